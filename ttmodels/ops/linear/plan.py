"""linear's planning (``OpDef.plan``)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ..activations import matmul_split
from ...language.graph import Node
from ...planning.layout import INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import LinearPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    rows, k = ctx.rc(node.inputs[0])
    if ctx.with_adapters:
        if x.memory.sharded:
            x = ctx.to_interleaved(node, 0, x, "linear runs without a sharded program config: "
                                   "interleaved input")
        if x.layout != TILE_LAYOUT:
            x = ctx.to_tile(node, 0, x, "matmul inputs must be tilized")
    dtype = node.precision.activations
    out = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, dtype)
    per_pixel = node.shape.h * node.shape.w > 1
    estimate = l1m.pixel_linear_l1 if per_pixel else l1m.linear_l1
    kw = dict(in_layout=x, rows=rows, k=k, n=node.shape.c,
              weights_dtype=node.precision.weights, bias=bool(node.attrs.get("bias", True)))
    if per_pixel:
        kw["budget"] = ctx.op_budget
        cap = ctx.cb_caps.get(node.name)
        if cap:
            # the address model found its CBs reaching into an L1 buffer (plan_alloc._capped):
            # ttnn sizes the automatic config's blocks to the L1 below its lowest buffer
            # (matmul_program_config.cpp get_max_l1_space), so held to ``cap`` bytes of CBs
            est = estimate(out_layout=out, **kw)
            kw["budget"] = min(ctx.op_budget, est.total - l1m.estimate_cbs(est) + cap)
    est = estimate(out_layout=out, **kw)
    if per_pixel and ctx.with_adapters and est.total > ctx.op_budget:
        # a per-pixel linear's output too large for L1 (ConvNeXt's pwconv1 at batch 8)
        # goes to DRAM interleaved: ttnn.linear takes any interleaved output memory config
        out = replace(out, memory=MemSpec(INTERLEAVED, "dram"))
        est = estimate(out_layout=out, **kw)
    return PlannedLayer(node, [x], out, est.total,
                        LinearPlan(dtype=dtype, memory_config=out.memory, program_config=None,
                                   # what the matmul fuses (the rest runs after it)
                                   activation=matmul_split(node.attrs.get("activation"))[0],
                                   l1_parts=est.parts))
