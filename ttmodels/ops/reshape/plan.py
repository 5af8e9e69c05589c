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
    interleaved bfloat16 or float32 TILE input (rule reshape.interleaved); the output in its
    memory."""
    x0 = ctx.layouts[node.inputs[0]]
    # a float32 tensor stays float32 (a typecast to bfloat16 here was the float32 profile's
    # largest loss on shufflenet_v2: every channel_shuffle rounded its block's output); only
    # the block floats, whose shared exponents a re-tiling changes, become bfloat16
    x = interleaved_tile_input(ctx, node, f"{node.op} runs on interleaved tensors",
                               "float32" if x0.dtype == "float32" else "bfloat16")
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout(node.op, [x], {}, None, [ctx.flat[node.inputs[0]]])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=node.shape.rows,
                         c=node.shape.c)
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))
