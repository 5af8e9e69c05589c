"""The layout math ttnn's ops share, in our terms: shard shapes of a [rows, C] tensor, L1 memory
specs of each sharding, tt-metal's divisor helpers and ``ParallelConfig`` (what conv2d_utils.cpp
``determine_parallel_config`` returns: the cores a sharded op runs on).

Pure functions of ``layout.py`` types. The rules core (``rules.py``) re-exports them; the
op-specific math (conv2d's, pool2d's, binary_ng's ...) is in ``ops/<op>/sharding.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..arch import DEFAULT_GRID
from ..language.graph import TILE, round_up
from .layout import BLOCK, HEIGHT, TILE_LAYOUT, WIDTH, MemSpec, TensorLayout, core_extent

Shape4 = tuple[int, int, int, int]


def cores_to_grid(num_cores: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Extent (x, y) of ``num_cores`` cores laid out row-wise on ``grid`` starting at (0, 0), as
    tt-metal's ``num_cores_to_corerangeset(n, grid, row_wise=true)`` builds it
    (``layout.core_ranges``)."""
    return core_extent(num_cores, grid)


def closest_divisor_with_padding(num: int, start: int) -> int:
    """tt-metal ``find_closest_largest_divisor_with_num_padding``: the largest d <= start such
    that padding ``num`` up to a multiple of d wastes less than one whole share."""
    d = max(1, start)
    while d > 1:
        padded = round_up(num, d)
        if padded - num < padded // d:
            return d
        d -= 1
    return 1


def height_shard_shape(rows: int, c: int, num_cores: int) -> tuple[int, int]:
    """[rows, C] over ``num_cores``: shard height = round_up(rows, num_cores*32) / num_cores (the
    same as ceil(rows / cores) rounded up to 32), shard width = C padded to a tile."""
    return (round_up(rows, num_cores * TILE) // num_cores, round_up(c, TILE))


def width_shard_shape(rows: int, c: int, num_cores: int) -> tuple[int, int]:
    return (round_up(rows, TILE), round_up(c, num_cores * TILE) // num_cores)


def block_shard_shape(rows: int, c: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Row-major orientation: grid y splits rows, grid x splits channels."""
    gx, gy = grid
    return (round_up(rows, gy * TILE) // gy, round_up(c, gx * TILE) // gx)


def sharded_memspec(kind: str, rows: int, c: int, *, num_cores: int | None = None,
                    grid: tuple[int, int] | None = None,
                    device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """An L1 MemSpec for ``kind`` sharding of a [rows, C] tensor. Height/width take ``num_cores``
    (laid out row-wise on ``device_grid``); block takes ``grid`` (x = channel cores, y = row cores)."""
    if kind == HEIGHT:
        n = num_cores or device_grid[0] * device_grid[1]
        return MemSpec(HEIGHT, "l1", cores_to_grid(n, device_grid), n,
                       height_shard_shape(rows, c, n))
    if kind == WIDTH:
        n = num_cores or device_grid[0] * device_grid[1]
        return MemSpec(WIDTH, "l1", cores_to_grid(n, device_grid), n,
                       width_shard_shape(rows, c, n))
    if kind == BLOCK:
        g = grid or device_grid
        return MemSpec(BLOCK, "l1", g, g[0] * g[1], block_shard_shape(rows, c, g))
    raise ValueError(f"not a sharded layout: {kind}")


@dataclass(frozen=True)
class ParallelConfig:
    """What tt-metal's ``determine_parallel_config`` returns, in our terms."""
    kind: str
    num_cores: int
    grid: tuple[int, int]         # extent (x, y)
    cores_nhw: int
    cores_c: int


def reshape_memspec(mem: MemSpec, rows: int, c: int, layout: str = TILE_LAYOUT) -> MemSpec:
    """Same scheme and grid, shard shape recomputed for a tensor of [rows, c] (what ops that keep
    their input's sharding, like upsample and binary_ng's adjust_to_shape, produce, and what a
    pad must be given for its padded rows). A ROW_MAJOR height shard is as wide as the tensor
    (no tile padding of the channels)."""
    if not mem.sharded:
        return mem
    if mem.memory_layout == HEIGHT:
        n = mem.num_cores or (mem.grid[0] * mem.grid[1])
        sh, sw = height_shard_shape(rows, c, n)
        return replace(mem, shard_shape=(sh, sw if layout == TILE_LAYOUT else c))
    if mem.memory_layout == WIDTH:
        n = mem.num_cores or (mem.grid[0] * mem.grid[1])
        return replace(mem, shard_shape=width_shard_shape(rows, c, n))
    return replace(mem, shard_shape=block_shard_shape(rows, c, mem.grid))


def tensor_bytes(layout: TensorLayout, rows: int, c: int) -> int:
    """Bytes of the whole tensor as stored (tile padding included)."""
    from .layout import bytes_per_element
    bpe = bytes_per_element(layout.dtype) if layout.layout == TILE_LAYOUT else \
        {"bfloat16": 2, "float32": 4}.get(layout.dtype, 2)
    return int(round_up(rows, TILE) * round_up(c, TILE) * bpe)


def _rows_c(shape: Shape4 | None) -> tuple[int, int] | None:
    if shape is None:
        return None
    return (shape[0] * shape[1] * shape[2], shape[3])


def core_count(mem: MemSpec) -> int:
    """Cores a sharded tensor occupies (0 for interleaved)."""
    if not mem.sharded:
        return 0
    return mem.num_cores or mem.grid[0] * mem.grid[1]


def tile_aligned_shard(m: MemSpec) -> bool:
    """A shard of whole 32x32 tiles (what a TILE tensor's shard spec must be)."""
    return m.shard_shape is not None and m.shard_shape[0] % TILE == 0 and \
        m.shard_shape[1] % TILE == 0


def split_work_to_cores(units: int, device_grid: tuple[int, int] = DEFAULT_GRID) -> tuple[int, int]:
    """tt-metal ``split_work_to_cores(grid, units)``: (cores used, units of the first group) =
    (min(cores, units), ceil(units / cores))."""
    n = max(1, min(device_grid[0] * device_grid[1], units))
    return n, -(-units // n)
