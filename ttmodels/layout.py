"""Resolved memory layouts: the pure-data description of where and how a tensor lives on a card.

These are the planner's vocabulary and are translated into ``ttnn.MemoryConfig`` objects (real or
sim) by ``ttmodels.backends.common.memory_config``. Keep everything here free of torch and ttnn so
the layout math can be unit-tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from .graph import TILE

# Wormhole: 1,499,136 B of L1 per Tensix core usable by ops (tt-metal's allocator reports
# l1_size_per_core minus the firmware/unreserved base); 8x8 worker grid on an n150/n300.
WORMHOLE_L1_BYTES_PER_CORE = 1_499_136
WORMHOLE_GRID = (8, 8)

INTERLEAVED = "interleaved"
HEIGHT = "height_sharded"
WIDTH = "width_sharded"
BLOCK = "block_sharded"
MEMORY_LAYOUTS = (INTERLEAVED, HEIGHT, WIDTH, BLOCK)

TILE_LAYOUT = "tile"
ROW_MAJOR = "row_major"

# Bytes per element as stored in a tile: bfp formats carry one shared exponent byte per 16 values.
BYTES_PER_TILE = {"bfloat16": 2048, "float32": 4096, "bfloat8_b": 1024 + 64, "bfloat4_b": 512 + 64}


def bytes_per_element(dtype: str) -> float:
    return BYTES_PER_TILE[dtype] / (TILE * TILE)


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
