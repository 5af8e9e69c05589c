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

This module is the shared core (per-core bytes of a tensor, the estimate, the halo's geometry, the
allocator's bank); each op's own estimate is in ``ops/<op>/l1.py`` (conv2d's and the pools' so far).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import arch as _arch
from ..arch import WORMHOLE_B0
from ..language.graph import TILE, round_up
from .layout import BYTES_PER_TILE, TensorLayout


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


def split_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, rows: int, c_in: int,
             channels: list[int], num_cores: int = 64) -> L1Estimate:
    """A split: one ttnn.slice per output, run one after the other. At the last slice the input
    and every output are allocated (the earlier outputs stay alive for their readers), plus one
    slice's CBs: two input tiles and 16 B (ttnn 0.81.1 on the mock device, interleaved TILE
    input, sections starting on a 32-channel boundary: 8208 B for [0, 8) of a 2048x16 bfloat16
    tensor, 10256 B for [32, 64) of 2048x64; a section starting inside a tile takes slice's
    padded path, whose CBs are larger: ``KNOWN_ESTIMATE_GAPS["split_unaligned"]``)."""
    parts = {"input": per_core_bytes(in_layout, rows, c_in, num_cores)}
    for k, ck in enumerate(channels):
        parts[f"output{k}"] = per_core_bytes(out_layout, rows, ck, num_cores)
    if not in_layout.memory.sharded:
        parts["slice_cb"] = 2 * tile_bytes(in_layout.dtype if in_layout.layout == "tile"
                                           else "bfloat16") + 16
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


def with_unborrowed_binary_cbs(est: L1Estimate, cbs: int = 4) -> L1Estimate:
    """A sharded binary_ng op off its native L1-sharded path streams its operands through CBs
    of its own instead of borrowing their buffers, ``cbs`` of two bf16 tiles each, measured on
    the mock device: with a broadcast operand four (efficientnet_b0's SE multiply: 4 x 4096 B);
    a sharded operand next to an interleaved (DRAM, spilled) one of the same shape three
    (bevdet b6's residual add with its shortcut spilled: the CB region ends 12,288 B above the
    base); a same-shape add of two sharded tensors off the native path (resnet50 batch 2's
    layer3 adds) borrows. The CBs ``eltwise_l1`` already counts for interleaved operands are
    part of them."""
    counted = sum(v for k, v in est.parts.items() if classify_part(k) == "cb")
    extra = max(0, cbs * 2 * tile_bytes("bfloat16") - counted)
    if not extra:
        return est
    return L1Estimate(est.total + extra, {**est.parts, "binary_cbs": extra})


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


def pixel_linear_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, rows: int, k: int,
                    n: int, weights_dtype: str = "bfloat8_b", num_cores: int = 64,
                    bias: bool = True, budget: int | None = None) -> L1Estimate:
    """A per-pixel interleaved ttnn.linear (many rows: ConvNeXt's pwconv) with ttnn's automatic
    program config (matmul_program_config.cpp create_matmul_program_config):

    * a narrow problem (rows / N > 8 in integer division, is_narrow_shape) gets the 1D
      systolic config: tall, per-core M = Mt / 64 cores, in0_block_w = 1, the whole N per core
      (convnext_tiny's pwconv1 at batch 2 and 4: 312,832 / 568,832 B, ttnn 0.81.1's figures
      on the mock device to the byte);
    * otherwise a 2D multicast over the 8x8 grid: per-core M = Mt / 8, per-core N = Nt / 8,
      in0_block_w the largest of 4, 3, 2, 1 dividing Kt. Not matched to 0.81.1: its figures on
      convnext_tiny at batch 1 are 0.6x to 6.6x this (pwconv1 at 28x28: 772 KB).

    get_multi_dim_per_core_factor shrinks the output block (M first here) until the CBs fit,
    which ``budget`` (the L1 left to the op) stands for. CBs: in0 2 x block_h x in0_block_w, in1
    2 x in0_block_w x block_w, out block_h x block_w tiles; the bias add's output besides."""
    m_t, n_t, k_t = -(-rows // TILE), -(-n // TILE), -(-k // TILE)
    if rows // max(n, 1) > 8:
        m_c, n_c, in0_bw = -(-m_t // num_cores), n_t, 1
    else:
        m_c, n_c = max(1, -(-m_t // 8)), max(1, -(-n_t // 8))
        in0_bw = next(d for d in (4, 3, 2, 1) if k_t % d == 0)
    t_in = tile_bytes(in_layout.dtype if in_layout.layout == "tile" else "bfloat16")
    t_w, t_out = tile_bytes(weights_dtype), tile_bytes(out_layout.dtype)
    out = per_core_bytes(out_layout, rows, n, num_cores)
    inp = per_core_bytes(in_layout, rows, k, num_cores)

    def cbs(m: int) -> tuple[int, int, int]:
        return 2 * m * in0_bw * t_in, 2 * in0_bw * n_c * t_w, m * n_c * t_out

    block_h = m_c
    if budget is not None:
        room = budget - inp - out * (2 if bias else 1)
        for m in sorted((d for d in range(1, m_c + 1) if m_c % d == 0), reverse=True):
            block_h = m
            if sum(cbs(m)) <= room:
                break
    in0_cb, in1_cb, out_cb = cbs(block_h)
    parts = {"input": inp, "output": out, "in0_cb": in0_cb, "in1_cb": in1_cb, "out_cb": out_cb}
    if bias:
        parts["bias_add_output"] = out
    return L1Estimate(sum(parts.values()), parts)


def layer_norm_l1(in_layout: TensorLayout, out_layout: TensorLayout, rows: int, c: int,
                  num_cores: int = 64) -> L1Estimate:
    """An interleaved ttnn.layer_norm: each core normalizes whole rows of ``Wt`` = C/32 tiles,
    so its CBs grow with the width. Fitted to ttnn 0.81.1's figures on the mock device
    (convnext_tiny at 224: 200,704 B at C = 96, 192,512 at 192, 270,336 at 384, 348,160 at 768,
    inputs and outputs included): 160 KiB plus four bfloat16 tiles per Wt, 0-22 % above them."""
    wt = -(-c // TILE)
    parts = {"input": per_core_bytes(in_layout, rows, c, num_cores),
             "output": per_core_bytes(out_layout, rows, c, num_cores),
             "cbs": 160 * 1024 + 4 * wt * tile_bytes("bfloat16")}
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
    if op == "conv_transpose2d":
        return "conv_transpose2d_matmul" if c.is_mm_conv else "conv_transpose2d"
    if op == "split" and layer.inputs and layer.inputs[0].layout == "tile" and any(
            lo % TILE for _, lo, _ in layer.node.attrs.sections):
        return "split_unaligned"
    return op


KNOWN_ESTIMATE_GAPS: dict[str, EstimateGap] = {
    "global_avg_pool": EstimateGap(
        "ttnn 0.81.1 reduces a whole-map avg_pool2d through untilize_with_unpadding, whose CB "
        "blocks grow with the rows it untilizes (batch 16: 2 x 12288 + 2 x 8192 B instead of "
        "batch 1's 2 x 4096) and, for a TILE output, a final tilize_with_val_padding; the "
        "estimate uses the batch-1 CB sizes (ResNet50 batch 16: 0.84 of ttnn's figure)",
        (0.8, 1.05)),
    "split_unaligned": EstimateGap(
        "a split section of a TILE tensor that starts inside a tile (not on a 32-channel "
        "boundary) runs ttnn.slice's padded path, whose CBs grow with the tensor's width and are "
        "not modelled: the estimate counts the aligned path's two input tiles (an 8/8 split of "
        "2048x16 bfloat16: 10,256 B against ttnn's 11,776; one slice [8, 16) of 2048x64: "
        "CBs of 18,944 B instead of 4,112); split on multiples of 32 channels where you can",
        (0.4, 1.05)),
}


# ---- the allocator's L1 bank and what a live tensor costs in it ---------------------------------

def slice_input_copy_bytes(memory, dtype: str) -> int:
    """Bytes per bank of a DRAM-sliced conv's input slice copied into L1 shards (row-major
    sticks of ``memory``'s shard shape; measured on the mock n150: 528,384 B where this says
    532,480 for a 64-channel 3x3 conv in two width slices). It sits beside the slice's first halo
    pass (``plan_alloc.op_events``), so a slice count fits only if both do."""
    sh, sw = memory.shard_shape
    return sh * sw * (4 if dtype == "float32" else 2)


def l1_region(arch: str = "wormhole_b0", l1_small_size: int = 32768) -> tuple[int, int]:
    """``[base, top)`` of the L1 allocator's range (``l1_alloc``): L1_SMALL sits above ``top``."""
    base = _arch.get(arch).l1_base
    return base, base + l1_bank_bytes(arch, l1_small_size)


def l1_bank_bytes(arch: str = "wormhole_b0", l1_small_size: int = 32768) -> int:
    """The allocator's L1 bank per core, for a device opened with ``l1_small_size`` (carved out of
    the same L1). Every L1 buffer and circular buffer of a core must fit in it at once."""
    return _arch.get(arch).l1_bank_no_l1_small - int(l1_small_size)


def bank_bytes(t: TensorLayout, rows: int, c: int, banks: int = WORMHOLE_B0.l1_banks) -> int:
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


# ---- the parts of an estimate, by what they are --------------------------------------------
#: inputs and outputs the op holds, the halo's output (convs, pools), and circular buffers (every
#: other part: act/weights/partials/bias/window CBs, eltwise cb<i>, phase extras)
PART_CLASSES = ("cb", "halo", "inputs", "outputs")
# buffers the op makes of its input before its main program (a tilized copy; a conv's own sharded
# copy in the halo phase; the global pool's "<phase>_phase" copies): tensors, not CBs, so the next
# program does not inherit them
_INPUT_COPIES = ("tilized_input", "input_copy", "halo_phase_extra")
# outputs the op writes besides its own, freed when it ends: a biased linear's matmul output
# (the bias add runs after it into the layer's output). A buffer the allocator places
# (plan_alloc.op_events allocates it), not a CB: counted as a CB too, it put convnext_tiny b8's
# pwconv1 CB region 301,056 B too high and the planner refused the model (issue 33). The
# float32 global pool's ttnn.mean (ops/pool/exact_global.py) writes three such buffers
_OWN_OUTPUTS = ("bias_add_output", "reshaped_input", "mean_out", "partials")


def classify_part(key: str) -> str:
    """Which class an ``l1_parts`` key belongs to (the part names above)."""
    if key == "input" or re.fullmatch(r"input\d+", key) or key in _INPUT_COPIES or \
            key.endswith("_phase"):
        return "inputs"
    if key == "output" or key in _OWN_OUTPUTS:
        return "outputs"
    if key == "halo":
        return "halo"
    # act/tilized_act/weights/partials/bias/window/reduce/in0/in1/out CBs, eltwise cb<i>: the op's
    # own buffers
    return "cb"


def estimate_cbs(est: "L1Estimate") -> int:
    """The circular-buffer bytes of an estimate (its parts of class "cb")."""
    return sum(int(v) for k, v in est.parts.items() if classify_part(k) == "cb")


def layer_parts(layer) -> dict[str, int]:
    """A planned layer's own L1 per core by class (``PART_CLASSES``); sums to its estimate
    (``PlannedLayer.l1_bytes_per_core``). The plot stacks these; liveness needs the CBs apart,
    since ttnn releases them only when the next program starts."""
    raw = dict(layer.config.l1_parts or {})
    out = {k: 0 for k in PART_CLASSES}
    if set(raw) == {"matmul"}:
        total = int(raw["matmul"])
        n = layer.node
        ins = sum(per_core_bytes(t, n.shape.rows, n.attrs.get("in_channels", n.shape.c))
                  for t in layer.inputs if t.memory.sharded)
        outs = per_core_bytes(layer.output, n.shape.rows, n.shape.c) \
            if layer.output.memory.sharded else 0
        ins, outs = min(ins, total), min(outs, max(total - ins, 0))
        out.update(inputs=ins, outputs=outs, cb=total - ins - outs)
    else:
        for k, v in raw.items():
            out[classify_part(k)] += int(v)
    # the classes total the estimate (what the table prints); anything unnamed is the op's own
    gap = int(layer.l1_bytes_per_core) - sum(out.values())
    if gap > 0:
        out["cb"] += gap
    return out
