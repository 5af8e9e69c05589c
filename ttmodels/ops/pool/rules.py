"""pool2d's layout rules (max_pool2d, avg_pool2d, global_avg_pool), its check and its output's
layout (its sharding math: ``sharding.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from ...arch import DEFAULT_GRID
from ...formats import BLOCK_FLOAT_DTYPES
from ...language.graph import TILE, round_up
from ...planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                       TensorLayout)
from ...planning.rules import _POOL, CallArgs, OutputQuery, Rule, _v, reads
from ..binary.rules import _c_binary, _out_binary
from .sharding import pool_output_memspec, pool_parallel_config, pool_parallel_config_of

_POOL_API = "ttnn/cpp/ttnn/operations/pool/generic/generic_pools.cpp"

RULE_LIST = (
    # --- pools ------------------------------------------------------------------------------
    Rule("pool.memory", "max_pool2d|avg_pool2d|global_avg_pool",
         "the input is HEIGHT/WIDTH/BLOCK sharded in L1, or interleaved (pool2d then shards it "
         "with applied_shard_scheme, default chosen like conv)",
         f"{_POOL}: Pool2D::validate_on_program_cache_miss ('Pool2D input shard spec should not be "
         f"empty'); {_POOL_API}: pool2d (shards an interleaved input)"),
    Rule("pool.channel_shards", "max_pool2d|avg_pool2d|global_avg_pool",
         "a WIDTH or BLOCK sharded input's (padded) channels are a multiple of its channel "
         "shard count (num_cores_c: the grid's columns for row-major block shards, every core "
         "for width shards) -- a conv may leave a grid column empty (512 channels on 5 columns "
         "of 128), which pool2d then refuses",
         f"{_POOL}: validate_pool2d ('For width and block sharding, input channels ({{}}) "
         "should be divisible by num_shards ({})')"),
    Rule("pool.dtype_layout", "max_pool2d|avg_pool2d|global_avg_pool",
         "output dtype and layout are arguments (dtype=bfloat16, output_layout=ROW_MAJOR by "
         "default); a bfloat8_b output needs output_layout=TILE",
         f"{_POOL_API}: max_pool2d/avg_pool2d signatures (dtype, output_layout)"),
    Rule("pool2d.slice_input", "max_pool2d|avg_pool2d",
         "a DRAM-sliced pool (dram_slice_config) reads its input from DRAM interleaved and "
         "writes a DRAM-interleaved output (seen on the 0.81.1 mock device: a [N*H*W, C] DRAM "
         "input gives a DRAM-interleaved output in the requested output_layout)",
         f"{_POOL_API}: pool2d with dram_slice_config (sliced through "
         "ttnn/cpp/ttnn/operations/sliding_window/op_slicing/op_slicing.cpp, like conv2d_DRAM); "
         "enforced by the sim (ops/pool/sim.py), not by rules.check"),
)

# the exact float32 max pool's fold (ops/pool/exact_window.py) is binary_ng's MAXIMUM, on the
# SFPU for every dtype (binary_ng_device_operation.cpp is_binary_sfpu_op): the binary ops'
# rules, check and output layout (ops/binary/rules.py names it)
LOWERED = {"maximum": (_c_binary, _out_binary)}


@dataclass(frozen=True)
class PoolArgs(CallArgs):
    """What the pool rules read of a max_pool2d / avg_pool2d / global pool call."""
    output_layout: str | None = ROW_MAJOR
    slice: object | None = None              # DRAM slicing (dram_slice_config)
    global_pool: bool = False                # an avg_pool2d whose window is the whole map
    applied_shard_scheme: str | None = None
    device_grid: tuple[int, int] = DEFAULT_GRID


def _padded_channels(c: int, layout: str) -> int:
    """The input's padded_shape()[3]: tiles pad the channels to 32."""
    return round_up(c, TILE) if layout == TILE_LAYOUT else c


def channel_shards_refused(x: TensorLayout, shape) -> str | None:
    """Rule pool.channel_shards: why pool2d refuses this width/block-sharded input, or None."""
    if x.memory.memory_layout not in (WIDTH, BLOCK) or not x.memory.grid or shape is None:
        return None
    c = _padded_channels(shape[3], x.layout)
    cores_c = pool_parallel_config_of(x.memory).cores_c
    if c % cores_c == 0:
        return None
    return f"pool input {x.memory.memory_layout} with {c} channels on {cores_c} channel shards"


@reads(PoolArgs)
def _c_pool(inputs, args: PoolArgs, output, shapes):
    vs = []
    x = inputs[0]
    if x is None:
        return [_v("pool.memory", "pool input is missing")]
    if x.memory.memory_layout not in (INTERLEAVED, HEIGHT, WIDTH, BLOCK):
        vs.append(_v("pool.memory", f"pool input {x.memory.memory_layout}"))
    elif (why := channel_shards_refused(x, shapes[0] if shapes else None)) is not None:
        vs.append(_v("pool.channel_shards", why))
    if args.dtype in BLOCK_FLOAT_DTYPES and args.output_layout != TILE_LAYOUT:
        vs.append(_v("pool.dtype_layout", f"pool output {args.dtype} needs output_layout=TILE"))
    return vs


@reads(PoolArgs)
def _out_pool(q: OutputQuery) -> TensorLayout:
    args: PoolArgs = q.attrs
    x, out_rc, requested = q.x, q.out_rc, q.requested
    out_layout = args.output_layout
    if args.slice:
        # rule pool2d.slice_input: a DRAM-sliced pool writes every slice into a DRAM-interleaved
        # output (generic_pools.cpp pool2d with dram_slice_config, through op_slicing.cpp as
        # conv2d_DRAM; memory_config is not taken), in the requested layout and dtype. Found by
        # the planner's ttnn oracle (bevdet_r50_encoder at batch 6: the table said height shards)
        return TensorLayout(MemSpec(INTERLEAVED, "dram"), out_layout, args.dtype or "bfloat16")
    if requested is not None:
        mem = requested
    elif (q.op == "global_avg_pool" or args.global_pool) and (
            x is None or x.memory.sharded or not args.applied_shard_scheme):
        # ttnn 0.81.1 runs an avg_pool2d whose window is the whole (unpadded) map of a sharded
        # input as a reduction -- sharded_to_interleaved, untilize_with_unpadding, reduce
        # (mean) -- whose output is interleaved in L1 (observed in its graph capture on the
        # mock device; pool/global_avg_pool/global_avg_pool.cpp pool_2d is the same reduce
        # path). An interleaved input is first sharded with applied_shard_scheme, and the output
        # then gets pool2d's own output spec (below: width shards of 32 channels for the usual
        # [N, C] head, measured on the mock device).
        mem = MemSpec(INTERLEAVED, "l1")
    elif x is not None and out_rc is not None:
        pc = pool_parallel_config_of(x.memory) if x.memory.sharded else pool_parallel_config(
            args.applied_shard_scheme or HEIGHT, out_rc[0], out_rc[1],
            in_tiled=x.layout == TILE_LAYOUT, out_tiled=out_layout == TILE_LAYOUT,
            device_grid=tuple(args.device_grid))
        mem = pool_output_memspec(pc, *out_rc, out_tiled=out_layout == TILE_LAYOUT)
    else:
        mem = x.memory if x is not None else MemSpec()
    return TensorLayout(mem, out_layout, args.dtype or "bfloat16")
