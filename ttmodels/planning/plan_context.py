"""What an op's planning function receives, and the planning helpers several ops share.

Each op plans itself in its package: ``ttmodels/ops/<op>/plan.py`` defines
``plan(ctx, node) -> PlannedLayer`` (``OpDef.plan``; a family such as the pools or the binary ops
shares one). The planner core (``planner.py``: the walk, adapters, liveness and its remedies)
calls it once per layer, possibly several times against different L1 budgets, with itself as
``ctx``: a ``PlanContext``. An op's planning function

* reads its inputs' layouts (``ctx.layouts`` / ``ctx.inputs_of``) and shapes (``ctx.flat``,
  ``ctx.rc``, ``ctx.g``), the device (``ctx.arch``, ``ctx.grid``) and the L1 it may use
  (``ctx.op_budget``: the bank less every other tensor alive around the layer);
* puts an adapter on an input edge where the op cannot take what the producer gives
  (``ctx.adapt`` and its shorthands ``to_interleaved``, ``to_dram``, ``to_tile``,
  ``to_row_major``; each is checked against the rules and recorded; nothing else may change the
  planner's state, except conv2d's slicing notes ``ctx.slice_miss``);
* honours the layer's explicit layout (``ctx.requested_memory``) and inserts nothing when
  ``ctx.with_adapters`` is False (ttnn's defaults, for the sim to show what the card rejects);
* returns the ``PlannedLayer`` (inputs as received, output layout, L1 bytes per core, the op's
  typed config), or raises ``LayoutError`` when it cannot fit ``ctx.op_budget``; the core then
  tries its remedies (smaller previous CBs, reordering, spills).

Shared here: ``interleaved_tile_input`` and ``per_channel_constant`` (the eltwise-like ops), and
the conv candidate search of conv2d and conv_transpose2d (``conv_candidate``, ``auto_pick``,
``smaller_act_blocks``, ``conv_on_candidate``, ``conv_layer``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from . import l1 as l1m
from . import rules as R
from ..language.graph import Graph, Node
from .layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                     TensorLayout)
from ..ops.conv2d import Conv2dPlan
from .plans import PlannedLayer
from .liveness import per_channel_constant as per_channel_constant_layout
from ..ops.conv2d.l1 import conv_l1
from ..ops.conv2d.sharding import conv_input_parallel_config, conv_memspec, conv_output_memspec, conv_reshards_input, determine_parallel_config, folded_output_parallel_config, is_matmul_conv, kernel_stride_fold, parallel_config_of
from ..ops.conv_transpose2d.l1 import conv_transpose_geometry


class PlanContext(Protocol):
    """What ``plan(ctx, node)`` may use of the planner (``planner._Planner`` implements it; an
    op gets it through a ``PlanningView``, which lets through nothing else)."""
    g: Graph                                    # the graph being planned
    arch: str                                   # "wormhole_b0", ...
    grid: tuple[int, int]                       # the device's compute grid (x, y)
    budget: int                                 # the L1 bank in bytes per core
    op_budget: int                              # what this layer may use of it
    ttnn_budget: int                            # what ttnn's own figure for it may use
    with_adapters: bool                         # False: ttnn's defaults, no adapters
    layouts: dict[str, TensorLayout]            # every tensor planned so far
    flat: dict[str, tuple[int, int, int, int]]  # their [N, H, W, C]
    adapted: set[tuple[str, int]]               # (layer, operand index) given an adapter
    cb_caps: dict[str, int]                     # conv -> CB bytes it may keep (next step)
    slice_miss: list[tuple]                     # conv2d's failed DRAM slicings (its error)
    oracle: Any                                 # planning.oracle.StepOracle asked about convs, or None
    ttnn_rejected: list[str]                    # conv candidates ttnn refused (notes)
    choices: dict[str, str]                     # conv -> why the estimate picked its layout

    def inputs_of(self, node: Node) -> list[TensorLayout]:
        """The layouts of ``node``'s inputs as their producers give them."""

    def rc(self, name: str) -> tuple[int, int]:
        """A tensor's (rows = N*H*W, channels)."""

    def requested_memory(self, node: Node, rows: int, c: int) -> MemSpec | None:
        """The MemSpec of the layer's explicit layout for a [rows, c] tensor; None for auto."""

    def consumers_need_tile(self, node: Node) -> bool:
        """Whether a layer reading ``node``'s output wants TILE (or a block-float dtype)."""

    def adapt(self, node: Node, idx: int, cur: TensorLayout, kind: str, after: TensorLayout,
              reason: str) -> TensorLayout:
        """An adapter op ``kind`` on input ``idx`` of ``node``: ``cur`` -> ``after``."""

    def to_interleaved(self, node: Node, idx: int, cur: TensorLayout, reason: str,
                       buffer: str = "l1") -> TensorLayout: ...

    def to_dram(self, node: Node, idx: int, cur: TensorLayout, reason: str) -> TensorLayout:
        """Input ``idx`` moved to DRAM interleaved (from shards or interleaved L1), unchanged
        when it is there already: the fallback of an op whose L1 path does not fit."""

    def to_tile(self, node: Node, idx: int, cur: TensorLayout, reason: str) -> TensorLayout: ...

    def to_row_major(self, node: Node, idx: int, cur: TensorLayout, reason: str
                     ) -> TensorLayout: ...


_MEMBERS = frozenset(PlanContext.__annotations__) | frozenset(
    n for n, v in vars(PlanContext).items() if callable(v) and not n.startswith("_"))


class PlanningView:
    """The planner as an op's ``plan(ctx, node)`` gets it: exactly ``PlanContext``'s members,
    read from (and, for the state they name, written to) the planner; anything else of the
    planner (its walk, remedies, liveness) is out of an op's reach and an AttributeError."""
    __slots__ = ("_planner",)

    def __init__(self, planner: Any):
        object.__setattr__(self, "_planner", planner)

    def __getattr__(self, name: str) -> Any:
        if name not in _MEMBERS:
            raise AttributeError(f"an op's planning may not use the planner's {name!r} "
                                 f"(it is not part of PlanContext)")
        return getattr(self._planner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _MEMBERS:
            raise AttributeError(f"an op's planning may not set the planner's {name!r}")
        setattr(self._planner, name, value)


# ---- eltwise-like ops ------------------------------------------------------------------------
def interleaved_tile_input(ctx: PlanContext, node: Node, why: str,
                           dtype: str | None = None) -> TensorLayout:
    """Input 0 interleaved (same buffer) and TILE, and in ``dtype`` when given (adapters)."""
    x = ctx.layouts[node.inputs[0]]
    if not ctx.with_adapters:
        return x
    if x.memory.sharded:
        x = ctx.to_interleaved(node, 0, x, why)
    if x.layout != TILE_LAYOUT:
        x = ctx.to_tile(node, 0, x, f"{node.op} runs on TILE tensors")
    if dtype is not None and x.dtype != dtype:
        x = ctx.adapt(node, 0, x, "typecast", replace(x, dtype=dtype),
                      f"{node.op} has no dtype argument: {x.dtype} -> {dtype} before it")
    return x


def per_channel_constant(ctx: PlanContext, node: Node, why: str):
    """x times (plus) [1, 1, 1, C] TILE constants in L1, as batch_norm and layer_scale run:
    binary_ng broadcasts them over x's rows whatever x's sharding (binary.broadcast).
    ``(x as fed, the constants' layout, output dtype, output layout, L1 estimate)``."""
    x = ctx.layouts[node.inputs[0]]
    if ctx.with_adapters and x.layout != TILE_LAYOUT:
        x = ctx.to_tile(node, 0, x, why)
    rows, c = ctx.rc(node.inputs[0])
    dtype = node.precision.activations if ctx.with_adapters else x.dtype
    const = per_channel_constant_layout(dtype)  # liveness counts them resident from the build on
    out = R.output_layout(node.op, [x, const], R.CallArgs(dtype=dtype, out_shape=node.shape.flat),
                          None, [ctx.flat[node.inputs[0]], (1, 1, 1, c)])
    est = l1m.eltwise_l1(inputs=[(x, rows, c), (const, 1, c)], out_layout=out, out_rows=rows,
                         c=c)
    return x, const, dtype, out, est


# ---- convs: the candidate search shared by conv2d and conv_transpose2d ---------------------
@dataclass(frozen=True)
class ConvCandidate:
    """One conv layout and its L1 estimate (``conv_candidate``)."""
    kind: str                   # HEIGHT / BLOCK / WIDTH
    pc: Any                     # rules.ParallelConfig
    conv_in: TensorLayout       # the input as the conv takes it
    out: TensorLayout           # ttnn's output spec
    est: Any                    # l1.L1Estimate
    is_mm: bool                 # a matmul (1x1) conv
    act_block_h: int            # 0: ttnn's default


def is_mm(node: Node) -> bool:
    a = node.attrs
    return is_matmul_conv(a["kernel"], a["stride"], a["padding"], a.get("dilation", (1, 1)),
                            a.get("groups", 1))


def conv_candidate(ctx: PlanContext, node: Node, kind: str, x: TensorLayout,
                   act_block_h: int | None, follow_input: bool,
                   dims: tuple[int, int, int] | None = None,
                   slice_hw: tuple[int, int, int, int] | None = None, *,
                   transposed: bool = False) -> ConvCandidate:
    """One conv layout and its L1 estimate; ``dims`` = (input rows, input width, output rows)
    and ``slice_hw`` = (ih, iw, oh, ow) of one DRAM slice instead of the whole tensors.

    ``transposed``: a conv_transpose2d's: conv2d's parallel config and output spec for the
    transposed conv's output rows, the conv2d micro-op's CBs and halo over the zero-inserted
    full input (conv_transpose2d.cpp conv_transpose2d_L1 calls
    determine_conv_config_for_auto_shard / shard_or_reshard_tensor_if_required with the output
    size and the full input size); a followed input is taken as it is, and the output spec is
    a non-matmul conv's."""
    a = node.attrs
    in_shape = ctx.g.shape_of(node.inputs[0])
    in_rows, _ = ctx.rc(node.inputs[0])
    out_rows, c_out = node.shape.rows, node.shape.c
    in_w = in_shape.w
    if dims is not None:
        in_rows, in_w, out_rows = dims
    c_in = a["in_channels"]
    mm = is_mm(node)
    if follow_input and not transposed and conv_reshards_input(x.memory, c_in, is_mm=mm):
        # conv2d would reshard this input itself onto its own parallel config: plan that
        # config, so an adapter does the reshard in the open (and the L1 estimate sees it)
        pc = conv_input_parallel_config(x.memory, out_rows, c_in, c_out, is_mm=mm,
                                          device_grid=ctx.grid, act_block_h=act_block_h)
        conv_in = TensorLayout(conv_memspec(pc.kind, in_rows, c_in, pc), x.layout, x.dtype)
    elif follow_input:
        pc = parallel_config_of(x.memory)
        conv_in = x
    else:
        pc = determine_parallel_config(kind, out_rows, c_in, c_out, ctx.grid,
                                         channels_padding=not mm, act_block_h=act_block_h)
        # a DRAM slice reaches the conv as padded_slice's row-major sticks (measured on the
        # mock device: its shards hold 8-aligned, not tile-aligned, channels)
        conv_in = TensorLayout(conv_memspec(kind, in_rows, c_in, pc),
                               ROW_MAJOR if dims is not None else x.layout, x.dtype)
    # ttnn's output spec: output parallel config, then (matmul convs) only the cores that
    # hold output blocks (sharding.conv_output_memspec)
    fold = 1 if transposed or dims is not None else kernel_stride_fold(
        a["kernel"], a["stride"], a["padding"], a.get("dilation", (1, 1)),
        (in_shape.h, in_shape.w), x.memory)
    if fold > 1 and kind == BLOCK:
        # conv2d folds it into a matmul conv on C * sh * sw channels: its channel cores
        out_mem = conv_output_memspec(
            folded_output_parallel_config(pc, c_in * fold, c_out, device_grid=ctx.grid),
            out_rows, c_out, is_mm=True, device_grid=ctx.grid)
    else:
        out_mem = conv_output_memspec(pc, out_rows, c_out, is_mm=mm and not transposed,
                                      device_grid=ctx.grid)
    out = TensorLayout(out_mem, TILE_LAYOUT, node.precision.activations)
    ih, iw, oh, ow = slice_hw or (in_shape.h, in_shape.w, node.shape.h, node.shape.w)
    if transposed:
        geo = conv_transpose_geometry(in_shape.n, in_shape.h, in_shape.w, node.shape.h,
                                          node.shape.w, a["kernel"], a["stride"], a["padding"],
                                          a["output_padding"], a["dilation"])
    else:
        # the halo gathers the dilated window's span (ASPP's dilation 12 and 18 convs)
        dil = tuple(a.get("dilation") or (1, 1))
        geo = l1m.ConvGeometry(in_shape.n, ih, iw, oh, ow,
                               tuple(d * (k - 1) + 1 for k, d in zip(a["kernel"], dil)),
                               tuple(a["stride"]), tuple(a["padding"]))
    # what the layer receives (alive throughout): a sharded producer is resharded to conv_in
    # by an adapter (conv_on_candidate), an interleaved one is read as it is; a DRAM slice
    # reads DRAM
    if dims is not None:        # a slice: an adapter puts any input in DRAM first
        received = TensorLayout(MemSpec(INTERLEAVED, "dram"), x.layout, x.dtype)
    else:
        received = None if follow_input or x.memory.sharded else x
    est = conv_l1(kind=kind, in_layout=conv_in, out_layout=out, in_rows=in_rows,
                      in_w=in_w, c_in=c_in, out_rows=out_rows, c_out=c_out,
                      kernel=tuple(a["kernel"]), cores_nhw=pc.cores_nhw, cores_c=pc.cores_c,
                      num_cores=pc.num_cores, weights_dtype=node.precision.weights,
                      fp32_accum=node.precision.fp32_accum, act_block_h=act_block_h,
                      bias=bool(a.get("bias") or node.bn), geometry=geo, is_mm=mm,
                      received=received)
    return ConvCandidate(kind=kind, pc=pc, conv_in=conv_in, out=out, est=est, is_mm=mm,
                         act_block_h=act_block_h or 0)


def auto_pick(cands: list[ConvCandidate]) -> ConvCandidate:
    """conv2d_utils.cpp determine_conv_config_for_auto_shard: height unless block is smaller
    in L1 and uses more cores than one grid row; then width if smaller still (not for mm)."""
    by = {c.kind: c for c in cands}
    win = by[HEIGHT]
    b, w = by.get(BLOCK), by.get(WIDTH)
    if b and b.est.total < win.est.total and b.pc.num_cores > 8:
        win = b
    if w and w.est.total < win.est.total and not w.is_mm:
        win = w
    return win


def smaller_act_blocks(ctx: PlanContext, node: Node, x: TensorLayout,
                       tried: list[ConvCandidate], follow: bool, *, transposed: bool = False
                       ) -> list[ConvCandidate]:
    """Over budget: each of ``tried`` (in order), each followed by its scheme with act_block_h
    128, 64, 32."""
    fallback = []
    for c in tried:
        fallback.append(c)
        for abh in (128, 64, 32):
            fallback.append(conv_candidate(ctx, node, c.kind, x, abh, follow,
                                           transposed=transposed))
    return fallback


def conv_on_candidate(ctx: PlanContext, node: Node, x: TensorLayout, c: ConvCandidate,
                      what: str) -> PlannedLayer:
    """The planned conv for candidate ``c``: a sharded producer on other cores is resharded
    to the candidate's input spec (conv2d keeps a sharded input's grid), and an interleaved
    policy asks its output memory config."""
    cin = x
    if ctx.with_adapters and x.memory.sharded and x.memory != c.conv_in.memory:
        want = replace(c.conv_in, layout=x.layout)
        why = f"{what} wants its input {c.kind} on {c.pc.num_cores} cores; producer gives " \
              f"{x.memory.short()}"
        if R.tensor_checks(want, ctx.flat[node.inputs[0]], "reshard output"):
            # the conv's shards hold tile-padded channels a row-major producer (a pool) does
            # not have: interleave it, and conv2d shards it itself
            cin = ctx.to_interleaved(node, 0, x, why + " (no row-major reshard holds its "
                                     "shards)")
            c = conv_candidate(ctx, node, c.kind, cin, c.act_block_h or None, False,
                               transposed=node.op == "conv_transpose2d")
        else:
            cin = ctx.adapt(node, 0, x, "reshard", want, why)
    requested = ctx.requested_memory(node, node.shape.rows, node.shape.c) \
        if node.layout.kind == INTERLEAVED else None
    return conv_layer(ctx, node, cin, c, requested)


def conv_layer(ctx: PlanContext, node: Node, cin: TensorLayout, c: ConvCandidate,
               requested: MemSpec | None) -> PlannedLayer:
    out = c.out
    if requested is not None:
        out = replace(out, memory=requested)
    config = Conv2dPlan(
        shard_layout=c.kind, act_block_h_override=c.act_block_h,
        reshard_if_not_optimal=False, override_sharding_config=False,
        output_layout=out.layout, dtype=out.dtype, is_mm_conv=c.is_mm,
        num_cores=c.pc.num_cores, core_grid=c.pc.grid,
        input_memory=c.conv_in.memory, memory_config=requested,
        weights_dtype=node.precision.weights, l1_parts=c.est.parts,
    )
    return PlannedLayer(node, [cin], out, c.est.total, config)
