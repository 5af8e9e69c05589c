"""How ttnn's interleaved group norm splits the channels over its core grid (the layer, the L1
estimate and the sim read it)."""
from __future__ import annotations


def virtual_columns(grid_x: int, c: int, groups: int) -> int:
    """How many chunks ttnn's interleaved group norm splits the channels into for a grid
    ``grid_x`` cores wide (its ``dram_group_norm_virtual_columns``, a C++ function the sim has not
    got): the most columns, at most ``grid_x``, that split both the groups and the channels into
    whole tiles per column. tests/test_group_norm.py checks it against ttnn's."""
    return max(k for k in range(1, grid_x + 1)
               if groups % k == 0 and c % k == 0 and (c // k) % 32 == 0)
