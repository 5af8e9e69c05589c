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
from .layout import (BLOCK, BYTES_PER_TILE, HEIGHT, WIDTH, WORMHOLE_GRID,
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
    return int(round_up(rows, TILE) * round_up(c, TILE) * _bpe(t)) // num_cores


@dataclass
class L1Estimate:
    total: int
    parts: dict[str, int]

    def __str__(self) -> str:
        return f"{self.total} B/core (" + ", ".join(f"{k} {v}" for k, v in self.parts.items()) + ")"


def conv_l1(*, kind: str, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int,
            in_w: int, c_in: int, out_rows: int, c_out: int, kernel: tuple[int, int],
            cores_nhw: int, cores_c: int, num_cores: int, weights_dtype: str = "bfloat8_b",
            fp32_accum: bool = False, act_block_h: int | None = None,
            bias: bool = True) -> L1Estimate:
    kh, kw = kernel
    cin_p = round_up(c_in, TILE * (cores_c if kind == BLOCK else 1))
    cout_p = round_up(c_out, TILE * (num_cores if kind == WIDTH else cores_c))
    out_shard_h = out_layout.memory.shard_shape[0] if out_layout.memory.sharded else \
        round_up(-(-out_rows // max(cores_nhw, 1)), TILE)
    per_core_m = -(-out_shard_h // TILE)
    abh = per_core_m if not act_block_h else min(per_core_m, max(1, act_block_h // TILE))
    if kind == HEIGHT:
        act_w = -(-(cin_p * kw) // TILE)
        k_tiles = -(-(cin_p * kh * kw) // TILE)
        n_tiles = cout_p // TILE
    elif kind == BLOCK:
        act_w = -(-(cin_p // cores_c * kw) // TILE)
        k_tiles = -(-(cin_p // cores_c * kh * kw) // TILE)
        n_tiles = cout_p // TILE // cores_c
    else:  # width: every core sees all rows, a slice of the channels
        act_w = -(-(round_up(c_in, TILE * num_cores) // num_cores * kw) // TILE)
        k_tiles = -(-(round_up(c_in, TILE * num_cores) // num_cores * kh * kw) // TILE)
        n_tiles = cout_p // TILE // num_cores
    act_tile = tile_bytes(in_layout.dtype if in_layout.layout == "tile" else "bfloat16")
    parts = {
        "input": per_core_bytes(in_layout, in_rows, c_in, num_cores),
        "output": per_core_bytes(out_layout, out_rows, c_out, num_cores),
        "act_cb": abh * act_w * act_tile,
        "tilized_act_cb": abh * act_w * tile_bytes("bfloat16"),
        "weights_cb": k_tiles * max(n_tiles, 1) * tile_bytes(weights_dtype),
        "partials_cb": abh * max(n_tiles, 1) * tile_bytes("float32" if fp32_accum else "bfloat16"),
    }
    if kh > 1 and in_layout.memory.sharded:
        # halo output: the shard plus (kh-1) rows of the input image of overlap
        bpe = _bpe(in_layout)
        width_c = in_layout.memory.shard_shape[1]
        parts["halo"] = int(parts["input"] + (kh - 1) * (in_w + kw) * width_c * bpe)
    elif kh > 1:
        bpe = 2.0
        share = -(-in_rows // max(cores_nhw, 1))
        parts["halo"] = int((share + (kh - 1) * (in_w + kw)) * round_up(c_in, 16) // max(cores_c, 1) * bpe)
    if bias:
        parts["bias_cb"] = max(n_tiles, 1) * tile_bytes(weights_dtype)
    return L1Estimate(sum(parts.values()), parts)


def pool_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int, in_w: int,
            c: int, out_rows: int, kernel: tuple[int, int], num_cores: int,
            global_pool: bool = False) -> L1Estimate:
    kh, kw = kernel
    parts = {
        "input": per_core_bytes(in_layout, in_rows, c, num_cores),
        "output": per_core_bytes(out_layout, out_rows, c, num_cores),
    }
    c_core = in_layout.memory.shard_shape[1] if in_layout.memory.sharded else round_up(c, TILE)
    if global_pool:
        # ttnn's global-pool fast path: one pool_sum reduction streaming tiles, no halo
        parts["reduce_cb"] = 4 * round_up(c_core, TILE) // TILE * BYTES_PER_TILE["bfloat16"]
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
        parts[f"cb{i}"] = 2 * tile_bytes(t.dtype if t.layout == "tile" else "bfloat16")
    parts["output"] = 0 if output_aliases_input is not None else \
        per_core_bytes(out_layout, out_rows, c, num_cores)
    parts["out_cb"] = 2 * tile_bytes(out_layout.dtype if out_layout.layout == "tile" else "bfloat16")
    return L1Estimate(sum(parts.values()), parts)


def linear_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, rows: int, k: int, n: int,
              weights_dtype: str = "bfloat8_b", num_cores: int = 64) -> L1Estimate:
    m_t = -(-rows // TILE)
    k_blk = min(-(-k // TILE), 8)
    n_core = max(1, -(-(-(-n // TILE)) // num_cores))
    parts = {
        "input": per_core_bytes(in_layout, rows, k, num_cores),
        "output": per_core_bytes(out_layout, rows, n, num_cores),
        "in0_cb": 2 * m_t * k_blk * tile_bytes(in_layout.dtype if in_layout.layout == "tile" else "bfloat16"),
        "in1_cb": 2 * k_blk * n_core * tile_bytes(weights_dtype),
        "out_cb": m_t * n_core * tile_bytes("bfloat16"),
    }
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
        if c.get("slice"):
            return "conv2d_sliced"
        if c.get("lowering") == "linear":
            return "conv2d_linear"
        return "conv2d_matmul" if c.get("is_mm_conv") else "conv2d"
    if op in ("add", "multiply"):
        return "binary"
    return op


KNOWN_ESTIMATE_GAPS: dict[str, EstimateGap] = {
    "conv2d": EstimateGap(
        "ttnn 0.81.1's NO_DISPATCH capture records no circular buffers for "
        "Conv2dShardedProgramFactory or UntilizeWithHaloProgramFactory, only their L1 buffers "
        "(halo output, conv output, reader-index config tensors); the estimate also counts the "
        "act / tilized-act / weights / partials / bias CBs a card allocates, so it is above "
        "ttnn's figure by that share (4.5x for the 7x7 stem, whose act and weight CBs dominate). "
        "Ratios below 1 (down to 0.71) are stride-2 1x1 (downsample) convs: not yet broken down",
        (0.65, 4.8)),
    "conv2d_matmul": EstimateGap(
        "a 1x1 stride-1 conv runs as ttnn::matmul, whose CBs are recorded: in0 (2 x per_core_M x "
        "in0_block_w tiles), in1 (in0_block_w x per_core_N weight tiles, double-buffered when K "
        "has more than one block), bias, plus ttnn's own tilize/reshard of a row-major input; "
        "the estimate still models them as conv CBs (act + tilized act + all K x N weights + "
        "partials), 0.83x-2.7x of ttnn's figure (e.g. layer4.1.conv1 at batch 1: ttnn = input "
        "16384 + output 4096 + in0 32768 + in1 34816 + bias 2176 = 90240 exactly)",
        (0.8, 2.9)),
    "conv2d_sliced": EstimateGap(
        "a DRAM-sliced conv: the estimate is the largest slice's sharded L1 with the conv CBs; "
        "ttnn's capture has the slices' halo and output buffers only (no conv CBs recorded)",
        (3.0, 3.8)),
    "binary": EstimateGap(
        "binary_ng's CBs are not in the capture (its sharded CBs sit on the operands' buffers); "
        "the estimate adds 2 double-buffered tiles per operand and output, and where a and b "
        "are sharded on different grids it adds both shards though no single core holds both",
        (0.95, 2.0)),
    "global_avg_pool": EstimateGap(
        "ttnn 0.81.1 runs a whole-map avg_pool2d as sharded_to_interleaved -> "
        "untilize_with_unpadding -> reduce, three programs with their own intermediates; the "
        "estimate models one pool2d program (input + output + reduce CB)",
        (0.6, 2.4)),
    "linear": EstimateGap(
        "the estimate assumes 2 x M x 8-tile in0/in1 blocks on 64 cores; ttnn's auto program "
        "config for the interleaved head matmul uses smaller blocks",
        (2.5, 3.2)),
    "max_pool2d": EstimateGap(
        "within 0-11 % (batch 16's stem pool: 11 %, the halo's row-major stick alignment)",
        (0.9, 1.15)),
}
