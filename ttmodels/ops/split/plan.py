"""split's planning (``OpDef.plan``)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.layout import INTERLEAVED, MemSpec, TensorLayout
from ...planning.plan_config import PlanConfig
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    """One ttnn.slice per named output (ops/split/layer.py Split): the input interleaved (rule
    slice.memory), every output in the input's memory config. In L1 when input and outputs fit
    what the tensors alive around it leave, else from DRAM (ttnn.slice reads and writes DRAM
    interleaved as well: yolov8n batch 16's first split holds 1.8 MB per core in L1), or when
    the address remedies ask for it (a cap of 0: ``plan_alloc._from_dram``)."""
    x = ctx.layouts[node.inputs[0]]
    rows, c = ctx.rc(node.inputs[0])
    channels = [hi - lo for _, lo, hi in node.attrs.sections]
    if ctx.with_adapters and x.memory.sharded and ctx.cb_caps.get(node.name) != 0:
        l1 = replace(x, memory=MemSpec(INTERLEAVED, "l1"))
        if _estimate(ctx, node, l1, rows, c, channels).total <= ctx.op_budget:
            x = ctx.to_interleaved(node, 0, x, "split runs ttnn.slice, which takes interleaved "
                                   "tensors")
    if ctx.with_adapters and (x.memory.sharded or ctx.cb_caps.get(node.name) == 0 or
                              _estimate(ctx, node, x, rows, c, channels).total > ctx.op_budget):
        x = ctx.to_dram(node, 0, x, "split runs ttnn.slice on interleaved tensors; " + (
            "the L1 allocator has no free block for them" if ctx.cb_caps.get(node.name) == 0
            else f"in L1 its input and outputs do not fit the {ctx.op_budget:,} B left"))
    out = R.output_layout("split", [x], {}, None, [ctx.flat[node.inputs[0]]])
    est = _estimate(ctx, node, x, rows, c, channels)
    return PlannedLayer(node, [x], out, est.total, PlanConfig(l1_parts=est.parts),
                        outputs={t: out for t in node.outputs})


def _estimate(ctx: PlanContext, node: Node, x: TensorLayout, rows: int, c: int,
              channels: list[int]) -> l1m.L1Estimate:
    """The split's L1 with its input as ``x`` (its outputs take the input's memory config)."""
    out = R.output_layout("split", [x], {}, None, [ctx.flat[node.inputs[0]]])
    return l1m.split_l1(in_layout=x, out_layout=out, rows=rows, c_in=c, channels=channels)
