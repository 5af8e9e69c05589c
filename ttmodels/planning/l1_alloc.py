"""ttnn's L1 allocator, as a model: where each buffer lands, and what a program's CBs may use.

What tt-metal 0.81 does (``tt_metal/impl/allocator/bank_manager.cpp``, ``algorithms/
free_list_opt.cpp``; behaviour confirmed on the mock device, ``tests/test_l1_alloc.py``):

* One free list serves every L1 bank: a buffer gets the *same* address range in each bank, so
  the per-bank size (``max_size_per_bank``: a shard, or an interleaved tensor's pages per bank)
  is what the list allocates. Sizes are rounded up to 32 B (the bank manager is built with the
  DRAM alignment, also the minimum allocation).
* The list covers ``[base, top)``: ``base`` is where the allocator starts (above firmware and
  reserved L1) and ``top`` is L1's end less the ``L1_SMALL`` region (``l1_small_size``, the
  halo/reader-index configs). On Wormhole with ``l1_small_size=32768``: ``[105,824,
  1,466,368)``, the 1,360,544 B bank.
* L1 buffers are allocated **top down** with the **FIRST** search policy: of the free blocks
  large enough, the one at the highest address, and the buffer sits at that block's top end.
  Freeing merges a block with free neighbours. Fragmentation is therefore a matter of order:
  a buffer freed below a live one leaves a hole that only a buffer of at most its size fills.
* A program's circular buffers (the ones not placed on a tensor's buffer) are laid out from
  ``base`` upward; ttnn checks, when the program is set up, that they end at or below the lowest
  L1 buffer on their cores ("Statically allocated circular buffers ... clash with L1 buffers":
  ``program.cpp``). With one list for all banks the lowest buffer is the same on every core.

Pure Python, no ttnn: the planner runs it over a plan's allocation order (``plan_alloc``), and
``ttmodels verify`` holds it against the real run.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..arch import WORMHOLE_B0

#: Wormhole's rounding; a plan's chip has its own (``Arch.l1_alignment``: Blackhole rounds to 64),
#: which ``plan_alloc.allocator`` passes
ALIGNMENT = WORMHOLE_B0.l1_alignment


def aligned(size: int, alignment: int = ALIGNMENT) -> int:
    return max(alignment, -(-int(size) // alignment) * alignment)


class OutOfMemory(Exception):
    """No free block holds the request (ttnn: 'Out of Memory: Not enough space ...')."""

    def __init__(self, size: int, state: "AllocState"):
        self.size, self.state = size, state
        super().__init__(f"{size:,} B per bank wanted; allocated {state.allocated:,}, free "
                         f"{state.free:,}, largest free block {state.largest_free:,}")


@dataclass(frozen=True)
class AllocState:
    """The allocator after a step: bytes per bank allocated and free, the largest free block,
    and the lowest occupied address (``None``: nothing allocated)."""
    allocated: int
    free: int
    largest_free: int
    lowest: int | None


class L1Allocator:
    """A free list over ``[base, top)``; addresses are absolute (as ttnn reports them)."""

    def __init__(self, base: int, top: int, alignment: int = ALIGNMENT):
        if top <= base:
            raise ValueError(f"empty L1 range [{base}, {top})")
        self.base, self.top, self.alignment = int(base), int(top), int(alignment)
        # free blocks as sorted start addresses and their sizes; allocated: start -> size
        self._free_starts: list[int] = [self.base]
        self._free_size: dict[int, int] = {self.base: self.top - self.base}
        self.allocated: dict[int, int] = {}

    @property
    def size(self) -> int:
        return self.top - self.base

    def allocate(self, size: int, *, bottom_up: bool = False) -> int:
        """Reserve ``size`` bytes per bank; returns the address. Raises ``OutOfMemory``."""
        need = aligned(size, self.alignment)
        fits = [s for s in self._free_starts if self._free_size[s] >= need]
        if not fits:
            raise OutOfMemory(need, self.state())
        start = fits[0] if bottom_up else fits[-1]
        block = self._free_size.pop(start)
        self._free_starts.remove(start)
        addr = start if bottom_up else start + block - need
        if addr > start:                       # the part left below
            self._add_free(start, addr - start)
        if addr + need < start + block:        # the part left above
            self._add_free(addr + need, start + block - addr - need)
        self.allocated[addr] = need
        return addr

    def allocate_at(self, addr: int, size: int) -> int:
        """Reserve ``size`` bytes at ``addr`` (ttnn's ``allocate_at_address``), e.g. to follow a
        real run from a point where the model and ttnn disagreed."""
        need, addr = aligned(size, self.alignment), int(addr)
        for start in self._free_starts:
            block = self._free_size[start]
            if start <= addr and addr + need <= start + block:
                self._free_starts.remove(start)
                del self._free_size[start]
                if addr > start:
                    self._add_free(start, addr - start)
                if addr + need < start + block:
                    self._add_free(addr + need, start + block - addr - need)
                self.allocated[addr] = need
                return addr
        raise OutOfMemory(need, self.state())

    def free(self, addr: int) -> None:
        """Release the buffer at ``addr`` (ttnn ignores an address it does not hold)."""
        size = self.allocated.pop(int(addr), None)
        if size is None:
            return
        start, end = int(addr), int(addr) + size
        i = bisect.bisect_left(self._free_starts, start)
        if i > 0:                              # merge with the free block below
            below = self._free_starts[i - 1]
            if below + self._free_size[below] == start:
                start = below
                self._free_starts.pop(i - 1)
                self._free_size.pop(below)
        if end in self._free_size:             # and the one above (it starts at our end)
            self._free_starts.remove(end)
            end += self._free_size.pop(end)
        self._add_free(start, end - start)

    def _add_free(self, start: int, size: int) -> None:
        bisect.insort(self._free_starts, start)
        self._free_size[start] = size

    def lowest(self) -> int | None:
        return min(self.allocated) if self.allocated else None

    def largest_free(self) -> int:
        return max(self._free_size.values(), default=0)

    def state(self) -> AllocState:
        used = sum(self.allocated.values())
        return AllocState(used, self.size - used, self.largest_free(), self.lowest())

    def cb_clash(self, cb_bytes: int) -> int | None:
        """Where a program's CB region of ``cb_bytes`` (from ``base``) would end if it runs
        into the lowest L1 buffer (ttnn refuses the program), else None."""
        end = self.base + int(cb_bytes)
        low = self.lowest()
        return end if low is not None and end > low else None
