"""Per-layer estimates of L1 bytes per core, against the architecture's usable L1.

The model (deliberately approximate; it decides between layouts, it does not replace the card's
allocator):

* sharded tensors: one shard per core (``shard_h * shard_w * bytes/element``, tile padded);
  interleaved L1 tensors: an even 1/64 share; DRAM tensors: 0.
* conv2d (after tt-metal conv2d_utils.cpp ``calculate_L1_usage`` / ``get_cb_info``, as
  ``determine_conv_config_for_auto_shard`` uses it): input shard + halo output (the input shard
  plus (kh-1) extra input rows of overlap) + output shard + circular buffers:
  - activation block: act_block_h x act_block_w tiles (input dtype), and the tilized copy (bf16);
  - weight block: the weights one core multiplies with (height: all of K x per-core N; block:
    K/cores_c x per-core N; width: K/cores x per-core N), weights dtype;
  - partials: out_block_h x per-core N tiles (fp32 when fp32_accum, else bf16);
  - bias: per-core N tiles of one row.
  act_block_h is the planner's choice (defaults to one tile row block of 32 rows x the shard,
  capped at the per-core height), act_block_w as tt-metal sets it per scheme.
* pools: input shard + halo output + output shard + a window CB (kh*kw sticks x per-core C, 2
  buffers); global average pool: ttnn's fast reduce path, no halo, a few tiles of CB.
* eltwise / relu / pad / upsample / concat: operand shards + output shard + 2 double-buffered
  tiles per operand.
* linear: interleaved inputs; CBs for an M x K_block and K_block x N_per_core block, output block.

Ignored: kernel binaries and runtime args (live outside the allocator's L1 space), reader index
config tensors (small; or in DRAM), L1 alignment padding of row-major sticks, allocator
fragmentation, split-reader/double-buffer options we do not enable, and the transient L1 used by
adapters themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

from .graph import TILE, round_up
from .layout import (BLOCK, BYTES_PER_TILE, HEIGHT, L1_INTERLEAVED, WIDTH, WORMHOLE_GRID,
                     WORMHOLE_L1_BYTES_PER_CORE, TensorLayout)

ARCH_L1 = {"wormhole_b0": WORMHOLE_L1_BYTES_PER_CORE}
ARCH_GRID = {"wormhole_b0": WORMHOLE_GRID}


def tile_bytes(dtype: str) -> int:
    return BYTES_PER_TILE[dtype]


def _bpe(t: TensorLayout) -> float:
    if t.layout == "tile":
        return BYTES_PER_TILE[t.dtype] / (TILE * TILE)
    return {"float32": 4.0}.get(t.dtype, 2.0)


def per_core_bytes(t: TensorLayout, rows: int, c: int, num_cores: int = 64) -> int:
    """L1 bytes one core holds of tensor ``t`` of [rows, c]."""
    m = t.memory
    if m.sharded:
        sh, sw = m.shard_shape
        return int(sh * sw * _bpe(t))
    if m.buffer == "dram":
        return 0
    # interleaved L1: pages round-robin over the banks, every bank reserves the largest share
    if t.layout == "tile":
        pages = (round_up(rows, TILE) // TILE) * (round_up(c, TILE) // TILE)
        return -(-pages // num_cores) * BYTES_PER_TILE[t.dtype]
    page = round_up(int(c * _bpe(t)), 16)
    return -(-rows // num_cores) * page


@dataclass
class L1Estimate:
    total: int
    parts: dict[str, int]

    def __str__(self) -> str:
        return f"{self.total} B/core (" + ", ".join(f"{k} {v}" for k, v in self.parts.items()) + ")"


@dataclass(frozen=True)
class ConvGeometry:
    """The sliding window of a conv (or of one DRAM slice of it): batch, input and output image
    sizes, kernel, stride and (top, bottom, left, right) padding."""
    n: int
    ih: int
    iw: int
    oh: int
    ow: int
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)


def halo_sticks_per_core(g: ConvGeometry, out_shard_h: int, num_cores_nhw: int) -> int:
    """Input sticks (pixels) the halo op gathers for one core, the largest over the cores: the
    span, in the zero-padded input image laid out row by row, from the first input pixel the
    core's first output reads to the last pixel its last output reads (sliding_window.cpp
    generate_op_trace_metadata / halo). ttnn sizes every core's halo shard to that maximum; e.g.
    56x56, 3x3/1 pad 1, 64-row shards: 58 + 7 + 2 * 58 + 3 = 184 sticks."""
    kh, kw = g.kernel
    sh, sw = g.stride
    pt, pb, pl, pr = g.padding
    hp, wp = g.ih + pt + pb, g.iw + pl + pr
    total = g.n * g.oh * g.ow
    best = 0
    for core in range(num_cores_nhw):
        first = core * out_shard_h
        if first >= total:
            break
        last = min(total, first + out_shard_h) - 1

        def start(o):
            b, r = divmod(o, g.oh * g.ow)
            y, x = divmod(r, g.ow)
            return (b * hp + y * sh) * wp + x * sw
        best = max(best, start(last) + (kh - 1) * wp + kw - start(first))
    return best


def conv_l1(*, kind: str, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int,
            in_w: int, c_in: int, out_rows: int, c_out: int, kernel: tuple[int, int],
            cores_nhw: int, cores_c: int, num_cores: int, weights_dtype: str = "bfloat8_b",
            fp32_accum: bool = False, act_block_h: int | None = None, bias: bool = True,
            geometry: ConvGeometry | None = None, received: TensorLayout | None = None,
            is_mm: bool = False) -> L1Estimate:
    """ttnn 0.81.1's per-core L1 for one conv2d (what its graph capture shows on the mock
    device, ``ttmodels verify``): the largest of its phases.

    ``received`` is the tensor the layer is given (alive throughout; default ``in_layout``),
    ``in_layout`` the sharded input conv2d works on (its own interleaved_to_sharded copy of an
    interleaved input, freed after the halo).

    * Non-matmul convs: halo phase = conv input shard + halo output; conv phase = received input
      + halo output + conv output + the CBs conv2d_op_program_factory_common.cpp ``get_cb_info``
      does not place on a tensor: weights (per_core_N x act_block_w tiles, x kh when the height
      is split in several act blocks), act (act_block_h x act_block_w; block sharding's mcast
      block with the output tile size), tilized act (same count, output tile), bias (per_core_N
      tiles), the 64 B scratchpad, and partials only when their dtype differs from the output's
      (otherwise they sit on the output buffer).
    * Matmul (1x1) convs run ttnn::matmul: received input + output + in1 (in0_block_w x
      per_core_N weight tiles, twice when K takes more than one block) + bias; 2D (block) also an
      in0 CB of 2 x per_core_M x in0_block_w tiles (1D reads in0 from its shard); a row-major
      input is first tilized into a TILE copy of its shard."""
    kh, kw = kernel
    received = received or in_layout
    out_mem = out_layout.memory
    out_shard_h = out_mem.shard_shape[0] if out_mem.sharded else \
        round_up(-(-out_rows // max(cores_nhw, 1)), TILE)
    out_shard_w = out_mem.shard_shape[1] if out_mem.sharded else round_up(c_out, TILE)
    per_core_m = -(-out_shard_h // TILE)
    per_core_n = max(1, -(-out_shard_w // TILE))
    wt = tile_bytes(weights_dtype)
    out_tile = tile_bytes(out_layout.dtype)
    bf16 = tile_bytes("bfloat16")
    parts = {"input": per_core_bytes(received, in_rows, c_in),
             "output": per_core_bytes(out_layout, out_rows, c_out)}
    if is_mm:
        k_core = round_up(c_in, TILE * (cores_c if kind == BLOCK else 1)) // \
            (cores_c if kind == BLOCK else 1)
        in0_bw = -(-k_core // TILE)
        k_blocks = -(-round_up(c_in, TILE) // TILE) // in0_bw
        dbl = 2 if k_blocks > 1 else 1
        parts["in1_cb"] = dbl * in0_bw * per_core_n * wt
        if kind == BLOCK:
            act_tile = tile_bytes(in_layout.dtype if in_layout.layout == "tile" else "bfloat16")
            parts["in0_cb"] = dbl * per_core_m * in0_bw * act_tile
        if in_layout.layout != "tile":
            # conv2d tilizes a row-major input (a TILE copy of the shard) before the matmul
            sh = in_layout.memory.shard_shape[0] if in_layout.memory.sharded else out_shard_h
            parts["tilized_input"] = round_up(sh, TILE) // TILE * in0_bw * bf16
        if bias:
            parts["bias_cb"] = per_core_n * wt
        return L1Estimate(sum(parts.values()), parts)
    # act block: act_block_h_override tiles (must divide the per-core height), else all of it
    abh = per_core_m
    if act_block_h:
        want = max(1, act_block_h // TILE)
        abh = want if per_core_m % want == 0 else max(d for d in range(1, want + 1)
                                                      if per_core_m % d == 0)
    # padded input channels: conv2d_utils.cpp get_input_channels_alignment -- 8 (L1 alignment /
    # 2) for a row-major input of a height/block conv unless its shard width is a tile multiple
    row_major_in = received.layout != "tile" and not (
        received.memory.sharded and received.memory.shard_shape[1] % TILE == 0)
    align = 8 if (row_major_in and kind != WIDTH) else TILE
    cin_p = round_up(c_in, align * (cores_c if kind == BLOCK else 1))
    if kind == HEIGHT:
        abw = -(-(cin_p * kw) // TILE)
    elif kind == BLOCK:
        abw = -(-(cin_p // cores_c * kw) // TILE)
    else:
        abw = -(-(round_up(c_in, TILE * num_cores) * kh * kw // num_cores) // TILE)
    act_blocks_h = per_core_m // abh
    weights_tiles = per_core_n * abw * (kh if kind == HEIGHT and act_blocks_h > 1 else 1)
    if kind == WIDTH:
        weights_tiles = per_core_n * abw
    parts["weights_cb"] = weights_tiles * wt
    parts["act_cb"] = abh * abw * (bf16 if kind == HEIGHT else out_tile)
    parts["tilized_act_cb"] = abh * abw * out_tile
    if kind == WIDTH:
        parts["act_row_major_cb"] = 2 * abw * bf16
    if bias:
        parts["bias_cb"] = per_core_n * wt
    acc = "float32" if fp32_accum else "bfloat16"
    if out_layout.dtype != acc:
        parts["partials_cb"] = per_core_m * per_core_n * tile_bytes(acc)
    parts["scratch"] = 64
    # halo: row-major bf16 sticks of the core's channels (aligned to 8 channels = 16 B)
    if geometry is not None:
        sticks = halo_sticks_per_core(geometry, out_shard_h, max(cores_nhw, 1))
    else:
        share = -(-in_rows // max(cores_nhw, 1))
        sticks = share + (kh - 1) * (in_w + kw)
    split = cores_c if kind in (BLOCK, WIDTH) else 1
    if in_layout is received and in_layout.memory.sharded:
        c_core = in_layout.memory.shard_shape[1]
        conv_input = per_core_bytes(in_layout, in_rows, c_in, num_cores)
    else:
        # conv2d's own copy of an interleaved input: channels aligned to 8 for row-major
        # (L1 alignment / 2), 32 for TILE (conv2d_utils.cpp get_input_channels_alignment)
        align = 8 if in_layout.layout != "tile" else TILE
        c_core = round_up(c_in, align * split) // split
        rows = in_layout.memory.shard_shape[0] if in_layout.memory.sharded else \
            -(-in_rows // max(cores_nhw, 1))
        conv_input = int(rows * c_core * _bpe(in_layout))
    halo = sticks * round_up(c_core, 8) * 2
    parts["halo"] = halo
    conv_phase = sum(parts.values())
    halo_phase = parts["input"] + (conv_input if in_layout is not received else 0) + halo
    if halo_phase > conv_phase:
        parts["halo_phase_extra"] = halo_phase - conv_phase
    return L1Estimate(sum(parts.values()), parts)


def pool_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int, in_w: int,
            c: int, out_rows: int, kernel: tuple[int, int], num_cores: int,
            global_pool: bool = False) -> L1Estimate:
    kh, kw = kernel
    parts = {
        "input": per_core_bytes(in_layout, in_rows, c),
        "output": per_core_bytes(out_layout, out_rows, c),
    }
    c_core = in_layout.memory.shard_shape[1] if in_layout.memory.sharded else round_up(c, TILE)
    if global_pool:
        # ttnn 0.81.1: sharded_to_interleaved (a TILE interleaved copy), untilize_with_unpadding
        # (row-major interleaved), reduce (the TILE interleaved output); the input stays alive.
        # Measured CBs: untilize 2 x 4096, reduce 18432 (bf16), whatever the channel count.
        tiled = TensorLayout(L1_INTERLEAVED, "tile", in_layout.dtype)
        s2i = per_core_bytes(tiled, in_rows, c) if in_layout.memory.sharded else 0
        rm = per_core_bytes(TensorLayout(L1_INTERLEAVED, "row_major", "bfloat16"), in_rows, c)
        out = parts["output"]
        phases = {"s2i": s2i, "untilize": s2i + rm + 8192, "reduce": rm + out + 18432}
        worst = max(phases, key=phases.get)
        # the output counts in the reduce phase only: the rest of the worst phase beside it
        parts[f"{worst}_phase"] = phases[worst] - out
        return L1Estimate(sum(parts.values()), parts)
    if in_layout.memory.sharded and kh > 1:
        parts["halo"] = int(parts["input"] + (kh - 1) * (in_w + kw) * c_core * _bpe(in_layout))
    # the reader fills the window sticks in chunks of at most 8 tiles' worth of rows
    parts["window_cb"] = 2 * min(kh * kw, 8 * TILE) * round_up(c_core, 16) * 2
    return L1Estimate(sum(parts.values()), parts)


def eltwise_l1(*, inputs: list[tuple[TensorLayout, int, int]], out_layout: TensorLayout,
               out_rows: int, c: int, num_cores: int = 64,
               output_aliases_input: int | None = None) -> L1Estimate:
    """``output_aliases_input``: the output is written into that input (``output_tensor=``),
    so it holds no L1 of its own."""
    parts = {}
    for i, (t, r, cc) in enumerate(inputs):
        parts[f"input{i}"] = per_core_bytes(t, r, cc, num_cores)
        if not t.memory.sharded:
            # a sharded operand's CB sits on its own buffer (globally allocated): no extra L1
            parts[f"cb{i}"] = 2 * tile_bytes(t.dtype if t.layout == "tile" else "bfloat16")
    parts["output"] = 0 if output_aliases_input is not None else \
        per_core_bytes(out_layout, out_rows, c, num_cores)
    if not out_layout.memory.sharded:
        parts["out_cb"] = 2 * tile_bytes(out_layout.dtype if out_layout.layout == "tile"
                                         else "bfloat16")
    return L1Estimate(sum(parts.values()), parts)


def linear_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, rows: int, k: int, n: int,
              weights_dtype: str = "bfloat8_b", num_cores: int = 64, bias: bool = True) -> L1Estimate:
    """An interleaved ttnn.linear (the head): input and output shares, the auto program config's
    CBs (in0_block_w = 2 K tiles when K allows: in0 2 x M x 2, in1 2 x 2 x per-core N, out
    M x per-core N tiles, as measured on ttnn 0.81.1), and with a bias a second output of the
    same size (the bias add runs as its own binary op after the matmul)."""
    m_t = -(-rows // TILE)
    k_t = -(-k // TILE)
    in0_bw = 2 if k_t % 2 == 0 else 1
    n_core = max(1, -(-(-(-n // TILE)) // num_cores))
    out = per_core_bytes(out_layout, rows, n, num_cores)
    parts = {
        "input": per_core_bytes(in_layout, rows, k, num_cores),
        "output": out,
        "in0_cb": 2 * m_t * in0_bw * tile_bytes(in_layout.dtype if in_layout.layout == "tile"
                                                else "bfloat16"),
        "in1_cb": 2 * in0_bw * n_core * tile_bytes(weights_dtype),
        "out_cb": m_t * n_core * tile_bytes(out_layout.dtype),
    }
    if bias:
        parts["bias_add_output"] = out
    return L1Estimate(sum(parts.values()), parts)


# ---- the estimate against ttnn's own figure ----------------------------------------------------
# ``ttmodels verify`` puts each layer's estimate next to ttnn 0.81.1's figure for the same step on
# the mock device (``ttnn_op_peak_total``: the step's L1 buffers and circular buffers plus its L1
# inputs, from the graph capture). Where the two differ by more than 10 %, the reason is one of
# these (measured tables: docs/layouts.md, "L1 estimate against ttnn"); ``band`` is the measured
# range of estimate / ttnn figure the CI test (tests/test_verify_models.py) holds each kind to.

@dataclass(frozen=True)
class EstimateGap:
    reason: str
    band: tuple[float, float]


def estimate_kind(layer) -> str:
    """The kind of a PlannedLayer's estimate: what ``KNOWN_ESTIMATE_GAPS`` is keyed by."""
    op, c = layer.node.op, layer.config
    if op == "conv2d":
        if c.slice:
            return "conv2d_sliced"
        if c.lowering == "linear":
            return "conv2d_linear"
        return "conv2d_matmul" if c.is_mm_conv else "conv2d"
    if op in ("add", "multiply"):
        return "binary"
    return op


KNOWN_ESTIMATE_GAPS: dict[str, EstimateGap] = {
    "global_avg_pool": EstimateGap(
        "ttnn 0.81.1 reduces a whole-map avg_pool2d through untilize_with_unpadding, whose CB "
        "blocks grow with the rows it untilizes (batch 16: 2 x 12288 + 2 x 8192 B instead of "
        "batch 1's 2 x 4096) and, for a TILE output, a final tilize_with_val_padding; the "
        "estimate uses the batch-1 CB sizes (ResNet50 batch 16: 0.84 of ttnn's figure)",
        (0.8, 1.05)),
}


# ---- the allocator's L1 bank and what a live tensor costs in it ---------------------------------

# Wormhole: the L1 bank per core without an L1_SMALL region, as ttnn 0.81.1 reports it
# (``ttnn.device.get_memory_view(device, ttnn.BufferType.L1).total_bytes_per_bank`` on a mock
# n150: 1,393,312 B with l1_small_size=0, 1,368,736 with 24576, 1,360,544 with 32768; the trace
# region is DRAM and does not change it). ``tests/test_verify.py`` checks it against the mock device.
ARCH_L1_BANK_NO_L1_SMALL = {"wormhole_b0": 1_393_312}
L1_BANKS = {"wormhole_b0": 64}        # one L1 bank per worker core (8x8): interleaved L1 pages


def l1_bank_bytes(arch: str = "wormhole_b0", l1_small_size: int = 32768) -> int:
    """The allocator's L1 bank per core, for a device opened with ``l1_small_size`` (carved out of
    the same L1). Every L1 buffer and circular buffer of a core must fit in it at once."""
    return ARCH_L1_BANK_NO_L1_SMALL[arch] - int(l1_small_size)


def bank_bytes(t: TensorLayout, rows: int, c: int, banks: int = 64) -> int:
    """What tensor ``t`` of [rows, c] occupies in each L1 bank while it is alive: its shard
    (sharded), or its share of round-robin pages (interleaved: tiles or rows, whole pages per
    bank), 0 in DRAM. The allocator gives a buffer the same address range in every bank, so this
    is what every core pays (ttnn's ``buffer_allocate.max_size_per_bank``)."""
    m = t.memory
    if m.buffer == "dram":
        return 0
    if m.sharded:
        return per_core_bytes(t, rows, c)
    if t.layout == "tile":
        pages = -(-rows // TILE) * -(-c // TILE)
        return -(-pages // banks) * tile_bytes(t.dtype)
    page = round_up(int(c * _bpe(t)), 16)          # one row per page, L1-aligned (16 B)
    return -(-rows // banks) * page


def total_bytes(t: TensorLayout, rows: int, c: int) -> int:
    """The whole tensor's bytes (all cores / DRAM): what moving it once costs."""
    return int(rows * c * _bpe(t))
