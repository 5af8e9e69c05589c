"""The float32 global average pool (global_avg_pool, adaptive_avg_pool2d to 1x1) as ``ttnn.mean``
over the map's rows, for float32 activations (issue 33: "float32 means float32").

ttnn 0.81.1's pool2d reads and writes bfloat16 only (pool_op.cpp:30, generic_pools.cpp:154), so
the pool2d path typecasts a float32 map to bfloat16 and loses 16 mantissa bits before the sum.
``ttnn.mean`` keeps float32: on a FLOAT32 input with ``fp32_dest_acc_en`` (and its default
``fast_and_approximate_mode=False``) the reduce takes the "accurate fp32" SFPU path (the 0.81.1
wheel's ``reduction/generic/device/kernels/compute/reduce.cpp``: ``enable_fp32_sfpu`` ->
``ReduceFp32Mode::Accurate``; ``kernel_lib/reduce_helpers_common.hpp``
``is_sfpu_reduce_path``): each input tile is unpacked straight into the 32-bit Dest
(UnpackToDestFp32, no tf32 srcA), the tiles of a column are folded by the SFPU's float32
``add_binary_tile`` in row order (``reduce_helpers_compute.inl`` REDUCE_COL loop), the 32 rows of
the folded tile are summed by a tree of SFPADDs (``ckernel_sfpu_reduce.h``
``perform_reduce_col_sum_avg``), and the mean's 1/(H*W) is a float32 multiply after the sum
(REDUCE_POST_MUL: the SFPU path ignores the scaler tile). Every step is float32.

The lowering: the [1, 1, N*H*W, C] map, interleaved TILE float32 (the planner's adapters),
reshaped to [N, 1, H*W, C] when N > 1, ``ttnn.mean(dim=2, keepdim=True)`` into L1 interleaved,
reshaped back to [1, 1, N, C]. adaptive_avg_pool2d to any other size keeps ttnn's bfloat16 op:
its windows are avg_pool2d's (the float32 window pools are their own lowering)."""
from __future__ import annotations

from dataclasses import replace

from ...language.graph import TILE, Node
from ...planning.l1 import L1Estimate, per_core_bytes, tile_bytes
from ...planning.layout import INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.plan_context import PlanContext, interleaved_tile_input
from ...planning.plans import PlannedLayer

# PoolPlan.lowering of a pool run by this module
LOWERING = "mean"
_DTYPE = "float32"


def applies(ctx: PlanContext, node: Node) -> bool:
    """A global pool (adaptive_avg_pool2d to 1x1 is one) whose activations are float32, planned
    with adapters (without them the plan is ttnn's defaults: pool2d)."""
    if node.op == "adaptive_avg_pool2d":
        if tuple(node.attrs.size) != (1, 1):
            return False
    elif node.op != "global_avg_pool":
        return False
    return ctx.with_adapters and node.precision.activations == _DTYPE


def reduce_cores(n: int, c: int, grid_cores: int) -> int:
    """The cores ttnn's H reduce splits its work over: one output tile column per (n, channel
    tile) (reduce_op_multi_core_h: ``num_cols = NC * Wt``, split_work_to_cores)."""
    return max(1, min(grid_cores, n * -(-c // TILE)))


def exact_l1(x: TensorLayout, out: TensorLayout, n: int, hw: int, c: int,
             dtype: str = _DTYPE) -> L1Estimate:
    """Per-core L1 of the lowering: the input, the output, for N > 1 the reshaped input copy
    (a TILE reshape re-tiles the rows when H*W is not a whole number of tiles) and the mean's
    [N, 1, 1, C] before the reshape back, the first stage's partial rows (these buffers as
    the mock device allocates them); the reduce's CBs (``REDUCE_CB_TILES``)."""
    parts = {"input": per_core_bytes(x, n * hw, c), "output": per_core_bytes(out, n, c)}
    if n > 1:
        if hw % TILE:
            parts["reshaped_input"] = per_core_bytes(x, n * -(-hw // TILE) * TILE, c)
        parts["mean_out"] = per_core_bytes(out, n * TILE, c)
    if splits_rows(n, hw, c):
        parts["partials"] = partial_rows_bytes(n, c)
    parts["reduce_cb"] = REDUCE_CB_TILES * tile_bytes(dtype)
    return L1Estimate(sum(parts.values()), parts)


# ttnn.mean over the rows of a map with few channel tiles splits the rows over more cores: a
# first reduce writes one ROW_MAJOR float32 row of partial sums per slice, a second sums them
# (seen on the mock device, n150 0.81.1: 20, 21, 22, 23, 25 and 98 tile rows of 1, 2, 8 or 32
# channel tiles split; 7, 8, 11, 13, 16, 18 and 19 tile rows, or 64 channel tiles, do not). The
# rule below is fitted to those runs: more than 19 tile rows on fewer columns than cores
SPLIT_MIN_TILE_ROWS = 19
SPLIT_GRID_CORES = 64


def splits_rows(n: int, hw: int, c: int) -> bool:
    """Whether ttnn's mean over ``hw`` rows reduces in two stages (see above)."""
    return n * -(-c // TILE) < SPLIT_GRID_CORES and -(-hw // TILE) > SPLIT_MIN_TILE_ROWS


def partial_rows_bytes(n: int, c: int) -> int:
    """Per bank: the first stage's ROW_MAJOR float32 partial rows, pages of one row spread over
    the banks: one row per bank (measured: C * 4 B at batch 1 and 2; its slice count is not
    known, taken as at most 64 rows in all)."""
    return c * 4


# the reduce program's CBs in float32 tiles (4096 B): input 2, scaler 1, output 2, the reduce
# factories' double-buffered input and output. Not measured: the mock's capture shows no CBs
# for ttnn.mean's programs (peak CB 0 at every shape tried), so this is the safe side's guess
REDUCE_CB_TILES = 5


def plan(ctx: PlanContext, node: Node, config, *, dtype: str = _DTYPE) -> PlannedLayer:
    """The lowering's plan: its input interleaved TILE ``dtype`` (adapters; a DRAM input stays
    in DRAM), its output [1, 1, N, C] TILE ``dtype`` in L1 interleaved (asked explicitly of
    ``ttnn.mean``). ``config``: the pool's PoolPlan, given the lowering's fields. Besides the
    float32 pool, the DRAM form of a bfloat16 global pool whose pool2d does not fit L1
    (ops/pool/plan.py ``whole_map_fits``)."""
    x = interleaved_tile_input(ctx, node, "the global pool reduces an interleaved TILE map "
                               "(ttnn.mean)", dtype=dtype)
    s = ctx.g.shape_of(node.inputs[0])
    l1 = MemSpec(INTERLEAVED, "l1")
    out = TensorLayout(l1, TILE_LAYOUT, dtype)
    est = exact_l1(x, out, s.n, s.h * s.w, s.c, dtype)
    cfg = replace(config, lowering=LOWERING, applied_shard_scheme=None, shard_scheme=None,
                  output_layout=TILE_LAYOUT, dtype=dtype, kernel=(s.h, s.w), num_cores=None,
                  core_grid=None, input_memory=x.memory, out_shape=node.shape.flat,
                  memory_config=l1, l1_parts=est.parts)
    return PlannedLayer(node, [x], out, est.total, cfg)


def compute_config(layer):
    """The layer's compute kernel config with ``fp32_dest_acc_en`` on: without it ttnn.mean takes
    the tf32 FPU path (reduce_op: ``fp32_sfpu_reduce = ... && fp32_dest_acc_en``)."""
    from ...backends import common
    return common.compute_config(layer.tt, layer.device,
                                 replace(layer.node.precision, fp32_accum=True))


def run(layer, x):
    """[1, 1, N*H*W, C] -> [1, 1, N, C]: the mean over each image's rows."""
    tt, s = layer.tt, layer.input_shape(0)
    mc = layer.requested_memory_config()
    cfg = layer._once("exact_compute_config", lambda: compute_config(layer))
    if s.n > 1:
        x = tt.reshape(x, (s.n, 1, s.h * s.w, s.c))
    y = tt.mean(x, dim=2, keepdim=True, memory_config=mc, compute_kernel_config=cfg)
    if s.n == 1:
        return y
    out = tt.reshape(y, (1, 1, s.n, s.c), memory_config=mc)
    tt.deallocate(y)
    return out


def cost(layer, env):
    """One reduce program: the input read once (as any global pool), and on each core the SFPU
    folding its columns' tiles: a copy to Dest and an ``add_binary_tile`` per input tile (a
    load, add and store per 32-lane vector, as activations.py counts SFPU work: a floor), the
    in-tile tree and the post-multiply per output tile. A two-stage mean (``splits_rows``)
    spreads each column's rows over the cores its columns leave idle (the slice count is not
    known: taken as all of them), its second stage one tile per column."""
    from ...planning.estimate import movement_phase
    from ..activations import SFPU_VECTORS_PER_TILE
    node = layer.node
    ins = env.shape(node.inputs[0])
    move = movement_phase(env, [(layer.inputs[0], ins)], (layer.output, node.shape), node.op)
    cores = reduce_cores(ins.n, ins.c, env.grid_cores)
    total_cols = ins.n * -(-ins.c // TILE)
    cols = -(-total_cols // cores)
    ht = -(-ins.h * ins.w // TILE)
    per_col = 2
    if splits_rows(ins.n, ins.h * ins.w, ins.c):
        slices = max(1, min(ht, env.grid_cores // total_cols))
        ht = -(-ht // slices)
        per_col += 1 * 3 + 2           # the second stage: one tile of partial rows per column
    sfpu = cols * (ht * 3 + per_col) * SFPU_VECTORS_PER_TILE
    return (replace(move, sfpu_cycles=float(sfpu)),)


def accurate_fp32_row_sum(x):
    """The sum over dim -2 of a float32 torch tensor [..., R, C] as ttnn 0.81.1's accurate fp32
    reduce adds it (the module docstring's kernels), [..., 1, C]: the rows padded with zeros to
    whole tiles, the tiles folded in order (``acc = acc + tile``, float32), then per column the
    32 rows of the folded tile by the SFPU's tree: rows r, 4+r, 8+r, 12+r of each face half as
    ``a + (b + (c + d))`` (replay A1-A3 of ``init_reduce_sum_avg``), the two halves (rows 0-15,
    16-31) added, and the four r = 0..3 partials as ``(s0 + s1) + (s2 + s3)`` after the
    transpose (``perform_reduce_col_sum_avg``). Each add is a float32 add, round to nearest
    even (the SFPU's SFPADD; denormals, which it flushes, are not modelled)."""
    import torch
    r = x.shape[-2]
    pad = -r % TILE
    if pad:
        x = torch.nn.functional.pad(x, (0, 0, 0, pad))
    tiles = x.reshape(*x.shape[:-2], -1, TILE, x.shape[-1]).to(torch.float32)
    acc = tiles[..., 0, :, :]
    for t in range(1, tiles.shape[-3]):
        acc = acc + tiles[..., t, :, :]
    def half(rows):          # rows [16, C] of one face pair -> [4, C]: a + (b + (c + d))
        g = rows.reshape(*rows.shape[:-2], 4, 4, rows.shape[-1])    # [group, r, C]
        return g[..., 0, :, :] + (g[..., 1, :, :] + (g[..., 2, :, :] + g[..., 3, :, :]))
    s = half(acc[..., :16, :]) + half(acc[..., 16:, :])             # [4, C] by r
    out = (s[..., 0, :] + s[..., 1, :]) + (s[..., 2, :] + s[..., 3, :])
    return out.unsqueeze(-2)


def accurate_fp32_row_mean(x, count: int):
    """``accurate_fp32_row_sum`` times the float32 1/count after it (REDUCE_POST_MUL)."""
    import torch
    return accurate_fp32_row_sum(x) * torch.tensor(1.0 / count, dtype=torch.float32)
