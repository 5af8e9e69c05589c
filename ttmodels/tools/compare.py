"""Per-layer comparison of a backend run against the float32 torch reference of the same graph.

``ttmodels compare SPEC`` runs both side by side on one input and prints each layer's PCC and max
abs error, marking the first layer whose PCC falls below the threshold (where the error starts).
On the sim it also gives each layer's local PCC (its inputs exact) and the largest cause of what
the layer loses: its math fidelity, its weights' format, the 16-bit Dest's rounding, the output's
rounding, or "inherited" from its inputs (``precision_errors``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass
class LayerDiff:
    name: str
    op: str
    shape: str
    pcc: float
    max_abs: float
    ref_std: float
    # every reference value equal (a clamp with equal bounds, a pool of equal channels): there is
    # no correlation to measure, so the row is judged by ``max_abs`` against ``ref_abs``
    ref_constant: bool = False
    ref_abs: float = 0.0            # the reference's largest magnitude
    # the layer's own PCC with exact inputs (its inputs the reference's), and the main cause of
    # what it loses (``precision_errors.Reason.main``): "fidelity", "weight format", "Dest
    # rounding", "output rounding", or "inherited" (its inputs carried more than it added)
    local_pcc: float | None = None
    reason: str = ""

    def tolerance(self, threshold: float) -> float:
        """A constant reference's allowed max abs error: the share of its magnitude (at least
        1) that ``threshold`` leaves, 1 % at 0.99 (a bfloat16 value is within 0.4 %)."""
        return (1.0 - threshold) * max(1.0, self.ref_abs)

    def passes(self, threshold: float) -> bool:
        if self.ref_constant:
            return self.max_abs <= self.tolerance(threshold)
        return self.pcc >= threshold


def compare_layers(spec, *, weights="random", image=None, batch_size=1, input_size=None,
                   profile=None, backend="sim", x=None, ignore=None,
                   key_map=None, device=None) -> list[LayerDiff]:
    """Run ``spec`` on ``backend`` and on the torch reference; one LayerDiff per layer, plan order.

    ``x`` (NCHW float) overrides ``image``; without either the input is matplotlib's sample photo
    preprocessed like ImageNet (resized to the graph's input size), for a graph whose input is
    not RGB or gray (3 or 1 channels) seeded synthetic images, a different one per channel (the
    same picture on every channel would make channels indistinguishable and, after a global
    pool, the reference constant). ``ignore``: key prefixes
    of ``weights`` to drop, ``key_map``: renames, reshapes and drops (``load_state_dict``).
    ``device``: plan for that system's chip (``ttmodels.runtime.mesh.DEVICES``; default n150)."""
    import torch

    from ..backends import open_backend
    from ..planning.planner import plan_graph
    from ..weights.reference import ReferenceModel, pcc
    from ..runtime.executor import Executor, to_torch_nchw
    from ..language.spec import load_graph
    from ..weights import load_state_dict, prepare_parameters

    graph = load_graph(spec, batch_size=batch_size, input_size=input_size, profile=profile)
    if len(graph.inputs) != 1:
        from ..errors import Error
        raise Error(f"compare supports single-input graphs; '{graph.name}' has {list(graph.inputs)}")
    (name, shape), = graph.inputs.items()
    if x is None:
        x = _image_batch(image, shape)
    elif tuple(x.shape) != (shape.n, shape.c, shape.h, shape.w):
        from ..errors import Error
        raise Error(f"the input has shape {list(x.shape)}; '{graph.name}' takes "
                    f"[{shape.n}, {shape.c}, {shape.h}, {shape.w}] (NCHW) here")
    sd = load_state_dict(weights, graph, ignore=ignore, key_map=key_map)
    ref = ReferenceModel(graph, sd).run({name: x}, return_all=True)
    from ..runtime.mesh import resolve_target
    plan = plan_graph(graph, arch=resolve_target(device).arch)
    be = open_backend(backend)
    try:
        params = prepare_parameters(graph, sd)
        ex = Executor(plan, params, be, keep_params=True)
        got = ex.run({name: x}, keep_all=True)
        rows = []
        for pl in plan.layers:
            n = pl.node
            for t in n.tensors:            # a split: one row per named output
                shape = graph.shape_of(t)
                out = to_torch_nchw(be, got[t], shape)
                r = ref[t].reshape(out.shape)
                rows.append(LayerDiff(t, n.op, "x".join(map(str, shape.nhwc)), pcc(r, out),
                                      float((r - out).abs().max()), float(r.std()),
                                      ref_constant=bool((r == r.flatten()[0]).all()),
                                      ref_abs=float(r.abs().max())))
        if backend == "sim":
            _attribute(rows, plan, params, ref, be)
        return rows
    finally:
        be.close()


def _attribute(rows: list[LayerDiff], plan, params, ref, be) -> None:
    """Each row's local PCC and the cause of its drop, from one sim run whose layers read the
    reference's inputs, each matmul layer also at HiFi4, then bfloat16 weights, then fp32_accum
    (``precision_errors``)."""
    from .precision_errors import (attribute, attribution_variants, local_errors, nmse_of_pcc,
                                   pcc_of_nmse)
    errs = local_errors(plan, params, ref, be, variants=attribution_variants)
    why = attribute(errs, plan.graph)
    owner = {t: n.name for n in plan.graph.nodes for t in n.tensors}
    for r in rows:
        w = why.get(owner.get(r.name, r.name))
        if w is None or r.ref_constant:
            continue
        r.local_pcc = pcc_of_nmse(w.local)
        full = nmse_of_pcc(r.pcc) if r.pcc > 0 else float("inf")
        r.reason = w.main(max(0.0, full - w.local))


def _image_batch(image, shape):
    """The input for a graph of input ``shape``: the image (default: the sample photo), gray
    for one channel; for another channel count synthetic images, which an image cannot fill."""
    from ..errors import Error
    from ..weights import synthetic_images
    from .images import imagenet_tensor, sample_image_path

    if shape.c not in (1, 3):
        if image:
            raise Error(f"--image: this spec's input has {shape.c} channels, an image 3 (RGB) "
                        f"or 1 (gray); pass --input FILE.npy holding [{shape.n}, {shape.c}, "
                        f"{shape.h}, {shape.w}]")
        return synthetic_images(shape.n, shape.c, shape.h, shape.w, seed=0)
    path = image or sample_image_path()
    side = max(shape.h, shape.w)
    t = imagenet_tensor(path, resize=side, crop=side)[:, :shape.h, :shape.w]
    if shape.c == 1:
        t = t.mean(0, keepdim=True)
    return t.unsqueeze(0).repeat(shape.n, 1, 1, 1).contiguous()


def format_table(rows: list[LayerDiff], threshold: float) -> str:
    first_bad = next((i for i, r in enumerate(rows) if not r.passes(threshold)), None)
    w = max([len(r.name) for r in rows] + [5])
    why = any(r.reason for r in rows)
    lines = [f"{'layer':<{w}}  {'op':<15} {'shape NHWC':<20} {'PCC':>9} {'max abs err':>12} "
             f"{'ref std':>9}" + (f" {'local PCC':>9}  {'why (largest cause)':<30}" if why else "")]
    for i, r in enumerate(rows):
        mark = "  <-- first below %.4g" % threshold if i == first_bad else (
            "  *" if not r.passes(threshold) else "")
        if r.ref_constant:      # no PCC to show: the max abs error decides
            mark = (mark or "  ") + f" (constant reference: max abs err <= " \
                f"{r.tolerance(threshold):.3g} decides)"
        pcc = f"{'const':>9}" if r.ref_constant else f"{r.pcc:9.6f}"
        local = "" if not why else (f" {r.local_pcc:9.6f}  {r.reason:<30}" if r.reason
                                    else f" {'':9}  {'':<30}")
        lines.append(f"{r.name:<{w}}  {r.op:<15} {r.shape:<20} {pcc} {r.max_abs:12.5g} "
                     f"{r.ref_std:9.4g}{local}{mark}")
    varied = [r for r in rows if not r.ref_constant]
    lowest = "" if not varied else "lowest PCC {0.pcc:.6f} at {0.name}; ".format(
        min(varied, key=lambda r: r.pcc))
    const = f"{len(rows) - len(varied)} with a constant reference; " if len(varied) < len(rows) \
        else ""
    lines.append(f"{len(rows)} layers; {const}{lowest}"
                 + ("all at or above threshold" if first_bad is None
                    else f"first below {threshold}: {rows[first_bad].name}"))
    return "\n".join(lines)


def plot_pcc(rows: list[LayerDiff], path: str, threshold: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.12), 4))
    # a constant reference has no PCC (its max abs error decides): a gap in the curve
    ax.plot(range(len(rows)), [float("nan") if r.ref_constant else r.pcc for r in rows],
            marker=".", lw=1)
    ax.axhline(threshold, color="red", ls="--", lw=0.8, label=f"threshold {threshold}")
    step = max(1, len(rows) // 40)
    ax.set_xticks(range(0, len(rows), step))
    ax.set_xticklabels([rows[i].name for i in range(0, len(rows), step)], rotation=90, fontsize=6)
    ax.set_ylabel("PCC vs torch float32")
    ax.set_title("per-layer PCC (sim vs reference)")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_compare(spec, *, batch_size=1, input_size=None, profile=None, image=None, weights="random",
                threshold=0.99, plot=None, ignore=None, key_map=None, input_npy=None,
                device=None) -> int:
    """Print the table (and draw the plot); exit status 0 when every layer's PCC is at or above
    ``threshold``, 1 when one falls below it, 2 for bad input. ``key_map``: a dict or the path of
    a YAML / JSON file holding one; ``input_npy``: a saved input (``.npy``) instead of ``image``."""
    from .images import ImageError

    if plot:
        plot = plot_path(plot)
        problem = unwritable(plot)
        if problem:      # say so before minutes of comparison, not after
            print(f"error: --plot {plot}: {problem}", file=sys.stderr)
            return 2
    if image and input_npy:
        print("error: give --image or --input, not both", file=sys.stderr)
        return 2
    if isinstance(key_map, (str, bytes)) or hasattr(key_map, "__fspath__"):
        key_map = read_key_map(key_map)
    x = None
    if input_npy is not None:
        x = read_input(input_npy, batch_size)
        if input_size is None:
            input_size = tuple(x.shape[-2:])
    try:
        rows = compare_layers(spec, weights=weights, image=image, batch_size=batch_size,
                              input_size=input_size, profile=profile, ignore=ignore, x=x,
                              key_map=key_map, device=device)
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(rows, threshold))
    if plot:
        plot_pcc(rows, plot, threshold)
        print(f"wrote {plot}")
    return 1 if any(not r.passes(threshold) for r in rows) else 0


def read_key_map(path) -> dict:
    """A key map file (YAML or JSON, which YAML reads too): a mapping whose values are key names,
    ``null`` (drop) or ``{from: key, reshape: [sizes]}`` (``load_state_dict``'s dict form).
    Read by the spec reader (``registry.read_file``), with its guards: regular files only, a size
    limit, aliases expanded under a node budget, and a duplicate key refused at its line."""
    from ..errors import Error, SpecError
    from ..language.files import irregular
    from ..language.registry import read_file
    p = _path(path)
    what = irregular(p) if p.exists() else None
    if not p.is_file() or what is not None:
        raise Error(f"--key-map {path}: " + (what or "no such file"))
    try:
        data = read_file(p, str(path))
    except SpecError as e:
        raise Error(f"--key-map {e}") from None
    if not isinstance(data, dict):
        raise Error(f"--key-map {path}: expected a mapping of key names (user key or prefix: "
                    f"spec key, null, or {{from: key, reshape: [sizes]}}), got "
                    f"{'a list' if isinstance(data, list) else type(data).__name__}")
    return data


def read_input(path, batch_size: int):
    """A saved input (``.npy``, no pickles): float, ``[N, C, H, W]`` or ``[C, H, W]`` (repeated
    over the batch), as an NCHW float32 tensor."""
    import numpy as np
    import torch

    from ..errors import Error
    from ..language.files import irregular
    p = _path(path)
    what = irregular(p) if p.exists() else None
    if not p.is_file() or what is not None:
        raise Error(f"--input {path}: " + (what or "no such file"))
    try:
        a = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise Error(f"--input {path}: not a .npy array ({e})") from None
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "fiu" or a.ndim not in (3, 4):
        raise Error(f"--input {path}: expected a float array [N, C, H, W] or [C, H, W], got "
                    f"{getattr(a, 'dtype', type(a).__name__)} of shape {list(getattr(a, 'shape', []))}")
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    if t.ndim == 3:
        t = t.unsqueeze(0).repeat(batch_size, 1, 1, 1)
    elif t.shape[0] != batch_size:
        raise Error(f"--input {path}: holds {t.shape[0]} images, --batch is {batch_size}")
    if not bool(torch.isfinite(t).all()):
        raise Error(f"--input {path}: contains NaN or Inf")
    return t


def _path(path):
    from pathlib import Path
    return Path(path)


def plot_path(plot: str) -> str:
    """The file the plot goes to: matplotlib's savefig adds .png to a name without extension."""
    from pathlib import Path
    return plot if Path(plot).suffix or Path(plot).is_dir() else plot + ".png"


def unwritable(path: str) -> str | None:
    """Why ``path`` cannot be written (None when it can), without creating or changing it."""
    import os
    from pathlib import Path
    p = Path(path)
    if p.is_dir():
        return "is a directory"
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    if p.exists() and not os.access(p, os.W_OK):
        return "is not writable"
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    return None
