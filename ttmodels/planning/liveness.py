"""Which tensors are alive in L1 while each layer runs, by the executor's own rules.

The executor (``runtime.Executor.run``) runs ``plan.layers`` in order and frees a tensor right
after its last consumer has run; graph outputs and constants are never freed; an adapter's copy
lives only while its consumer runs (the original stays alive until its own last use); a spill
(``plan.spills``) moves a tensor to DRAM right after layer ``after`` and frees its L1 copy.
During layer ``i`` the L1 of each core therefore holds the op's own buffers (inputs as the op
receives them, its output, its circular buffers: ``PlannedLayer.l1_bytes_per_core``) plus every
*other* tensor alive at that moment: ``others_alive`` lists them with their bytes per bank.

**Circular buffers outlive their program.** ttnn releases a program's circular buffers only when
the next program starts (``circular_buffer_deallocate_all`` in a graph capture comes right before
the next program's own CBs, *after* that op has created its output tensor). So while step ``s``
allocates what it needs before its first program (its output; a halo'd conv only its halo
buffer, since the halo is its first program), the previous program's CBs are still reserved:

    L1(s) = others + max(own, first + carry),   carry = the previous step's CBs

``StepL1`` holds those figures for every step the executor runs (adapters, layers, spills);
``layer_steps`` computes them for one layer and the adapters in front of it; ``step_figures``
for a whole plan; both read the executor's order from ``plan_walk`` (its events fed to
``_Sums``). On the mock device the result equals ttnn's own timeline figure to within a
few hundred bytes per step (``tests/test_verify_models.py``).

Pure functions over plan data (no torch, no ttnn); the planner calls them while planning (to give
each op the L1 that is really left) and once planned (``live_l1`` per layer, ``Plan.step_l1``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..language.graph import TILE, Graph, Node
from .l1 import bank_bytes, layer_parts, tile_bytes
from ..ops.pool.l1 import global_pool_last_cbs
from .layout import BLOCK, INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from . import plan_walk as pw
# the executor's freeing rules, read here and by the planner under these names
from .plan_walk import freed_after_adapters, last_uses  # noqa: F401


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


def tensor_rows_c(graph: Graph, name: str) -> tuple[int, int]:
    if name in graph.constants:
        shape = (1, 1, 1, 1) + tuple(int(v) for v in graph.constants[name].shape)
        return shape[-4] * shape[-3] * shape[-2], shape[-1]
    s = graph.shape_of(name)
    return s.rows, s.c


#: the per-channel constants batch_norm and layer_scale layers put on the device when the model
#: is built ([1, 1, 1, C] TILE in L1: ``plan_context.per_channel_constant``), so they hold L1 for
#: the whole run, before the first step: how many each op makes, and their layout
RESIDENT_CONSTANTS = {"batch_norm": 2, "layer_scale": 1}
def per_channel_constant(dtype: str) -> TensorLayout:
    """Their layout: float32 constants for float32 activations (bfloat16 ones rounded every
    scale and shift: densenet121's float32 self-check lost most at its standalone BNs)."""
    return TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT,
                        "float32" if dtype == "float32" else "bfloat16")


RESIDENT = "(per-channel constants)"

_resident_cache: dict[int, tuple[Graph, int, tuple[tuple[str, int], ...], int]] = {}


def resident_constant_buffers(graph: Graph, banks: int) -> list[tuple[str, int]]:
    """(name, bytes per bank) of every per-channel constant buffer the built model holds in L1,
    in build (layer) order. Measured: timm dpn68's 27 batch_norm layers, 54 buffers of 2048 B
    per bank, were the 110,592 B every step of its real run held beyond the plan's sums.
    Cached per graph: the planner asks at every layer, the address model once (one walk of the
    node list, whatever the depth: tests/test_adversarial.py)."""
    return list(_resident(graph, banks)[2])


def resident_constant_bytes(graph: Graph, banks: int) -> int:
    """Their sum per bank."""
    return _resident(graph, banks)[3]


def _resident(graph: Graph, banks: int):
    hit = _resident_cache.get(id(graph))
    if hit is None or hit[0] is not graph or hit[1] != banks:
        out = []
        for n in graph.nodes:
            k = RESIDENT_CONSTANTS.get(n.op, 0)
            b = bank_bytes(per_channel_constant(n.precision.activations), 1, n.shape.c,
                           banks=banks) if k else 0
            out += [(f"const:{n.name}:{j}", b) for j in range(k)]
        hit = (graph, banks, tuple(out), sum(b for _, b in out))
        _resident_cache[id(graph)] = hit
    return hit


def others_alive(i: int, node: Node, held: Mapping[str, TensorLayout], last: Mapping[str, int],
                 keep: Iterable[str], graph: Graph,
                 received: Sequence[TensorLayout] | None, banks: int) -> dict[str, int]:
    """Bytes per bank of every tensor other than ``node``'s operands that is alive in L1 while
    layer ``i`` runs. ``held``: every tensor produced before ``i`` (graph inputs, constants,
    earlier layers) as it is held then (spilled ones in DRAM). ``received``: the layouts the op
    receives (after adapters), when known: an operand whose adapter made a copy is counted here
    too, since the original stays alive until its own last use."""
    keep = set(keep)
    own = set(node.inputs)
    if received:
        own = {s for s, got in zip(node.inputs, received) if held.get(s) == got}
        # an original whose copy is this op's input, freed right after its adapters
        own |= {s for s, got in zip(node.inputs, received)
                if held.get(s) != got and freed_after_adapters(s, i, node, last, keep)}
    elif received is not None:
        own = set()
    out: dict[str, int] = {}
    for name, t in held.items():
        if name in own or name in node.tensors:
            continue
        if last.get(name, -1) < i and name not in keep:
            continue
        b = bank_bytes(t, *tensor_rows_c(graph, name), banks=banks)
        if b:
            out[name] = b
    # the node's own constants are its operands (its estimate counts them)
    resident = resident_constant_bytes(graph, banks) - RESIDENT_CONSTANTS.get(node.op, 0) * \
        bank_bytes(per_channel_constant(node.precision.activations), 1, node.shape.c, banks=banks)
    if resident:
        out[RESIDENT] = resident
    return out


@dataclass(frozen=True)
class StepL1:
    """One executor step's L1 per core as ttnn's timeline counts it (module docstring):
    ``own`` its buffers and CBs (inputs as it holds them, outputs, halo, CBs), of which ``cbs``
    circular buffers and ``first`` what it allocates before its first program starts; ``carry``
    the CBs the previous program still holds then; ``others`` every other tensor alive in L1."""
    kind: str                   # "layer", "adapter" or "spill"
    name: str
    own: int
    cbs: int
    first: int
    carry: int
    others: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.others.values()) + max(self.own, self.first + self.carry)

    @property
    def carried(self) -> bool:
        """The previous program's CBs make this step's peak (not its own)."""
        return self.first + self.carry > self.own


def layer_cbs(layer) -> int:
    """A planned layer's circular-buffer bytes per core (what the next step inherits). A
    DRAM-sliced conv2d's last program writes its last slice into the DRAM output, with a few
    kB of CBs (measured on the mock device): nothing worth carrying; the global pool's last
    program is its reduce (or the tilize after it)."""
    if layer.node.op == "conv2d" and layer.config.slice:
        return 0
    if layer.node.op == "global_avg_pool":      # three programs; the last one's CBs
        return global_pool_last_cbs(layer.output, tuple(layer.config.kernel))
    # a pool's halo program (its first) releases its own CBs when the pool program starts
    return layer_parts(layer)["cb"] - int((layer.config.l1_parts or {}).get("halo_cb", 0))


def layer_first(layer) -> int:
    """What a layer allocates before its first program releases the previous one's CBs: all but
    its CBs; a conv that first runs a halo, or makes its own copy of the input (tilize,
    reshard, interleaved_to_sharded), allocates its output only after that program (measured on
    the mock device; pools allocate their output first)."""
    parts = layer_parts(layer)
    first = int(layer.l1_bytes_per_core) - parts["cb"]
    raw = layer.config.l1_parts or {}
    if layer.node.op == "conv2d" and (parts["halo"] > 0 or "tilized_input" in raw or
                                      "input_copy" in raw):
        first -= parts["outputs"]
    return first


#: the widest row (tiles) an interleaved tilize holds whole in its CBs (measured: 32 does, 33 not)
INTERLEAVED_TILIZE_MAX_TILES = 32


def adapter_cbs(a, rows: int, c: int) -> int:
    """CBs an adapter's program leaves for the next step (of a [rows, c] tensor), measured on the
    mock device (ttnn 0.81.1):

    * an untilize (``to_layout`` to row major) double-buffers a row of the core's channel tiles
      (2 x 4 bf16 tiles for 128-channel shards);
    * a tilize (``to_layout`` to tile) of a block-sharded row-major tensor that needs padding
      (rows or channels not whole tiles) runs ``tilize_with_val_padding``, whose sharded factory
      takes width-sharded inputs only (``can_use_tilize_with_val_padding_sharded_factory``); the
      default factory's two CBs each hold a row of the *whole* tensor's tiles, input and output
      data format (``tilize_with_val_padding_multi_core_default_program_factory.cpp``):
      [196, 128] 8 x 2 shards (128, 32) bf16: 2 x 8192 B; [196, 512] (64, 128): 2 x 32,768;
      to bfloat8_b: 8192 + 4352; from float32: 2 x 16,384;
    * other sharded tilizes leave none of their own: tile-aligned ones run the sharded tilize
      factory, whose CBs alias the input and output shards; a height-sharded one that needs
      padding is a pad (128-256 B CBs) then that tilize;
    * reshards and memory moves read and write the tensors' own buffers or a few tiles.

    * a tilize from interleaved memory (L1 or DRAM; to interleaved L1) leaves two CBs of a row
      of the tensor's tiles, input and output data format, up to 32 tiles wide: 128 channels
      2 x 8192 B, 256 2 x 16,384, 1024 2 x 65,536, 21 2 x 2048, to bfloat8_b 8192 + 4352
      (196 and 224 rows alike). Wider rows take the block factory, measured 2-4 tiles a CB
      (1056 and 1536 channels 3 at 196 rows, 1536 2 at 64 rows, 2048 and 3072 4): counted as
      its lower bound, 2 tiles a CB."""
    if a.kind != "to_layout":
        return 0
    per_row = -(-c // TILE)
    if a.after.layout == "row_major":
        m = a.before.memory if a.before.memory.sharded else a.after.memory
        width = m.shard_shape[1] if m.sharded else c
        return 2 * -(-width // TILE) * tile_bytes("bfloat16")
    padded = rows % TILE or c % TILE
    if not a.before.memory.sharded and not a.after.memory.sharded:
        tiles = per_row if per_row <= INTERLEAVED_TILIZE_MAX_TILES else 2
        return tiles * (tile_bytes(a.before.dtype) + tile_bytes(a.after.dtype))
    if a.before.memory.memory_layout == BLOCK and padded:
        return per_row * (tile_bytes(a.before.dtype) + tile_bytes(a.after.dtype))
    return 0


class _Sums:
    """The L1 sums fed ``plan_walk`` events: one ``StepL1`` per adapter, layer and spill.
    ``held``: every tensor produced so far as it is held (spilled ones in DRAM), updated as the
    layers run; ``carry``: the CBs the previous program still holds."""

    def __init__(self, graph: Graph, last: Mapping[str, int], keep: Iterable[str],
                 held: dict[str, TensorLayout], carry: int, banks: int, node: Node | None = None):
        self.g, self.last, self.keep, self.banks = graph, last, set(keep), banks
        self.node = node        # the node the planner plans (else each layer's own)
        self.held, self.carry = held, carry
        self.steps: list[StepL1] = []
        self.i = -1
        self.alive: dict[str, int] = {}
        self.temps: dict[int, tuple[str, int]] = {}     # operand -> (its latest copy, bytes)

    def feed(self, ev: pw.Event) -> None:
        if ev.i != self.i:
            self._begin(ev)
        if isinstance(ev, pw.Adapt):
            self._adapter(ev)
        elif isinstance(ev, pw.FreeOriginal):
            self.alive.pop(ev.tensor, None)
        elif isinstance(ev, pw.Run):
            self._layer(ev)
        elif isinstance(ev, pw.SpillTensor):
            self._spill(ev)
        # reallocations move a tensor without changing the sums; the other frees are the
        # ``last`` / ``keep`` rules ``others_alive`` applies

    def _begin(self, ev: pw.Event) -> None:
        """Layer ``ev.i``'s first event: what is alive around it (its operands too)."""
        self.i = ev.i
        for name in [n for n in self.held if self.last.get(n, -1) < ev.i and n not in self.keep]:
            del self.held[name]     # freed: keeps the walk linear in depth
        node = self.node or ev.layer.node
        self.alive = others_alive(ev.i, node, self.held, self.last, self.keep, self.g,
                                  received=(), banks=self.banks)
        self.temps = {}

    def _adapter(self, ev: pw.Adapt) -> None:
        a = ev.adapter
        rows, c = tensor_rows_c(self.g, a.src)
        b = self.banks
        src_b, dst_b = bank_bytes(a.before, rows, c, b), bank_bytes(a.after, rows, c, b)
        chained = ev.operand in self.temps
        others = {k: v for k, v in self.alive.items() if not (k == a.src and not chained)}
        others.update({name: n for idx, (name, n) in self.temps.items() if idx != ev.operand})
        if chained:         # a chain: its input is the previous copy (freed after)
            src_b = self.temps[ev.operand][1]
        cbs = adapter_cbs(a, rows, c)
        self.steps.append(StepL1("adapter", ev.name, src_b + dst_b + cbs, cbs, src_b + dst_b,
                                 self.carry, others))
        self.carry = cbs
        self.temps[ev.operand] = (f"{a.edge} (copy)", dst_b)

    def _layer(self, ev: pw.Run) -> None:
        layer, node = ev.layer, self.node or ev.layer.node
        received = getattr(layer, "inputs", None)
        others = others_alive(ev.i, node, self.held, self.last, self.keep, self.g, received,
                              self.banks)
        cbs = layer_cbs(layer)
        self.steps.append(StepL1("layer", node.name, int(layer.l1_bytes_per_core), cbs,
                                 layer_first(layer), self.carry, others))
        self.carry = cbs
        self.held.update(layer.tensor_layouts())    # as planned (a split makes several)

    def _spill(self, ev: pw.SpillTensor) -> None:
        # runs before the layer's inputs are freed; writes DRAM, so it allocates no L1
        layer, sp = ev.layer, ev.spill
        alive = others_alive(ev.i, self.node or layer.node, self.held, self.last, self.keep,
                             self.g, received=(), banks=self.banks)
        for t, lay in layer.tensor_layouts().items():
            alive[t] = bank_bytes(lay, *tensor_rows_c(self.g, t), banks=self.banks)
        own = alive.pop(sp.tensor, 0)
        self.steps.append(StepL1("spill", ev.name, own, 0, 0, self.carry, alive))
        self.held[sp.tensor] = sp.to
        self.carry = 0


def layer_steps(i: int, node: Node, layer, adapters: Sequence, held: Mapping[str, TensorLayout],
                last: Mapping[str, int], keep: Iterable[str], graph: Graph,
                carry: int, banks: int) -> tuple[list[StepL1], int]:
    """The steps of layer ``i``: its adapters (``plans.Adapter``, the ones into ``node``) in the
    executor's order (``plan_walk.layer_walk``), then the layer; ``carry``: the previous step's
    CBs. Returns the steps and the CBs the next step inherits (the layer's)."""
    sums = _Sums(graph, last, keep, dict(held), carry, banks, node)
    for ev in pw.layer_walk(i, node, layer, adapters, last, sums.keep):
        sums.feed(ev)
        if isinstance(ev, pw.Run):
            break           # what follows frees; the planner asks before the layer's spills
    return sums.steps, sums.carry


def step_figures(plan) -> list[StepL1]:
    """Every step of ``plan`` in the executor's order (``plan_walk.walk``): each layer's
    adapters, the layer, the spills after it; with the final layouts and spills."""
    g = plan.graph
    keep = set(g.outputs) | set(g.constants)
    last = last_uses([pl.node for pl in plan.layers])
    sums = _Sums(g, last, keep, {**plan.input_layouts, **plan.constant_layouts}, 0,
                 plan.l1_banks)
    for ev in pw.walk(plan):
        sums.feed(ev)
    return sums.steps


def refresh(plan) -> None:
    """Set ``plan.step_l1`` and each layer's ``live_l1`` / ``live_tensors`` from the plan as it
    is now (after a change to its layers, e.g. plan_alloc's in-place ops)."""
    plan.step_l1 = step_figures(plan)
    by_name = {pl.name: pl for pl in plan.layers}
    for st in plan.step_l1:
        if st.kind == "layer":
            by_name[st.name].live_l1, by_name[st.name].live_tensors = st.total, dict(st.others)
