"""Hardware facts, one place: per architecture, what the planner, the L1 models and the sim need
to know about a chip. A new architecture is a new ``Arch`` entry of measured data, not new code.

Every figure is what ttnn 0.81.1 reports or does on that chip (measured on the mock device where
noted; ``tests/test_verify.py`` and ``tests/test_l1_alloc.py`` hold them to it).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    name: str                       # ttnn's arch name ("wormhole_b0")
    grid: tuple[int, int]           # worker grid (x, y): ``device.compute_with_storage_grid_size()``
    l1_bank_no_l1_small: int        # the allocator's L1 bank per core with l1_small_size=0
    l1_base: int                    # where the L1 allocator's range starts (first CB / lowest buffer)
    l1_banks: int                   # L1 banks an interleaved L1 tensor spreads over (one per core)
    tile: int = 32                  # tile edge (TILE layout: 32x32)
    l1_alignment: int = 32          # what the L1 allocator rounds every buffer to (its DRAM alignment)
    # Speed facts, for the device-time estimate; each names its source at the entry.
    clock_hz: float = 1.0e9         # AICLK the data-movement model assumes
    dram_bytes_per_s: float = 258e9  # peak DRAM bandwidth of ttnn's op performance model
    dram_banks: int = 12            # DRAM banks an interleaved DRAM tensor spreads over
    fpu_mul_adds_per_cycle: int = 4096  # per core at LoFi: tt-metal's op performance models

    @property
    def cores(self) -> int:
        return self.grid[0] * self.grid[1]


# Wormhole n150 / n300 (each chip), measured on the mock n150: ``get_memory_view(device,
# BufferType.L1).total_bytes_per_bank`` is 1,393,312 B with l1_small_size=0 (1,368,736 with
# 24576, 1,360,544 with 32768: L1_SMALL is carved from the same bank; the trace region is DRAM);
# the allocator's range starts at 105,824 (above firmware and reserved L1).
# Speed: the clock is ttnn's data-movement model's (`device_frequency_hz`, 1e9 on Wormhole, in the
# wheel's ttnn/cpp/ttnn/operations/data_movement/common/common.cpp); the DRAM bandwidth is
# tt-metal's op performance model's (ttnn/core/operation.cpp, 258 GB/s on Wormhole); 12 DRAM
# banks: ``get_memory_view(device, BufferType.DRAM).num_banks`` on the mock n150 (and
# ``device.dram_grid_size()`` 12x1). Two 32 B L1 buffers land 32 B apart (``l1_alignment``).
# FPU: 4096 mul-adds per cycle per core at LoFi ("8x16 x 16x16 in a single cycle", the matmul and
# conv2d op performance models of tt-metal, the same figure on Blackhole).
WORMHOLE_B0 = Arch("wormhole_b0", grid=(8, 8), l1_bank_no_l1_small=1_393_312, l1_base=105_824,
                   l1_banks=64, clock_hz=1.0e9, dram_bytes_per_s=258e9, dram_banks=12)

# Blackhole p150 (each chip), measured on the mock p150 (ttmodels/data/blackhole_p150_mock_cluster.yaml,
# no Tensix column harvested): ``compute_with_storage_grid_size()`` 13x10; the L1 bank is
# 1,461,120 B with l1_small_size=0 over 130 banks (one per worker); the first L1 buffer (2,048 B,
# placed top down) lands at 1,570,816, so the range ends at 1,572,864 (1.5 MiB) and starts at
# 1,572,864 - 1,461,120 = 111,744; 8 DRAM banks (``get_memory_view(device, BufferType.DRAM)
# .num_banks``, ``dram_grid_size()`` 8x1); two 32 B L1 buffers land 64 B apart: the allocator rounds
# to Blackhole's 64 B DRAM alignment (``l1_alloc.ALIGNMENT`` is still Wormhole's 32, so the plan's
# address model may place a Blackhole buffer up to 32 B higher than ttnn does). Speed: `device_frequency_hz` 1.2e9 for every arch but
# Wormhole in the wheel's data_movement/common/common.cpp; 512 GB/s DRAM in tt-metal's
# ttnn/core/operation.cpp. A board with harvested columns has fewer workers (11x10 with tt-umd's
# mask 192): the plans are for the whole grid (docs/multichip.md "Mock systems and real boards").
BLACKHOLE = Arch("blackhole", grid=(13, 10), l1_bank_no_l1_small=1_461_120, l1_base=111_744,
                 l1_banks=130, clock_hz=1.2e9, dram_bytes_per_s=512e9, dram_banks=8,
                 l1_alignment=64)

ARCHS: dict[str, Arch] = {a.name: a for a in (WORMHOLE_B0, BLACKHOLE)}
DEFAULT = WORMHOLE_B0
DEFAULT_GRID: tuple[int, int] = DEFAULT.grid


def get(name: str) -> Arch:
    """The entry for ``name``; an unknown one is refused naming the known ones."""
    try:
        return ARCHS[name]
    except KeyError:
        from .errors import Error
        raise Error(f"unknown arch {name!r}; known: {', '.join(sorted(ARCHS))}") from None
