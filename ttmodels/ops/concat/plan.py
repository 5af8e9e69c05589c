"""concat's planning (``OpDef.plan``)."""
from __future__ import annotations

from dataclasses import replace

from ...arch import ARCHS
from ...planning import l1 as l1m
from ...planning import rules as R
from ...formats import is_block_float
from ...language.graph import Node
from ...planning.layout import HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import ConcatPlan
from . import l1 as CL
from .rules import ConcatArgs
from .sharding import concat_shard_misalignment

CHANNELS = ConcatArgs(dim=-1)          # a channel concat's call, as the rules read it


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    ins = ctx.inputs_of(node)
    shapes = [ctx.flat[s] for s in node.inputs]
    if ctx.with_adapters and node.layout.kind == "auto" and (
            l1_need(ctx, node, ins) > ctx.op_budget or ctx.cb_caps.get(node.name) == 0):
        # the fallback that fits: concat reads and writes DRAM interleaved as well (unet's
        # decoder concats at batch 16, bevdet's neck concat at 8: 1.4-2.1 MB per core in L1);
        # a cap of 0 is the address remedy's ask (plan_alloc._from_dram: no free block for
        # the output in L1)
        why = ("the L1 allocator has no free block for its output: it runs from DRAM"
               if ctx.cb_caps.get(node.name) == 0 else
               f"in L1 the concat does not fit the {ctx.op_budget:,} B left: it runs from DRAM")
        for i, t in enumerate(ins):
            ins[i] = ctx.to_dram(node, i, t, why)
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
    parts = dict(est.parts)
    channels = [ctx.rc(s)[1] for s in node.inputs]
    copies = CL.layout_copies(ins, node.shape.rows, channels, ARCHS[ctx.arch].l1_banks)
    if any(copies):
        # interleaved inputs of two layouts: ttnn converts the others to the concat's layout
        # in their memory before the output (ops/concat/l1.py; plan_alloc allocates them there)
        parts["to_layout_phase"] = sum(copies)
    if ctx.with_adapters and CL.untilizes(ins, channels, out):
        # ttnn's native factory runs only if its CBs and output fit the L1 free at that moment;
        # else the untilized copies and the row-major concat (ops/concat/l1.py). An L1 output
        # counts the second (measured: 409,600 B outputs took it with more than that free by
        # the sums); a DRAM output needs only the native CBs free, as the address model checks
        rows, banks = node.shape.rows, ARCHS[ctx.arch].l1_banks
        native = CL.native_cbs(ins, channels, out)
        cbs = sum(v for k, v in parts.items() if l1m.classify_part(k) == "cb")
        if native is not None and out.memory.buffer == "dram":
            parts["unaligned_cbs"] = max(0, native - cbs)
        else:
            parts["untilize_phase"] = sum(CL.untilized_copies(ins, rows, channels, banks))
            parts["rm_concat_phase"] = CL.row_major_concat(ins, out, rows, node.shape.c, banks)
    return PlannedLayer(node, ins, out, sum(parts.values()),
                        ConcatPlan(dim=-1, l1_parts=parts))


def l1_need(ctx: PlanContext, node: Node, ins: list[TensorLayout]) -> int:
    """L1 bytes per core of the concat run in L1 (its output interleaved or sharded over the
    grid, about the same per core) with its inputs where they are, and ttnn's copies of the
    inputs of the other layout."""
    out = TensorLayout(MemSpec(INTERLEAVED, "l1"), ins[0].layout, node.precision.activations
                       if not is_block_float(node.precision.activations) or
                       ins[0].layout == TILE_LAYOUT else "bfloat16")
    copies = CL.layout_copies(ins, node.shape.rows, [ctx.rc(s)[1] for s in node.inputs],
                              ARCHS[ctx.arch].l1_banks)
    return l1m.eltwise_l1(inputs=[(t, *ctx.rc(s)) for t, s in zip(ins, node.inputs)],
                          out_layout=out, out_rows=node.shape.rows, c=node.shape.c).total + \
        sum(copies)


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
