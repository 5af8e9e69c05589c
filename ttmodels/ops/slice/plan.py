"""slice's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.plan_config import PlanConfig
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    if ctx.with_adapters and x.memory.sharded:
        x = ctx.to_interleaved(node, 0, x, "slice takes interleaved tensors")
    out = R.output_layout("slice", [x], {}, None, [ctx.flat[node.inputs[0]]])
    rows, c = ctx.rc(node.inputs[0])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows,
                         c=node.shape.c)
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))
