"""The program config ttnn 0.81.1's matmul picks itself for interleaved operands (no program
config given: ttnn.linear without one, or a 1x1 conv2d run out of DRAM, rule
``conv2d.mm_interleaved``), and the circular buffers it then allocates.

matmul_program_config.cpp: a narrow problem (one side over 8x the other, or within a tile)
gets ``get_mcast_1d_config``: tall (rows >= columns) splits M over every core
(per-core M = ceil(ceil(M / cores) / 32) tiles, the whole N per core), wide splits N;
in0_block_w = 2 when K is an even number of tiles, else 1. Otherwise a 2D multicast over the
grid (per-core M = Mt / grid rows, per-core N = Nt / grid columns, in0_block_w the largest of
4, 3, 2, 1 dividing Kt; the 2D branch was not measured here). Either way
``get_multi_dim_per_core_factor`` then shrinks the output block (out_block_h x out_block_w) to
the largest product of divisors of (per-core M, per-core N), the squarest of equal products,
whose *estimated* CBs (``get_estimated_size_of_cbs``: in0 and in1 double-buffered, the output
and an intermediate block, the bias for in0_block_w tiles) are under the L1 below the lowest
buffer (``get_max_l1_space``).

The CBs the program then allocates differ from that estimate: inputs are double-buffered only
when K takes more than one block, the bias holds out_block_w tiles, and the intermediate shares
the output's CB unless its format differs (fp32 accumulation into a narrower output).
Measured on the mock n150 for 1x1 convs out of DRAM (bfloat16 activations, bfloat8_b weights,
with bias), to the byte: 32x112x112 16 -> 96: 407,936 B (blocks 49x3, in0_block_w 1);
32x160x160 32 -> 32: 411,776 (100x1); 32x56x56 256 -> 256: 824,576 (49x4, in0_block_w 2);
16x64x176 64 -> 256: 476,672 (22x8, in0_block_w 2).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import TILE
from ...planning.l1 import L1Estimate, tile_bytes

FP32_TILE = tile_bytes("float32")
PACKER_TILE = tile_bytes("bfloat16")    # estimate_interm_tile_size's floor (packer L1 acc)


@dataclass(frozen=True)
class AutoBlocks:
    """ttnn's automatic blocking: per-core M and N, the output block and in0_block_w, in
    tiles; ``kt``: K in tiles."""
    per_core_m: int
    per_core_n: int
    out_block_h: int
    out_block_w: int
    in0_block_w: int
    kt: int


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def is_narrow(rows: int, cols: int) -> bool:
    """matmul_program_config.cpp is_narrow_shape (or a side within one tile)."""
    lo, hi = min(rows, cols), max(rows, cols)
    return lo <= TILE or hi > 8 * lo


def _divisor_pairs(m: int, n: int) -> list[tuple[int, int]]:
    """(m, n) factor pairs from the largest product down, the squarest of equal products
    (get_multi_dim_per_core_factor's ordered map; a later equally square pair replaces)."""
    def factors(v: int) -> list[int]:
        return [v, 1] + [f for f in range(v // 2, 1, -1) if v % f == 0]
    best: dict[int, tuple[int, int]] = {}
    for fm in factors(m):
        for fn in factors(n):
            ratio = max(fm, fn) / min(fm, fn)
            old = best.get(fm * fn)
            if old is None or not max(old) / min(old) < ratio:
                best[fm * fn] = (fm, fn)
    return [best[k] for k in sorted(best, reverse=True)]


def blocks(*, rows: int, k: int, n: int, t_in: int, t_w: int, t_out: int, t_interm: int,
           bias: bool, grid: tuple[int, int], max_l1: int) -> AutoBlocks:
    """The blocking ttnn chooses for [rows, k] x [k, n] (see the module docstring)."""
    mt, kt, nt = _ceil(rows, TILE), _ceil(k, TILE), _ceil(n, TILE)
    cores = grid[0] * grid[1]
    if is_narrow(mt * TILE, nt * TILE):
        if mt >= nt:        # tall: in1 multicast, M split over the cores
            pm, pn = _ceil(_ceil(mt * TILE, cores), TILE), nt
        else:
            pm, pn = mt, _ceil(_ceil(nt * TILE, cores), TILE)
        bw = 2 if kt % 2 == 0 else 1
    else:
        pm, pn = _ceil(mt, grid[1]), max(1, _ceil(nt, grid[0]))
        bw = next(d for d in (4, 3, 2, 1) if kt % d == 0)
    t_bias = t_w if bias else 0

    def estimated(h: int, w: int) -> int:      # get_estimated_size_of_cbs
        return (h * bw * 2 * t_in + w * bw * 2 * t_w + h * w * t_out + h * w * t_interm
                + bw * t_bias)
    h, w = pm, pn
    if not estimated(pm, pn) < max_l1:
        h, w = next(((fm, fn) for fm, fn in _divisor_pairs(pm, pn)
                     if estimated(fm, fn) < max_l1), (1, 1))
    return AutoBlocks(pm, pn, h, w, bw, kt)


def interleaved_matmul_l1(*, rows: int, k: int, n: int, in_dtype: str, weights_dtype: str,
                          out_dtype: str, fp32_accum: bool, bias: bool, grid: tuple[int, int],
                          max_l1: int) -> L1Estimate:
    """The CBs per core of ttnn's automatic matmul on interleaved operands (inputs and output
    in DRAM: nothing else of the op is in L1); ``max_l1``: the L1 left to the op, for
    ttnn's block search."""
    t_in = tile_bytes(in_dtype)
    t_w, t_out = tile_bytes(weights_dtype), tile_bytes(out_dtype)
    t_interm = FP32_TILE if fp32_accum else max(PACKER_TILE, t_out)
    b = blocks(rows=rows, k=k, n=n, t_in=t_in, t_w=t_w, t_out=t_out, t_interm=t_interm,
               bias=bias, grid=grid, max_l1=max_l1)
    h, w, bw = b.out_block_h, b.out_block_w, b.in0_block_w
    depth = 2 if b.kt // bw > 1 else 1
    parts = {"in0_cb": h * bw * depth * t_in, "in1_cb": w * bw * depth * t_w,
             "out_cb": h * w * t_out}
    if bias:
        parts["bias_cb"] = w * t_w
    if fp32_accum and t_out != FP32_TILE:
        parts["interm_cb"] = h * w * FP32_TILE
    return L1Estimate(sum(parts.values()), parts)
