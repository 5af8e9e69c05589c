"""Resolved memory layouts: the pure-data description of where and how a tensor lives on a card.

These are the planner's vocabulary and are translated into ``ttnn.MemoryConfig`` objects (real or
sim) by ``ttmodels.backends.common.memory_config``. Keep everything here free of torch and ttnn so
the layout math can be unit-tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..language.graph import TILE


INTERLEAVED = "interleaved"
HEIGHT = "height_sharded"
WIDTH = "width_sharded"
BLOCK = "block_sharded"
MEMORY_LAYOUTS = (INTERLEAVED, HEIGHT, WIDTH, BLOCK)
#: our memory layout names -> ttnn.TensorMemoryLayout member names (the one map; the backends and
#: the sim build their enum lookups from it)
TTNN_MEMORY_LAYOUTS = {INTERLEAVED: "INTERLEAVED", HEIGHT: "HEIGHT_SHARDED",
                       WIDTH: "WIDTH_SHARDED", BLOCK: "BLOCK_SHARDED"}

TILE_LAYOUT = "tile"
ROW_MAJOR = "row_major"

# Bytes per element as stored in a tile: bfp formats carry one shared exponent byte per 16 values.
BYTES_PER_TILE = {"bfloat16": 2048, "float32": 4096, "bfloat8_b": 1024 + 64, "bfloat4_b": 512 + 64}


def bytes_per_element(dtype: str) -> float:
    return BYTES_PER_TILE[dtype] / (TILE * TILE)


CoreBox = tuple[tuple[int, int], tuple[int, int]]   # inclusive (start x, y), (end x, y)


def core_ranges(num_cores: int, grid: tuple[int, int], row_wise: bool = True) -> list[CoreBox]:
    """The cores tt-metal's ``num_cores_to_corerangeset(n, grid, row_wise)`` (work_split.cpp)
    picks, as inclusive (start, end) boxes from core (0, 0): whole rows (row_wise) or whole
    columns, then a partial last row / column. What conv2d and pools use for height / width
    sharding over fewer cores than the grid holds; the one definition (rules, the backends'
    CoreRangeSets and the sim's ``num_cores_to_corerangeset`` read it)."""
    gx, gy = grid
    if gx <= 0 or gy <= 0 or num_cores <= 0 or num_cores > gx * gy:
        raise ValueError(f"{num_cores} cores do not fit a {gx}x{gy} grid")
    if not row_wise:   # columns: the transpose of the row-wise boxes
        return [((sy, sx), (ey, ex)) for (sx, sy), (ex, ey) in core_ranges(num_cores, (gy, gx))]
    full, rest = divmod(num_cores, gx)
    out: list[CoreBox] = []
    if full:
        out.append(((0, 0), (gx - 1, full - 1)))
    if rest:
        out.append(((0, full), (rest - 1, full)))
    return out


def core_extent(num_cores: int, grid: tuple[int, int]) -> tuple[int, int]:
    """(x, y) extent of the row-wise ``core_ranges`` of ``num_cores`` cores on ``grid``."""
    boxes = core_ranges(num_cores, grid)
    return (max(e[0] for _, e in boxes) + 1, max(e[1] for _, e in boxes) + 1)


@dataclass(frozen=True)
class MemSpec:
    """A tensor's memory config.

    ``grid`` is the (x, y) extent of the core grid the shards occupy, starting at core (0, 0);
    ``num_cores`` may be smaller than x*y for height sharding over a partial last row (TTNN builds
    such grids with ``num_cores_to_corerangeset``). ``shard_shape`` is (height, width) in elements.
    """
    memory_layout: str = INTERLEAVED      # one of MEMORY_LAYOUTS
    buffer: str = "dram"                  # "dram" | "l1"
    grid: tuple[int, int] | None = None
    num_cores: int | None = None
    shard_shape: tuple[int, int] | None = None
    orientation: str = "row_major"        # shard orientation: "row_major" | "col_major"

    @property
    def sharded(self) -> bool:
        return self.memory_layout != INTERLEAVED

    def short(self) -> str:
        if not self.sharded:
            return f"interleaved/{self.buffer}"
        gx, gy = self.grid or (0, 0)
        return f"{self.memory_layout}/{self.buffer} {gx}x{gy} shard {self.shard_shape}"


DRAM_INTERLEAVED = MemSpec(INTERLEAVED, "dram")
L1_INTERLEAVED = MemSpec(INTERLEAVED, "l1")


@dataclass(frozen=True)
class TensorLayout:
    """Everything a consumer needs to agree with its producer about: memory, tile layout, dtype."""
    memory: MemSpec
    layout: str = TILE_LAYOUT             # "tile" | "row_major"
    dtype: str = "bfloat16"

    def short(self) -> str:
        return f"{self.memory.short()} {self.layout} {self.dtype}"


def closest_common_divisor(a: int, b: int, start: int) -> int:
    """The largest d <= ``start`` dividing both ``a`` and ``b`` (conv2d_utils.cpp
    ``find_closest_largest_divisor(num1, num2, start)``; the matmul and pool configs use it)."""
    d = max(1, start)
    while a % d or b % d:
        d -= 1
    return d
