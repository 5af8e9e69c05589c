"""Where a model's precision loses accuracy, layer by layer: each layer's *local* error.

One torch float32 reference run gives every tensor's exact value. One sim run then feeds every
layer the reference values of its inputs (in the dtype, layout and memory config the plan gives
them: "teacher forcing"), so a layer's output error is its own, not what it inherited. At each
matmul layer the same reference inputs also go through variants of the layer at other precisions
(fidelity, weights dtype, ``fp32_accum``), built beside the planned one, so one pass measures
every candidate of every layer. ``precision.py`` plans by these numbers; ``compare`` names the
cause of a layer's drop with them (``attribute``).

The error measure is the normalised squared error ``|y - r|^2 / |r - mean(r)|^2`` (NMSE): for an
error uncorrelated with the signal, PCC = 1 / sqrt(1 + NMSE).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..language.graph import AUTO_OPS, Graph, Node, Precision, float32_followers

FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")
WEIGHT_DTYPES = ("bfloat8_b", "bfloat16")
# float32 activations (a layer whose bfloat16 output rounding is what loses): HiFi4 with
# fp32_accum (a 16-bit Dest holds bfloat16), weights bfloat16 or float32
FLOAT32_WEIGHTS = ("bfloat16", "float32")


def nmse(y, r) -> float:
    """``|y - r|^2 / |r - mean(r)|^2`` (0 for equal tensors; inf when r is constant and y not)."""
    y, r = y.double().flatten(), r.double().flatten()
    num = float(((y - r) ** 2).sum())
    den = float(((r - r.mean()) ** 2).sum())
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else float("inf")


def pcc_of_nmse(e: float) -> float:
    return (1.0 + e) ** -0.5


def nmse_of_pcc(p: float) -> float:
    return 1.0 / max(p, 1e-9) ** 2 - 1.0


def has_fused_act(node: Node) -> bool:
    """A fused activation reads the Dest register: only then does ``fp32_accum`` change what
    the sim computes (its float32 SFPU forms instead of the 16-bit Dest's)."""
    return node.attrs.get("activation") is not None


def candidates(node: Node) -> list[Precision]:
    """The precisions the resolver chooses among for ``node``: every fidelity and weights dtype,
    with and without ``fp32_accum`` (only with a fused activation: elsewhere it changes nothing
    the sim or the estimate sees) at the node's activations; and where those are bfloat16, float32
    activations (``float32_candidates``)."""
    accs = (False, True) if has_fused_act(node) else (node.precision.fp32_accum,)
    return [dataclasses.replace(node.precision, math_fidelity=f, weights=w, fp32_accum=a)
            for f in FIDELITIES for w in WEIGHT_DTYPES for a in accs] + float32_candidates(node)


def float32_candidates(node: Node) -> list[Precision]:
    """float32 activations at HiFi4 with fp32_accum, bfloat16 or float32 weights: for a node
    whose activations are bfloat16 (a block-float profile asked for less on purpose)."""
    if node.precision.activations != "bfloat16":
        return []
    return [Precision(weights=w, activations="float32", math_fidelity="HiFi4", fp32_accum=True)
            for w in FLOAT32_WEIGHTS]


def with_precisions(graph: Graph, chosen: dict[str, Precision]) -> Graph:
    """A copy of ``graph`` whose nodes in ``chosen`` have those precisions (the rest shared),
    the non-matmul nodes after a float32 choice following it (``float32_followers``, what the
    spec's ``resolved_precision:`` does at load)."""
    nodes = [dataclasses.replace(n, precision=chosen[n.name]) if n.name in chosen else n
             for n in graph.nodes]
    follow = float32_followers(nodes)
    nodes = [dataclasses.replace(n, precision=follow[n.name]) if n.name in follow else n
             for n in nodes]
    return dataclasses.replace(graph, nodes=nodes)


def _variant(planned, p: Precision):
    """``planned`` (a PlannedLayer) at precision ``p``: its node, its config's weights dtype and
    its output's dtype (the same memory config: the sim does not count a shard's bytes)."""
    node = dataclasses.replace(planned.node, precision=p)
    cfg = planned.config
    if getattr(cfg, "weights_dtype", None) is not None:
        cfg = dataclasses.replace(cfg, weights_dtype=p.weights)
    out = planned.output
    if p.activations != planned.node.precision.activations:
        out = dataclasses.replace(out, dtype=p.activations)
    return dataclasses.replace(planned, node=node, config=cfg, output=out)


def _flat(ref, like):
    """The NCHW reference ``ref`` in the flattened NHWC shape of backend tensor ``like``."""
    flat = ref.permute(0, 2, 3, 1).contiguous()
    shape = tuple(like.shape)
    n = 1
    for s in shape:
        n *= s
    return flat.reshape(shape) if flat.numel() == n else None


@dataclass(frozen=True)
class LocalErrors:
    """Per layer: its local NMSE at its planned precision (``own``), and at each variant
    precision asked for (``by_precision``)."""
    own: dict[str, float]
    by_precision: dict[str, dict[Precision, float]]


def local_errors(plan, params: dict, ref: dict, backend,
                 variants: Callable[[Node], Iterable[Precision]] = lambda n: ()) -> LocalErrors:
    """Run ``plan`` on ``backend`` (the sim) with every layer's inputs replaced by the reference
    values ``ref`` (tensor name -> NCHW float32, ``ReferenceModel.run(return_all=True)``), and
    measure each layer's output against ``ref``; at each matmul layer also run ``variants(node)``
    on the same inputs. ``params``: ``prepare_parameters``' dict (kept, not consumed)."""
    from ..runtime.executor import Executor, to_torch_nchw
    from ..runtime.layers import make_layer

    graph = plan.graph
    tt = backend.tt
    produced = {t for n in graph.nodes for t in n.tensors}
    own: dict[str, float] = {}
    by: dict[str, dict[Precision, float]] = {}

    def forced(args, node):
        out = list(args)
        for i, name in enumerate(node.inputs):
            if name not in produced or name not in ref or i >= len(out):
                continue
            a = out[i]
            flat = _flat(ref[name], a)
            if flat is None:
                continue
            out[i] = tt.from_torch(flat, dtype=a.dtype, layout=a.layout, device=backend.device,
                                   memory_config=a.memory_config())
        return out

    def error_of(node, out) -> float:
        if node.outputs:
            return max(nmse(to_torch_nchw(backend, o, graph.shape_of(t)), ref[t])
                       for o, t in zip(out, node.outputs))
        return nmse(to_torch_nchw(backend, out, graph.shape_of(node.name)), ref[node.name])

    def hook(kind, planned, args, call):
        if kind != "layer":
            return call()
        node = planned.node
        args[:] = forced(args, node)          # ``call`` runs the layer on this very list
        if node.op in AUTO_OPS:
            shapes = [None if s in graph.constants else graph.shape_of(s) for s in node.inputs]
            errs = {}
            for p in dict.fromkeys(variants(node)):
                if p == node.precision:
                    continue
                layer = make_layer(_variant(planned, p), params.get(node.name), backend,
                                   input_shapes=shapes)
                layer.precompute()
                y = layer(list(args))
                errs[p] = error_of(node, y)
                tt.deallocate(y)
            by[node.name] = errs
        out = call()
        own[node.name] = error_of(node, out)
        if node.name in by:
            by[node.name][node.precision] = own[node.name]
        return out

    ex = Executor(plan, params, backend, keep_params=True)
    ex.step_hook = hook
    (name, _), = graph.inputs.items()
    ex.run({name: ref[name]}, keep_all=True)
    return LocalErrors(own, by)


# ---- why a layer loses accuracy (compare's reason column) ---------------------------------

def attribution_variants(node: Node) -> list[Precision]:
    """The layer's precision with, one after the other, HiFi4, bfloat16 weights and fp32_accum:
    the differences between them are the fidelity's, the weight format's and the 16-bit Dest's
    shares of its local error (what remains is the output's rounding to its dtype)."""
    p = node.precision
    hi = dataclasses.replace(p, math_fidelity="HiFi4")
    w16 = dataclasses.replace(hi, weights="bfloat16" if p.weights != "float32" else "float32")
    acc = dataclasses.replace(w16, fp32_accum=True)
    return [hi, w16, acc]


@dataclass(frozen=True)
class Reason:
    """A layer's local error split by cause (NMSE), and the main cause's name."""
    local: float          # the layer's own error (its inputs exact)
    fidelity: float
    weights: float
    dest: float
    output: float         # the rest: the output's rounding to its dtype (and the op's own)

    def main(self, inherited: float) -> str:
        """The cause to show: the largest share of the local error, after "inherited; own:"
        when the layer's inputs carried more error than the layer itself added."""
        shares = {"fidelity": self.fidelity, "weight format": self.weights,
                  "Dest rounding": self.dest, "output rounding": self.output}
        own = max(shares, key=shares.get)
        return f"inherited; own: {own}" if inherited > self.local else own


def attribute(errs: LocalErrors, graph: Graph) -> dict[str, Reason]:
    """Each layer's ``Reason`` from ``local_errors(..., variants=attribution_variants)``."""
    out = {}
    for n in graph.nodes:
        if n.name not in errs.own:
            continue
        e = errs.own[n.name]
        v = errs.by_precision.get(n.name)
        if not v:
            out[n.name] = Reason(e, 0.0, 0.0, 0.0, e)
            continue
        hi, w16, acc = (v.get(p, e) for p in attribution_variants(n))
        out[n.name] = Reason(e, max(0.0, e - hi), max(0.0, hi - w16), max(0.0, w16 - acc),
                             min(e, acc))
    return out


def describe(node: Node) -> dict[str, Any]:
    p = node.precision
    return {"math_fidelity": p.math_fidelity, "weights": p.weights, "fp32_accum": p.fp32_accum}
