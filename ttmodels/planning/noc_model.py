"""ttnn's own NoC / DRAM data-movement model, ported as data: what a data-movement step (reshard,
sharded<->interleaved, halo, concat, a spill) costs in cycles.

Source: the wheel's ``ttnn/cpp/ttnn/operations/data_movement/common/common.cpp`` (ttnn 0.81.1):
the measured bandwidth tables by transaction size (``noc_dram_bw``, ``noc_l1_read_bw``,
``noc_l1_write_bw``, ``noc_l1_local_bw``: GB/s per core, Wormhole and Blackhole columns),
``get_transaction_noc_bw`` (nearest power of two), the first-transaction latencies of
``get_cycles_for_transaction_size``, the aggregate limits of ``get_effective_l1_cores`` /
``get_effective_dram_cores`` and ``common_tm_bw_model`` (read and write overlap; the slower
wins). Only the parts this project's steps reach are ported: no per-faceline transposes, no
split or broadcast special cases. Pure functions of sizes and flags; no ttnn import.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

# transaction bytes -> (Wormhole GB/s, Blackhole GB/s), common.cpp's tables
NOC_DRAM_BW = {16: (0.436, 0.387), 32: (0.868, 0.772), 64: (1.736, 1.545), 128: (3.489, 3.088),
               256: (6.975, 6.176), 512: (13.889, 12.361), 1024: (27.891, 24.71),
               2048: (28.411, 49.164), 4096: (28.227, 50.238), 8192: (28.537, 50.393),
               16384: (27.831, 50.636), 32768: (27.758, 50.695), 65536: (28.694, 50.626)}
NOC_L1_READ_BW = {16: (0.868, 0.671), 32: (1.724, 1.336), 64: (3.477, 2.673),
                  128: (6.885, 5.354), 256: (13.794, 10.691), 512: (27.143, 21.382),
                  1024: (28.976, 42.771), 2048: (29.742, 47.977), 4096: (29.544, 49.34),
                  8192: (28.728, 49.961), 16384: (28.7, 50.287), 32768: (28.618, 50.335),
                  65536: (28.7, 50.403)}
NOC_L1_WRITE_BW = {16: (0.681, 0.511), 32: (1.254, 1.018), 64: (2.709, 2.036),
                   128: (5.417, 4.072), 256: (10.823, 8.143), 512: (21.668, 16.284),
                   1024: (27.837, 32.593), 2048: (27.811, 48.644), 4096: (27.811, 49.828),
                   8192: (27.808, 50.219), 16384: (27.808, 50.578), 32768: (27.811, 50.412),
                   65536: (28.808, 50.383)}
NOC_L1_LOCAL_BW = {16: (0.868, 0.671), 32: (1.724, 1.337), 64: (3.477, 2.675),
                   128: (6.899, 5.354), 256: (13.791, 10.708), 512: (27.594, 21.413),
                   1024: (27.696, 42.792), 2048: (27.911, 46.455), 4096: (27.811, 48.5),
                   8192: (27.808, 49.639), 16384: (27.814, 50.171), 32768: (27.805, 50.123),
                   65536: (27.84, 50.21)}

_KEYS = sorted(NOC_DRAM_BW)      # the four tables share their transaction sizes

# first-transaction latency in cycles (Wormhole, Blackhole): get_cycles_for_transaction_size
LATENCY_DRAM = (358, 529)
LATENCY_LOCAL = (56, 88)
LATENCY_L1_WRITE = (256, 404)
LATENCY_L1_READ = (259, 403)
# get_effective_l1_cores: per-NoC aggregate GB/s; get_effective_dram_cores: chip aggregate
L1_AGGREGATE_PER_NOC = (32.0, 50.0)
DRAM_AGGREGATE = 265.0
MAX_TRANSACTION = 2048           # "size with highest bw" (row-major height-sharded sticks)


def column(arch_name: str) -> int:
    """The tables' column for a chip: Wormhole's or Blackhole's (common.cpp knows only these)."""
    return 1 if arch_name.startswith("blackhole") else 0


@lru_cache(maxsize=4096)      # planning asks it for every conv candidate: a few sizes, often
def transaction_bw(size: int, *, dram: bool, local: bool, read: bool, col: int) -> float:
    """GB/s per core of a transaction of ``size`` bytes (``get_transaction_noc_bw``: the entry of
    the nearer power of two, clamped to the table)."""
    table = NOC_DRAM_BW if dram else NOC_L1_LOCAL_BW if local else \
        NOC_L1_READ_BW if read else NOC_L1_WRITE_BW
    size = max(int(size), 16)
    lo = 2 ** math.floor(math.log2(size))
    hi = 2 ** math.ceil(math.log2(size))
    keys = _KEYS
    lo_k = min((k for k in keys if k >= lo), default=keys[-1])
    hi_k = min((k for k in keys if k >= hi), default=keys[-1])
    return table[lo_k if size - lo < hi - size else hi_k][col]


def latency(*, dram: bool, local: bool, read: bool, col: int) -> int:
    if dram:
        return LATENCY_DRAM[col]
    if local:
        return LATENCY_LOCAL[col]
    return (LATENCY_L1_READ if read else LATENCY_L1_WRITE)[col]


@lru_cache(maxsize=16384)
def transfer_cycles(size: int, count: float, *, dram: bool, local: bool, read: bool, col: int,
                    clock_hz: float) -> float:
    """Cycles to move ``count`` transactions of ``size`` bytes on one core, first-transaction
    latency included (``get_cycles_for_transaction_size``: bytes x clock / bandwidth)."""
    size = max(int(size), 16)
    bw = transaction_bw(size, dram=dram, local=local, read=read, col=col)
    return math.ceil(count * size * clock_hz / (bw * 1e9)) + \
        latency(dram=dram, local=local, read=read, col=col)


@dataclass(frozen=True)
class Side:
    """One side of a data movement: its bytes, the size of one transaction, where it lives and
    whether it is L1-sharded (and on how many cores)."""
    bytes: float
    transaction: int
    dram: bool
    cores: int | None = None      # sharded: the cores holding it; None: interleaved


def tm_cycles(src: Side, dst: Side, *, grid_cores: int, noc_count: int, col: int,
              clock_hz: float) -> float:
    """``common_tm_bw_model``: a data-movement op's device cycles. Reads and writes are split
    over the cores the aggregate NoC / DRAM bandwidth can feed (``get_effective_*_cores``); a
    sharded-to-sharded move on the same cores is local; reads and writes overlap (max), except
    DRAM to DRAM (read then write)."""
    n_read = math.ceil(src.bytes / max(src.transaction, 1))
    n_write = math.ceil(dst.bytes / max(dst.transaction, 1))
    cores = grid_cores
    if src.dram or dst.dram:
        side = src if src.dram else dst
        bw = transaction_bw(side.transaction, dram=True, local=False, read=True, col=col)
        cores = min(math.ceil(DRAM_AGGREGATE / bw), grid_cores)
    else:
        agg = L1_AGGREGATE_PER_NOC[col] * noc_count
        rd = min(math.ceil(agg / transaction_bw(src.transaction, dram=False, local=False,
                                                read=True, col=col)), grid_cores)
        cores = max(1, min(rd, n_read))
    local = (src.cores is not None and dst.cores is not None and not src.dram and not dst.dram
             and src.cores == dst.cores)
    if local:
        cores = dst.cores
    cores = max(1, cores)
    rd = transfer_cycles(src.transaction, math.ceil(n_read / cores), dram=src.dram, local=local,
                         read=True, col=col, clock_hz=clock_hz)
    wr = transfer_cycles(dst.transaction, math.ceil(n_write / cores), dram=dst.dram, local=local,
                         read=False, col=col, clock_hz=clock_hz)
    if src.dram and dst.dram:
        return rd + wr
    return max(rd, wr)
