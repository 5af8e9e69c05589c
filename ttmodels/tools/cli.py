"""Command line: ``ttmodels plan|validate|list|compare|verify|import|probe-1x1``.

Errors in what the user gave (spec, weights, layouts) print one clear line and exit 2.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import Error


SPEC_HELP = "a shipped or registered model name (see `ttmodels list`) or a YAML spec file"


def _threshold(text: str) -> float:
    """A PCC threshold: a finite number (NaN would compare false against every PCC)."""
    import math
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number such as 0.99")
    return v


def _add_shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=None,
                   help="batch size (default: the batch the spec declares, else 1)")
    p.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"),
                   help="input height and width (default: the spec's)")
    p.add_argument("--profile", help="precision profile defined in the spec (e.g. tt-perf)")


def device_name(text: str) -> str:
    """A system's one-word name (``--device``): checked here, before anything is planned."""
    from ..runtime.mesh import get_device
    try:
        return get_device(text).name
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_mesh_arg(p: argparse.ArgumentParser) -> None:
    from ..runtime.mesh import known_devices
    p.add_argument("--device", type=device_name, metavar="NAME",
                   help=f"the system to plan for: {known_devices()} (default n150); a multi-chip "
                        "one runs data parallel (--batch is the whole batch; it must divide by "
                        "the chip count)")
    p.add_argument("--mesh", help="data parallel over a mesh of Wormhole chips: n150, n300, "
                                  "t3000, galaxy or ROWSxCOLS (as --device for the named ones)")


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    ap = argparse.ArgumentParser(prog="ttmodels", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("plan", help="show the layout plan of a spec")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    _add_mesh_arg(p)
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: one row per layer and adapter; json: the whole plan "
                        "(default: %(default)s)")
    p.add_argument("--plot", metavar="PNG",
                   help="also draw the plan (L1 per core, layouts, adapters) into this .png")
    p.add_argument("--no-ttnn", action="store_true",
                   help="plan from the rule table alone: ask the installed ttnn nothing (as "
                        "TTMODELS_TTNN_ORACLE=0); the plan then shows its steps unconfirmed")

    p = sub.add_parser("validate", help="check a spec; exit 0 if valid, print the error and exit 2")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    _add_mesh_arg(p)

    sub.add_parser("list", help="list shipped and registered model names")

    p = sub.add_parser("compare", help="per-layer PCC of the sim backend against a torch reference")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    p.add_argument("--image", help="image file (default: the sample photo shipped with matplotlib)")
    p.add_argument("--weights", default="random",
                   help="random | pretrained | FILE (default: %(default)s)")
    p.add_argument("--ignore", action="append", metavar="PREFIX",
                   help="drop the weights' keys under PREFIX (e.g. model.22.dfl.); repeatable")
    p.add_argument("--key-map", metavar="FILE",
                   help="YAML or JSON mapping that renames, reshapes or drops the weights' keys "
                        "(build()'s key_map= dict form; null drops; see weights/README.md)")
    p.add_argument("--input", metavar="NPY",
                   help="saved input (.npy, float, NCHW or CHW; its H x W is the input size "
                        "unless --input-size is given) instead of --image")
    p.add_argument("--threshold", type=_threshold, default=0.99,
                   help="PCC below this is marked, and makes the exit status 1 "
                        "(default: %(default)s)")
    p.add_argument("--plot", metavar="PNG", help="draw PCC per layer into this PNG file "
                   "(.png is added when the name has no extension)")
    p.add_argument("--device", type=device_name, metavar="NAME",
                   help="plan for this system's chip (n150 or p150; the sim runs the plan)")

    p = sub.add_parser("precision", help="resolve 'precision: auto': the cheapest precision per "
                       "layer that keeps the outputs at a PCC target (docs/spec.md)")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    p.add_argument("--weights", default="random",
                   help="random | pretrained | FILE (default: %(default)s)")
    p.add_argument("--ignore", action="append", metavar="PREFIX",
                   help="drop the weights' keys under PREFIX; repeatable")
    p.add_argument("--input", metavar="NPY",
                   help="calibration input (.npy, float, NCHW or CHW) instead of seeded "
                        "synthetic images")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the synthetic calibration images (default: %(default)s)")
    p.add_argument("--pcc", type=_threshold, default=None,
                   help="the outputs' PCC target (default: the spec's auto pcc, else 0.99)")
    p.add_argument("-o", "--output", metavar="YAML",
                   help="write the spec with its resolved_precision: section here (the spec "
                        "itself is never changed)")
    p.add_argument("--device", type=device_name, metavar="NAME",
                   help="cost the precisions on this system's chip (n150 or p150)")

    p = sub.add_parser("verify", help="run the plan for real through the installed ttnn on a mock "
                       "device (no card): ttnn's own validation, allocator (addresses, "
                       "fragmentation, CB placement), memory configs and L1 figures per step")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    p.add_argument("--no-adapters", action="store_true",
                   help="plan without adapters, so ttnn's own rejections show")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s)")
    _add_mesh_arg(p)
    p.add_argument("--system", type=device_name, dest="system", help=argparse.SUPPRESS)
    p.add_argument("--plot", metavar="PNG", help="also draw the plan with ttnn's peak_total per "
                   "layer (rejected / mismatched layers in red) into this .png")

    p = sub.add_parser("oracle", help="the cache of ttnn's answers to the planner (ttnn in the "
                       "planning loop): where it is, the contradictions with the rule table, clear")
    p.add_argument("action", choices=("info", "contradictions", "clear"),
                   help="info: the cache directory and its entries; contradictions: every "
                        "recorded step where ttnn contradicts rules.py; clear: delete the cache")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format of contradictions (default: %(default)s)")
    p = sub.add_parser("import", help="turn a PyTorch module into a spec (torch.fx trace; "
                       "checks itself against the module in the float32 profile)")
    p.add_argument("module", metavar="MODULE_REF",
                   help="package.module:callable (torchvision.models:mobilenet_v3_small), "
                        "package:callable(args) (timm:create_model(resnet50d)) or "
                        "path/to/file.py:callable")
    p.add_argument("-o", "--output", required=True, metavar="SPEC.yaml", help="spec file to write")
    p.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"), default=(224, 224),
                   help="example input height and width (default: 224 224)")
    p.add_argument("--batch", type=int, default=1, help="example batch size (default 1)")
    p.add_argument("--channels", type=int, default=3, help="input channels (default 3)")
    p.add_argument("--name", help="the spec's name (default: the callable's)")
    p.add_argument("--partial", action="store_true",
                   help="write the spec up to the first unsupported node (named as its output)")
    p.add_argument("--no-precision", action="store_true",
                   help="leave 'precision: auto' unresolved (HiFi4, bfloat16 weights) instead of "
                        "resolving it on the module's weights (slow on big models)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the float32 self-check against the module")
    p.add_argument("--force", action="store_true",
                   help="overwrite SPEC.yaml if it exists (never the module's own source)")

    p = sub.add_parser("probe-1x1", help="time 1x1-conv lowerings on a card (device only)")
    p.add_argument("spec", help=SPEC_HELP)
    _add_shape_args(p)
    p.add_argument("--out", default="probe-1x1.json", help="JSON report path")
    p.add_argument("--write-spec", metavar="YAML", help="write the spec with the winning lowerings")
    p.add_argument("--mock", action="store_true",
                   help="no card: check on a mock device which candidates ttnn accepts, with "
                        "their L1 figures (no timing, no bit identity)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    real_stdout = sys.stdout
    sys.stdout = _Output(real_stdout)
    try:
        rc = _run(args)
        sys.stdout.flush()          # a full disk shows here, not in the interpreter's exit
        return rc
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130                  # 128 + SIGINT, as the shell reports a Ctrl-C
    except BrokenPipeError:
        # `ttmodels plan ... | head`: the reader left. Point stdout at /dev/null so the flush at
        # exit does not raise again, and exit as a process killed by SIGPIPE would (128 + 13).
        _drop_stdout(real_stdout)
        return 141
    except OSError as e:
        # our own output (> /dev/full), a file we write (--plot onto a full disk), or one we read
        if isinstance(e, _OutputError):
            _drop_stdout(real_stdout)
            what = "cannot write the output"
        elif e.filename is not None:
            what = str(e.filename)
        else:
            what = f"--plot {args.plot}" if getattr(args, "plot", None) else "input/output"
        print(f"error: {what}: {e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = real_stdout


class _OutputError(OSError):
    """Writing the command's own output (stdout) failed."""


class _Output:
    """stdout, whose write errors say they are stdout's (an OSError has no file name then)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _OutputError(e.errno, e.strerror) from e

    def flush(self):
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _OutputError(e.errno, e.strerror) from e

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _drop_stdout(stream) -> None:
    """Point ``stream`` at /dev/null, and drop what its buffer holds: the real stdout cannot
    take it, and the interpreter's flush at exit would raise again."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError):       # no file descriptor (a test's capture)
        pass


def _declared_batch(name: str) -> int | None:
    """The batch a spec's layouts were written for (its ``batch:``, its default), or None."""
    from ..errors import SpecError
    from ..language.spec import load_graph
    try:
        return load_graph(name).batch
    except SpecError:       # a registered spec that does not load: `list` still names it
        return None


def _run(args) -> int:
    import ttmodels

    size = tuple(args.input_size) if getattr(args, "input_size", None) else None
    if getattr(args, "spec", None) is not None and getattr(args, "batch", 1) is None:
        # a spec that declares its batch (resnet50_tt's `batch: 16`) plans at it unless told
        args.batch = _declared_batch(args.spec) or 1
    if args.cmd == "list":
        for name in ttmodels.list_models():
            batch = _declared_batch(name)
            print(name if batch is None else f"{name}  (written for batch {batch})")
        return 0
    if args.cmd == "validate":
        # the spec's validity needs no ttnn verdicts: plan from the table (fast, no worker)
        plan = ttmodels.plan(args.spec, batch_size=args.batch, input_size=size, profile=args.profile,
                             mesh=args.mesh, device=args.device, oracle=False)
        graph = plan.graph
        on = (f"; batch {plan.batch_size} = {plan.per_chip_batch} per chip on "
              f"{plan.mesh.describe()}") if plan.mesh else ""
        print(f"{graph.source}: valid ({len(graph.nodes)} layers, outputs: {', '.join(graph.outputs)}"
              f"{on})")
        return 0
    if args.cmd == "oracle":
        return _oracle(args)
    if args.cmd == "plan":
        if args.no_ttnn:
            import os
            from .ttnn_oracle import ENV
            os.environ[ENV] = "0"
        if args.plot:
            from ..planning.plan_plot import check_plot_path
            check_plot_path(args.plot)          # a bad path fails before any planning
        plan = ttmodels.plan(args.spec, batch_size=args.batch, input_size=size, profile=args.profile,
                             mesh=args.mesh, device=args.device)
        print(plan.to_json() if args.format == "json" else str(plan))
        if args.plot:
            plan.plot(args.plot)
            print(f"wrote {args.plot}", file=sys.stderr)   # stderr: keeps --format json clean
        return 0
    if args.cmd == "compare":
        from .compare import run_compare
        return run_compare(args.spec, batch_size=args.batch, input_size=size, profile=args.profile,
                           image=args.image, weights=args.weights, threshold=args.threshold,
                           plot=args.plot, ignore=args.ignore, key_map=args.key_map,
                           input_npy=args.input, device=args.device)
    if args.cmd == "precision":
        from .precision import run_precision
        return run_precision(args.spec, weights=args.weights, batch_size=args.batch,
                             input_size=size, profile=args.profile, target=args.pcc,
                             input_npy=args.input, seed=args.seed, output=args.output,
                             ignore=args.ignore, device=args.device)
    if args.cmd == "verify":
        from .verify import verify
        from ..runtime.mesh import resolve_target
        if args.system and args.device and args.system != args.device:
            raise Error(f"--system {args.system} and --device {args.device} disagree (--system is "
                        "the old name of --device)")
        device = args.device or args.system
        resolve_target(device, args.mesh)       # names that disagree fail before any planning
        plan = None
        if args.plot:
            from ..runtime.builder import make_plan
            from ..planning.plan_plot import check_plot_path
            check_plot_path(args.plot)          # a bad path fails before any planning
            plan = make_plan(args.spec, batch_size=args.batch, input_size=size,
                             profile=args.profile, mesh=args.mesh, adapters=not args.no_adapters,
                             device=device)
        report = verify(args.spec, batch_size=args.batch, input_size=size, profile=args.profile,
                        adapters=not args.no_adapters, system=device, plan=plan,
                        mesh=args.mesh)
        print(report.to_json() if args.format == "json" else str(report))
        if args.plot:
            from ..planning.plan_plot import plot_plan
            plot_plan(plan, args.plot, verify_records=report.steps,
                      l1_bank_bytes=report.l1_bank_bytes)
            print(f"wrote {args.plot}", file=sys.stderr)
        # 0: the real run reached the end with every step accepted as planned (ttnn's allocator
        # enforced the bank itself; the capture's summed figures are diagnostics, and on a mesh
        # they add up every chip's buffers)
        return 0 if report.ok and (report.real or report.fits) else 1
    if args.cmd == "import":
        from .importer import run_import
        return run_import(args.module, args.output, batch=args.batch, input_size=args.input_size,
                          channels=args.channels, name=args.name, partial=args.partial,
                          check=not args.no_check, force=args.force,
                          resolve_precision=not args.no_precision)
    if args.cmd == "probe-1x1":
        from .probe import run_probe
        return run_probe(args.spec, batch_size=args.batch, input_size=size, profile=args.profile,
                         out=args.out, write_spec=args.write_spec, mock=args.mock)
    raise AssertionError(args.cmd)


def _oracle(args) -> int:
    import json

    from . import ttnn_oracle as O
    base, problem = O.cache_base()
    if base is None:
        if args.action == "info":
            print(f"ttnn oracle: off ({problem})")
            return 0
        raise Error(problem)
    if args.action == "clear":
        done = O.clear(base)
        print(f"removed {done.removed} cached answer(s) and contradiction(s) under {base}")
        if done.failed:
            print(f"error: {len(done.failed)} file(s) could not be removed, e.g. "
                  f"{done.failed[0]}", file=sys.stderr)
            return 1
        return 0
    if args.action == "info":
        from ..backends.mock_device import ttnn_version
        try:
            here = base / f"ttnn-{ttnn_version()}"   # this ttnn's answers, not another version's
        except Exception:                              # no ttnn: why_off says so
            here = base / "ttnn-none"
        print(f"ttnn oracle: {O.why_off() or 'on'}; cache {here}: {O.count_answers(here)} "
              f"answer(s), {len(O.list_contradictions(here))} contradiction(s) with rules.py")
        return 0
    found = O.list_contradictions(base)
    if args.format == "json":
        print(json.dumps(found, indent=2))
        return 0
    for c in found:
        print(f"ttnn {c.get('ttnn')} {c.get('model')}: {c.get('kind')} {c.get('step')} "
              f"({c.get('op')}): {c.get('contradiction')}")
    print(f"{len(found)} contradiction(s) recorded under {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
