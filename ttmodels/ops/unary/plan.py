"""The unary ops' planning (``OpDef.plan`` of the standalone activations and identity)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...formats import is_block_float
from ...language.graph import Node
from ...planning.layout import TILE_LAYOUT
from ...planning.plan_config import PlanConfig
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    want = node.precision.activations
    if ctx.with_adapters and x.dtype != want:
        after = replace(x, dtype=want, layout=TILE_LAYOUT if is_block_float(want) else x.layout)
        kind = "typecast" if x.layout == TILE_LAYOUT else "to_layout"
        x = ctx.adapt(node, 0, x, kind, after,
                      f"{node.op} has no dtype argument: {x.dtype} -> {want} before it")
    out = R.output_layout(node.op, [x], {}, None, [ctx.flat[node.inputs[0]]])
    rows, c = ctx.rc(node.inputs[0])
    est = l1m.eltwise_l1(inputs=[(x, rows, c)], out_layout=out, out_rows=rows, c=c)
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts))
