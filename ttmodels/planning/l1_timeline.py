"""Per-core L1 over time, read from a ttnn graph capture (``ttnn.graph.end_graph_capture()``).

A NO_DISPATCH capture records every L1 buffer allocation and deallocation with its per-bank
size (``buffer_allocate.max_size_per_bank``: the allocator reserves the same address range in
every bank, so that is what each core pays), and every circular/dataflow buffer a program
creates, with its core range; ``circular_buffer_deallocate_all`` marks where the next program
releases the previous one's. Walking the nodes in order gives the per-core L1 timeline whose
maximum is ttnn's own ``extract_resource_usage_per_core(graph).peak_total`` (``tests`` check the
two agree). ``ttmodels.tools.verify`` puts a marker around each step it runs
(``ttnn.graph.track_function_start("ttmodels::<kind>::<name>")``), so the timeline also yields
each layer's and each adapter's peak, with every tensor alive at that moment counted.

A capture of a *real* run (``RunMode.NORMAL`` on the mock device: ttnn's allocator gives every
buffer its address) also carries addresses: each step then records the L1 buffers it allocated
and freed in order (``Step.l1_events``: what ``l1_alloc`` replays), where its programs' own
circular buffers end (``cb_end``) and the lowest L1 buffer alive while they were placed
(``lowest_l1``): ttnn refuses a program whose CBs end above that buffer.

Pure: takes the captured list of dicts, imports nothing heavy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER = "ttmodels::"
_RANGE = re.compile(r"\[(\d+)-(\d+) - (\d+)-(\d+)\]")


@dataclass(frozen=True)
class Usage:
    """Per-core bytes: ``l1`` buffers, ``cb`` circular + dataflow buffers, ``total`` both (the
    worst core: L1 buffers cost every bank the same, CBs only the cores of their range)."""
    l1: int = 0
    cb: int = 0
    total: int = 0

    def peak(self, other: "Usage") -> "Usage":
        return Usage(max(self.l1, other.l1), max(self.cb, other.cb), max(self.total, other.total))


@dataclass
class Step:
    """One marked step: ``kind`` ("layer" or "adapter"), ``name``, its peak usage (everything
    alive in L1 during it), the L1 alive when it started, and the buffers it allocated."""
    kind: str
    name: str
    peak: Usage = field(default_factory=Usage)
    live_at_start: int = 0
    # real runs only (addresses): ("alloc" | "free", address, bytes per bank) of L1 buffers
    l1_events: list[tuple[str, int, int]] = field(default_factory=list)
    cb_end: int | None = None          # highest end address of its programs' own CBs
    lowest_l1: int | None = None       # lowest L1 buffer address alive while CBs were placed


@dataclass
class Timeline:
    steps: list[Step]
    peak: Usage
    tensor_bytes: dict[int, int]        # ttnn tensor_id -> per-bank L1 bytes of its buffer
    # real runs: every L1 buffer event in order, ("alloc" | "free", address, bytes per bank,
    # index in ``steps`` of the innermost open step or None between steps)
    l1_events: list[tuple[str, int, int, int | None]] = field(default_factory=list)

    def step(self, kind: str, name: str) -> Step:
        for s in self.steps:
            if s.kind == kind and s.name == name:
                return s
        raise KeyError(f"{kind} {name}")


def parse_core_ranges(text: str) -> list[tuple[int, int, int, int]]:
    """``"{[0-0 - 7-6], [0-7 - 3-7]}"`` -> [(x0, y0, x1, y1), ...] (inclusive)."""
    return [tuple(int(v) for v in m.groups()) for m in _RANGE.finditer(text or "")]  # type: ignore[misc]


def _is_l1(params: dict) -> bool:
    return params.get("type") == "L1"


# tt-metal's BufferType: L1_SMALL (3) also reports type "L1" but has an allocator of its own
# (the halo/reader-index configs at the top of L1); only L1 (1) shares the CBs' address range
L1_BUFFER_TYPE = 1


def _is_main_l1(params: dict) -> bool:
    return _is_l1(params) and int(params.get("buffer_type", L1_BUFFER_TYPE)) == L1_BUFFER_TYPE


def _borrows(params: dict) -> bool:
    # A CB placed on a sharded tensor's buffer (globally allocated) costs nothing of its own.
    return str(params.get("borrows_memory", "0")) in ("1", "true") or \
        str(params.get("globally_allocated", "0")) in ("1", "true")


def read(graph: list[dict]) -> Timeline:
    """Walk a captured graph; see the module docstring."""
    l1 = 0
    cb_per_core: dict[tuple[int, int], int] = {}
    cb_unranged = 0
    peak = Usage()
    steps: list[Step] = []
    open_steps: list[tuple[int, Step]] = []      # (stacking level, step)
    buffer_bytes: dict[int, int] = {}           # buffer node index -> per-bank bytes
    tensor_bytes: dict[int, int] = {}
    live_l1: dict[int, int] = {}                # real runs: address -> per-bank bytes
    events: list[tuple[str, int, int, int | None]] = []
    index = {}                                  # id(step) -> its index in steps

    def record(what: str, addr: int, size: int) -> None:
        inner = index[id(open_steps[-1][1])] if open_steps else None
        events.append((what, addr, size, inner))
        for _, st in open_steps:
            st.l1_events.append((what, addr, size))
    nodes = list(graph)

    def now() -> Usage:
        cb = cb_unranged + (max(cb_per_core.values()) if cb_per_core else 0)
        return Usage(l1, cb, l1 + cb)

    def touch() -> None:
        nonlocal peak
        u = now()
        peak = peak.peak(u)
        for _, s in open_steps:
            s.peak = s.peak.peak(u)

    for i, n in enumerate(nodes):
        kind = n.get("node_type")
        p = n.get("params") or {}
        if kind == "function_start":
            name = str(p.get("name", ""))
            if name.startswith(MARKER):
                _, step_kind, step_name = name.split("::", 2)
                s = Step(step_kind, step_name, now(), l1)
                index[id(s)] = len(steps)
                steps.append(s)
                open_steps.append((n.get("stacking_level", 0), s))
        elif kind == "function_end":
            lvl = n.get("stacking_level", 0)
            if open_steps and open_steps[-1][0] == lvl and \
                    str(p.get("name", "")).startswith(MARKER):
                open_steps.pop()
        elif kind == "buffer_allocate" and _is_l1(p):
            size = int(p.get("max_size_per_bank", 0))
            l1 += size
            for j in n.get("connections", ()):      # the allocate node points at its buffer
                buffer_bytes[j] = size
            if "address" in p and _is_main_l1(p):
                addr = int(p["address"])
                live_l1[addr] = size
                record("alloc", addr, size)
            touch()
        elif kind == "buffer_deallocate" and _is_l1(p):
            l1 -= int(p.get("max_size_per_bank", 0))
            if "address" in p and _is_main_l1(p):
                addr = int(p["address"])
                live_l1.pop(addr, None)
                record("free", addr, int(p.get("max_size_per_bank", 0)))
            touch()
        elif kind in ("circular_buffer_allocate", "dataflow_buffer_allocate"):
            if not _borrows(p):
                size = int(p.get("size", 0))
                ranges = parse_core_ranges(str(p.get("core_range_set", "")))
                if not ranges:
                    cb_unranged += size
                for x0, y0, x1, y1 in ranges:
                    for x in range(x0, x1 + 1):
                        for y in range(y0, y1 + 1):
                            cb_per_core[(x, y)] = cb_per_core.get((x, y), 0) + size
                if "address" in p:
                    end = int(p["address"]) + size
                    low = min(live_l1) if live_l1 else None
                    for _, s in open_steps:
                        s.cb_end = end if s.cb_end is None else max(s.cb_end, end)
                        if low is not None:
                            s.lowest_l1 = low if s.lowest_l1 is None else min(s.lowest_l1, low)
                touch()
        elif kind == "program_execution" and live_l1:
            # real runs: ttnn checks a program's CBs against the lowest L1 buffer when it runs
            low = min(live_l1)
            for _, st in open_steps:
                st.lowest_l1 = low if st.lowest_l1 is None else min(st.lowest_l1, low)
        elif kind == "circular_buffer_deallocate_all":
            cb_per_core.clear()
            cb_unranged = 0
            touch()
    # tensors -> their buffers: a buffer node connects to the tensor nodes that hold it
    for i, b in buffer_bytes.items():
        for j in nodes[i].get("connections", ()):
            if j < len(nodes) and nodes[j].get("node_type") == "tensor":
                tid = (nodes[j].get("params") or {}).get("tensor_id")
                if tid is not None:
                    tensor_bytes[int(tid)] = b
    return Timeline(steps, peak, tensor_bytes, events)
