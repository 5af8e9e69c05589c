"""How long a plan runs on the device: a time per step (layers, adapters, spills,
reallocations) and the total, from what the plan knows. No card is needed and none is asked.

The model (docs/estimate.md):

* a step runs one or more device programs (``Phase``); a program costs a fixed launch
  (``PROGRAM_CYCLES``) plus the slowest of its compute, its NoC traffic and its DRAM traffic,
  which the kernels overlap (reader, compute and writer are separate RISC-Vs);
* compute: the FPU's ``Arch.fpu_mul_adds_per_cycle`` per core at LoFi, times the fidelity's
  phases (tt-metal's op performance models, ``ttnn/core/operation.cpp``
  ``fidelity_multiplier``: LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4), on the MACs each core does under
  the op's own parallel config (tile padding included: ``ops/<op>/cost.py``), divided by
  ``FPU_EFFICIENCY``, the one fitted constant;
* SFPU: an activation's cycles per output tile (the activation table's count of its kernel,
  ``ops/activations.py`` ``sfpu_tile_cycles``), on the math thread after the FPU's block, so
  added to the compute and not divided by ``FPU_EFFICIENCY`` (that constant is the FPU's);
  an activation the op cannot fuse runs as its own program (``eltwise_sfpu``);
* data movement: ttnn's own NoC model (``noc_model``, ported from the wheel's
  ``common.cpp``), and DRAM bytes at ``Arch.dram_bytes_per_s``.

Each op's terms are its package's ``cost.py`` (``cost(layer, env) -> tuple[Phase, ...]``);
an op without one is costed as a data movement from its inputs to its output.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from ..arch import Arch, get as arch_get
from ..language.graph import TILE, TensorShape, round_up
from .layout import BYTES_PER_TILE, TILE_LAYOUT, TensorLayout, bytes_per_element
from .noc_model import MAX_TRANSACTION, Side, column, tm_cycles, transfer_cycles

# The one fitted constant: the fraction of the FPU's peak that conv and matmul kernels reach.
# Fitted on ONE figure, TT's published Wormhole device-kernel throughput of its hand-tuned
# ResNet50 at batch 16 (tt-metal models/demos/wormhole/resnet50/tests/
# test_perf_device_resnet50.py: expected_perf 6090.0 samples/s), reproduced here by
# ttmodels/configs/resnet50_tt.yaml: `python benchmarks/bench_estimate.py --fit` finds it by
# bisection; the residual on that figure is below 0.1 % (one constant, one figure). Re-fitted
# from 0.3535 when the SFPU term came in (the residual adds' fused relu is SFPU work: 0.3823),
# and again for conv2d's tilize and split reader (0.4099).
FPU_EFFICIENCY = 0.4099

# A program's fixed cost: its first DRAM read and first L1 write (the NoC model's measured
# first-transaction latencies, common.cpp get_cycles_for_transaction_size: 358 + 256 cycles on
# Wormhole). Not fitted.
PROGRAM_CYCLES = {0: 358 + 256, 1: 529 + 404}

# tt-metal OpPerformanceModel::fidelity_multiplier (ttnn/core/operation.cpp)
FIDELITY_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}

# bytes per element of a row-major tensor (block floats are stored as bfloat16 rows)
ROW_MAJOR_BPE = {"bfloat16": 2, "float32": 4, "bfloat8_b": 2, "bfloat4_b": 2, "uint32": 4}


@dataclass(frozen=True)
class Phase:
    """One device program of a step: per core, its compute cycles (FPU at the kernel's
    fidelity, before ``FPU_EFFICIENCY``), its NoC cycles (``noc_model``), and the chip's DRAM
    bytes it moves."""
    compute_cycles: float = 0.0
    noc_cycles: float = 0.0
    dram_bytes: float = 0.0
    what: str = ""
    sfpu_cycles: float = 0.0     # activations on the SFPU (not FPU work: no FPU_EFFICIENCY)
    tilize_cycles: float = 0.0   # conv2d's im2col tilize on the compute core (TT's cycles/tile)


@dataclass(frozen=True)
class StepTime:
    kind: str            # "layer" | "adapter" | "spill" | "reallocate"
    name: str            # the layer, the adapter's edge, the spilt / moved tensor
    op: str              # the layer's op, or the step's ttnn call
    us: float
    compute_us: float
    movement_us: float
    programs: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "op": self.op,
                "device_us": round(self.us, 3), "compute_us": round(self.compute_us, 3),
                "movement_us": round(self.movement_us, 3), "programs": self.programs}


@dataclass(frozen=True)
class Estimate:
    """A plan's estimated device time: every step in execution order, and the samples/s of the
    whole batch (all chips of a mesh run their replicas at once)."""
    steps: tuple[StepTime, ...]
    samples: int
    arch: str
    constants: dict = field(default_factory=dict)

    @property
    def device_us(self) -> float:
        return sum(s.us for s in self.steps)

    @property
    def fps(self) -> float:
        return self.samples / (self.device_us * 1e-6) if self.device_us > 0 else float("inf")

    @property
    def by_op(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.steps:    # a layer's op, an adapter's ttnn call, "spill", "reallocate"
            out[s.op] = out.get(s.op, 0.0) + s.us
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def layer_us(self) -> dict[str, float]:
        """Layer name -> its own step's µs (adapters, spills and reallocations are their own)."""
        return {s.name: s.us for s in self.steps if s.kind == "layer"}

    def to_dict(self) -> dict[str, Any]:
        return {"device_us": round(self.device_us, 3), "fps": round(self.fps, 1),
                "by_op": {k: round(v, 3) for k, v in self.by_op.items()},
                "samples": self.samples, "constants": dict(self.constants),
                "steps": [s.to_dict() for s in self.steps if s.kind != "layer"]}

    def summary(self) -> str:
        return (f"estimated device time {self.device_us:,.0f} us for {self.samples} "
                f"sample{'s' if self.samples != 1 else ''}: "
                f"{self.fps:,.0f} samples/s (model: docs/estimate.md)")


# ---- what cost functions read --------------------------------------------------------------

@dataclass(frozen=True)
class CostEnv:
    """What an op's ``cost`` reads besides its layer: the chip, and the plan's graph."""
    arch: Arch
    plan: Any

    @property
    def col(self) -> int:
        return column(self.arch.name)

    @property
    def grid_cores(self) -> int:
        return self.arch.cores

    @property
    def noc_count(self) -> int:
        """common_tm_bw_model's num_nocs: grid rows + grid columns."""
        return self.arch.grid[0] + self.arch.grid[1]

    def shape(self, tensor: str) -> TensorShape:
        return self.plan.graph.shape_of(tensor)

    def fidelity(self, layer) -> int:
        return FIDELITY_PHASES.get(layer.node.precision.math_fidelity, 2)

    def fpu_cycles(self, macs: float, fidelity: int) -> float:
        """Cycles of ``macs`` multiply-accumulates on one core's FPU (tt-metal's op
        performance model: ``2 * MACs / mul_adds_per_cycle * fidelity_multiplier``)."""
        return math.ceil(2 * macs / self.arch.fpu_mul_adds_per_cycle) * fidelity

    def side(self, layout: TensorLayout, rows: int, c: int) -> Side:
        """One tensor as ``common_tm_bw_model`` sees it: bytes as stored, transaction size (a
        tile, or a row / shard row; height-sharded L1 row-major: several rows up to 2 KB)."""
        m = layout.memory
        tiled = layout.layout == TILE_LAYOUT
        if tiled:
            nbytes = round_up(rows, TILE) * round_up(c, TILE) * bytes_per_element(layout.dtype)
            trans = BYTES_PER_TILE.get(layout.dtype, 2048)
        else:
            bpe = ROW_MAJOR_BPE.get(layout.dtype, 2)
            nbytes = rows * c * bpe
            width = m.shard_shape[1] if m.sharded and m.shard_shape else c
            trans = width * bpe
            if m.sharded and m.buffer == "l1" and m.memory_layout == "height_sharded" \
                    and m.shard_shape:
                trans = min(m.shard_shape[0] * trans, MAX_TRANSACTION)
        cores = (m.num_cores or m.grid[0] * m.grid[1]) if m.sharded and m.grid else None
        return Side(nbytes, int(trans), m.buffer == "dram", cores)

    def move(self, src: Side, dst: Side) -> float:
        return tm_cycles(src, dst, grid_cores=self.grid_cores, noc_count=self.noc_count,
                         col=self.col, clock_hz=self.arch.clock_hz)

    def local_cycles(self, size: int, count: float, *, read: bool = True) -> float:
        return transfer_cycles(size, count, dram=False, local=True, read=read, col=self.col,
                               clock_hz=self.arch.clock_hz)

    def remote_cycles(self, size: int, count: float, *, read: bool = True) -> float:
        return transfer_cycles(size, count, dram=False, local=False, read=read, col=self.col,
                               clock_hz=self.arch.clock_hz)


def movement_phase(env: CostEnv, srcs: list[tuple[TensorLayout, TensorShape]],
                   dst: tuple[TensorLayout, TensorShape], what: str) -> Phase:
    """A program that reads ``srcs`` and writes ``dst`` (common_tm_bw_model; several inputs
    are read one after the other)."""
    dl, ds = dst
    d = env.side(dl, ds.rows, ds.c)
    sides = [env.side(sl, ss.rows, ss.c) for sl, ss in srcs]
    # several operands (a binary op) read as one stream of their summed bytes
    cores = {s.cores for s in sides}
    src = Side(sum(s.bytes for s in sides), sides[0].transaction, any(s.dram for s in sides),
               cores.pop() if len(cores) == 1 else None)
    cycles = env.move(src, d)
    dram = sum(s.bytes for s in sides if s.dram) + (d.bytes if d.dram else 0.0)
    return Phase(noc_cycles=cycles, dram_bytes=dram, what=what)


def tiles_per_core(layout: TensorLayout, shape: TensorShape, env: CostEnv) -> float:
    """Output tiles one core computes: its shard's, else the tensor's spread over the grid."""
    m = layout.memory
    if m.sharded and m.shard_shape:
        sh, sw = m.shard_shape
        return math.ceil(sh / TILE) * math.ceil(sw / TILE)
    tiles = math.ceil(shape.rows / TILE) * math.ceil(shape.c / TILE)
    return math.ceil(tiles / max(1, min(env.grid_cores, tiles)))


def activation_split(layer) -> tuple[str | None, str | None, str]:
    """(fused activation, activation run after the op, where the fused one runs) of a layer:
    ``activations.op_split`` by the op's kind; a standalone unary op is its own activation."""
    from ..ops import activations as A
    node = layer.node
    if node.op in A.ACTIVATIONS:
        from ..ops.unary import unary_activation
        return None, unary_activation(node.op, dict(node.attrs)), "standalone"
    act = node.attrs.get("activation")
    cfg = layer.config
    if node.op == "linear" or (node.op == "conv2d" and (
            getattr(cfg, "is_mm_conv", False) or getattr(cfg, "lowering", None) == "linear")):
        where = "matmul"
    elif node.op in ("conv2d", "conv_transpose2d"):
        where = "conv"
    else:
        where = "binary"
    fused, later = A.op_split(act, where) if act else (None, None)
    return fused, later, where


def fused_sfpu_cycles(layer, tiles: float) -> float:
    """SFPU cycles of the layer's fused activation over ``tiles`` output tiles of one core."""
    from ..ops.activations import sfpu_tile_cycles
    fused, _, where = activation_split(layer)
    return tiles * sfpu_tile_cycles(fused, where) if where != "standalone" else 0.0


def generic_cost(layer, env: CostEnv) -> tuple[Phase, ...]:
    """An op without a ``cost.py``: a data movement from its inputs to its output (and its
    fused activation's SFPU time over the output tiles it writes)."""
    srcs = [(lay, env.shape(t)) for lay, t in zip(layer.inputs, layer.node.inputs)
            if t in env.plan.graph.inputs or _is_node(env, t)]
    p = movement_phase(env, srcs or [(layer.output, layer.node.shape)],
                       (layer.output, layer.node.shape), layer.node.op)
    sfpu = fused_sfpu_cycles(layer, tiles_per_core(layer.output, layer.node.shape, env))
    return (replace(p, sfpu_cycles=sfpu) if sfpu else p,)


def activation_phases(layer, env: CostEnv) -> tuple[Phase, ...]:
    """The SFPU program of a standalone activation op, or of the activation an op cannot fuse
    (run after it in the same layer): the output read and written locally in place of the
    data movement a unary op's generic cost is, plus its SFPU cycles per tile."""
    from ..ops.activations import sfpu_tile_cycles
    _, act, where = activation_split(layer)
    if act is None:
        return ()
    out, shape = layer.output, layer.node.shape
    p = movement_phase(env, [(out, shape)], (out, shape), act)
    return (replace(p, sfpu_cycles=tiles_per_core(out, shape, env) *
                    sfpu_tile_cycles(act, "standalone")),)


def _is_node(env: CostEnv, t: str) -> bool:
    try:
        env.plan.graph.producer(t)
        return True
    except KeyError:
        return False


_COST: dict[str, Any] = {}


def op_cost(op: str):
    """``cost`` of the op's package's ``cost`` module, or ``generic_cost``."""
    if op not in _COST:
        from .. import ops
        d = ops.REGISTRY.get(op)
        fn = generic_cost
        if d is not None:
            try:
                fn = importlib.import_module(f"{d.package}.cost").cost
            except ModuleNotFoundError:
                fn = generic_cost
        _COST[op] = fn
    return _COST[op]


# ---- the walk ------------------------------------------------------------------------------

def plan_steps(plan) -> Iterator[tuple[str, Any]]:
    """The executor's device steps in order, as (kind, object): the shared walk's
    (``plan_walk.walk``) reallocations, adapters, layers and spills; its frees and renames cost
    no device time."""
    from .plan_walk import Adapt, Reallocate, Run, SpillTensor, walk
    for ev in walk(plan):
        if isinstance(ev, Reallocate):
            yield "reallocate", ev.reallocation
        elif isinstance(ev, Adapt):
            yield "adapter", ev.adapter
        elif isinstance(ev, Run):
            yield "layer", ev.layer
        elif isinstance(ev, SpillTensor):
            yield "spill", ev.spill


def _step_phases(kind: str, obj, env: CostEnv) -> tuple[str, str, tuple[Phase, ...]]:
    if kind == "layer":
        _, _, where = activation_split(obj)
        if where == "standalone":      # its one program: the SFPU over its data movement
            return obj.name, obj.node.op, activation_phases(obj, env)
        return obj.name, obj.node.op, (*op_cost(obj.node.op)(obj, env),
                                       *activation_phases(obj, env))
    if kind == "adapter":
        shape = env.shape(obj.src)
        return obj.edge, obj.kind, (movement_phase(env, [(obj.before, shape)],
                                                   (obj.after, shape), obj.kind),)
    if kind == "spill":
        shape = env.shape(obj.tensor)
        return obj.tensor, "spill", (movement_phase(env, [(obj.before, shape)],
                                                    (obj.to, shape), "spill"),)
    # reallocate: the tensor's bytes per bank copied within L1 (read and write, local)
    n = math.ceil(obj.moves / MAX_TRANSACTION)
    cyc = env.local_cycles(MAX_TRANSACTION, n) + env.local_cycles(MAX_TRANSACTION, n, read=False)
    return obj.tensor, "reallocate", (Phase(noc_cycles=cyc, what="reallocate"),)


def phase_us(p: Phase, env: CostEnv, efficiency: float) -> tuple[float, float, float]:
    """(total, compute, movement) µs of one program."""
    clk = env.arch.clock_hz
    compute = (p.compute_cycles / efficiency + p.sfpu_cycles + p.tilize_cycles) / clk
    movement = max(p.noc_cycles / clk, p.dram_bytes / env.arch.dram_bytes_per_s)
    fixed = PROGRAM_CYCLES[env.col] / clk
    return (fixed + max(compute, movement)) * 1e6, compute * 1e6, movement * 1e6


def step_time(kind: str, obj, env: CostEnv, efficiency: float = FPU_EFFICIENCY) -> StepTime:
    name, op, phases = _step_phases(kind, obj, env)
    tot = comp = mov = 0.0
    for p in phases:
        t, c, m = phase_us(p, env, efficiency)
        tot, comp, mov = tot + t, comp + c, mov + m
    return StepTime(kind, name, op, tot, comp, mov, len(phases))


def estimate(plan, *, efficiency: float = FPU_EFFICIENCY) -> Estimate:
    """The plan's estimated device time, step by step."""
    env = CostEnv(arch_get(plan.arch), plan)
    steps = tuple(step_time(k, o, env, efficiency) for k, o in plan_steps(plan))
    return Estimate(steps, plan.batch_size, plan.arch,
                    {"fpu_efficiency": efficiency,
                     "program_cycles": PROGRAM_CYCLES[env.col]})
