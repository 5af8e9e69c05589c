"""The planner's result: every layer with its resolved layouts, and the adapters between them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..arch import DEFAULT, DEFAULT_GRID, get as arch_get
from ..language.graph import Graph, Node
from .layout import TensorLayout
from .plan_config import PlanConfig


@dataclass
class Adapter:
    """A layout conversion inserted on one edge: ``src`` tensor feeding input ``index`` of ``dst``.

    ``kind`` is the ttnn call that performs it: "sharded_to_interleaved", "interleaved_to_sharded",
    "reshard", "to_memory_config", "to_layout" or "typecast".
    """
    src: str
    dst: str
    index: int
    kind: str
    before: TensorLayout
    after: TensorLayout
    reason: str

    @property
    def edge(self) -> str:
        return f"{self.src} -> {self.dst}[{self.index}]"


@dataclass(frozen=True)
class Reallocation:
    """``ttnn.reallocate(tensor)`` right before layer ``before`` (ahead of its adapters): the
    tensor is freed and allocated again, top down, so it moves into the highest free block that
    holds it and the space it leaves joins its neighbours (TT's ResNet50 does this after the
    stem). ``plan_alloc.fit`` adds one where ttnn's allocator would refuse ``for_step``."""
    tensor: str
    before: str
    layout: TensorLayout
    moves: int                  # bytes per bank copied
    for_step: str
    problem: str                # what the allocator model found at ``for_step`` without it

    @property
    def kind(self) -> str:
        return "reallocate"

    @property
    def reason(self) -> str:
        return (f"reallocate {self.tensor} before {self.before} (moves {self.moves:,} B/core) "
                f"for {self.for_step}: {self.problem}")


@dataclass(frozen=True)
class InPlaceNote:
    """``layer`` (a binary op) writes into operand a (``output_tensor=a``, TT's ``ttnn.add_``):
    its output allocation of ``saves`` bytes per bank is what ttnn's allocator refused."""
    layer: str
    saves: int
    problem: str

    @property
    def reason(self) -> str:
        return f"in place: {self.layer} writes into operand a (saves {self.saves:,} B/core): " \
            f"{self.problem}"


@dataclass(frozen=True)
class FreedEarlyNote:
    """Conv ``layer`` frees its input ``tensor`` itself as soon as it has read it
    (``Conv2dConfig.deallocate_activation``, as TT's ResNet50 does), instead of the executor
    after it: it is the input's last reader, and the space is what ttnn's allocator needed."""
    layer: str
    tensor: str
    problem: str

    @property
    def reason(self) -> str:
        return f"deallocate_activation: {self.layer} frees {self.tensor} once read: {self.problem}"


@dataclass(frozen=True)
class ReorderNote:
    """The planner ran ``layer`` right before ``before`` (not where the spec has it), so that
    fewer tensors are alive in L1 while it runs (a remedy that moves no bytes)."""
    layer: str
    before: str

    @property
    def reason(self) -> str:
        return f"reorder: {self.layer} runs before {self.before} (fewer live tensors)"


@dataclass(frozen=True)
class BlockingNote:
    """The planner gave conv ``layer`` a smaller blocking than it needs on its own so that its
    circular buffers (``cbs`` B/core; ttnn holds them until the next program starts) leave room
    for ``for_layer`` (a remedy that moves no bytes)."""
    layer: str
    how: str            # the conv's choice, e.g. "block_sharded on 64 cores, act_block_h 64"
    cbs: int
    for_layer: str

    @property
    def reason(self) -> str:
        return (f"blocking: {self.layer} runs {self.how}, its CBs {self.cbs:,} B/core, so that "
                f"{self.for_layer} fits (ttnn frees them only when the next program starts)")


@dataclass
class PlannedLayer:
    node: Node
    inputs: list[TensorLayout]            # what the op receives (after adapters), operand order
    output: TensorLayout
    l1_bytes_per_core: int                # estimate: input/output shards + weights + CBs
    # What the planner decided for the op (its typed, frozen config: ``OpDef.config`` of
    # ttmodels/ops/<op>/, e.g. a conv's shard_layout, act_block_h, matmul program config). A
    # mapping of the config's fields is accepted (plans written by hand) and converted.
    config: PlanConfig = field(default_factory=PlanConfig)
    # With every other tensor alive in L1 while it runs and the CBs the previous program still
    # holds (liveness.py, ttnn's accounting): the total per core, and the
    # other tensors by name with their bytes per core.
    live_l1: int | None = None
    live_tensors: dict[str, int] = field(default_factory=dict)
    # A split's named outputs (``Node.outputs``): tensor name -> its layout; ``output`` is then
    # the first of them. Empty for single-output ops.
    outputs: dict[str, TensorLayout] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.config, PlanConfig):
            from .. import ops
            d = ops.REGISTRY.get(self.node.op)
            cls = d.config if d is not None else PlanConfig
            self.config = cls.from_attrs(self.config, layer=self.node.name)

    @property
    def name(self) -> str:
        return self.node.name

    def tensor_layouts(self) -> dict[str, TensorLayout]:
        """Every tensor this layer produces and its layout (one: the layer's name)."""
        return dict(self.outputs) if self.outputs else {self.node.name: self.output}


@dataclass
class Plan:
    graph: Graph
    layers: list[PlannedLayer]
    adapters: list[Adapter]
    input_layouts: dict[str, TensorLayout]    # how each graph input is fed to the first ops
    constant_layouts: dict[str, TensorLayout]
    arch: str = "wormhole_b0"
    grid: tuple[int, int] = DEFAULT_GRID
    # The allocator's L1 bank per core for the device options the backend opens with
    # (l1.l1_bank_bytes: 1,360,544 B on Wormhole with l1_small_size=32768): the planner's budget.
    l1_budget: int = DEFAULT.l1_bank_no_l1_small - 32768
    spills: list = field(default_factory=list)     # liveness.Spill, in execution order
    reordered: list = field(default_factory=list)  # ReorderNote: layers moved by the planner
    blockings: list = field(default_factory=list)  # BlockingNote: convs blocked for the next op
    # address remedies (plan_alloc.fit): tensors moved by ttnn.reallocate, and binary ops made
    # in place because the allocator's free blocks, not its free bytes, fell short
    reallocations: list = field(default_factory=list)   # Reallocation, in execution order
    in_place: list = field(default_factory=list)        # InPlaceNote
    freed_early: list = field(default_factory=list)     # FreedEarlyNote (deallocate_activation)
    # plan_alloc.StepAddr of every step (the allocator model's figures), set by the planner
    step_addr: list = field(default_factory=list)
    # what the address model asked the planner for (plan_alloc.fit): (tensor, layer) spills,
    # and (conv, CB bytes) caps on a conv's own circular buffers
    spill_hints: frozenset = frozenset()
    cap_hints: frozenset = frozenset()
    l1_small_size: int = 32768
    # Data parallel: the graph (and every layout above) is for ONE chip's batch; the mesh runs
    # a replica per chip (ttmodels.runtime.mesh.MeshSpec), None for a single chip.
    mesh: Any = None
    system: str = "n150"        # the system named (ttmodels.runtime.mesh.DEVICES, or "RxC")
    # liveness.StepL1 of every step the executor runs (adapters, layers, spills), in its order:
    # the L1 per core ttnn's timeline counts at each (set by the planner)
    step_l1: list = field(default_factory=list)
    # what ttnn said about every step (ttnn_oracle.TtnnRecord: confirmed, rejected, differs, or
    # unconfirmed when the oracle is off), set by plan_graph
    ttnn: Any = None
    # conv -> why the device-time estimate picked its layout among those that fit (its µs and
    # the runner-up's: ops/conv2d/cost.py fastest_first)
    choices: dict = field(default_factory=dict)

    @property
    def l1_bank_bytes(self) -> int:
        return self.l1_budget

    @property
    def l1_banks(self) -> int:
        """The L1 banks an interleaved tensor spreads over: its chip's."""
        return arch_get(self.arch).l1_banks

    @property
    def num_chips(self) -> int:
        return 1 if self.mesh is None else self.mesh.num_chips

    @property
    def per_chip_batch(self) -> int:
        inputs = list(self.graph.inputs.values())
        return inputs[0].n if inputs else 1

    @property
    def batch_size(self) -> int:
        """The whole batch a model built from this plan takes (per-chip batch x chips)."""
        return self.per_chip_batch * self.num_chips

    def layer(self, name: str) -> PlannedLayer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def spills_after(self, name: str) -> list:
        return [s for s in self.spills if s.after == name]

    def adapters_into(self, name: str) -> list[Adapter]:
        return [a for a in self.adapters if a.dst == name]

    @property
    def estimate(self):
        """The plan's estimated device time per step and its samples/s (``estimate.Estimate``:
        ``device_us``, ``fps``, ``by_op``, ``steps``; the model: docs/estimate.md)."""
        from .estimate import estimate
        return estimate(self)

    def to_dict(self) -> dict[str, Any]:
        from .plan_format import plan_to_dict
        return plan_to_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        from .plan_format import plan_table
        return plan_table(self)

    def plot(self, path, *, verify_records=None, title: str | None = None,
             l1_bank_bytes: int | None = None):
        """Write a PNG of the plan: L1 per core per layer, output layouts, adapters
        (``plan_plot.plot_plan``). Returns the PlotData drawn."""
        from .plan_plot import plot_plan
        return plot_plan(self, path, verify_records=verify_records, title=title,
                         l1_bank_bytes=l1_bank_bytes)
