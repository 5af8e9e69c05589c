"""pool2d's own sharding (generic_pools.cpp, pool_op.cpp): the cores it shards an interleaved
input over, the memory configs of its input and output, and its output's padded shape."""
from __future__ import annotations

from ...arch import DEFAULT_GRID
from ...language.graph import TILE, round_up
from ...planning.layout import BLOCK, HEIGHT, WIDTH, MemSpec, closest_common_divisor
from ...planning.sharding import ParallelConfig, closest_divisor_with_padding, cores_to_grid

L1_ALIGNMENT = 16          # bytes (Wormhole hal::get_l1_alignment)


def _closest_divisor(num: int, start: int) -> int:
    """conv2d_utils.cpp ``find_closest_largest_divisor``: largest d <= start dividing num."""
    d = max(1, start)
    while num % d:
        d -= 1
    return d


def pool_parallel_config(kind: str, out_rows: int, c: int, *, in_tiled: bool, out_tiled: bool,
                         device_grid: tuple[int, int] = DEFAULT_GRID) -> ParallelConfig:
    """The cores pool2d shards an interleaved input over when given ``applied_shard_scheme``.

    generic_pools.cpp ``get_pool_input_memory_config`` calls conv2d_utils.cpp
    ``determine_parallel_config(scheme, N, C, OH, OW, C, input_channels_alignment, grid,
    ROW_MAJOR, enable_channels_padding=false, is_shard_height_tile_multiple=out_tiled,
    is_shard_width_tile_multiple=in_tiled or out_tiled, act_block_h_override=0)``: "tiles" are
    32 rows only for a TILE output (else single rows) and 32 channels for a TILE input or output
    (else 16); height = the closest divisor-with-padding of those rows up to the grid, laid out
    row-wise; width = the largest *exact* divisor of the channel tiles up to the grid (no channel
    padding for pools); block = divisor-with-padding of the rows over grid y x the largest common
    divisor of the channel tiles and the input's channel blocks (alignment 32 for TILE inputs,
    L1 alignment / 2 = 8 for row-major) over grid x."""
    gx, gy = device_grid
    eff_h = TILE if out_tiled else 1
    eff_w = TILE if (in_tiled or out_tiled) else TILE // 2
    align = TILE if (in_tiled or c == 1) else L1_ALIGNMENT // 2   # c == 1: depthwise branch
    nhw_tiles = -(-out_rows // eff_h)
    c_tiles = -(-c // eff_w)
    if kind == HEIGHT:
        n = closest_divisor_with_padding(nhw_tiles, gx * gy)
        return ParallelConfig(HEIGHT, n, cores_to_grid(n, device_grid), n, 1)
    if kind == WIDTH:
        n = _closest_divisor(c_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    if kind == BLOCK:
        nhw = closest_divisor_with_padding(nhw_tiles, gy)
        cc = closest_common_divisor(c_tiles, -(-c // align), gx)
        return ParallelConfig(BLOCK, nhw * cc, (cc, nhw), nhw, cc)
    raise ValueError(f"Only height, width, or block sharding strategies are supported, got {kind}")


def pool_parallel_config_of(mem: MemSpec) -> ParallelConfig:
    """pool2d on an already sharded input: the parallel config is the input's shard grid
    (``get_num_cores_nhw`` / ``get_num_cores_channels`` of it)."""
    gx, gy = mem.grid
    n = mem.num_cores or gx * gy
    if mem.memory_layout == HEIGHT:
        return ParallelConfig(HEIGHT, n, mem.grid, n, 1)
    if mem.memory_layout == WIDTH:
        return ParallelConfig(WIDTH, n, mem.grid, 1, n)
    return ParallelConfig(BLOCK, gx * gy, mem.grid, gy, gx)


def pool_input_memspec(pc: ParallelConfig, in_rows: int, c: int, *, in_tiled: bool) -> MemSpec:
    """The memory config pool2d moves an interleaved input to (``to_memory_config``):
    ``create_sharded_memory_config_from_parallel_config`` of [1, 1, rows, C snapped to
    cores_c * channel alignment] (rows = the input's padded rows), rows rounded up to
    cores_nhw * (32 for a TILE input, else 1) except for width sharding."""
    align = TILE if (in_tiled or c == 1) else L1_ALIGNMENT // 2
    width = round_up(c, pc.cores_c * align)
    rows = round_up(in_rows, TILE) if in_tiled else in_rows
    if pc.kind != WIDTH:
        rows = round_up(rows, pc.cores_nhw * (TILE if in_tiled else 1))
    return MemSpec(pc.kind, "l1", pc.grid, pc.num_cores,
                   (rows // pc.cores_nhw, width // pc.cores_c))


def row_major_shard_width(c: int, cores_c: int) -> int:
    """A ROW_MAJOR pool output's shard width for C channels over ``cores_c`` channel shards,
    measured on ttnn 0.81.1 (mock n150, avg and max pool, height / width / block shards, ROW_MAJOR
    and TILE inputs; tests/rules_corpus.py ``pool_rm_width_cases``): the per-core channels
    p = ceil(C / cores_c) stay as they are when a multiple of 16, become one 16-wide face when
    below 16, and are otherwise rounded up to whole 32-wide tiles (80 over 2 columns: 40 -> 64,
    not 48; 200 on height shards: 224; 160 over 2: 80). Not the rule of any generic_pools.cpp
    version found (those round C to cores_c * 16); the wheel's behaviour is what counts."""
    p = -(-c // max(1, cores_c))
    if p % (TILE // 2) == 0:
        return p
    return TILE // 2 if p < TILE // 2 else round_up(p, TILE)


def pool_output_memspec(pc: ParallelConfig, out_rows: int, c: int, *, out_tiled: bool) -> MemSpec:
    """pool2d's output shard spec (generic_pools.cpp, "update the shard spec to match the output
    shape"): the input's grid; shard height round_up(out_rows, cores_nhw * (32 if TILE output
    else 1)) / cores_nhw; shard width round_up(C, cores_c * 32) / cores_c for a TILE output,
    ``row_major_shard_width`` for a ROW_MAJOR one. A ROW_MAJOR output's shard height is *not*
    tile rounded."""
    sh = round_up(out_rows, pc.cores_nhw * (TILE if out_tiled else 1)) // pc.cores_nhw
    sw = (round_up(c, pc.cores_c * TILE) // pc.cores_c if out_tiled
          else row_major_shard_width(c, pc.cores_c))
    return MemSpec(pc.kind, "l1", pc.grid, pc.num_cores, (sh, sw))


def pool_output_padded_shape(mem: MemSpec, out_rows: int, c: int, *, out_tiled: bool) -> tuple[int, int, int, int]:
    """pool2d's output padded (physical) shape; the logical shape stays [1, 1, out_rows, C]
    (pool_op.cpp Pool2D::compute_output_specs, TensorLayout::fromPaddedShape): rows rounded to
    cores_nhw (x32 for a TILE output); C rounded to cores_c * 32 for a TILE output, to the
    shard width of a sharded ROW_MAJOR output (``row_major_shard_width``; the shards past C
    are not counted: measured on the mock), else to 16."""
    pc = pool_parallel_config_of(mem) if mem.sharded else ParallelConfig(mem.memory_layout, 1, (1, 1), 1, 1)
    rows = round_up(out_rows, pc.cores_nhw * (TILE if out_tiled else 1))
    if out_tiled:
        cp = round_up(c, TILE * pc.cores_c)
    elif mem.sharded:
        # C rounded to the shard width (measured: 40 channels over 4 columns of 16 -> 48, not
        # 64; 80 on height shards of 80 -> 80)
        cp = round_up(c, row_major_shard_width(c, pc.cores_c))
    else:
        cp = round_up(c, TILE // 2)
    return (1, 1, rows, cp)
