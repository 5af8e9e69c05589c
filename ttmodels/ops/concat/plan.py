"""concat's planning (``OpDef.plan``)."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...formats import is_block_float
from ...language.graph import Node
from ...planning.layout import HEIGHT, ROW_MAJOR, TILE_LAYOUT, TensorLayout
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import ConcatPlan
from .rules import ConcatArgs
from .sharding import concat_shard_misalignment

CHANNELS = ConcatArgs(dim=-1)          # a channel concat's call, as the rules read it


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    ins = ctx.inputs_of(node)
    shapes = [ctx.flat[s] for s in node.inputs]
    if ctx.with_adapters and node.layout.kind == HEIGHT and node.layout.buffer != "dram" \
            and ins[0].memory.memory_layout != HEIGHT:
        # asked for height sharding: shard the first input so (below) the others follow it
        rows, c = ctx.rc(node.inputs[0])
        want = R.reshape_memspec(ctx.requested_memory(node, rows, c), rows, c, ins[0].layout)
        kind = "reshard" if ins[0].memory.sharded else "interleaved_to_sharded"
        ins[0] = ctx.adapt(node, 0, ins[0], kind, replace(ins[0], memory=want),
                           "layout asks height_sharded; the other inputs follow this one")
    if ctx.with_adapters and R.check("concat", ins, CHANNELS, None, shapes=shapes):
        first = ins[0]
        channels = [ctx.rc(s)[1] for s in node.inputs]
        misaligned = concat_shard_misalignment(HEIGHT, channels, first.dtype)
        for i, t in enumerate(ins):
            rows, c = ctx.rc(node.inputs[i])
            if first.memory.sharded and first.memory.memory_layout == HEIGHT and not misaligned:
                want = R.reshape_memspec(first.memory, rows, c)
                if t.memory != want:
                    kind = "reshard" if t.memory.sharded else "interleaved_to_sharded"
                    ins[i] = ctx.adapt(node, i, t, kind, replace(t, memory=want),
                                       "channel concat needs equal height shards on one grid")
            elif t.memory.sharded:
                ins[i] = ctx.to_interleaved(node, i, t, misaligned or
                                            "concat inputs all interleaved")
        if R.check("concat", ins, CHANNELS, None, shapes=shapes):
            ins = concat_format(ctx, node, ins)
    out = R.output_layout("concat", ins, ConcatArgs(out_shape=node.shape.flat), None, shapes)
    est = l1m.eltwise_l1(inputs=[(t, *ctx.rc(s)) for t, s in zip(ins, node.inputs)],
                         out_layout=out, out_rows=node.shape.rows, c=node.shape.c)
    return PlannedLayer(node, ins, out, est.total, ConcatPlan(dim=-1, l1_parts=est.parts))


def concat_format(ctx: PlanContext, node: Node, ins: list[TensorLayout]) -> list[TensorLayout]:
    """Adapters giving every concat input one layout and dtype (rules concat.same_layout,
    concat.same_format): TILE when any input is TILE (block-float exists only in TILE, so
    untilizing would change its dtype), the layer's activation dtype when they differ."""
    want_layout = TILE_LAYOUT if any(t.layout == TILE_LAYOUT for t in ins) else ROW_MAJOR
    dtypes = {t.dtype for t in ins}
    act = node.precision.activations
    want_dtype = ins[0].dtype if len(dtypes) == 1 else act if act in dtypes else ins[0].dtype
    if want_layout == ROW_MAJOR and is_block_float(want_dtype):
        want_dtype = "bfloat16"
    for i, t in enumerate(ins):
        if t.layout != want_layout:
            ins[i] = ctx.adapt(node, i, t, "to_layout",
                               replace(t, layout=want_layout, dtype=want_dtype),
                               "concat inputs share one layout and dtype")
        elif t.dtype != want_dtype:
            ins[i] = ctx.adapt(node, i, t, "typecast", replace(t, dtype=want_dtype),
                               "concat inputs share one dtype")
    return ins
