"""Per-core L1 over time, read from a ttnn graph capture (``ttnn.graph.end_graph_capture()``).

A NO_DISPATCH capture records every L1 buffer allocation and deallocation with its per-bank
size (``buffer_allocate.max_size_per_bank``: the allocator reserves the same address range in
every bank, so that is what each core pays), and every circular/dataflow buffer a program
creates, with its core range; ``circular_buffer_deallocate_all`` marks where the next program
releases the previous one's. Walking the nodes in order gives the per-core L1 timeline whose
maximum is ttnn's own ``extract_resource_usage_per_core(graph).peak_total`` (``tests`` check the
two agree). ``ttmodels.verify`` puts a marker around each step it runs
(``ttnn.graph.track_function_start("ttmodels::<kind>::<name>")``), so the timeline also yields
each layer's and each adapter's peak, with every tensor alive at that moment counted.

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


@dataclass
class Timeline:
    steps: list[Step]
    peak: Usage
    tensor_bytes: dict[int, int]        # ttnn tensor_id -> per-bank L1 bytes of its buffer

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
            touch()
        elif kind == "buffer_deallocate" and _is_l1(p):
            l1 -= int(p.get("max_size_per_bank", 0))
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
                touch()
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
    return Timeline(steps, peak, tensor_bytes)
