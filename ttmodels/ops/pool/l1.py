"""pool2d's per-core L1 estimate, and the global average pool's reduce path (its CBs, measured
on the mock device), on the shared model of ``ttmodels/planning/l1.py``."""
from __future__ import annotations

from ...language.graph import TILE, round_up
from ...planning.l1 import ConvGeometry, L1Estimate, _bpe, halo_sticks_per_core, per_core_bytes, tile_bytes
from ...planning.layout import L1_INTERLEAVED, TensorLayout


def pool_l1(*, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int, in_w: int,
            c: int, out_rows: int, kernel: tuple[int, int], num_cores: int,
            global_pool: bool = False, geometry: ConvGeometry | None = None,
            cores_nhw: int | None = None) -> L1Estimate:
    """pool2d's L1 per core. ``geometry`` (with ``cores_nhw``) sizes the halo buffer as ttnn does
    (``halo_sticks_per_core``: a strided window whose shard straddles two images takes their
    padding rows too); without it, the input shard plus (kh-1) rows."""
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
        cbs = {"s2i": 0, "untilize": _untilize_cbs(in_rows, c), "reduce": reduce_cbs(kh * kw)}
        phases = {"s2i": s2i, "untilize": s2i + rm + cbs["untilize"],
                  "reduce": rm + out + cbs["reduce"]}
        worst = max(phases, key=phases.get)
        # the output counts in the reduce phase only: the rest of the worst phase beside it,
        # its copies of the input (buffers) apart from its CBs
        parts[f"{worst}_phase"] = phases[worst] - out - cbs[worst]
        if cbs[worst]:
            parts[f"{worst}_cb"] = cbs[worst]
        return L1Estimate(sum(parts.values()), parts)
    if in_layout.memory.sharded and kh > 1:
        if geometry is not None and out_layout.memory.sharded:
            sticks = halo_sticks_per_core(geometry, out_layout.memory.shard_shape[0],
                                          max(cores_nhw or num_cores, 1))
            # row-major sticks of the core's channels, as the conv's halo
            parts["halo"] = int(sticks * c_core * _bpe(in_layout))
        else:
            parts["halo"] = int(parts["input"] + (kh - 1) * (in_w + kw) * c_core *
                                _bpe(in_layout))
    # the reader fills the window sticks in chunks of at most 8 tiles' worth of rows
    parts["window_cb"] = 2 * min(kh * kw, 8 * TILE) * round_up(c_core, 16) * 2
    if "halo" in parts and in_layout.layout == "tile":
        # the halo program untilizes the input (in and out CBs of 2 x channel-tiles bf16 tiles,
        # plus two 128 B config CBs); they stay reserved while pool2d allocates its output
        # (ttnn frees a program's CBs when the next starts). Measured on the mock device
        # (ttmodels verify, 64 channels: 2 x 8192 + 2 x 128 B).
        parts["halo_cb"] = 2 * 2 * (round_up(c_core, TILE) // TILE) * tile_bytes("bfloat16") + 256
    return L1Estimate(sum(parts.values()), parts)


# Measured on the mock device (bf16): the tilize that follows the global pool's reduce for a
# TILE output (its last program then: what the next op inherits)
TILIZE_CBS = 8192


def reduce_cbs(hw: int) -> int:
    """CBs of the global pool's (last) reduce over maps of ``hw`` pixels, measured on the mock
    device: from 28x28 up ttnn reduces in two stages, the last with 30,720 B of CBs
    (efficientnet_b0's squeezes); below, one reduce holding a column of the map's tiles beside
    14,336 B of fixed CBs (18,432 B for 7x7 maps, 28,672 B for 14x14)."""
    if hw >= 28 * 28:
        return 30720
    return 14336 + -(-hw // TILE) * tile_bytes("bfloat16")


def global_pool_last_cbs(out_layout: TensorLayout, kernel: tuple[int, int]) -> int:
    """The CBs of the global pool's last program: the reduce, then a tilize for a TILE output."""
    return TILIZE_CBS if out_layout.layout == "tile" else reduce_cbs(kernel[0] * kernel[1])


def _untilize_cbs(rows: int, c: int) -> int:
    """CBs of the global pool's middle phase on an interleaved [rows, c] TILE tensor, in and
    out CB alike (measured on the mock device):

    * no padding to strip (rows and channels whole tiles): ttnn.untilize, whose CBs each hold
      two rows of tiles (resnet50 batch 32: 2 x 262,144 B);
    * else untilize_with_unpadding (untilize_with_unpadding_device_operation.cpp
      select_program_factory): the block factory, width split in blocks, when a row has more
      than 32 tiles and is wider than the column is tall (up to 32 tiles): 2 x 4096 B at
      resnet50 batch 1 (batch 16: 2 x 12288 + 2 x 8192, an explained gap); otherwise the row
      factory, one row of tiles per CB (efficientnet_b0's squeeze: 2 x 16,384 B for 8 tiles)."""
    per_row, per_col = -(-c // TILE), -(-rows // TILE)
    row = per_row * tile_bytes("bfloat16")
    if rows % TILE == 0 and c % TILE == 0:
        return 2 * 2 * row
    if per_row > TILE and per_col <= TILE and per_row > per_col:
        return 8192
    return 2 * row



def exact_l1(c: int, *, in_tiled: bool, out_tiled: bool, padded: bool,
             row_tiles_max: int) -> L1Estimate:
    """The exact float32 pool's L1 per core (ops/pool/exact_window.py): its tensors are all DRAM
    interleaved, so only its programs' CBs count, the largest of them (ttnn frees a program's CBs
    when the next starts). Measured on the mock device (0.81.1, float32, ``ttmodels verify``'s
    ttnn op figure of max/avg pools of 16-4096 channels, row-major and TILE in and out):

    * maximum / add / multiply (binary_ng, row-major operands): 24,576 B (3 CBs of 2 float32
      tiles), whatever the channels;
    * pad (row-major): a 32 KiB CB, or 16 sticks when wider, plus one stick (C x 4 B):
      16 ch 32,832, 256 ch 33,792, 512 ch 34,816, 768 ch 52,224, 2048 ch 139,264;
    * untilize of a TILE input (interleaved): 2 CBs of a row of the channel tiles up to 32 tiles
      (1024 ch 262,144), beyond that the block factory's 2 x 4 tiles (2048 ch 32,768);
    * tilize of a TILE output: ``liveness.adapter_cbs``' interleaved tilize (at most the binary's
      at 2048 channels, measured); ``row_tiles_max`` is its widest row held whole
      (``liveness.INTERLEAVED_TILIZE_MAX_TILES``: liveness imports this module);
    * the strided slices stayed under the binary's figure in every case."""
    tiles = -(-c // TILE)
    f32 = tile_bytes("float32")
    stick = c * 4
    cbs = {"binary_cb": EXACT_BINARY_CBS}
    if padded:
        cbs["pad_cb"] = max(PAD_RM_CB, 16 * stick) + stick
    if in_tiled:
        cbs["untilize_cb"] = 2 * (tiles if tiles <= row_tiles_max else 4) * f32
    if out_tiled:
        cbs["tilize_cb"] = (tiles if tiles <= row_tiles_max else 2) * 2 * f32
    worst = max(cbs, key=cbs.get)
    return L1Estimate(cbs[worst], {worst: cbs[worst]})


# binary_ng on row-major float32 operands: a, b and the output CB, two float32 tiles each
EXACT_BINARY_CBS = 3 * 2 * 4096
# the row-major pad's fixed CB (measured: 32,768 B up to 2048-byte sticks)
PAD_RM_CB = 32768
