"""conv_transpose2d's planning (``OpDef.plan``): conv2d's candidate search (``plan_context``) on
its L1 path, with the transposed geometry."""
from __future__ import annotations

from dataclasses import replace

from ...planning import rules as R
from ...errors import LayoutError
from ...language.graph import Node
from ...planning.layout import BLOCK, HEIGHT, INTERLEAVED, WIDTH, MemSpec
from ...planning.plan_context import (PlanContext, auto_pick, conv_candidate, conv_on_candidate,
                             smaller_act_blocks)
from ...planning.plans import PlannedLayer
from . import ConvTranspose2dPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """Like conv2d's plan on its L1 path: follow a sharded input, else ttnn's auto choice
    among height/block/width (auto_pick); smaller act blocks when over budget. No DRAM
    slicing (its slice path is not modelled): an input in DRAM is first moved to L1
    interleaved (rule conv_transpose2d.l1_path)."""
    x = ctx.layouts[node.inputs[0]]
    policy = node.layout
    if ctx.with_adapters and x.memory.buffer == "dram":
        x = ctx.adapt(node, 0, x, "to_memory_config",
                      replace(x, memory=MemSpec(INTERLEAVED, "l1")),
                      "conv_transpose2d runs its L1 path on an L1 input")
    follow = policy.kind == "auto" and x.memory.sharded
    kinds = [policy.kind] if policy.kind in (HEIGHT, BLOCK, WIDTH) else (
        [x.memory.memory_layout] if follow else [HEIGHT, BLOCK, WIDTH])
    cands = []
    for k in kinds:
        try:
            cand = conv_candidate(ctx, node, k, x, None, follow, transposed=True)
        except (ValueError, ZeroDivisionError):
            continue
        if not R.tensor_checks(cand.out, node.shape.flat, "conv_transpose2d output"):
            cands.append(cand)
    if not cands:
        raise LayoutError("no shard layout gives ttnn a valid conv_transpose2d output",
                          layer=node.name)
    chosen = auto_pick(cands) if len(cands) >= 2 else cands[0]
    tried = [chosen] + [c for c in cands if c is not chosen]
    fallback = smaller_act_blocks(ctx, node, x, tried, follow, transposed=True)
    fit = next((c for c in fallback if c.est.total <= ctx.op_budget), None)
    if fit is None:
        best = min(fallback, key=lambda c: c.est.total)
        raise LayoutError(
            f"conv_transpose2d needs at least {best.est.total} B of L1 per core "
            f"({best.kind}, {best.est}), over the {ctx.op_budget} B left by the "
            f"{ctx.budget} B bank of {ctx.arch} and the tensors alive around it (it is not "
            "DRAM-sliced); use a smaller input size or batch", layer=node.name)
    layer = conv_on_candidate(ctx, node, x, fit, "conv_transpose2d")
    a = node.attrs
    layer.config = ConvTranspose2dPlan.of(layer.config, kernel=tuple(a["kernel"]),
                                          padding=tuple(a["padding"]),
                                          dilation=tuple(a["dilation"]))
    return layer
