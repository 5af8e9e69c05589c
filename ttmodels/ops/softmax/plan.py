"""softmax's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer
from . import SoftmaxPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = interleaved_tile_input(ctx, node, "softmax: interleaved input (no sharded program "
                               "config is planned)", node.precision.activations)
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout("softmax", [x], {}, None, [ctx.flat[node.inputs[0]]])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows, c=c)
    return PlannedLayer(node, [x], out, est.total, SoftmaxPlan(l1_parts=est.parts))
