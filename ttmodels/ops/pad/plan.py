"""pad's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import PadPlan
from .rules import PadArgs


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    if ctx.with_adapters and R.check("pad", [x], {}, None, shapes=[ctx.flat[node.inputs[0]]]):
        x = ctx.to_interleaved(node, 0, x, "spatial pad runs on interleaved tensors")
    # ttnn.pad keeps the input's memory config unless given one; a height-sharded input
    # gets more rows, so the plan passes a memory_config refitted to the padded shape
    # (same grid and cores, taller shards), or the card rejects the output's shard spec.
    requested = None
    if ctx.with_adapters and x.memory.sharded:
        requested = R.reshape_memspec(x.memory, node.shape.rows, node.shape.c, x.layout)
    out = R.output_layout("pad", [x], PadArgs(out_shape=node.shape.flat), requested,
                          [ctx.flat[node.inputs[0]]])
    rows, c = ctx.rc(node.inputs[0])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows, c=c)
    return PlannedLayer(node, [x], out, est.total,
                        PadPlan(padding=node.attrs.get("padding"),
                                value=node.attrs.get("value", 0.0), memory_config=requested,
                                out_shape=node.shape.flat, l1_parts=est.parts))
