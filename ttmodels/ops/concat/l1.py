"""What an interleaved channel concat of TILE inputs whose channels pad a tile allocates in
ttnn 0.81.1 (the wheel's ``data_movement/concat/concat.cpp`` and
``device/concat_tiled_unaligned_program_factory.cpp``):

* the native ``ConcatTiledUnalignedProgramFactory`` when ``can_use_tiled_unaligned_concat``
  holds: bfloat16 / float32, 2-32 interleaved TILE inputs, an interleaved output, and its CBs
  ``(3 * sum(input tile columns) + 3 * output tile columns) * tile bytes`` plus the (pending)
  L1 output fit the L1 that is free *now*: ``get_max_l1_space``, the room below the lowest
  L1 buffer (so which path runs depends on what else is alive, and where);
* else ``build_untilize_rm_retilize_concat``: each input untilized (``untilize_with_unpadding``,
  in the input's memory), a ROW_MAJOR concat (in the output's memory), then
  ``tilize_with_val_padding`` into the output. Measured on the mock n150 (yolov8n batch 8's
  ``model.2.cat``, three 8x160x160x16 bfloat16 inputs in L1 to 48 channels, DEVELOPERS.md):
  +102,400 B x3, +307,200, (the output, 409,600), -307,200, -102,400 x3 per bank.

Measured on the mock n150 (tests/test_concat_unaligned.py): three 16-channel bfloat16 inputs
in L1 into an L1 output at batch 1 and 4 ran native, at batch 8 (409,600 B output, 614,400 B
of inputs, the largest free block 409,600) the row-major path, as yolov8n batch 8's did with a
largest free block of 438,944 (the native need there: 440,320). The planner counts the second
for an L1 output (``untilize_phase``, ``rm_concat_phase``; safe, the larger); for a DRAM output
the native CBs, and the address model (``plan_alloc``) checks them against the free L1.
"""
from __future__ import annotations

from dataclasses import replace

from ...language.graph import TILE, round_up
from ...planning.l1 import bank_bytes, tile_bytes
from ...planning.layout import ROW_MAJOR, TILE_LAYOUT, TensorLayout
from .rules import mixed_output_layout


def untilizes(inputs: list[TensorLayout], channels: list[int], out: TensorLayout) -> bool:
    """ttnn's wrapper takes the untilize / row-major / retilize path (unless the native factory
    applies and fits): TILE inputs, one of whose channel counts pads a tile, sharded or not
    (concat.cpp:96, the predicate of build_untilize_rm_retilize_concat). Measured on the mock
    n150: three 8x160x160x16 height-sharded inputs (shards 3200 x 32) into 3200 x 64 shards,
    ttnn's figure 1,748,992 B per core = inputs 614,400 + output 409,600 + copies 3 x 102,400 +
    the row-major concat 409,600 + 8,192 of CBs."""
    return len(inputs) >= 2 and all(t.layout == TILE_LAYOUT for t in inputs) and \
        any(c % TILE for c in channels)


def layout_copies(inputs: list[TensorLayout], rows: int, channels: list[int],
                  banks: int) -> list[int]:
    """Per bank: the copy ttnn makes of each interleaved input whose layout is not the concat's
    (``concat_impl``: the first input's layout, ROW_MAJOR when a ROW_MAJOR input does not tile;
    ``rules.mixed_output_layout``), ``ttnn::to_layout`` in the input's memory, allocated before
    the output and freed after it (0 for an input already in that layout, or in DRAM).
    Measured on the mock n150 (tests/test_concat_mixed_layouts.py, unet_resnet34 batch 32's
    ``decoder.blocks.1.cat``: a ROW_MAJOR 256-channel and a TILE 128-channel input, 32x32 x32):
    +131,072 (the TILE input untilized), +393,216 (the output), -131,072."""
    if len({t.layout for t in inputs}) < 2 or any(t.memory.sharded for t in inputs):
        return [0] * len(inputs)
    target = mixed_output_layout(inputs, [(1, 1, rows, c) for c in channels])
    return [0 if t.layout == target else
            bank_bytes(row_major(t) if target == ROW_MAJOR else replace(t, layout=TILE_LAYOUT),
                       rows, c, banks)
            for t, c in zip(inputs, channels)]


def native_cbs(inputs: list[TensorLayout], channels: list[int],
               out: TensorLayout) -> int | None:
    """The native factory's CBs per core (``required_cb_bytes``), None where it does not apply
    (``is_supported_tiled_unaligned_config``: bfloat16 / float32, 2-32 interleaved inputs, an
    interleaved output)."""
    dtype = inputs[0].dtype
    if dtype not in ("bfloat16", "float32") or not 2 <= len(inputs) <= 32 or \
            out.memory.sharded or any(t.memory.sharded for t in inputs):
        return None
    in_wt = sum(-(-c // TILE) for c in channels)
    out_wt = -(-sum(channels) // TILE)
    return (3 * in_wt + 3 * out_wt) * tile_bytes(dtype)


def row_major(t: TensorLayout) -> TensorLayout:
    """A TILE tensor untilized where it is (block floats come out bfloat16)."""
    return replace(t, layout=ROW_MAJOR, dtype="float32" if t.dtype == "float32" else "bfloat16")


def _row_major_bytes(t: TensorLayout, rows: int, c: int, banks: int,
                     shard_wide: bool = False) -> int:
    """Per bank: [rows, c] ROW_MAJOR in ``t``'s memory: a shard of its rows, each c channels
    (``shard_wide``: the shard spec's width) 16 B aligned, or interleaved rows (0 in DRAM)."""
    m = t.memory
    if m.sharded and m.shard_shape:
        width = m.shard_shape[1] if shard_wide else c
        return m.shard_shape[0] * round_up(width * (4 if t.dtype == "float32" else 2), 16)
    return bank_bytes(t, rows, c, banks)


def untilized_copies(inputs: list[TensorLayout], rows: int, channels: list[int],
                     banks: int) -> list[int]:
    """Per bank: each input's untilized copy, in the input's memory (0 in DRAM)."""
    return [_row_major_bytes(row_major(t), rows, c, banks) for t, c in zip(inputs, channels)]


def row_major_concat(inputs: list[TensorLayout], out: TensorLayout, rows: int, c: int,
                     banks: int) -> int:
    """Per bank: the row-major concat, in the output's memory (0 in DRAM)."""
    # a sharded one takes the output's shard spec, tile-padded width and all (measured)
    return _row_major_bytes(replace(row_major(inputs[0]), memory=out.memory), rows, c, banks,
                            shard_wide=True)
