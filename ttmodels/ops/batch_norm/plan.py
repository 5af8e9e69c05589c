"""batch_norm's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...language.graph import Node
from ...planning.plan_context import PlanContext, per_channel_constant
from ...planning.plans import PlannedLayer
from . import BatchNormPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """x * scale + shift with [1, 1, 1, C] TILE constants in L1 (rules batch_norm.as_binary):
    binary_ng broadcasts them over x's rows whatever x's sharding (binary.broadcast)."""
    x, const, dtype, out, est = per_channel_constant(
        ctx, node, "binary operands in TILE (the constants are TILE)")
    return PlannedLayer(node, [x], out, est.total,
                        BatchNormPlan(dtype=dtype, constant_memory=const.memory,
                                      constant_dtype=const.dtype,
                                      activation=node.attrs.get("activation"),
                                      l1_parts=est.parts))
