"""group_norm's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...language.graph import Node
from ...planning import rules as R
from ...planning.layout import INTERLEAVED, MemSpec
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer
from . import GroupNormPlan
from .l1 import group_norm_l1


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """ttnn.group_norm on an interleaved TILE input in bfloat16 (float32 where the activations
    are float32 and the profile accumulates in float32, which ttnn requires for it; ttnn refuses
    bfloat8_b), the output in the input's memory config (asked for
    explicitly: ttnn's default is DRAM) and dtype; weight/bias ROW_MAJOR and the mask TILE in
    DRAM."""
    p = node.precision
    f32 = p.activations == "float32" and p.fp32_accum
    x = interleaved_tile_input(ctx, node, "group_norm without a sharded config",
                               "float32" if f32 else "bfloat16")
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout("group_norm", [x], {}, x.memory, [ctx.flat[node.inputs[0]]])
    est = group_norm_l1(x, out, rows, c, int(node.attrs.groups))
    return PlannedLayer(node, [x], out, est.total,
                        GroupNormPlan(num_groups=int(node.attrs.groups),
                                      fp32_dest_acc_en=bool(p.fp32_accum), memory_config=x.memory,
                                      constant_memory=MemSpec(INTERLEAVED, "dram"),
                                      l1_parts=est.parts))
