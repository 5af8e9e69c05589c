"""grn's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...language.graph import Node
from ...planning import rules as R
from ...planning.l1 import L1Estimate, per_core_bytes
from ...planning.layout import INTERLEAVED, MemSpec
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer
from . import GrnPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """The composition on an interleaved TILE input, every step's output in the input's memory
    config and dtype; weight and bias [1, 1, 1, C] TILE in L1. L1: the input, x*x and x*s (the
    two full-size intermediates alive at once at most: x*s and the output) per core; the
    per-channel vectors are one tile row each."""
    x = interleaved_tile_input(ctx, node, "grn's reductions on an interleaved input")
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout("grn", [x], {}, x.memory, [ctx.flat[node.inputs[0]]])
    full = per_core_bytes(out, rows, c)
    parts = {"input": per_core_bytes(x, rows, c), "output": full, "intermediate": full}
    est = L1Estimate(sum(parts.values()), parts)
    return PlannedLayer(node, [x], out, est.total,
                        GrnPlan(memory_config=x.memory, constant_memory=MemSpec(INTERLEAVED, "l1"),
                                l1_parts=est.parts))
