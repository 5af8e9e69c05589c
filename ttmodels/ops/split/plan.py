"""split's planning (``OpDef.plan``)."""
from __future__ import annotations

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.plan_config import PlanConfig
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """One ttnn.slice per named output (ops/split/layer.py Split): the input interleaved (rule
    slice.memory), every output in the input's memory config."""
    x = ctx.layouts[node.inputs[0]]
    if ctx.with_adapters and x.memory.sharded:
        x = ctx.to_interleaved(node, 0, x, "split runs ttnn.slice, which takes interleaved "
                               "tensors")
    out = R.output_layout("split", [x], {}, None, [ctx.flat[node.inputs[0]]])
    rows, c = ctx.rc(node.inputs[0])
    est = l1m.split_l1(in_layout=x, out_layout=out, rows=rows, c_in=c,
                       channels=[hi - lo for _, lo, hi in node.attrs.sections])
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts),
                        outputs={t: out for t in node.outputs})
