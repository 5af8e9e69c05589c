"""The pools' planning (``OpDef.plan`` of max_pool2d, avg_pool2d, global_avg_pool,
adaptive_avg_pool2d): shard scheme, output layout and dtype, and DRAM slicing of a max/avg pool
over its L1."""
from __future__ import annotations

from dataclasses import replace

from ...planning import l1 as l1m
from ...planning import rules as R
from ...formats import is_block_float
from ...language.graph import Node
from ...planning.liveness import INTERLEAVED_TILIZE_MAX_TILES
from ...planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                       TensorLayout)
from ...planning.plan_config import SliceConfig
from ...planning.plan_context import PlanContext
from ...planning.plans import PlannedLayer
from ...planning.sharding import reshape_memspec, sharded_memspec
from . import PoolPlan, exact_window
from .rules import PoolArgs, channel_shards_refused
from ..conv2d.sharding import select_conv_shard_layout
from .l1 import exact_l1, pool_l1
from ..base import pads
from .sharding import pool_input_memspec, pool_parallel_config, pool_parallel_config_of
from . import exact_global


# the output dtypes ttnn 0.81.1's pool2d (max_pool2d, avg_pool2d) writes
POOL2D_DTYPES = ("bfloat16", "bfloat8_b", "bfloat4_b")
# the pools that may run as pool2d: the global pool too (inception_v3 float32's 8x8 avgpool
# did, and was refused a float32 output; when it runs as a reduce, float32 would do, but which
# path ttnn takes is not known in advance: DEVELOPERS.md)
POOL2D_OPS = ("max_pool2d", "avg_pool2d", "global_avg_pool")


def plan(ctx: PlanContext, node: Node) -> PlannedLayer:
    x = ctx.layouts[node.inputs[0]]
    in_rows, c = ctx.rc(node.inputs[0])
    in_shape = ctx.g.shape_of(node.inputs[0])
    policy = node.layout
    if exact_global.applies(ctx, node):
        # float32 activations: ttnn.mean keeps them float32 where pool2d reads bfloat16
        return exact_global.plan(ctx, node, PoolPlan())
    if ctx.with_adapters and exact_window.wanted(node.op, node.precision.activations, x.dtype):
        # float32 stays float32: slices and SFPU binaries, not the bfloat16-only pool2d
        return plan_exact(ctx, node, x)
    if node.op == "global_avg_pool" and ctx.with_adapters and x.memory.buffer == "dram" and \
            not whole_map_fits(ctx, node, x):
        # the planner's DRAM form (its last remedy) of a map whose pool2d copies do not fit
        # L1 (efficientnet_b0 batch 32's SE pool over 32x56x56x144): ttnn.mean reduces the
        # DRAM map itself, only its CBs and the small output in L1 (ops/pool/exact_global.py)
        return exact_global.plan(ctx, node, PoolPlan(), dtype="bfloat16")
    if node.op in POOL2D_OPS and x.dtype == "float32" and ctx.with_adapters:
        # pool_op.cpp:30 (0.81.1, the real run): "Only BFLOAT16 supported for now"
        x = ctx.adapt(node, 0, x, "typecast", replace(x, dtype="bfloat16"),
                      "pool2d reads bfloat16, not float32")
    if node.op == "global_avg_pool" and ctx.with_adapters and x.memory.buffer == "dram":
        # ttnn 0.81.1's pool2d DRAM-slices a DRAM input by output rows, and a whole-map window
        # has one: "DRAM Auto slice could not find valid slice configuration" (efficientnet_b0
        # batch 16's SE pool over 16x56x56x96). From L1 it pools as any other.
        x = ctx.adapt(node, 0, x, "interleaved_to_sharded",
                      replace(x, memory=whole_map_input(in_rows, c, x.layout, ctx.grid)),
                      "a whole-map pool cannot be DRAM-sliced: it reads its input from L1")
    scheme = x.memory.memory_layout if x.memory.sharded else (
        policy.kind if policy.kind in (HEIGHT, WIDTH, BLOCK) else
        select_conv_shard_layout(node.shape.rows, c, c, device_grid=ctx.grid))
    if policy.kind in (HEIGHT, WIDTH, BLOCK) and x.memory.sharded and policy.kind != scheme \
            and ctx.with_adapters:
        want = ctx.requested_memory(node, in_rows, c)
        x = ctx.adapt(node, 0, x, "reshard", replace(x, memory=want),
                      f"policy asks {policy.kind}; producer gives {x.memory.short()}")
        scheme = policy.kind
    if ctx.with_adapters and channel_shards_refused(x, ctx.flat[node.inputs[0]]):
        # rule pool.channel_shards: a producer that left a grid column empty (a conv's 512
        # channels on 5 columns of 128) gives pool2d a channel shard count it refuses; from
        # interleaved L1 pool2d shards the input itself (applied_shard_scheme)
        x = ctx.to_interleaved(node, 0, x, f"pool2d refuses {x.memory.short()} of {c} channels "
                               "(rule pool.channel_shards)")
        scheme = policy.kind if policy.kind in (HEIGHT, WIDTH, BLOCK) else \
            select_conv_shard_layout(node.shape.rows, c, c, device_grid=ctx.grid)
    dtype = node.precision.activations
    out_layout = TILE_LAYOUT if (ctx.with_adapters and (ctx.consumers_need_tile(node) or
                                                        is_block_float(dtype))) else ROW_MAJOR
    if not ctx.with_adapters or node.op == "adaptive_avg_pool2d":
        # adaptive_avg_pool2d has no dtype / output_layout arguments (0.81.1 signature)
        dtype = "bfloat16"
    if node.op == "adaptive_avg_pool2d":
        out_layout = ROW_MAJOR
    if node.op in POOL2D_OPS and dtype not in POOL2D_DTYPES:
        # ttnn 0.81.1 pool2d: "Currently only BFLOAT16, BFLOAT8_B, and BFLOAT4_B output data
        # formats are supported" (generic_pools.cpp:154, the real run of googlenet float32)
        dtype = "bfloat16"
    if node.op == "global_avg_pool":
        kernel = (in_shape.h, in_shape.w)
    elif node.op == "adaptive_avg_pool2d":
        kernel = tuple(-(-i // o) for i, o in zip((in_shape.h, in_shape.w), node.attrs.size))
    else:
        kernel = tuple(node.attrs.kernel)
    call = PoolArgs(output_layout=out_layout, dtype=dtype,
                    applied_shard_scheme=None if x.memory.sharded else scheme,
                    out_shape=node.shape.flat, device_grid=ctx.grid)
    # generic_pools.cpp: an interleaved input is moved to the shard spec pool2d derives from
    # applied_shard_scheme (pool_parallel_config); a sharded one is used as it is.
    in_tiled = x.layout == TILE_LAYOUT
    if x.memory.sharded:
        pc = pool_parallel_config_of(x.memory)
        pool_in = x
    else:
        pc = pool_parallel_config(scheme, node.shape.rows, c, in_tiled=in_tiled,
                                    out_tiled=out_layout == TILE_LAYOUT, device_grid=ctx.grid)
        pool_in = replace(x, memory=pool_input_memspec(pc, in_rows, c, in_tiled=in_tiled))
    # The global pool's output is asked for: left to itself, ttnn 0.81.1 reduces some
    # whole-map pools to interleaved L1 and runs others (batch 3, 6, 10 of a sharded map; an
    # interleaved input) as pool2d with sharded outputs (measured on the mock device)
    requested = MemSpec(INTERLEAVED, "l1") if (
        ctx.with_adapters and node.op == "global_avg_pool") else None
    out = R.output_layout(node.op, [x], call, requested, [ctx.flat[node.inputs[0]]])
    # the global pool reduces the input as it is (no pool2d sharding of it)
    geo = None
    if node.op in ("max_pool2d", "avg_pool2d"):
        geo = l1m.ConvGeometry(in_shape.n, in_shape.h, in_shape.w, node.shape.h, node.shape.w,
                               kernel, tuple(node.attrs.stride),
                               pads(node.attrs.get("padding", (0, 0))))
    est = pool_l1(in_layout=x if node.op == "global_avg_pool" else pool_in,
                      out_layout=out, in_rows=in_rows, in_w=in_shape.w,
                      c=c, out_rows=node.shape.rows, kernel=kernel, num_cores=pc.num_cores,
                      global_pool=node.op == "global_avg_pool", geometry=geo,
                      cores_nhw=pc.cores_nhw)
    config = PoolPlan(applied_shard_scheme=call.applied_shard_scheme,
                      shard_scheme=scheme, output_layout=out_layout, dtype=dtype,
                      kernel=kernel, num_cores=pc.num_cores, core_grid=pc.grid,
                      input_memory=pool_in.memory, out_shape=call.out_shape,
                      memory_config=requested, l1_parts=est.parts)
    if ctx.with_adapters and est.total > ctx.op_budget and \
            node.op not in ("global_avg_pool", "adaptive_avg_pool2d"):
        sliced = plan_pool_sliced(ctx, node, x, est, config)
        if sliced is not None:
            return sliced
    return PlannedLayer(node, [x], out, est.total, config)


def plan_pool_sliced(ctx: PlanContext, node: Node, x: TensorLayout, est, config
                     ) -> PlannedLayer | None:
    """A max/avg pool over the L1 it has, run DRAM-sliced (``dram_slice_config``, ttnn
    0.81.1 pool2d: input read from DRAM slice by slice, output DRAM interleaved; checked on
    the mock device). Height slices of the output, the fewest that fit; the per-slice L1 is
    the whole pool's input/halo/output scaled to the slice's rows (the window CB stays)."""
    s_in, s_out = ctx.g.shape_of(node.inputs[0]), node.shape
    kh, _ = node.attrs.kernel
    sh, _ = node.attrs.get("stride", node.attrs.kernel)
    dh, _ = node.attrs.get("dilation", (1, 1))
    fixed = {k: v for k, v in est.parts.items() if k.endswith("_cb")}
    scaled_in = {k: v for k, v in est.parts.items() if k in ("input", "halo")}
    scaled_out = {k: v for k, v in est.parts.items() if k == "output"}
    # bounded search: at most one output row per slice, and no more than 64 slices
    for k in range(2, min(s_out.h, 64) + 1):
        oh = -(-s_out.h // k)
        ih = min(s_in.h, (oh - 1) * sh + dh * (kh - 1) + 1)
        parts = dict(fixed)
        parts.update({n: -(-v * ih // s_in.h) for n, v in scaled_in.items()})
        parts.update({n: -(-v * oh // s_out.h) for n, v in scaled_out.items()})
        total = sum(parts.values())
        if total <= ctx.op_budget:
            break
    else:
        return None
    dram = MemSpec(INTERLEAVED, "dram")
    cin = ctx.to_dram(node, 0, x, "a DRAM-sliced pool reads its input from DRAM interleaved")
    out = TensorLayout(dram, config.output_layout, config.dtype)
    config = replace(config, applied_shard_scheme=None, input_memory=dram, l1_parts=parts,
                     slice=SliceConfig("height", k))
    return PlannedLayer(node, [cin], out, total, config)


def plan_exact(ctx: PlanContext, node: Node, x: TensorLayout) -> PlannedLayer:
    """A float32 max/avg pool as ``exact_window``'s slices and binaries: input, intermediates
    and output DRAM interleaved (the input in either layout; the output in the one its
    consumers want)."""
    dram = MemSpec(INTERLEAVED, "dram")
    x = ctx.to_dram(node, 0, x, "the exact float32 pool reads its input from DRAM interleaved")
    out_layout = TILE_LAYOUT if ctx.consumers_need_tile(node) else ROW_MAJOR
    out = TensorLayout(dram, out_layout, "float32")
    g = exact_window.window(node.attrs, node.op, ctx.g.shape_of(node.inputs[0]), node.shape)
    est = exact_l1(g.c, in_tiled=x.layout == TILE_LAYOUT, out_tiled=out_layout == TILE_LAYOUT,
                   padded=g.pad != (0, 0, 0, 0), row_tiles_max=INTERLEAVED_TILIZE_MAX_TILES)
    config = PoolPlan(output_layout=out_layout, dtype="float32", kernel=g.kernel,
                      input_memory=dram, out_shape=node.shape.flat, l1_parts=est.parts,
                      exact=True)
    return PlannedLayer(node, [x], out, est.total, config)


def whole_map_fits(ctx: PlanContext, node: Node, x: TensorLayout) -> bool:
    """Whether a global pool of the DRAM map ``x`` fits the layer's L1 as pool2d: the map in L1
    shards (``whole_map_input``) and pool2d's copies of it (``pool_l1``), its output aside."""
    rows, c = ctx.rc(node.inputs[0])
    s = ctx.g.shape_of(node.inputs[0])
    # pool2d reads bfloat16 (a float32 map is typecast first)
    x_l1 = TensorLayout(whole_map_input(rows, c, x.layout, ctx.grid), x.layout,
                        "bfloat16" if x.dtype == "float32" else x.dtype)
    out = TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT, "bfloat16")
    est = pool_l1(in_layout=x_l1, out_layout=out, in_rows=rows, in_w=s.w, c=c,
                  out_rows=node.shape.rows, kernel=(s.h, s.w), num_cores=1, global_pool=True)
    return est.total <= ctx.op_budget


def whole_map_input(rows: int, c: int, layout: str, grid: tuple[int, int]) -> MemSpec:
    """The L1 a global pool reads a DRAM input from: height shards of whole tile rows on the
    most cores of ``grid`` that share the tile rows evenly (no empty last core, which a
    ``round_up(rows, cores * 32)`` split over the whole grid leaves); a ROW_MAJOR shard is as
    wide as the tensor."""
    tiles = -(-rows // 32)
    cores = max(n for n in range(1, grid[0] * grid[1] + 1) if tiles % n == 0)
    return reshape_memspec(sharded_memspec(HEIGHT, rows, c, num_cores=cores, device_grid=grid),
                           rows, c, layout)
