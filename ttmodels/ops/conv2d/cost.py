"""conv2d's device time (planning/estimate.py): its programs and what each does per core.

Sources (tt-metal, ttnn 0.81.1's conv2d as the wheel ships it):
* the conv is a matmul of the im2col'd activation [rows, K] by the weights [K, Cout]; grouped
  weights are made block diagonal, dense (``prepare_conv2d_weights``: groups are not skipped),
  so K = kh * kw * Cin with Cin padded to a tile's width in the weights' layout;
* height sharded: each core computes its output rows for every output channel, the weights
  multicast to all cores (``reader_writer_tiled_out_1d_mcast_*``); block sharded: a core owns
  rows x its columns' channels, activations multicast along a row, weights down a column
  (``*_2d_mcast_*``); width sharded: all rows, its channels;
* a conv that is not a plain matmul (kernel > 1, stride, padding: ``is_mm_conv`` false) runs the
  halo program first (``ttnn::halo``, its own device op), then builds each im2col row from
  ``kh * kw`` sticks of its input shard;
* DRAM-sliced (``Op2DSliceConfig``): per slice, its input rows read from DRAM, the conv in L1,
  its output written back to DRAM;
* lowering linear: a matmul program (``ttnn.linear``) with the same MACs;
* the activation block is tilized on the compute core before its matmul, and a height or block
  sharded conv may split its activation reads over both data-movement RISC-Vs (the split
  reader): both from tt-metal's conv2d program factory (``conv2d_op_sharded_program_factory``
  / ``conv2d_utils.cpp``: ``get_tilize_cycles_per_tile``, ``is_split_reader_supported``,
  ``is_split_reader_viable``), whose comment is TT's own model of a block's time before its
  matmul: one reader ``max(act + tilize, weights)``, split ``act / 2 + max(tilize, weights)``.
"""
from __future__ import annotations

import math

from ...language.graph import TILE, round_up
from ...planning.estimate import CostEnv, Phase, fused_sfpu_cycles
from ...planning.layout import BYTES_PER_TILE, bytes_per_element
from ...planning.noc_model import transfer_cycles


def _work_split(layer, rows: int, cout: int) -> tuple[int, int, int]:
    """(cores, output rows per core, output channels per core) under the conv's own parallel
    config (its output shard when sharded; its config's cores otherwise)."""
    cfg, m = layer.config, layer.output.memory
    kind = m.memory_layout if m.sharded else cfg.shard_layout or "height_sharded"
    if m.sharded and m.shard_shape:
        cores = m.num_cores or m.grid[0] * m.grid[1]
        sh, sw = m.shard_shape
        if kind == "height_sharded":
            return cores, sh, round_up(cout, TILE)
        return cores, sh, sw
    cores = cfg.num_cores or 64
    grid = cfg.core_grid or (8, 8)
    if kind == "block_sharded":
        return cores, math.ceil(rows / grid[1]), math.ceil(round_up(cout, TILE) / grid[0])
    if kind == "width_sharded":
        return cores, rows, math.ceil(round_up(cout, TILE) / cores)
    return cores, math.ceil(rows / cores), round_up(cout, TILE)


# tt-metal conv2d get_tilize_cycles_per_tile: [arch][halo dtype][output dtype] ->
# (cycles per tile, with fp32_dest_acc_en); halo dtype is float32 for a float32 input, else
# bfloat16; a 4-bit or other output dtype takes the bfloat8_b row (not in TT's table)
TILIZE_CYCLES = {
    "wormhole_b0": {"float32": {"float32": (107, 128), "bfloat16": (74, 74),
                                "bfloat8_b": (74, 70)},
                    "bfloat16": {"float32": (92, 117), "bfloat16": (61, 68),
                                 "bfloat8_b": (40, 43)}},
    "blackhole": {"float32": {"float32": (132, 132), "bfloat16": (132, 80),
                              "bfloat8_b": (132, 77)},
                  "bfloat16": {"float32": (105, 128), "bfloat16": (72, 72),
                               "bfloat8_b": (60, 60)}},
}
# tt-metal conv2d get_mcast_many_l1_linked_noc_transfer_rate: GB/s rising linearly from the
# L1 alignment to 64 KB (min, peak), then flat
MCAST_RATE = {"wormhole_b0": (65536, 0.318, 25.345), "blackhole": (65536, 0.182, 57.677)}
# the tables' reference clock (is_split_reader_viable: 1.35 GHz on Blackhole, 1.0 Wormhole)
TABLE_GHZ = {"wormhole_b0": 1.0, "blackhole": 1.35}


def tilize_cycles_per_tile(env: CostEnv, in_dtype: str, out_dtype: str, fp32_acc: bool) -> int:
    table = TILIZE_CYCLES.get(env.arch.name, TILIZE_CYCLES["wormhole_b0"])
    halo = table["float32" if in_dtype == "float32" else "bfloat16"]
    row = halo.get(out_dtype, halo["bfloat8_b"])
    return row[1 if fp32_acc else 0]


def mcast_cycles(env: CostEnv, nbytes: float) -> float:
    """Cycles to multicast ``nbytes`` of weights (TT's linked-multicast rate by size)."""
    top, lo, hi = MCAST_RATE.get(env.arch.name, MCAST_RATE["wormhole_b0"])
    align = 16
    size = min(max(nbytes, align), top)
    rate = lo + (hi - lo) / (top - align) * (size - align)
    return nbytes / rate * TABLE_GHZ.get(env.arch.name, 1.0)


def act_block_tiles(layer, rows_pc: int) -> int:
    """The act block's height in tiles: ``act_block_h_override`` (rounded down to a divisor of
    the core's height, as ``l1.conv_l1``), else the core's whole height (ttnn's default)."""
    per_core_m = max(1, math.ceil(rows_pc / TILE))
    want = int(getattr(layer.config, "act_block_h_override", 0) or 0) // TILE
    if want <= 0:
        return per_core_m
    return max(d for d in range(1, min(want, per_core_m) + 1) if per_core_m % d == 0)


def split_reader(kind: str, abh: int, act_blk: float, tilize_blk: float, w_blk: float,
                 force: bool | None = None) -> bool:
    """Whether ttnn runs the split reader (``is_split_reader_supported`` and, unless forced,
    ``is_split_reader_viable``): height or block sharded with act blocks over one tile high;
    block sharded always, height sharded when TT's time before the first matmul is shorter."""
    if kind not in ("height_sharded", "block_sharded") or abh <= 1:
        return False
    if force is not None:
        return bool(force)
    if kind == "block_sharded":
        return True
    return act_blk / 2 + max(w_blk, tilize_blk) < max(act_blk + tilize_blk, w_blk)


def conv_phases(layer, env: CostEnv, in_shape, out_shape, *, rows_scale: float = 1.0):
    """The conv's own programs (halo and the conv), for ``rows_scale`` of its output rows (a
    DRAM slice)."""
    node, cfg = layer.node, layer.config
    a = node.attrs
    kh, kw = a.kernel
    cin, cout = in_shape.c, out_shape.c
    rows = max(1, int(out_shape.rows * rows_scale))
    cores, rows_pc, cols_pc = _work_split(layer, rows, cout)
    if rows_scale < 1.0:
        rows_pc = max(1, math.ceil(rows / max(cores, 1)))
    k = kh * kw * round_up(cin, TILE)
    macs = round_up(rows_pc, TILE) * round_up(cols_pc, TILE) * round_up(k, TILE)
    compute = env.fpu_cycles(macs, env.fidelity(layer))

    act_dtype = layer.inputs[0].dtype if layer.inputs else "bfloat16"
    w_dtype = getattr(cfg, "weights_dtype", None) or node.precision.weights
    out_dtype = layer.output.dtype
    abpe, wbpe = bytes_per_element(act_dtype), bytes_per_element(w_dtype)
    kind = layer.output.memory.memory_layout if layer.output.memory.sharded else \
        (cfg.shard_layout or "height_sharded")
    in_cols = cin if kind == "height_sharded" else math.ceil(round_up(cin, TILE) / 8)
    mm = bool(cfg.is_mm_conv) or (kh, kw) == (1, 1) and tuple(a.stride) == (1, 1) \
        and not any(a.padding)
    # activation reader: a plain matmul reads its shard's tiles locally; otherwise each im2col
    # row is kh*kw sticks of its (halo'd) shard's channels
    if mm:
        act_tiles = round_up(rows_pc, TILE) * round_up(in_cols, TILE) / (TILE * TILE)
        act = env.local_cycles(BYTES_PER_TILE.get(act_dtype, 2048), act_tiles)
    else:
        # the halo'd input is row-major bfloat16 sticks of the core's channels; adjacent window
        # columns are adjacent sticks, so the reader takes one window row (kw sticks) per read
        ch = round_up(cin, 8) if kind == "height_sharded" else in_cols
        act = env.local_cycles(max(16, int(kw * ch * 2)), rows_pc * kh)
    if kind == "block_sharded":
        # the row's other cores' im2col blocks arrive by multicast
        act += env.remote_cycles(2048, rows_pc * k * abpe / 2048)
    # weights: read from DRAM once, multicast; every core receives its columns' [K, cols]
    w_core = round_up(k, TILE) * round_up(cols_pc, TILE) * wbpe
    weights = env.remote_cycles(2048, w_core / 2048, read=False)
    w_dram = round_up(k, TILE) * round_up(cout, TILE) * wbpe
    out = env.local_cycles(BYTES_PER_TILE.get(out_dtype, 2048),
                           round_up(rows_pc, TILE) * round_up(cols_pc, TILE) / (TILE * TILE),
                           read=False)
    tilize = 0.0
    if not mm and kind != "width_sharded":
        # the im2col block tilized on the compute core (TT's cycles per tile), every K tile of
        # every output row tile of the core; with TT's first-block figures, whether the two
        # data-movement RISC-Vs split the activation reads
        fp32_acc = bool(getattr(node.precision, "fp32_accum", False))
        per_tile = tilize_cycles_per_tile(env, act_dtype, out_dtype, fp32_acc)
        k_tiles = math.ceil(kw * (round_up(cin, 8) if kind == "height_sharded" else in_cols)
                            / TILE)
        tilize = per_tile * math.ceil(rows_pc / TILE) * k_tiles * kh
        abh = act_block_tiles(layer, rows_pc)
        ch = round_up(cin, 8) if kind == "height_sharded" else in_cols
        unit = max(16, int(kw * ch * (4 if act_dtype == "float32" else 2)))
        act_blk = env.local_cycles(unit, abh * TILE)
        w_blk_bytes = k_tiles * math.ceil(cols_pc / TILE) * BYTES_PER_TILE.get(w_dtype, 2048)
        w_blk = transfer_cycles(BYTES_PER_TILE.get(w_dtype, 2048),
                                w_blk_bytes / BYTES_PER_TILE.get(w_dtype, 2048), dram=True,
                                local=False, read=True, col=env.col,
                                clock_hz=env.arch.clock_hz) + mcast_cycles(env, w_blk_bytes)
        split = split_reader(kind, abh, act_blk, per_tile * abh * k_tiles, w_blk,
                             getattr(cfg, "force_split_reader", None))
    else:
        split = False
    # reader and weights reader run on the two data-movement RISC-Vs (overlapped), the writer
    # after the compute of each block; the split reader has the second RISC-V read half of
    # the activation, then the weights (TT's thread organisation, is_split_reader_viable)
    noc = (act / 2 + weights if split else max(act, weights)) + out
    phases = []
    if not mm:
        # halo: the input shard plus its neighbours' edge rows, as row-major sticks
        in_rows_pc = math.ceil(in_shape.rows * rows_scale / max(cores, 1))
        halo_rows = in_rows_pc + (kh - 1) * in_shape.w * (1 if kind != "width_sharded" else 0)
        stick = max(16, int(in_cols * 2))
        # the halo op copies runs of consecutive sticks (its gather config: one transfer per
        # run, at most an image row long), its own rows locally, the neighbours' over the NoC
        run = max(16, int(min(in_shape.w * stick, 2048)))
        halo = env.local_cycles(run, in_rows_pc * stick / run) + \
            env.remote_cycles(run, (halo_rows - in_rows_pc) * stick / run, read=False)
        phases.append(Phase(noc_cycles=halo, what="halo"))
    # the fused activation: SFPU over each output tile of the core (relu: the packer's, free)
    sfpu = fused_sfpu_cycles(layer, math.ceil(rows_pc / TILE) * math.ceil(cols_pc / TILE))
    phases.append(Phase(compute_cycles=compute, noc_cycles=noc, dram_bytes=w_dram,
                        what="conv split reader" if split else "conv", sfpu_cycles=sfpu, tilize_cycles=tilize))
    return phases


def _l1_sharded(layout, shape, cores: int, grid_x: int):
    """The L1 height-sharded form ttnn moves an interleaved conv input / output through."""
    from ...planning.layout import MemSpec, TensorLayout
    sh = (round_up(math.ceil(shape.rows / cores), TILE), round_up(shape.c, TILE))
    grid = (min(grid_x, cores), math.ceil(cores / grid_x))
    return TensorLayout(MemSpec("height_sharded", "l1", grid, cores, sh), layout.layout,
                        layout.dtype)


def cost(layer, env: CostEnv):
    node, cfg = layer.node, layer.config
    in_shape = env.shape(node.inputs[0])
    out_shape = node.shape
    if cfg.slice is None and not layer.output.memory.sharded:
        # an interleaved conv: ttnn shards its input into L1 and its output back (the
        # conv's own interleaved_to_sharded / sharded_to_interleaved programs)
        cores = cfg.num_cores or env.grid_cores
        ins, outs = layer.inputs[0], layer.output
        gx = env.arch.grid[0]
        sh_in = _l1_sharded(ins, in_shape, cores, gx)
        sh_out = _l1_sharded(outs, out_shape, cores, gx)
        pre = env.move(env.side(ins, in_shape.rows, in_shape.c),
                       env.side(sh_in, in_shape.rows, in_shape.c))
        post = env.move(env.side(sh_out, out_shape.rows, out_shape.c),
                        env.side(outs, out_shape.rows, out_shape.c))
        dram_in = env.side(ins, in_shape.rows, in_shape.c)
        dram_out = env.side(outs, out_shape.rows, out_shape.c)
        return (Phase(noc_cycles=pre, dram_bytes=dram_in.bytes if dram_in.dram else 0,
                      what="interleaved_to_sharded"),
                *conv_phases(layer, env, in_shape, out_shape),
                Phase(noc_cycles=post, dram_bytes=dram_out.bytes if dram_out.dram else 0,
                      what="sharded_to_interleaved"))
    if cfg.slice is not None:
        n = cfg.slice.num_slices
        phases = []
        ins = layer.inputs[0]
        for _ in range(n):
            # the slice's input rows in from DRAM, its output rows out to DRAM
            in_bytes = in_shape.rows * in_shape.c * bytes_per_element(ins.dtype) / n
            out_bytes = out_shape.rows * round_up(out_shape.c, TILE) * \
                bytes_per_element(layer.output.dtype) / n
            io = env.move(env.side(ins, max(1, in_shape.rows // n), in_shape.c),
                          env.side(layer.output, max(1, out_shape.rows // n), out_shape.c))
            phases.append(Phase(noc_cycles=io, dram_bytes=in_bytes + out_bytes, what="slice io"))
            phases.extend(conv_phases(layer, env, in_shape, out_shape, rows_scale=1.0 / n))
        return tuple(phases)
    return tuple(conv_phases(layer, env, in_shape, out_shape))


# ---- choosing by it (the planner's conv candidates) ------------------------------------------

# a candidate must beat ttnn's own preference (the candidates' first) by this much to replace
# it: below the model's resolution the plan stays ttnn's
MARGIN = 0.02


def candidate_us(ctx, node, x, c) -> float:
    """Estimated µs of conv ``node`` on candidate ``c`` (``plan_context.ConvCandidate``) fed
    ``x``: the conv's programs, and the reshard an adapter does when ``x`` is sharded elsewhere."""
    from types import SimpleNamespace
    from ...arch import get as arch_get
    from ...planning.estimate import movement_phase, phase_us
    from ...planning.plan_context import conv_layer
    env = CostEnv(arch_get(ctx.arch), SimpleNamespace(graph=ctx.g))
    reshard = x.memory.sharded and x.memory != c.conv_in.memory
    cin = c.conv_in if reshard else x
    layer = conv_layer(ctx, node, cin, c, None)
    phases = list(cost(layer, env))
    if reshard:
        shape = ctx.g.shape_of(node.inputs[0])
        phases.append(movement_phase(env, [(x, shape)], (c.conv_in, shape), "reshard"))
    return sum(phase_us(p, env, _efficiency())[0] for p in phases)


def sliced_us(ctx, layer) -> float:
    """Estimated µs of a DRAM-sliced conv ``layer`` (every slice's programs)."""
    from types import SimpleNamespace
    from ...arch import get as arch_get
    from ...planning.estimate import phase_us
    env = CostEnv(arch_get(ctx.arch), SimpleNamespace(graph=ctx.g))
    return sum(phase_us(p, env, _efficiency())[0] for p in cost(layer, env))


def _efficiency() -> float:
    from ...planning.estimate import FPU_EFFICIENCY
    return FPU_EFFICIENCY


def describe(c) -> str:
    return (f"{c.kind} on {c.pc.num_cores} cores, act_block_h {c.act_block_h or 'auto'}")


def fastest_first(ctx, node, x, cands: list) -> tuple[list, dict]:
    """``cands`` (all fitting L1, in the planner's order of preference) ordered by estimated
    µs, fastest first; ttnn's preference stays first unless another is ``MARGIN`` faster.
    Returns the order and each candidate's µs (by id)."""
    if len(cands) < 2:
        return cands, {}
    us = {id(c): candidate_us(ctx, node, x, c) for c in cands}
    first = cands[0]
    # width sharding only where ttnn's own heuristic picks it: the L1 address model is not yet
    # exact after a width-sharded stage the estimate chose (resnet50 b16's global pool on
    # layer4 width-sharded: its largest free block 53,248 B off ttnn's; tests/test_l1_alloc.py)
    movable = [c for c in cands if c.kind != "width_sharded" or first.kind == "width_sharded"]
    rest = sorted(movable, key=lambda c: us[id(c)])
    rest += [c for c in cands if c not in rest]
    if us[id(rest[0])] < us[id(first)] * (1 - MARGIN):
        return rest, us
    return [first] + [c for c in rest if c is not first], us


def why(pick, order: list, us: dict, default=None) -> str | None:
    """The note a conv's choice records: its µs and the runner-up's (another scheme, grid or
    block; None when nothing else was weighed)."""
    if pick is None or id(pick) not in us:
        return None
    # the runner-up: the fastest other scheme or core count; else another act_block_h
    scheme = (pick.kind, pick.pc.num_cores)
    others = [c for c in order if (c.kind, c.pc.num_cores) != scheme] or \
        [c for c in order if describe(c) != describe(pick)]
    if not others:
        return None
    r = min(others, key=lambda c: us[id(c)])
    text = (f"{describe(pick)}: {us[id(pick)]:,.1f} µs estimated; runner-up {describe(r)}: "
            f"{us[id(r)]:,.1f} µs")
    if default is not None and default is not pick and id(default) in us:
        text = f"by the estimate, not ttnn's default ({describe(default)}: " \
               f"{us[id(default)]:,.1f} µs): " + text
    return text


def lowering_us(ctx, node, x) -> tuple[float, float | None]:
    """(linear, conv2d) estimated µs of a 1x1 stride-1 conv that ``lowering: auto`` may run either
    way: ``ttnn.linear`` with the solver's program config (the move of ``x`` into its in0
    layout included), and the fastest conv2d candidate that fits L1 (None: none fits). The
    question ``probe-1x1`` answers on a card."""
    from types import SimpleNamespace
    from ...arch import get as arch_get
    from ...planning.estimate import movement_phase, phase_us
    from ...planning.layout import HEIGHT, BLOCK, TILE_LAYOUT, TensorLayout
    from ...planning.matmul_solver import solve_node
    from ...planning.plan_context import conv_candidate
    from ..linear.cost import matmul_phase
    env = CostEnv(arch_get(ctx.arch), SimpleNamespace(graph=ctx.g))
    cfg = solve_node(node, grid=ctx.grid, l1_budget=max(ctx.op_budget, 1))
    shape = ctx.g.shape_of(node.inputs[0])
    in0 = TensorLayout(cfg.in0_memory, TILE_LAYOUT, x.dtype)
    as_linear = SimpleNamespace(node=node, config=SimpleNamespace(lowering="linear"))
    phases = [matmul_phase(as_linear, env, cfg.M, cfg.K, cfg.N, cfg)]
    if x.memory != in0.memory or x.layout != TILE_LAYOUT:
        phases.append(movement_phase(env, [(x, shape)], (in0, shape), "to in0"))
    lin = sum(phase_us(p, env, _efficiency())[0] for p in phases)
    convs = []
    for k in (HEIGHT, BLOCK):
        try:
            c = conv_candidate(ctx, node, k, x, None, False)
        except (ValueError, ZeroDivisionError):
            continue
        if c.est.total <= ctx.op_budget:
            convs.append(candidate_us(ctx, node, x, c))
    return lin, (min(convs) if convs else None)
