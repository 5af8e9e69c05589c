"""A plan's L1 by address: the executor's allocation order run through ttnn's allocator model.

Sums (``liveness``) say whether a step's bytes fit the bank; they cannot say whether they fit
*where the free space is*. ttnn's allocator (``l1_alloc``) is deterministic, so given the order
in which buffers are allocated and freed, every address follows. That order is:

* the executor's (``runtime.Executor.run``), as ``plan_walk.walk`` yields it: each layer's
  reallocations, its adapters in operand order (a chain frees its previous copy), the original
  freed right after its copy when that is its last use, the layer, its spills, then the adapter
  copies, then every tensor whose last reader it was;
* each op's own, inside a step: measured on the mock device for the ops the shipped models use
  (``op_events``; the table in docs/layouts.md): a conv or pool with a halo allocates the halo
  buffer, frees it, allocates it again (its second pass), then the output, and frees the halo
  after its program; a 1x1 conv that tilizes its input first makes two copies (the first freed
  before the output), one that only shards it one; everything else allocates its output.

``simulate(plan)`` walks the plan in that order and returns, per step, the allocator state
right after the step's op (before the executor frees what it no longer needs: what
``ttmodels verify`` reads from ttnn at the same point), the lowest L1 buffer while its programs
ran, where its CBs end, and the first failure: an allocation no free block holds (out of memory
by fragmentation or by sum) or CBs that run into the lowest L1 buffer (the clash ttnn raises
when it places a program). ``Plan.remedies`` (reallocations, in-place ops) are part of the walk,
so the planner can try one and see its effect before committing to it (``fit``).

Pure: plan data in, figures out; no ttnn.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import l1_alloc
from ..arch import WORMHOLE_B0
from ..arch import get as get_arch
from . import liveness as lv
from . import plan_walk as pw
from .l1 import bank_bytes, l1_region, layer_parts, slice_input_copy_bytes
from .layout import HEIGHT, INTERLEAVED, MemSpec
from .plans import FreedEarlyNote, InPlaceNote, Reallocation

ALLOC, FREE, PROGRAM = "alloc", "free", "program"
# ("room", need, events, otherwise): ``events`` when ``need`` bytes fit the L1 free at that
# point (``room_choice``), else ``otherwise``
ROOM = "room"


@dataclass(frozen=True)
class StepAddr:
    """One executor step by address (module docstring). Bytes per bank; addresses absolute."""
    kind: str                       # "layer" | "adapter" | "spill" | "reallocate"
    name: str
    allocated: int
    largest_free: int
    lowest: int | None              # lowest L1 buffer while its programs ran
    cb_end: int                     # where its programs' CBs end (base + the planned CBs)
    failure: str | None = None      # why ttnn's allocator would refuse it (first problem)
    need: int | None = None         # the allocation that failed, bytes per bank
    short: int = 0                  # by how much: the request less the largest free block
                                    # then, or how far the CBs run into the lowest buffer

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class _Walk:
    alloc: l1_alloc.L1Allocator
    addr: dict[object, int] = field(default_factory=dict)     # buffer key -> address
    steps: list[StepAddr] = field(default_factory=list)

    def allocate(self, key: object, size: int) -> tuple[str, int] | None:
        """None, or (why, by how many bytes) the allocation fails."""
        if size <= 0:
            return None
        try:
            self.addr[key] = self.alloc.allocate(size)
        except l1_alloc.OutOfMemory as e:
            return (f"out of memory: {e.size:,} B per bank wanted, largest free block "
                    f"{e.state.largest_free:,} B (free {e.state.free:,} B)",
                    e.size - e.state.largest_free)
        return None

    def free(self, key: object) -> None:
        a = self.addr.pop(key, None)
        if a is not None:
            self.alloc.free(a)


def tensor_bank_bytes(graph, name: str, layout, banks: int) -> int:
    return bank_bytes(layout, *lv.tensor_rows_c(graph, name), banks=banks)


def op_events(pl, graph, banks: int = WORMHOLE_B0.l1_banks) -> list[tuple]:
    """The L1 buffers layer ``pl`` allocates and frees itself, in order, with ``("program",
    cb_bytes)`` where a program places its CBs; its outputs are keys ``"out:<tensor>"``."""
    raw = dict(pl.config.l1_parts or {})
    outs = [(f"out:{t}", tensor_bank_bytes(graph, t, lay, banks))
            for t, lay in pl.tensor_layouts().items()]
    cbs = layer_parts(pl)["cb"]
    op = pl.node.op
    # ``banks``: the L1 banks (worker cores) an interleaved tensor spreads over
    alloc_outs = [(ALLOC, k, b) for k, b in outs]
    if op in ("add", "multiply", "subtract") and getattr(pl.config, "inplace", False):
        return [(PROGRAM, cbs)]         # the output is operand a's buffer
    if op == "concat":
        from ..ops.concat import l1 as CL
        channels = [lv.tensor_rows_c(graph, s)[1] for s in pl.node.inputs]
        if CL.untilizes(list(pl.inputs), channels, pl.output):
            return _unaligned_concat_events(pl, graph, banks, alloc_outs, cbs)
        copies = CL.layout_copies(list(pl.inputs), lv.tensor_rows_c(graph, pl.name)[0],
                                  channels, banks)
        if any(copies):
            # measured: the inputs of the other layout converted (in their memory) before the
            # output, freed after the program
            conv = [(i, b) for i, b in enumerate(copies) if b]
            return [(ALLOC, f"to_layout{i}", b) for i, b in conv] + alloc_outs + \
                [(PROGRAM, cbs)] + [(FREE, f"to_layout{i}") for i, _ in conv]
    halo = int(raw.get("halo", 0))
    sliced = bool(getattr(pl.config, "slice", None))
    if sliced and op in ("conv2d", "max_pool2d", "avg_pool2d"):
        # measured (mock n150, 0.81.1): each DRAM slice copies its input slice into L1 shards
        # beside a first halo pass, frees both, then the halo again and the output slice, both
        # freed at the slice's end. Every slice leaves L1 as it found it, so one slice of the
        # largest figures stands for all (the estimate's parts are the largest slice's)
        out = int(raw.get("output", 0))
        halo, out, cbs = _slice_parts_as_ttnn(raw, halo, out, cbs)
        return [(ALLOC, "in_copy", slice_input_copy(pl)), (ALLOC, "halo0", halo),
                (FREE, "in_copy"), (FREE, "halo0"), (ALLOC, "halo", halo),
                (ALLOC, "slice_out", out), (PROGRAM, cbs), (FREE, "halo"),
                (FREE, "slice_out")] + alloc_outs
    if op == "upsample" and getattr(pl.config, "pad_c", None) and raw.get("upsample_phase"):
        # measured (mock n150, 0.81.1; tests/test_op_events.py): the channel-padded bilinear
        # upsample (its pad is in DRAM) shards the padded input, haloes it, writes its padded
        # output, frees halo and copy, then the slice writes the layer's output and the padded
        # output goes
        up = int(raw["upsample_phase"])
        return [(ALLOC, "in_copy", int(raw.get("input_copy", 0))), (ALLOC, "halo", halo),
                (ALLOC, "up_out", up), (FREE, "halo"), (FREE, "in_copy")] + alloc_outs + \
            [(PROGRAM, cbs), (FREE, "up_out")]
    if op == "upsample" and halo:
        # measured: bilinear's halo before its output, freed after the program
        return [(ALLOC, "halo", halo)] + alloc_outs + [(PROGRAM, cbs), (FREE, "halo")]
    if op == "pad" and pl.inputs and pl.inputs[0].layout == "tile":
        # measured: a TILE input is untilized, padded in ROW_MAJOR, tilized back into the
        # output; both row-major copies are freed after it (ops/pad/layer.py)
        rm = [(ALLOC, "rm_in", _row_major_bank_bytes(pl, graph, pl.node.inputs[0], banks)),
              (ALLOC, "rm_pad", _row_major_bank_bytes(pl, graph, pl.name, banks))]
        return rm + alloc_outs + [(PROGRAM, cbs), (FREE, "rm_in"), (FREE, "rm_pad")]
    if op == "conv2d" and not sliced and runs_auto_matmul(pl):
        return alloc_outs + [(PROGRAM, cbs - int(raw.get("ttnn_extra_cb", 0)))]
    run = _conv_run(pl, alloc_outs, cbs) if op == "conv2d" and not sliced else \
        alloc_outs + [(PROGRAM, cbs)]
    if halo and not sliced and op in ("conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"):
        pre = []
        copy = conv_input_copy(pl, graph, banks)
        if copy and getattr(pl.config, "deallocate_activation", False):
            # measured (mock n150, 0.81.1; tests/test_conv_input_copy.py): the copy, the input
            # freed, the copy freed and made again (ttnn's move, in the same place), the first
            # halo pass beside it, both freed
            pre = [(ALLOC, "in_copy", copy), (FREE, "in:0"), (FREE, "in_copy"),
                   (ALLOC, "in_copy", copy), (ALLOC, "halo0", halo), (FREE, "in_copy"),
                   (FREE, "halo0")]
        elif copy:
            # an input in DRAM (the stem) or interleaved in L1 is first copied into the conv's
            # L1 shards beside a first halo pass (measured: tests/test_conv_input_copy.py)
            pre = [(ALLOC, "in_copy", copy), (ALLOC, "halo0", halo), (FREE, "in_copy"),
                   (FREE, "halo0")]
        elif getattr(pl.config, "deallocate_activation", False):
            # measured: the halo program runs on the first halo buffer with the input still
            # there; the input goes right after it
            pre = [(ALLOC, "halo0", halo), (PROGRAM, 0), (FREE, "in:0"), (FREE, "halo0")]
        else:
            pre = [(ALLOC, "halo0", halo), (FREE, "halo0")]
        return pre + [(ALLOC, "halo", halo)] + run + [(FREE, "halo")]
    if op == "global_avg_pool" and raw.get("reduce_phase"):
        # its middle phase makes two copies of the partial sums, the first freed first
        rp = int(raw["reduce_phase"])
        return [(ALLOC, "phase0", rp), (ALLOC, "phase1", rp), (FREE, "phase0")] + alloc_outs + \
            [(PROGRAM, cbs), (FREE, "phase1")]
    if op in ("global_avg_pool", "adaptive_avg_pool2d") and pl.config.lowering:
        # the float32 pool's ttnn.mean (ops/pool/exact_global.py), measured on the mock: at
        # batch > 1 the reshaped input, the two-stage mean's partial rows, the mean's
        # [N, 1, 1, C], free the partials, the output (the reshape back), free the rest; at
        # batch 1 the partials live around the output alone
        def alloc(k):
            return [(ALLOC, k, int(raw[k]))] if raw.get(k) else []

        def free(k):
            return [(FREE, k)] if raw.get(k) else []
        if raw.get("mean_out"):
            return alloc("reshaped_input") + alloc("partials") + alloc("mean_out") + \
                free("partials") + alloc_outs + [(PROGRAM, cbs)] + free("mean_out") + \
                free("reshaped_input")
        return alloc("partials") + alloc_outs + [(PROGRAM, cbs)] + free("partials")
    if op == "linear" and raw.get("bias_add_output"):
        # the matmul's output, then the bias add's (the layer's output); the first is freed
        return [(ALLOC, "matmul_out", int(raw["bias_add_output"]))] + alloc_outs + \
            [(PROGRAM, cbs), (FREE, "matmul_out")]
    tilized, copied = int(raw.get("tilized_input", 0)), int(raw.get("input_copy", 0))
    if op == "conv2d" and tilized and not sliced:
        # tilize, then its sharded copy: the first is freed before the output
        return [(ALLOC, "copy0", tilized), (ALLOC, "copy1", tilized), (FREE, "copy0")] + \
            run + [(FREE, "copy1")]
    if op == "conv2d" and copied and not sliced:
        # one sharded copy of a DRAM / interleaved input
        return [(ALLOC, "copy1", copied)] + run + [(FREE, "copy1")]
    if op == "conv2d" and getattr(pl.config, "deallocate_activation", False):
        return run + [(FREE, "in:0")]    # measured: after its output
    return run


def runs_auto_matmul(pl) -> bool:
    """A 1x1 conv that conv2d runs out of DRAM interleaved with matmul's automatic program config
    (``ops/conv2d/plan.plan_mm_from_dram``: ``is_mm_conv``, no ``shard_layout``). That config
    sizes its CBs to the L1 below the lowest buffer when the program is made
    (``ops/linear/auto_config.py``), so in the real run they end below that buffer by
    construction, and are as large as the estimate (sized for the L1 the plan leaves it). The
    oracle judges the layer alone on an empty device, where the same config takes more: its
    excess (``ttnn_extra_cb``, planner.with_ttnn_figure) is not what the run places. yolov8s b8
    ``model.15.cv2.conv``: estimate 655,360 B, ttnn alone 901,120; with the excess the model
    saw its CBs end at 1,006,944, over the lowest buffer at 892,928, a clash ttnn's config
    cannot make."""
    c = pl.config
    return bool(getattr(c, "is_mm_conv", False)) and getattr(c, "shard_layout", "x") is None \
        and not getattr(c, "lowering", None)


def _conv_run(pl, alloc_outs: list, cbs: int) -> list:
    """A (not sliced) conv2d's output and its program's CBs. With an output that is not sharded
    (interleaved in L1 or DRAM) ttnn's conv writes its sharded output (the estimate's
    ``output``: plan_context.conv_layer sizes the conv on it), runs, makes the layer's output
    and frees the sharded one (measured, mock n150 0.81.1, tests/test_conv_input_copy.py:
    3x3 and 1x1 convs, L1 [+sharded, +interleaved, -sharded] and DRAM [+sharded, -sharded]).
    The estimate lacks an interleaved L1 output beside the sharded one, so ttnn's figure
    exceeds it by that buffer (``ttnn_extra_cb``, counted as CBs): that much of the excess is
    the buffer placed here, not CBs."""
    raw = dict(pl.config.l1_parts or {})
    if pl.output.memory.sharded or getattr(pl.config, "lowering", None) or "output" not in raw:
        return alloc_outs + [(PROGRAM, cbs)]
    if pl.output.memory.buffer == "l1":
        cbs -= min(int(raw.get("ttnn_extra_cb", 0)), sum(e[2] for e in alloc_outs))
    return [(ALLOC, "sharded_out", int(raw["output"])), (PROGRAM, cbs)] + alloc_outs + \
        [(FREE, "sharded_out")]


# a sliced conv's parts that grow with its per-core output rows (``ops/conv2d/l1.py``): the
# act block is the whole shard height when no act_block_h is set, and so are the partials
_SLICE_ROW_CBS = ("act_cb", "tilized_act_cb", "partials_cb")


def _slice_parts_as_ttnn(raw: dict, halo: int, out: int, cbs: int) -> tuple[int, int, int]:
    """(halo, output slice, CBs) of a DRAM slice as ttnn places them, where ttnn's figure
    exceeds the estimate (``ttnn_extra_cb``, planner.with_ttnn_figure; else the estimate's).

    ttnn picks each slice's shard height itself (the per-slice parallel config is not
    reproduced) and it can be taller than the estimate's; the halo, the output slice and the
    act-block CBs all grow with it, by one ratio. Measured (mock n150, 0.81.1): bevdet_r50_encoder
    b8 256x704 img_backbone.layer2.0.downsample.0 (2 height slices, block sharded): estimate
    shard 1408 rows, ttnn's 1536: halo 349,120 -> 380,864, output 180,224 -> 196,608, CBs
    184,640 -> 201,024 (ttnn's figure 778,576 = the estimate 713,984 + 64,592). So the excess is
    spread over those parts by that ratio (here 1.091 for 1536/1408 = 1.0909), not put all on
    the halo: the CBs' share is what ran them into the slice's output (a 11,936 B clash the
    model did not see). resnet50 b32 layer2.0.downsample.0: halo 387,008 -> 448,453 by the
    ratio, ttnn's out-of-memory message said 442,304 (the ratio errs on the large side there)."""
    extra = int(raw.get("ttnn_extra_cb", 0))
    cbs -= extra            # layer_parts counts the excess as CBs
    row_cbs = sum(int(raw.get(k, 0)) for k in _SLICE_ROW_CBS)
    rows = halo + out + row_cbs
    if extra <= 0 or rows <= 0:
        return halo, out, cbs
    def grow(v: int) -> int:
        return -(-v * (rows + extra) // rows)
    return grow(halo), grow(out), cbs - row_cbs + grow(row_cbs)


def _unaligned_concat_events(pl, graph, banks: int, alloc_outs: list, cbs: int) -> list:
    """An interleaved concat of TILE inputs whose channels pad a tile (``ops/concat/l1.py``):
    ttnn's native factory (the output, its CBs) when they fit the free L1, else the untilized
    copies, the row-major concat, the output, the frees (measured on the mock n150: yolov8n
    batch 8's model.2.cat, tests/test_concat_unaligned.py)."""
    from ..ops.concat import l1 as CL
    rows, c = lv.tensor_rows_c(graph, pl.name)
    channels = [lv.tensor_rows_c(graph, s)[1] for s in pl.node.inputs]
    native = CL.native_cbs(list(pl.inputs), channels, pl.output)
    copies = CL.untilized_copies(list(pl.inputs), rows, channels, banks)
    rm = CL.row_major_concat(list(pl.inputs), pl.output, rows, c, banks)
    rm_path = [(ALLOC, f"untilized{i}", b) for i, b in enumerate(copies)] + \
        [(ALLOC, "rm_concat", rm)] + alloc_outs + [(PROGRAM, cbs), (FREE, "rm_concat")] + \
        [(FREE, f"untilized{i}") for i in range(len(copies))]
    if native is None or pl.output.memory.buffer != "dram":
        # an L1 output: the row-major path, as the estimate counts it (ttnn's choice depends
        # on its free L1 at that moment, which the model does not reproduce exactly)
        return rm_path
    return [(ROOM, native, alloc_outs + [(PROGRAM, native)], rm_path)]


def room_choice(e: tuple, alloc, base: int, top: int) -> list:
    """A ``ROOM`` event's branch: its events when its need fits the largest free L1 block
    ``alloc`` has now (ttnn's ``get_max_l1_space``; the largest free block matched ttnn's
    choice in the three concats measured), else the other ones."""
    return list(e[2] if e[1] <= alloc.largest_free() else e[3])


def _row_major_bank_bytes(pl, graph, name: str, banks: int) -> int:
    """Per bank: tensor ``name`` in ROW_MAJOR bfloat16 in the memory of ``pl``'s input (pad's
    row-major copies; a block-float input has no row-major form, so bfloat16)."""
    from dataclasses import replace
    x = pl.inputs[0]
    t = replace(x, layout="row_major", dtype="float32" if x.dtype == "float32" else "bfloat16")
    return bank_bytes(t, *lv.tensor_rows_c(graph, name), banks=banks)


def slice_input_copy(pl) -> int:
    """Bytes per bank of a DRAM slice's input copy: a pool's ``input`` part; a conv's slice
    input shards (``l1.slice_input_copy_bytes`` of ``slice_input_memory``)."""
    raw = dict(pl.config.l1_parts or {})
    m = getattr(pl.config, "slice_input_memory", None)
    if pl.node.op != "conv2d" or m is None or not m.shard_shape:
        return int(raw.get("input", 0))
    return slice_input_copy_bytes(m, pl.inputs[0].dtype if pl.inputs else "bfloat16")


def conv_input_copy(pl, graph, banks: int = WORMHOLE_B0.l1_banks) -> int:
    """Bytes per core of the sharded copy a (not sliced) conv2d makes of an input it does not
    receive sharded, in DRAM or interleaved in L1 (``ops/conv2d/l1.py`` own_input_copy, on the
    shards the plan gives it: ``Conv2dPlan.input_memory``); 0 for a sharded input."""
    if pl.node.op != "conv2d" or not pl.inputs or pl.inputs[0].memory.sharded:
        return 0
    from ..ops.conv2d.l1 import own_input_copy
    from ..ops.conv2d.sharding import parallel_config_of
    x, m = pl.inputs[0], getattr(pl.config, "input_memory", None)
    rows, c = lv.tensor_rows_c(graph, pl.node.inputs[0])
    c = int(pl.node.attrs.get("in_channels", c))
    if m is None or not m.sharded:
        # a plan without the conv's input shards: height shards on its output's cores
        cores = max(1, pl.output.memory.num_cores if pl.output.memory.sharded else banks)
        return own_input_copy(replace(x, memory=MemSpec(INTERLEAVED, "l1")), rows, c, HEIGHT,
                              1, cores)
    pc = parallel_config_of(m)
    return own_input_copy(replace(x, memory=m), rows, c, pc.kind, pc.cores_c, pc.cores_nhw)


def can_free_input(pl, plan) -> bool:
    """Whether conv ``pl`` may free its input itself (``deallocate_activation``): a conv2d run by
    ttnn.conv2d (not as a linear, not DRAM-sliced) on an L1 input that it reads last and once,
    that no caller keeps, and without an input copy of its own (whose order is not measured)."""
    c = pl.config
    if pl.node.op != "conv2d" or getattr(c, "deallocate_activation", False) or c.slice or \
            c.lowering == "linear" or not pl.inputs or pl.inputs[0].memory.buffer != "l1":
        return False
    raw = dict(c.l1_parts or {})
    if raw.get("tilized_input") or raw.get("input_copy"):
        return False
    g = plan.graph
    src = pl.node.inputs[0]
    if src in g.inputs or src in g.constants or src in g.outputs:
        return False
    last = lv.last_uses([x.node for x in plan.layers])
    i = next(k for k, x in enumerate(plan.layers) if x.name == pl.name)
    return last.get(src) == i and pl.node.inputs.count(src) == 1


def freeing_input(pl, graph=None):
    """``pl`` (a conv ``can_free_input`` allows) with ``deallocate_activation``, and its
    estimate as ttnn then counts it (measured): a halo conv frees its input right after its
    first halo buffer, so its peak is the larger of the op without its input and the input with
    that halo buffer; a matmul conv frees it after its output, so its peak does not change (the
    space is free for the next step only). A halo conv given an interleaved L1 input frees it
    once its own sharded copy is made, before the first halo buffer (``op_events``): the input
    then meets that copy, not the halo."""
    from dataclasses import replace
    parts = dict(pl.config.l1_parts or {})
    total = int(pl.l1_bytes_per_core)
    inp, halo = int(parts.get("input", 0)), int(parts.get("halo", 0))
    copy = conv_input_copy(pl, graph) if graph is not None else 0
    if halo:
        new_total = max(total - inp, inp + (copy or halo))
        parts["input"] = new_total - (total - inp)      # what of the input the peak still holds
        total = new_total
    cfg = replace(pl.config, deallocate_activation=True, l1_parts=parts)
    return replace(pl, config=cfg, l1_bytes_per_core=total)


def allocator(arch_name: str, l1_small_size: int = 32768) -> l1_alloc.L1Allocator:
    """An empty model of ttnn's L1 allocator for chip ``arch_name``: its L1 range and the size
    it rounds every buffer to (``Arch.l1_alignment``: 32 B on Wormhole, 64 B on Blackhole)."""
    base, top = l1_region(arch_name, l1_small_size)
    return l1_alloc.L1Allocator(base, top, alignment=get_arch(arch_name).l1_alignment)


def simulate(plan, *, l1_small_size: int = 32768) -> list[StepAddr]:
    """Every executor step of ``plan`` by address (module docstring), in ``plan_walk``'s order."""
    g = plan.graph
    arch_name = getattr(plan, "arch", "wormhole_b0")
    base, top = l1_region(arch_name, l1_small_size)
    banks = plan.l1_banks
    w = _Walk(allocator(arch_name, l1_small_size))
    nodes = [pl.node for pl in plan.layers]

    def key(buf) -> object:
        # a tensor's buffer by its name, an adapter copy by its ``plan_walk.Copy``
        return f"t:{buf}" if isinstance(buf, str) else buf

    # graph inputs (DRAM) and constants (small, L1) before the first layer
    for name, size in lv.resident_constant_buffers(g, banks):
        w.allocate(name, size)          # built with the model, before the run (liveness)
    for name, lay in plan.constant_layouts.items():
        if any(name in n.inputs for n in nodes):
            w.allocate(key(name), tensor_bank_bytes(g, name, lay, banks))
    for name, lay in plan.input_layouts.items():
        w.allocate(key(name), tensor_bank_bytes(g, name, lay, banks))

    def step(ev: pw.Step, events: list[tuple], rename: dict) -> None:
        failure, need, short, lowest, cb_end = None, None, 0, None, base
        events = list(events)
        while events:
            e = events.pop(0)
            if e[0] == ROOM:
                events[:0] = room_choice(e, w.alloc, base, top)
            elif e[0] == ALLOC:
                why = w.allocate(rename.get(e[1], e[1]), e[2])
                if why and failure is None:
                    (failure, short), need = why, l1_alloc.aligned(e[2])
            elif e[0] == FREE:
                w.free(rename.get(e[1], e[1]))
            else:
                end = base + int(e[1])
                low = w.alloc.lowest()
                cb_end = max(cb_end, end)
                if low is not None:
                    lowest = low if lowest is None else min(lowest, low)
                    if end > low and failure is None:
                        failure = (f"CB clash: its circular buffers end at {end:,}, above the "
                                   f"lowest L1 buffer at {low:,}")
                        short = end - low
        st = w.alloc.state()
        w.steps.append(StepAddr(ev.kind, ev.name, st.allocated, st.largest_free, lowest, cb_end,
                                failure, need, short))

    for ev in pw.walk(plan):
        if isinstance(ev, pw.Reallocate):
            # ttnn.reallocate (ttnn::move): the tensor is freed, then allocated again top-down
            # (ttnn runs no program of its own here that the capture shows)
            r, k = ev.reallocation, key(ev.tensor)
            step(ev, [(FREE, k), (ALLOC, k, tensor_bank_bytes(g, r.tensor, r.layout, banks))], {})
        elif isinstance(ev, pw.Adapt):
            a = ev.adapter
            step(ev, [(ALLOC, ev.copy, tensor_bank_bytes(g, a.src, a.after, banks)),
                      (PROGRAM, lv.adapter_cbs(a, *lv.tensor_rows_c(g, a.src)))], {})
        elif isinstance(ev, pw.Run):
            pl = ev.layer
            rename = {f"out:{t}": key(t) for t in pl.tensor_layouts()}
            if ev.operands:         # what operand 0 is now: its adapter copy, or the tensor
                rename["in:0"] = key(ev.operands[0])
            step(ev, op_events(pl, g, banks=banks), rename)
        elif isinstance(ev, pw.WriteInPlace):
            # the output is the operand's buffer: it takes over that buffer's key
            holder = key(ev.holder)
            if holder in w.addr:
                w.addr[key(ev.tensor)] = w.addr.pop(holder)
        elif isinstance(ev, pw.SpillTensor):
            step(ev, [(PROGRAM, 0)], {})
            w.free(key(ev.tensor))
        elif isinstance(ev, pw.FreeCopy):
            w.free(key(ev.copy))
        elif isinstance(ev, (pw.FreeOriginal, pw.FreeTensor)):
            w.free(key(ev.tensor))
        # DropName: the buffer is the in-place output's now (WriteInPlace moved its key)
    return w.steps


def first_failure(steps: list[StepAddr]) -> StepAddr | None:
    return next((s for s in steps if not s.ok), None)


# ---- remedies ------------------------------------------------------------------------------

def _layer_of(plan, st: StepAddr) -> str:
    """The layer a step belongs to: an adapter's consumer, a reallocation's next layer."""
    if st.kind == "layer":
        return st.name
    if st.kind == "adapter":
        return st.name.split(" -> ", 1)[1].rsplit("[", 1)[0]
    if st.kind == "reallocate":
        return st.name.split(" before ", 1)[1]
    after = st.name.split(" after ", 1)[1]          # a spill runs after its layer
    names = [pl.name for pl in plan.layers]
    return names[min(names.index(after) + 1, len(names) - 1)]


def _progress(plan, steps: list[StepAddr]) -> tuple[int, int]:
    """How far a walk gets: (layers run before its first failing step, minus what that step
    lacks); larger is better. Counted in layers, not steps, so that a remedy's own step (a
    reallocation) is no progress by itself. A walk without failure scores past every layer."""
    done = 0
    for st in steps:
        if not st.ok:
            return done, -st.short
        done += st.kind == "layer"
    return len(plan.layers) + 1, 0


def _held_before(plan, layer: str) -> tuple[int, dict]:
    """(the index of ``layer`` or -1, every tensor made before it as it is held then: graph
    inputs, constants, earlier layers' outputs, spilled ones in DRAM), by ``plan_walk``."""
    held = {**plan.input_layouts, **plan.constant_layouts}
    for ev in pw.walk(plan):
        if ev.layer.name == layer:
            return ev.i, held
        if isinstance(ev, pw.Run):
            held.update(ev.layer.tensor_layouts())
        elif isinstance(ev, pw.SpillTensor):
            held[ev.tensor] = ev.spill.to
    return -1, held


def _live_before(plan, layer: str, l1_small_size: int) -> dict[str, int]:
    """Tensor name -> bytes per bank of every tensor in L1 right before ``layer`` runs (with
    the plan's remedies so far), by walking the plan up to there."""
    g = plan.graph
    i, held = _held_before(plan, layer)
    if i < 0:
        return {}
    last = lv.last_uses([pl.node for pl in plan.layers])
    keep = set(g.outputs) | set(g.constants)
    out = {}
    for name, lay in held.items():
        if (last.get(name, -1) >= i or name in keep) and lay.memory.buffer == "l1" \
                and name not in g.constants:
            b = tensor_bank_bytes(g, name, lay, plan.l1_banks)
            if b:
                out[name] = b
    return out


def _in_place_candidate(plan, pl):
    """``pl`` as an in-place binary op (output_tensor=a), or None where ttnn would not take it
    (the same conditions as ``ops/binary/plan.py`` ``inplace_blocker``)."""
    from dataclasses import replace
    if pl.node.op not in ("add", "multiply") or getattr(pl.config, "inplace", False):
        return None
    if pl.config.broadcast is not None:
        return None
    g = plan.graph
    ia = 1 if pl.config.swap_operands else 0
    src = pl.node.inputs[ia]
    a = pl.inputs[ia]
    if a != pl.output or a.memory.buffer != "l1" or pl.node.inputs.count(src) > 1:
        return None
    copied = any(ad.dst == pl.name and ad.index == ia for ad in plan.adapters)
    if not copied and (src in g.inputs or src in g.constants or src in g.outputs or
                       [c.name for c in g.consumers(src)] != [pl.name]):
        return None
    s = pl.node.shape
    parts = dict(pl.config.l1_parts or {})
    own = int(parts.get("output", 0))
    parts["output"] = 0             # the output is a's buffer (l1.eltwise_l1 output_aliases_input)
    cfg = replace(pl.config, inplace=True, out_shape=(1, 1, s.rows, s.c), l1_parts=parts)
    return replace(pl, config=cfg, l1_bytes_per_core=int(pl.l1_bytes_per_core) - own)


def _with(plan, **changes):
    from dataclasses import replace
    return replace(plan, **changes)


def _replanned(plan, new, extra_notes=()):
    """``new`` (a replan of ``plan``'s graph, reordered or with more spills) with ``plan``'s
    address remedies carried over where their layers still exist."""
    names = {pl.name for pl in new.layers}
    done = {n.layer for n in plan.in_place}
    early = {n.layer for n in plan.freed_early}
    layers = [(_in_place_candidate(new, pl) if pl.name in done else None) or pl
              for pl in new.layers]
    layers = [freeing_input(pl, new.graph) if pl.name in early and can_free_input(pl, new)
              else pl
              for pl in layers]
    kept = [r for r in plan.reallocations if r.before in names]
    return _with(new, layers=layers, in_place=list(plan.in_place),
                 freed_early=[n for n in plan.freed_early if n.layer in names],
                 reallocations=_ordered(new, kept),
                 reordered=list(new.reordered) + list(extra_notes))


def _reordered(plan, layer: str, replan):
    """``plan`` replanned with ``layer`` run right after its inputs (``planner.moved``), its
    remedies so far kept; None where it cannot move earlier or the replan fails."""
    from ..errors import LayoutError
    from ..language.graph import moved
    from .plans import ReorderNote
    g = plan.graph
    pos = {n.name: k for k, n in enumerate(g.nodes)}
    node = g.node(layer)
    earliest = max([pos[s] + 1 for s in node.inputs if s in pos] + [0])
    if replan is None or earliest >= pos[layer]:
        return None
    before = g.nodes[earliest].name
    try:
        new = replan(moved(g, layer, earliest), plan.spill_hints, plan.cap_hints)
    except LayoutError:
        return None
    return _replanned(plan, new, [ReorderNote(layer, before)])


def _spilled(plan, tensor: str, layer: str, replan):
    """``plan`` replanned with ``tensor`` spilled to DRAM for ``layer`` (the planner's own spill:
    its readers from then on are planned against the DRAM copy); None where the replan fails."""
    from ..errors import LayoutError
    if replan is None or (tensor, layer) in plan.spill_hints:
        return None
    try:
        new = replan(plan.graph, plan.spill_hints | {(tensor, layer)}, plan.cap_hints)
    except LayoutError:
        return None
    return _replanned(plan, new)


def _capped(plan, layer: str, cbs: int, replan):
    """``plan`` replanned with conv ``layer``'s circular buffers held to ``cbs`` bytes (a smaller
    act block or another layout: the planner's own blockings), so that its CB region ends below
    the lowest L1 buffer; None where no blocking meets it or the replan fails."""
    from ..errors import LayoutError
    if replan is None or cbs <= 0 or any(n == layer for n, _ in plan.cap_hints):
        return None
    try:
        new = replan(plan.graph, plan.spill_hints, plan.cap_hints | {(layer, cbs)})
    except LayoutError:
        return None
    if layer_parts(new.layer(layer))["cb"] > cbs:
        return None
    return _replanned(plan, new)


# ops whose planning runs them from DRAM interleaved when asked to keep no L1 (a cap hint of
# 0: ``ctx.cb_caps``), the remedy for an output the allocator finds no block for
DRAM_FALLBACK_OPS = ("concat", "split")


def _from_dram(plan, layer: str, replan):
    """``plan`` replanned with ``layer`` (a concat or split) run from DRAM interleaved; None
    where it is there already or the replan fails."""
    from ..errors import LayoutError
    if replan is None or any(n == layer for n, _ in plan.cap_hints):
        return None
    try:
        new = replan(plan.graph, plan.spill_hints, plan.cap_hints | {(layer, 0)})
    except LayoutError:
        return None
    return _replanned(plan, new)


_TRACE = None      # debugging: called with (failing step, its score, candidate, its score)


def _candidates(plan, bad: StepAddr, small: int, replan):
    """Remedies for ``bad``, cheapest first, each a new plan made only when asked for (the
    replanning ones cost a plan of the whole graph): the conv frees its input itself, the
    binary op runs in place, a live tensor is reallocated, the layer runs right after its
    inputs, the conv keeps smaller CBs, a live tensor waits in DRAM."""
    layer = _layer_of(plan, bad)
    pl = plan.layer(layer)
    if bad.kind == "layer" and can_free_input(pl, plan):
        layers = [freeing_input(x, plan.graph) if x.name == layer else x for x in plan.layers]
        yield _with(plan, layers=layers, freed_early=plan.freed_early + [
            FreedEarlyNote(layer, pl.node.inputs[0], bad.failure)])
    if bad.kind == "layer" and bad.need is not None:
        ip = _in_place_candidate(plan, pl)
        if ip is not None:
            layers = [ip if x.name == layer else x for x in plan.layers]
            yield _with(plan, layers=layers,
                        in_place=plan.in_place + [InPlaceNote(layer, bad.need, bad.failure)])
    live = sorted(_live_before(plan, layer, small).items(), key=lambda kv: kv[1])
    for t, b in live:
        if not any(r.tensor == t and r.before == layer for r in plan.reallocations):
            r = Reallocation(t, layer, _held_layout(plan, t, layer), b, bad.name, bad.failure)
            yield _with(plan, reallocations=_ordered(plan, plan.reallocations + [r]))
    if replan is None:
        return
    yield REPLANS       # the remedies below cost a plan of the whole graph each
    if not any(n.layer == layer for n in plan.reordered):
        yield _reordered(plan, layer, replan)
    if bad.kind == "layer" and bad.need is None and pl.node.op in ("conv2d", "linear"):
        yield _capped(plan, layer, layer_parts(pl)["cb"] - bad.short, replan)
    if bad.kind == "layer" and pl.node.op in DRAM_FALLBACK_OPS:
        yield _from_dram(plan, layer, replan)
    for t, _ in live:
        if t not in pl.node.inputs:
            yield _spilled(plan, t, layer, replan)


def fit(plan, *, l1_small_size: int | None = None, max_remedies: int = 64, replan=None):
    """``plan`` with the address remedies ttnn's allocator needs (``_candidates``, cheapest
    first), each tried in the model before it is kept: the first that gets the walk past the
    failing step, else the one that gets closest. Returns a new Plan (the caller's is not
    changed); raises ``LayoutError`` naming the step, its request and the largest free block
    when no remedy helps. ``replan(graph, spill_hints, cap_hints)``: the planner's plan of a
    graph with those hints, for the remedies that change more than one layer."""
    from ..errors import LayoutError
    small = plan.l1_small_size if l1_small_size is None else int(l1_small_size)
    steps = simulate(plan, l1_small_size=small)
    for _ in range(max_remedies):
        score = _progress(plan, steps)
        bad = next((s for s in steps if not s.ok), None)
        if bad is None:
            plan.step_addr = steps
            if plan.in_place or plan.freed_early:
                lv.refresh(plan)    # the layers these changed: their live figures again
            return plan
        best, best_steps, best_score = None, None, score
        passing = []                # (plan, steps) of the remedies that get past the step
        replanning = False
        for cand in _candidates(plan, bad, small, replan):
            if cand is REPLANS:
                if passing:
                    break   # a cheaper remedy passes: no plan of the whole graph is made
                replanning = True
                continue
            if cand is None:
                continue
            if passing and _remedy(plan, cand).startswith("reallocate") and \
                    _remedy(plan, passing[-1][0]).startswith("reallocate"):
                break   # reallocations come smallest first: the first that passes is the
                #         fastest of them
            cs = simulate(cand, l1_small_size=small)
            sc = _progress(cand, cs)
            if _TRACE is not None:
                _TRACE(bad, score, cand, sc)
            if sc > best_score:
                best, best_steps, best_score = cand, cs, sc
            if sc[0] > score[0]:
                passing.append((cand, cs))
                if replanning:
                    break       # a replanning remedy: the first that gets past the step
        if passing:             # of those that get past it, the fastest by the estimate
            best, best_steps = _fastest_remedy(plan, bad, passing)
        if best is None:
            raise LayoutError(
                f"ttnn's L1 allocator would refuse step '{bad.name}' ({bad.kind}): "
                f"{bad.failure}; no remedy (the conv freeing its input, in place, reallocation, "
                "reorder, smaller blocking, spill, from DRAM) gets past it; use a smaller batch or input "
                "size (--batch / --input-size)", layer=_layer_of(plan, bad))
        plan, steps = best, best_steps
    raise LayoutError(f"ttnn's L1 allocator would refuse step '{bad.name}': {bad.failure}; "
                      f"more than {max_remedies} address remedies would be needed",
                      layer=_layer_of(plan, bad))


# ``_candidates`` yields this before the remedies that replan the whole graph
REPLANS = object()


def _remedy(plan, cand) -> str:
    """What remedy ``cand`` applied to ``plan``, for its choice note."""
    if len(cand.freed_early) > len(plan.freed_early):
        n = cand.freed_early[-1]
        return f"{n.layer} frees its input {n.tensor} (deallocate_activation)"
    if len(cand.in_place) > len(plan.in_place):
        return f"{cand.in_place[-1].layer} in place"
    if len(cand.reallocations) > len(plan.reallocations):
        new = [r for r in cand.reallocations if r not in plan.reallocations]
        return "reallocate " + ", ".join(f"{r.tensor} before {r.before}" for r in new)
    if len(cand.reordered) > len(plan.reordered):
        return f"run {cand.reordered[-1].layer} earlier"
    if len(cand.spills) > len(plan.spills):
        return "spill " + ", ".join(sp.tensor for sp in cand.spills[len(plan.spills):])
    dram = [n for n, cap in cand.cap_hints - plan.cap_hints
            if cap == 0 and cand.layer(n).node.op in DRAM_FALLBACK_OPS]
    if dram:
        return f"{dram[0]} from DRAM"
    return "smaller blocking"


def _fastest_remedy(plan, bad: StepAddr, passing: list):
    """Of the remedies that get past step ``bad`` (cheapest first), the fastest by the device
    estimate (the first on a tie), with a note in the plan's ``choices``: its µs and the
    runner-up's. Returns (plan, steps)."""
    from .estimate import estimate
    us = [estimate(c).device_us for c, _ in passing]
    k = min(range(len(passing)), key=lambda i: (us[i], i))
    pick, steps = passing[k]
    others = [i for i in range(len(passing)) if i != k]
    runner = "runner-up: none of the others tried gets past it"
    if others:
        r = min(others, key=lambda i: us[i])
        runner = f"runner-up {_remedy(plan, passing[r][0])}: {us[r]:,.1f} µs"
    layer = _layer_of(plan, bad)
    note = (f"address remedy at '{bad.name}': {_remedy(plan, pick)}: plan {us[k]:,.1f} µs "
            f"estimated; {runner}")
    choices = dict(pick.choices)
    mark = "address remedy"
    for name, text in plan.choices.items():   # a replan's plan: the earlier remedies' notes
        if mark in text and mark not in choices.get(name, ""):
            own = choices.get(name)
            part = text[text.index(mark):]
            choices[name] = f"{own}; then {part}" if own else part
    prev = choices.get(layer)
    choices[layer] = f"{prev}; then {note}" if prev else note
    return _with(pick, choices=choices), steps


def _held_layout(plan, tensor: str, before: str):
    """The layout ``tensor`` is held in right before layer ``before`` (its producer's, or the
    input's, or where a spill put it)."""
    return _held_before(plan, before)[1].get(tensor)


def _ordered(plan, reallocations: list) -> list:
    order = {pl.name: i for i, pl in enumerate(plan.layers)}
    return sorted(reallocations, key=lambda r: order[r.before])
