"""The binary ops' planning (``OpDef.plan`` of add, multiply, subtract): operand order,
adapters to a layout binary_ng takes, the reshard rule, and writing in place into operand a."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...language.graph import Node
from ...planning.layout import TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from . import BinaryPlan
from .rules import BinaryArgs
from .sharding import is_native_binary_sharding


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    ins = ctx.inputs_of(node)
    shapes = [ctx.flat[s] for s in node.inputs]
    s0, s1 = (ctx.g.shape_of(i) if i not in ctx.g.constants else None for i in node.inputs)
    commutes = node.op in ("add", "multiply")
    # b is the operand that broadcasts: a constant, or a per-image vector [N, 1, 1, C]
    swap = commutes and (
        (node.inputs[0] in ctx.g.constants and node.inputs[1] not in ctx.g.constants)
        or (s0 is not None and s1 is not None and s0 != s1 and s0.h == s0.w == 1))
    if not swap and commutes and node.inputs[1] not in ctx.g.constants and s0 == s1 and \
            ins[0].memory.buffer == "dram" and ins[1].memory.sharded:
        # a DRAM operand (a spilled shortcut) next to a sharded one: binary_ng gives the
        # output a sharded spec anyway (seen on the mock device), so make the sharded
        # tensor operand a: the output follows it, and in place it is its buffer
        swap = True
    ia, ib = (1, 0) if swap else (0, 1)
    a, b = ins[ia], ins[ib]
    sa, sb = (s1, s0) if swap else (s0, s1)
    per_image = sa is not None and sb is not None and sa != sb and sa.n > 1
    if ctx.with_adapters and per_image:
        # [1,1,N*H*W,C] against [1,1,N,C] does not broadcast per image: the layer reshapes
        # them to [N,1,H*W,C] and [N,1,1,C]; a TILE reshape that changes the tile padding
        # copies and takes no sharded tensor (rules binary.reshape_broadcast)
        why = "per-image broadcast reshapes its operands to [N, 1, H*W, C] / [N, 1, 1, C]"
        if a.memory.sharded:
            a = ctx.to_interleaved(node, ia, a, why)
        if b.memory.sharded:
            b = ctx.to_interleaved(node, ib, b, why)
        if a.layout != TILE_LAYOUT:
            a = ctx.to_tile(node, ia, a, "binary operands in TILE")
        if b.layout != TILE_LAYOUT:
            b = ctx.to_tile(node, ib, b, "binary operands in TILE")
    if ctx.with_adapters and not per_image:
        # a row-major shard that is not whole tiles cannot be tilized where it is (ttnn
        # tilizes with the shard spec: tensor.shard_tile): it goes interleaved first
        if a.layout != TILE_LAYOUT and a.memory.sharded and not R.tile_aligned_shard(a.memory):
            a = ctx.to_interleaved(node, ia, a, "row-major shards that are not whole tiles")
        if b.layout != TILE_LAYOUT and b.memory.sharded and not R.tile_aligned_shard(b.memory):
            b = ctx.to_interleaved(node, ib, b, "row-major shards that are not whole tiles")
        if a.layout != TILE_LAYOUT and (a.memory.sharded or b.memory.sharded):
            a = ctx.to_tile(node, ia, a, "binary_ng's row-major path takes no sharded tensors")
        if b.layout != TILE_LAYOUT and (a.memory.sharded or b.memory.sharded):
            b = ctx.to_tile(node, ib, b, "binary_ng's row-major path takes no sharded tensors")
        if a.layout == TILE_LAYOUT and b.layout != TILE_LAYOUT:
            b = ctx.to_tile(node, ib, b, "operand layouts must agree (TILE)")
        adv = R.advise(node.op, [a, b], {}, None, shapes=[shapes[ia], shapes[ib]])
        # only a different shard spec is worth a move: equal specs that are not native
        # (uneven shards) stay on the TensorAccessor path whatever we do
        if adv and a.memory.sharded and b.memory.sharded and shapes[ia] == shapes[ib] \
                and a.memory != b.memory:
            cost_a = R.tensor_bytes(a, *ctx.rc(node.inputs[ia]))
            cost_b = R.tensor_bytes(b, *ctx.rc(node.inputs[ib]))
            # move the operand on fewer cores onto the other's grid: that is where ttnn
            # puts the output anyway (ops/binary/sharding.py binary_output_source), and it keeps the stage
            # on the wider grid; equal core counts: the cheaper move (ties: b)
            na, nb = R.core_count(a.memory), R.core_count(b.memory)
            if na < nb or (na == nb and cost_a < cost_b):
                a = ctx.adapt(node, ia, a, "reshard", replace(a, memory=b.memory),
                              f"shard specs differ ({a.memory.short()} vs {b.memory.short()}); "
                              f"a on {na} cores, b on {nb}; moving a costs {cost_a} B "
                              f"(b: {cost_b} B); same spec = native L1-sharded binary_ng")
            else:
                b = ctx.adapt(node, ib, b, "reshard", replace(b, memory=a.memory),
                              f"shard specs differ ({a.memory.short()} vs {b.memory.short()}); "
                              f"a on {na} cores, b on {nb}; moving b costs {cost_b} B "
                              f"(a: {cost_a} B); same spec = native L1-sharded binary_ng")
    req = None if per_image else ctx.requested_memory(node, node.shape.rows, node.shape.c)
    dtype = node.precision.activations if ctx.with_adapters else a.dtype
    out = R.output_layout(node.op, [a, b], BinaryArgs(dtype=dtype, out_shape=node.shape.flat), req,
                          [shapes[ia], shapes[ib]])
    received = [None, None]
    received[ia], received[ib] = a, b
    est = l1m.eltwise_l1(inputs=[(a, *ctx.rc(node.inputs[ia])), (b, *ctx.rc(node.inputs[ib]))],
                         out_layout=out, out_rows=node.shape.rows, c=node.shape.c)
    inplace, blocker = False, "per-image broadcast" if per_image else None
    if ctx.with_adapters and est.total > ctx.op_budget and not per_image:
        if node.op != "subtract" and \
                inplace_blocker(ctx, node, ia, a, shapes[ia], dtype, req) is not None and \
                inplace_blocker(ctx, node, ib, b, shapes[ib], dtype, req) is None:
            # add/multiply commute: write into the operand nothing else reads
            ia, ib, a, b, swap = ib, ia, b, a, not swap
            received[ia], received[ib] = a, b
        blocker = inplace_blocker(ctx, node, ia, a, shapes[ia], dtype, req)
        inplace = blocker is None
    if inplace:
        # TT's ResNet50 bottleneck: ttnn.add_(out, ds_out) = add(a, b, output_tensor=a).
        # The output is a's buffer (binary_ng compute_output_specs returns the preallocated
        # tensor's spec), so it costs no L1 of its own.
        out = a
        est = l1m.eltwise_l1(inputs=[(a, *ctx.rc(node.inputs[ia])),
                                     (b, *ctx.rc(node.inputs[ib]))],
                             out_layout=out, out_rows=node.shape.rows, c=node.shape.c,
                             output_aliases_input=0)
    native = is_native_binary_sharding(a, b, out.memory, shapes[ia], shapes[ib])
    if not native and shapes[ia] != shapes[ib] and (a.memory.sharded or b.memory.sharded):
        est = l1m.with_unborrowed_binary_cbs(est)
    elif not native and a.memory.sharded != b.memory.sharded:
        est = l1m.with_unborrowed_binary_cbs(est, cbs=3)
    config = BinaryPlan(swap_operands=swap, dtype=dtype, memory_config=req,
                        native_l1_sharding=native,
                        broadcast="per_image" if per_image else (
                            "row_b" if shapes[ib] != shapes[ia] else None),
                        activation=node.attrs.get("activation"), l1_parts=est.parts)
    if inplace:
        config = replace(config, inplace=True, out_shape=node.shape.flat)
    elif est.total > ctx.op_budget and ctx.with_adapters:
        # the plan fails: say why output_tensor=a won't do
        config = replace(config, inplace_blocked=blocker)
    return PlannedLayer(node, received, out, est.total, config)


def inplace_blocker(ctx: PlanContext, node: Node, ia: int, a: TensorLayout, shape_a, dtype: str,
                    req: MemSpec | None) -> str | None:
    """Why the binary op cannot write its output into operand a (``output_tensor=a``), or
    None when it can. binary_ng takes the preallocated tensor's spec as the output spec, so
    it must have the broadcast output shape, the output dtype ('If both output dtype and
    output tensor provided dtype should match') and the requested memory config; and the
    tensor a is overwritten, so nothing may read it afterwards."""
    src = node.inputs[ia]
    if shape_a != node.shape.flat:
        return "operand a is broadcast"
    if a.dtype != dtype:
        return f"output dtype {dtype} differs from a's {a.dtype}"
    if req is not None and req != a.memory:
        return "a memory_config other than a's is requested"
    if a.memory.buffer != "l1":
        return "a is not in L1 (nothing to save)"
    if node.inputs.count(src) > 1:
        return "both operands are the same tensor"
    if (node.name, ia) in ctx.adapted:
        return None                    # a is the adapter's fresh copy: safe to overwrite
    if src in ctx.g.inputs or src in ctx.g.constants or src in ctx.g.outputs:
        return f"{src} is a graph input, constant or output"
    if [c.name for c in ctx.g.consumers(src)] != [node.name]:
        return f"{src} is read by other layers too"
    return None
