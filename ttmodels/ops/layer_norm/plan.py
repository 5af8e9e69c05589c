"""layer_norm's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.layout import INTERLEAVED, MemSpec
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer
from . import LayerNormPlan


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """ttnn.layer_norm on an interleaved TILE input (rule layer_norm.interleaved), output in
    the input's memory config and dtype; weight and bias [1, 1, 1, C] TILE in DRAM."""
    x = interleaved_tile_input(ctx, node, "layer_norm without a sharded program config",
                               node.precision.activations)
    rows, c = ctx.rc(node.inputs[0])
    out = R.output_layout("layer_norm", [x], {}, None, [ctx.flat[node.inputs[0]]])
    est = l1m.layer_norm_l1(x, out, rows, c)
    return PlannedLayer(node, [x], out, est.total,
                        LayerNormPlan(constant_memory=MemSpec(INTERLEAVED, "dram"),
                                      l1_parts=est.parts))
