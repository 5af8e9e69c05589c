"""layer_scale's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...language.graph import Node
from ...planning.plan_context import PlanContext, per_channel_constant
from ...planning.plans import PlannedLayer
from . import LayerScalePlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """x * gamma, gamma a [1, 1, 1, C] TILE constant in L1 (as batch_norm's scale)."""
    x, const, dtype, out, est = per_channel_constant(
        ctx, node, "binary operands in TILE (the scale is TILE)")
    return PlannedLayer(node, [x], out, est.total,
                        LayerScalePlan(dtype=dtype, constant_memory=const.memory,
                                       constant_dtype=const.dtype, l1_parts=est.parts))
