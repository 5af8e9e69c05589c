"""ttnn.upsample's layout math (upsample.cpp, upsample_device_operation.cpp) and grid_sample's
(its align_corners lowering) grid points."""
from __future__ import annotations

from dataclasses import replace

from ...arch import DEFAULT_GRID
from ...language.graph import round_up
from ...planning.layout import HEIGHT, MemSpec
from ...planning.sharding import cores_to_grid


def bilinear_upsample_memspec(rows: int, c: int, device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """The height sharding ttnn.upsample gives an interleaved input of bilinear mode
    (upsample.cpp ``compute_bilinear_autoshard_memory_config``): min(cores, rows) shards laid out
    row-wise, shard height round_up(rows, shards) / shards, the whole (row-major) channel width.
    Its halo step is built for exactly these shards, so the planner's adapter produces them."""
    n = min(device_grid[0] * device_grid[1], rows)
    return MemSpec(HEIGHT, "l1", cores_to_grid(n, device_grid), n, (round_up(rows, n) // n, c))


def upsample_output_memspec(mem: MemSpec, factor: int) -> MemSpec:
    """upsample_device_operation.cpp compute_output_specs: a sharded output keeps the input's grid
    and shard width; its shard height is the input's times scale_h * scale_w (each input shard
    becomes its own upscaled rows, not a re-split of the output: 160-row shards -> 640 at 2x).
    ``factor`` = scale_h * scale_w = output rows / input rows."""
    h, w = mem.shard_shape
    return replace(mem, shard_shape=(h * factor, w))


def grid_sample_points(grid_c: int, precomputed: bool, mode: str = "bilinear") -> int:
    """Values per grid point: 6 (precomputed bilinear: h0, w0 and four weights), 2 (precomputed
    nearest: h, w; or normalized x, y)."""
    return 6 if precomputed and mode == "bilinear" else 2
