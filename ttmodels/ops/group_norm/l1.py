"""group_norm's per-core L1 estimate on the shared model of ``ttmodels/planning/l1.py``."""
from __future__ import annotations

from ...language.graph import TILE
from ...planning.l1 import L1Estimate, per_core_bytes, tile_bytes
from ...planning.layout import TensorLayout
from .columns import virtual_columns

# The interleaved program's circular buffers per core, in input-dtype tiles, fitted to ttnn
# 0.81.1's figures on the mock device (``ttmodels verify``'s "ttnn op" less the L1 input, batch 1
# unless said; r = tile rows per core, w = tiles per column of channels):
#   C=128 g32 64x64 (r 8, w 1): 77 tiles; 128x128 (r 32, w 1): 269; 64x64 batch 4: 77;
#   C=256 g32 32x32 (r 4, w 1): 45; C=512 16x16 (r 1, w 2): 24; C=1024 8x8 (r 1, w 4): 27;
#   C=32 g8 8x8, C=64 g32 / C=96 g3 16x12 (r 1, w 1): 21.
# 13 + 8 r + 3 w is within 0 to +22 % of each (it over-counts the width term).
CB_BASE_TILES, CB_TILES_PER_ROW, CB_TILES_PER_WT = 13, 8, 3


def group_norm_l1(in_layout: TensorLayout, out_layout: TensorLayout, rows: int, c: int,
                  groups: int, grid: tuple[int, int] = (8, 8)) -> L1Estimate:
    """An interleaved ttnn.group_norm on (at most) a ``grid`` of cores: the channels split into
    ttnn's virtual columns, the rows of tiles over the cores of each column. The grid ttnn picks
    (``determine_expected_group_norm_dram_grid_size``, a C++ search) may be smaller when there
    are few rows; the rows per core are then still about one tile, as the fit assumes."""
    gx, gy = grid
    # C not a multiple of 32 and of the groups: rule group_norm.channels refuses it; any split
    cols = virtual_columns(gx, c, groups) if c % 32 == 0 and c % groups == 0 else 1
    wt = -(-c // TILE) // cols
    r = max(1, -(-(-(-rows // TILE)) // max(1, gx * gy // cols)))
    tiles = CB_BASE_TILES + CB_TILES_PER_ROW * r + CB_TILES_PER_WT * wt
    parts = {"input": per_core_bytes(in_layout, rows, c, gx * gy),
             "output": per_core_bytes(out_layout, rows, c, gx * gy),
             "cbs": tiles * tile_bytes(in_layout.dtype)}
    return L1Estimate(sum(parts.values()), parts)
