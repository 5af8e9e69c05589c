"""The one walk of a plan: every event of a run, in the executor's order.

The executor runs a plan, the L1 sums (``liveness.step_figures``) and the address model
(``plan_alloc.simulate``) follow it step by step, and a device-time estimate costs it step by
step. All of them read the order from here (``walk(plan)``), so that it is written once:

for each layer ``i`` (``plan.layers`` in order):

1. ``Reallocate`` each tensor ``plan.reallocations`` moves before it (ahead of its adapters);
2. per operand, in operand order: its adapters (``plan.adapters`` into that operand, in planning
   order), each an ``Adapt`` making a new copy from the previous one; a chain frees the previous
   copy right after the next one exists (``FreeCopy``); once the operand's last copy exists, the
   original is freed when this is its last use, the layer reads it once and nobody keeps it
   (``FreeOriginal``, see ``freed_after_adapters``);
3. ``Run`` the layer on its operands (each a tensor name or its adapter copy); an in-place
   binary op (``config.inplace``) then ``WriteInPlace``: its output is the buffer of operand
   ``in_place`` (``swap_operands``: the second);
4. ``SpillTensor`` each of ``plan.spills_after(layer)``: the tensor moves to DRAM and its L1
   buffer is freed (the spill itself frees it: no separate event);
5. ``FreeCopy`` every adapter copy left, but the in-place output's buffer;
6. per tensor the layer read or made (inputs, then its outputs, each once) whose last use this
   was and that nobody keeps: ``FreeTensor``; or ``DropName`` for the in-place operand, whose
   buffer lives on as the output. An original ``FreeOriginal`` already freed is not freed again.

Graph inputs and constants exist before the walk (their layouts: ``plan.input_layouts`` and
``plan.constant_layouts``); graph outputs and constants are never freed; ``keep`` adds more
(the executor's backend tensors the caller passed in; every tensor when it keeps them all).

Each event is a frozen dataclass carrying the planned object it is about: ``layer`` (the
``PlannedLayer`` of the step's layer, whose ``config`` holds the op's choices), ``adapter``
(``plans.Adapter``), ``reallocation`` (``plans.Reallocation``), ``spill`` (``liveness.Spill``).
The ones that run something on the device are ``Step``s (``kind`` and ``name`` as the executor,
``liveness.StepL1`` and ``plan_alloc.StepAddr`` name them); the others only free or rename.
Buffers are named by tensor name (``str``) or, for an adapter's copy, by a ``Copy``.

Pure: plan data in, events out; no torch, no ttnn.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence, Union

from ..language.graph import Node
if TYPE_CHECKING:  # pragma: no cover  (annotations only: plans -> estimate -> here)
    from .plans import Adapter, PlannedLayer, Reallocation


@dataclass(frozen=True)
class Copy:
    """The buffer an adapter makes: copy ``position`` (0 = the first adapter of the chain) of
    operand ``operand`` of layer ``layer``."""
    layer: str
    operand: int
    position: int

    def __str__(self) -> str:
        return f"{self.layer}[{self.operand}] copy {self.position}"


Buffer = Union[str, Copy]       # a tensor by name, or an adapter's copy


@dataclass(frozen=True)
class Event:
    """Something the run does while layer ``i`` (``layer``, a ``PlannedLayer``) is its business."""
    i: int
    layer: PlannedLayer


@dataclass(frozen=True)
class Step(Event):
    """An event that runs a device call (a program, a move): what the per-step figures count."""

    @property
    def kind(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Reallocate(Step):
    """``ttnn.reallocate(reallocation.tensor)`` before layer ``i``'s adapters."""
    reallocation: Reallocation

    @property
    def kind(self) -> str:
        return "reallocate"

    @property
    def name(self) -> str:
        r = self.reallocation
        return f"{r.tensor} before {r.before}"

    @property
    def tensor(self) -> str:
        return self.reallocation.tensor


@dataclass(frozen=True)
class Adapt(Step):
    """``adapter`` (a ``plans.Adapter`` into operand ``operand`` of layer ``i``, ``position`` in
    its chain) reads ``source`` (the tensor, or the chain's previous copy) into ``copy``."""
    adapter: Adapter
    operand: int
    position: int
    source: Buffer
    copy: Copy

    @property
    def kind(self) -> str:
        return "adapter"

    @property
    def name(self) -> str:
        return self.adapter.edge

    @property
    def tensor(self) -> str:
        return self.adapter.src


@dataclass(frozen=True)
class FreeCopy(Event):
    """An adapter copy nobody reads any more (a chain's previous copy, or after the layer)."""
    copy: Copy


@dataclass(frozen=True)
class FreeOriginal(Event):
    """Operand ``operand``'s original ``tensor`` is freed as soon as its last copy ``copy``
    exists, before the op allocates (its last use: ``freed_after_adapters``)."""
    tensor: str
    operand: int
    copy: Copy


@dataclass(frozen=True)
class Run(Step):
    """Layer ``i`` runs on ``operands`` (per operand: the tensor, or its last adapter copy);
    ``in_place``: the operand whose buffer its output is (``WriteInPlace`` follows), or None."""
    operands: tuple
    in_place: int | None = None

    @property
    def kind(self) -> str:
        return "layer"

    @property
    def name(self) -> str:
        return self.layer.name


@dataclass(frozen=True)
class WriteInPlace(Event):
    """Layer ``i``'s output ``tensor`` is the buffer ``holder`` of operand ``operand`` (binary
    ``output_tensor=a``): that buffer is not freed with the operand; it is the output's now."""
    operand: int
    holder: Buffer
    tensor: str


@dataclass(frozen=True)
class SpillTensor(Step):
    """``spill`` (a ``liveness.Spill``): ``spill.tensor`` moves to DRAM right after layer ``i``;
    its L1 buffer is freed by the move."""
    spill: Any                  # liveness.Spill (liveness reads this module)

    @property
    def kind(self) -> str:
        return "spill"

    @property
    def name(self) -> str:
        return f"{self.spill.tensor} after {self.spill.after}"

    @property
    def tensor(self) -> str:
        return self.spill.tensor


@dataclass(frozen=True)
class FreeTensor(Event):
    """``tensor``'s last reader (layer ``i``) has run and nobody keeps it: its buffer goes."""
    tensor: str


@dataclass(frozen=True)
class DropName(Event):
    """``tensor``'s last reader has run, but its buffer is layer ``i``'s in-place output: the
    name goes, the buffer stays."""
    tensor: str


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


def freed_after_adapters(src: str, i: int, node: Node, last: Mapping[str, int],
                         keep: Iterable[str]) -> bool:
    """Whether operand ``src`` of layer ``i`` is freed as soon as its adapters have made the copy
    the op reads: this is its last use, it is not kept, and the layer reads it once (a
    DRAM-sliced pool's input then leaves L1 before the pool allocates)."""
    return last.get(src, -1) == i and src not in keep and list(node.inputs).count(src) == 1


def in_place_operand(layer) -> int | None:
    """The operand whose buffer a binary op writes its output into, or None (not in place)."""
    c = getattr(layer, "config", None)
    if not getattr(c, "inplace", False):
        return None
    return 1 if getattr(c, "swap_operands", False) else 0


def layer_walk(i: int, node: Node, layer, adapters: Sequence, last: Mapping[str, int],
               keep: Iterable[str], *, reallocations: Sequence = (), spills: Sequence = (),
               in_place: bool = True) -> Iterator[Event]:
    """The events of layer ``i`` (``node``, planned as ``layer``) in the module docstring's
    order. ``adapters``: the ``plans.Adapter``s into it, in planning order; ``last``:
    ``last_uses``; ``keep``: tensors never freed; ``in_place=False`` runs an in-place op out of
    place (the executor, when it keeps every tensor). The planner asks for a layer it is still
    planning (no reallocations or spills yet); ``walk`` for a whole plan."""
    keep = keep if isinstance(keep, (set, frozenset)) else set(keep)
    for r in reallocations:
        yield Reallocate(i, layer, r)
    chains: dict[int, list] = {}
    for a in adapters:
        chains.setdefault(a.index, []).append(a)
    operands: list[Buffer] = []
    copies: list[Copy] = []             # every copy still alive, in the order made
    freed: set[str] = set()
    for idx, src in enumerate(node.inputs):
        cur: Buffer = src
        for j, a in enumerate(chains.get(idx, ())):
            copy = Copy(node.name, idx, j)
            yield Adapt(i, layer, a, idx, j, cur, copy)
            if isinstance(cur, Copy):
                yield FreeCopy(i, layer, cur)
                copies.remove(cur)
            copies.append(copy)
            cur = copy
        if isinstance(cur, Copy) and freed_after_adapters(src, i, node, last, keep):
            yield FreeOriginal(i, layer, src, idx, cur)
            freed.add(src)
        operands.append(cur)
    ia = in_place_operand(layer) if in_place else None
    yield Run(i, layer, tuple(operands), ia)
    holder = operands[ia] if ia is not None else None
    if ia is not None:
        yield WriteInPlace(i, layer, ia, holder, node.name)
    for sp in spills:
        yield SpillTensor(i, layer, sp)
    for c in copies:
        if c != holder:
            yield FreeCopy(i, layer, c)
    for t in dict.fromkeys(list(node.inputs) + list(node.tensors)):
        if last.get(t) != i or t in keep or t in freed:
            continue
        if holder == t and t not in node.tensors:
            yield DropName(i, layer, t)     # its buffer is the output now
        else:
            yield FreeTensor(i, layer, t)


def walk(plan, *, keep: Iterable[str] = (), in_place: bool = True) -> Iterator[Event]:
    """Every event of a run of ``plan``, in order (module docstring). ``keep``: tensors kept
    besides the graph's outputs and constants; ``in_place=False``: in-place ops run out of place
    (they need every input kept)."""
    g = plan.graph
    kept = set(g.outputs) | set(g.constants) | set(keep)
    last = last_uses([pl.node for pl in plan.layers])
    into: dict[str, list] = {}
    for a in plan.adapters:
        into.setdefault(a.dst, []).append(a)
    moves: dict[str, list] = {}
    for r in getattr(plan, "reallocations", ()):
        moves.setdefault(r.before, []).append(r)
    after: dict[str, list] = {}
    for sp in getattr(plan, "spills", ()):
        after.setdefault(sp.after, []).append(sp)
    for i, pl in enumerate(plan.layers):
        yield from layer_walk(i, pl.node, pl, into.get(pl.name, ()), last, kept,
                              reallocations=moves.get(pl.name, ()),
                              spills=after.get(pl.name, ()), in_place=in_place)


def steps(plan, **kw) -> list[Step]:
    """The ``Step``s of ``walk(plan, **kw)``: what runs on the device, in order."""
    return [ev for ev in walk(plan, **kw) if isinstance(ev, Step)]
