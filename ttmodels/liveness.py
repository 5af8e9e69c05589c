"""Which tensors are alive in L1 while each layer runs, by the executor's own rules.

The executor (``runtime.Executor.run``) runs ``plan.layers`` in order and frees a tensor right
after its last consumer has run; graph outputs and constants are never freed; an adapter's copy
lives only while its consumer runs (the original stays alive until its own last use); a spill
(``plan.spills``) moves a tensor to DRAM right after layer ``after`` and frees its L1 copy.
During layer ``i`` the L1 of each core therefore holds the op's own buffers (inputs as the op
receives them, its output, its circular buffers: ``PlannedLayer.l1_bytes_per_core``) plus every
*other* tensor alive at that moment: ``others_alive`` lists them with their bytes per bank.

Pure functions over plan data (no torch, no ttnn); the planner calls them while planning (to give
each op the L1 that is really left) and ``plans.Plan`` once planned (``live_l1`` per layer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .graph import Graph, Node
from .l1 import bank_bytes
from .layout import TensorLayout


@dataclass(frozen=True)
class Spill:
    """Move ``tensor`` to ``to`` (DRAM) right after layer ``after`` has run, freeing ``frees``
    bytes per core of L1 for ``for_layer`` (the first layer it makes room for)."""
    tensor: str
    after: str
    before: TensorLayout
    to: TensorLayout
    frees: int
    for_layer: str

    @property
    def kind(self) -> str:
        return "spill"

    @property
    def reason(self) -> str:
        return f"spill: frees {self.frees:,} B/core for {self.for_layer}"


@dataclass(frozen=True)
class LiveL1:
    """A layer's L1 per core with every live tensor: ``own`` (the op's estimate) + ``others``
    (name -> bytes per bank of each other tensor alive in L1 while it runs)."""
    own: int
    others: Mapping[str, int]

    @property
    def total(self) -> int:
        return self.own + sum(self.others.values())


def last_uses(nodes: Sequence[Node]) -> dict[str, int]:
    """Tensor name -> index of the layer after which the executor frees it (its last consumer;
    a layer nobody reads is freed right after it runs, unless kept)."""
    last: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for t in n.tensors:
            last.setdefault(t, i)
        for s in n.inputs:
            last[s] = i
    return last


def tensor_rows_c(graph: Graph, name: str) -> tuple[int, int]:
    if name in graph.constants:
        shape = (1, 1, 1, 1) + tuple(int(v) for v in graph.constants[name].shape)
        return shape[-4] * shape[-3] * shape[-2], shape[-1]
    s = graph.shape_of(name)
    return s.rows, s.c


def others_alive(i: int, node: Node, held: Mapping[str, TensorLayout], last: Mapping[str, int],
                 keep: Iterable[str], graph: Graph,
                 received: Sequence[TensorLayout] | None = None) -> dict[str, int]:
    """Bytes per bank of every tensor other than ``node``'s operands that is alive in L1 while
    layer ``i`` runs. ``held``: every tensor produced before ``i`` (graph inputs, constants,
    earlier layers) as it is held then (spilled ones in DRAM). ``received``: the layouts the op
    receives (after adapters), when known: an operand whose adapter made a copy is counted here
    too, since the original stays alive until its own last use."""
    keep = set(keep)
    own = set(node.inputs)
    if received is not None:
        own = {s for s, got in zip(node.inputs, received) if held.get(s) == got}
    out: dict[str, int] = {}
    for name, t in held.items():
        if name in own or name in node.tensors:
            continue
        if last.get(name, -1) < i and name not in keep:
            continue
        b = bank_bytes(t, *tensor_rows_c(graph, name))
        if b:
            out[name] = b
    return out
