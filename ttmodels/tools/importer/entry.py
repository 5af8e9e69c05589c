"""The entry points: ``import_module`` and the ``ttmodels import`` command (``run_import``,
module references ``path/file.py:fn(args)``).
"""
from __future__ import annotations

import contextlib
import os
import re

from .blocks import _ident
from .emit import emit_spec
from .intermediate import ImportError_, ImportedSpec, PCC_MIN, UnsupportedError
from .selfcheck import _same_graph, check_spec
from .tracing import trace
from .where import _first_line, _user_frame


def import_module(module, example_input, *, name: str | None = None, partial: bool = False,
                  check: bool = True, resolve_precision: bool = False) -> ImportedSpec:
    """The spec (YAML text) of ``module`` traced on ``example_input`` (an NCHW tensor).

    Raises ``UnsupportedError`` listing every node the spec language has no op for (``partial``:
    the spec stops before the first one, which it names). With ``check`` the spec is built in
    the float32 profile on the sim with the module's weights and compared with the module;
    below ``PCC_MIN`` that is an ``ImportError_`` naming the first layer that differs. With
    ``resolve_precision`` the spec's ``precision: auto`` is resolved on the module's weights and
    ``example_input`` (``tools/precision.py``) and written into it (``resolved_precision:``)."""
    import torch
    if not isinstance(example_input, torch.Tensor) or example_input.dim() != 4:
        raise ImportError_("example_input must be an NCHW tensor (one image input)")
    _check_runs(module, example_input)
    tr = trace(module, example_input, partial=partial)
    if tr.unsupported and not partial:
        raise UnsupportedError(tr.unsupported)
    n, c, h, w = tr.input_shape
    text = emit_spec(tr, module, name=name)
    flat = emit_spec(tr, module, name=name, flat=True)
    diff = _diff(text, flat, n, (h, w))
    note = ""
    if diff is not None:              # a library block that does not fit after all: own blocks
        text = emit_spec(tr, module, name=name, library=False)
        diff = _diff(text, flat, n, (h, w))
    if diff is not None:              # the block finder got it wrong: the flat spec is exact
        text, note = flat, f"blocks dropped (they did not expand to the traced layers: {diff})"
    out = ImportedSpec(text)
    out.layers = len(tr.layers)
    out.blocks = tuple(sorted(set(re.findall(r"block: \"?([A-Za-z0-9_/]+)", text))))
    out.ignored_prefixes = tr.unused_prefixes
    out.report = note
    if check:
        from ...errors import Error
        try:
            res = check_spec(text, module, tr, example_input)
        except Error as e:
            # the float32 profile does not build or plan: the spec is still written when the
            # default profile plans (the planner's limits are not the import's), saying why
            why = _locate(str(e), tr)
            try:
                _plans(text, tr)
            except Error as e2:
                raise ImportError_(f"{tr.module_class}: the imported spec does not plan: "
                                   f"{_locate(str(e2), tr)}") from None
            out.check_failed = f"the float32 profile does not plan, so the self-check did " \
                               f"not run: {why}"
            out.report = (note + "\n" if note else "") + "warning: " + out.check_failed
            return out
        out.pcc, out.max_abs = res.pcc, res.max_abs
        out.report = (note + "\n" if note else "") + res.summary()
        if res.pcc < PCC_MIN:
            raise ImportError_(f"{tr.module_class}: the imported spec does not reproduce the "
                               f"module: {res.summary()}")
    if resolve_precision and not tr.partial_stop:
        from ...errors import Error
        from ..precision import resolve_text
        try:
            text, res = resolve_text(text, module, example_input,
                                     ignore=list(tr.unused_prefixes) or None)
            said = res.summary()
        except Error as e:      # no conv / linear, or it does not plan: stays unresolved
            said = f"left unresolved (HiFi4, bfloat16 weights): {_first_line(e)}"
        out = _replace_text(out, text)
        out.report = (out.report + "\n" if out.report else "") + "precision: auto: " + said
    return out


def _replace_text(old: ImportedSpec, text: str) -> ImportedSpec:
    """``old``'s report fields on the new ``text``."""
    new = ImportedSpec(text)
    new.__dict__.update(old.__dict__)
    return new


def _diff(text: str, flat: str, n: int, hw) -> str | None:
    """``_same_graph``, a spec that does not load being a difference too (the flat one is then
    used, and its own error, if any, is told by the module in the self-check)."""
    from ...errors import Error
    try:
        return _same_graph(text, flat, n, hw)
    except Error as e:
        return str(e).splitlines()[0]


def _plans(text: str, tr) -> None:
    """Raise the spec's error when its default profile does not load or plan."""
    from ...language.spec import load_graph
    from ...planning.planner import plan_graph
    n, _c, h, w = tr.input_shape
    plan_graph(load_graph(text, batch_size=n, input_size=(h, w)))


_AT_STRING = re.compile(r"<string>:\d+(?:, )?")


def _locate(msg: str, tr) -> str:
    """An error about the generated spec, told by the module: ``<string>:N`` (a line of a spec
    the user never saw) becomes the layer's module path and source line."""
    first = msg.strip().splitlines()[0] if msg.strip() else msg
    first = _AT_STRING.sub("", first).strip()
    m = re.search(r"layer '([^']+)'", first)
    if m is not None:
        lay = next((l for l in tr.layers if l.name == m.group(1) or
                    (l.outputs and m.group(1) in l.outputs)), None)
        if lay is not None:
            first += f" [module {lay.name}: {' '.join(lay.parts)}, {lay.source}]"
    return first


@contextlib.contextmanager
def _spec_named(output: str, *, resolving: bool):
    """Warnings about the generated spec name ``output``, the file the user gets, not
    ``<string>``: its lines are the written file's (the resolution only appends a section).
    ``resolving``: the loads before the resolution say nothing of unresolved ``auto`` layers
    (the report says how the resolution went)."""
    import logging

    def rename(record: logging.LogRecord) -> bool:
        said = record.getMessage()
        if resolving and "'precision: auto' is not resolved" in said:
            return False
        if "<string>" in said:
            record.msg, record.args = said.replace("<string>", output), ()
        return True

    log = logging.getLogger("ttmodels")
    log.addFilter(rename)
    try:
        yield
    finally:
        log.removeFilter(rename)


def _check_runs(module, x) -> None:
    """The module takes ``x`` as its one input and runs on it: else one line saying why (the
    dtype, the forward's inputs, or what the module raised, at its own source line), before
    torch.fx would print its own tracebacks."""
    import inspect

    import torch
    cls = f"{type(module).__module__}.{type(module).__qualname__}"
    if isinstance(module, torch.jit.ScriptModule):
        raise ImportError_(f"{cls}: a TorchScript module (torch.jit.script / trace) has no "
                           "Python forward to trace: import the nn.Module it was made from")
    meta = next((k for k, t in [*module.named_parameters(), *module.named_buffers()]
                 if t.device.type == "meta"), None)
    if meta is not None:
        raise ImportError_(f"{cls}: its weights are on the meta device ({meta}: no values); "
                           "materialise them first (e.g. to_empty(device='cpu') and load a "
                           "state dict)")
    if x.dtype != torch.float32 or x.is_complex() or x.device.type == "meta":
        raise ImportError_(f"{cls}: the example input is a {x.dtype} tensor on {x.device.type}; "
                           "use a float32 CPU tensor (the spec's float32 profile is the most it "
                           "computes in)")
    if min(x.shape) < 1:
        raise ImportError_(f"{cls}: the example input's shape {list(x.shape)} has an empty "
                           "dimension")
    try:
        sig = inspect.signature(module.forward)
        need = [p for p in sig.parameters.values() if p.default is p.empty and p.kind in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):        # a builtin forward: no signature to read
        need = []
    if len(need) > 1:
        raise ImportError_(f"{cls}: forward takes {len(need)} inputs "
                           f"({', '.join(p.name for p in need)}); `ttmodels import` traces a "
                           "module with one image input (wrap it: forward(self, x) calling "
                           "yours)")
    was = module.training
    module.eval()
    try:
        with torch.no_grad():
            module(x)
    except Exception as e:                 # noqa: BLE001 (the user's module: say what and where)
        raise ImportError_(f"{cls} does not run on the example input "
                           f"({'x'.join(map(str, x.shape))} {str(x.dtype).replace('torch.', '')})"
                           f": {type(e).__name__}: {_first_line(e)}{_user_frame(e)}") from None
    finally:
        module.train(was)
    from .tables import module_row
    row = module_row(module)
    if row is not None:
        # its keys are `weight`, `bias`: no module path to name a layer after
        raise ImportError_(f"{cls}: the module is a single {row[0]} itself; `ttmodels import` "
                           "names layers by module path: wrap it, e.g. nn.Sequential(module) "
                           "(its keys then start with `0.`)")


_REF = re.compile(r"^(?P<mod>[^:]+):(?P<fn>[A-Za-z_][A-Za-z0-9_.]*)(?:\((?P<args>.*)\))?$")


def _parse_args(text: str):
    """``resnet50d, pretrained=False`` -> (args, kwargs): literals, bare names as strings."""
    import ast
    if not text.strip():
        return [], {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as e:
        raise ImportError_(f"cannot read the arguments ({text}): {e.msg}") from None

    def lit(n):
        if isinstance(n, ast.Name):
            return n.id
        try:
            return ast.literal_eval(n)
        except ValueError:
            raise ImportError_(f"argument {ast.unparse(n)!r}: only literals and bare names") \
                from None
    return [lit(a) for a in call.args], {k.arg: lit(k.value) for k in call.keywords}


def resolve_module_ref(ref: str):
    """``package.module:callable``, ``package:callable(arg, k=v)`` or ``path/file.py:callable``
    -> (the nn.Module it returns, a default name)."""
    import importlib
    import importlib.util
    m = _REF.match(ref.strip())
    if m is None:
        raise ImportError_(f"module reference {ref!r}: use package.module:callable, "
                           "package:callable(args) or path/to/file.py:callable")
    mod_name, fn_name, args = m.group("mod"), m.group("fn"), m.group("args") or ""
    if mod_name.endswith(".py"):
        if not os.path.isfile(mod_name):
            raise ImportError_(f"module reference {ref!r}: no file {mod_name}")
        # named after the file (errors and the spec's header say `nets.Net`), unless that
        # name is taken by a loaded module (then a private one: never replace sys.modules')
        stem = os.path.basename(mod_name)[:-3]
        import sys
        spec = importlib.util.spec_from_file_location(
            stem if stem.isidentifier() and stem not in sys.modules else
            f"_ttmodels_import_{abs(hash(os.path.abspath(mod_name)))}", mod_name)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except SyntaxError as e:
            raise ImportError_(f"module reference {ref!r}: {e.filename}:{e.lineno}: syntax "
                               f"error: {e.msg}") from None
        except (Exception, SystemExit) as e:      # noqa: BLE001 (the user's module ran)
            raise ImportError_(f"module reference {ref!r}: running {mod_name} raised "
                               f"{type(e).__name__}: {_first_line(e)}{_user_frame(e)}") from None
    else:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ImportError_(f"module reference {ref!r}: {e}") from None
        except SyntaxError as e:
            raise ImportError_(f"module reference {ref!r}: {e.filename}:{e.lineno}: syntax "
                               f"error: {e.msg}") from None
        except (Exception, SystemExit) as e:      # noqa: BLE001
            raise ImportError_(f"module reference {ref!r}: importing {mod_name} raised "
                               f"{type(e).__name__}: {_first_line(e)}{_user_frame(e)}") from None
    obj = mod
    for part in fn_name.split("."):
        if not hasattr(obj, part):
            raise ImportError_(f"module reference {ref!r}: {mod_name} has no {fn_name}")
        obj = getattr(obj, part)
    try:
        a, kw = _parse_args(args)
    except ImportError_ as e:
        raise ImportError_(f"module reference {ref!r}: {e}") from None
    if callable(obj) and not _is_module(obj):
        try:
            module = obj(*a, **kw)
        except (Exception, SystemExit) as e:      # noqa: BLE001 (needs arguments, raises, ...)
            raise ImportError_(f"module reference {ref!r}: calling {fn_name}"
                               f"({args}) raised {type(e).__name__}: {_first_line(e)}"
                               f"{_user_frame(e)}") from None
    else:
        module = obj
    if not _is_module(module):
        raise ImportError_(f"module reference {ref!r} gave a {type(module).__name__}, "
                           "not a torch.nn.Module")
    default = str(a[0]) if a and isinstance(a[0], str) else fn_name.rsplit(".", 1)[-1]
    return module, _ident(default)


def _is_module(obj) -> bool:
    import torch
    return isinstance(obj, torch.nn.Module)


def _module_files(ref: str, module) -> set[str]:
    """The source files the reference names or the module's class lives in (never overwritten)."""
    import inspect
    import sys
    files = set()
    m = _REF.match(ref.strip())
    if m is not None and m.group("mod").endswith(".py"):
        files.add(os.path.realpath(m.group("mod")))
    for cls in (type(module),):
        src = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if src:
            files.add(os.path.realpath(src))
        try:
            files.add(os.path.realpath(inspect.getfile(cls)))
        except (TypeError, OSError):
            pass
    return files


def run_import(ref: str, output: str, *, batch: int = 1, input_size=(224, 224), channels: int = 3,
               name: str | None = None, partial: bool = False, check: bool = True,
               force: bool = False, resolve_precision: bool = True) -> int:
    """``ttmodels import``: write the spec, print what was imported and the self-check. An
    existing ``output`` is kept unless ``force``; the module's own source never is written."""
    import sys

    from ...weights import synthetic_images
    if batch < 1 or min(input_size) < 1 or channels < 1:
        raise ImportError_("--batch, --input-size and --channels must be positive")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise ImportError_(f"-o {output}: directory {parent} does not exist")
    m = _REF.match(ref.strip())
    if m is not None and m.group("mod").endswith(".py") and os.path.exists(output) and \
            os.path.realpath(output) == os.path.realpath(m.group("mod")):
        raise ImportError_(f"-o {output} is the module's own source file: write the spec "
                           "elsewhere")
    if os.path.exists(output) and not force:
        raise ImportError_(f"-o {output} exists: give --force to overwrite it, or another path")
    if os.path.exists(output) and not os.path.isfile(output):
        raise ImportError_(f"-o {output} is not a regular file")
    module, default = resolve_module_ref(ref)
    if os.path.realpath(output) in _module_files(ref, module):
        raise ImportError_(f"-o {output} is the source file of {type(module).__qualname__}: "
                           "write the spec elsewhere")
    h, w = input_size
    x = synthetic_images(batch, channels, h, w, seed=0)
    try:
        with _spec_named(output, resolving=resolve_precision):
            text = import_module(module, x, name=name or default, partial=partial, check=check,
                                 resolve_precision=resolve_precision)
    except UnsupportedError as e:
        print(f"error: {ref}: {e}", file=sys.stderr)
        return 2
    except ImportError_:
        raise
    except Exception as e:                 # noqa: BLE001 (no traceback for the user: what, where)
        raise ImportError_(f"{ref}: the import failed: {type(e).__name__}: {_first_line(e)}"
                           f"{_user_frame(e)}") from None
    try:
        with open(output, "w") as f:
            f.write(text)
    except OSError as e:
        raise ImportError_(f"-o {output}: cannot write it: {e.strerror or e}") from None
    print(f"wrote {output}: {text.layers} layers, {len(text.blocks)} block(s)"
          + (f" ({', '.join(text.blocks)})" if text.blocks else ""))
    if text.ignored_prefixes:
        print(f"  modules unused by forward (build with ignore={list(text.ignored_prefixes)}): "
              + ", ".join(text.ignored_prefixes))
    report = text.report
    if text.check_failed:   # said once, on stderr below, not also in the report
        report = report.replace("warning: " + text.check_failed, "").strip()
    if report:
        print("  " + report.replace("\n", "\n  "))
    if text.check_failed:
        print(f"warning: {output}: {text.check_failed}", file=sys.stderr)
    return 0
