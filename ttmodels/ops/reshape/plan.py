"""The reshape family's planning (``OpDef.plan`` of flatten, reshape, permute,
channel_shuffle)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.plan_config import PlanConfig
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """flatten / reshape / permute / channel_shuffle: ttnn.reshape and ttnn.permute on an
    interleaved bfloat16 TILE input (rule reshape.interleaved); the output in its memory."""
    x = interleaved_tile_input(ctx, node, f"{node.op} runs on interleaved tensors",
                               "bfloat16")
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout(node.op, [x], {}, None, [ctx.flat[node.inputs[0]]])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows,
                         c=node.shape.c)
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))
