"""binary_ng's layout math: its native L1-sharded path, and whose memory config its output takes."""
from __future__ import annotations

from ...language.graph import TILE, round_up
from ...planning.layout import MemSpec, TensorLayout
from ...planning.sharding import Shape4, _rows_c, core_count


def is_native_binary_sharding(a: TensorLayout, b: TensorLayout, out: MemSpec,
                              shape_a: Shape4 | None, shape_b: Shape4 | None) -> bool:
    """binary_ng_utils.cpp ``is_native_L1_sharding``: same shape and memory config for a and b,
    even shards, all in L1, output sharded on the same grid."""
    if not out.sharded or shape_a != shape_b or a.memory != b.memory:
        return False
    if not a.memory.sharded:
        return False
    if a.memory.buffer != "l1" or out.buffer != "l1":
        return False
    if out.grid is not None and a.memory.grid != out.grid:
        return False
    if shape_a is not None and a.memory.shard_shape:
        rows, c = _rows_c(shape_a)
        sh, sw = a.memory.shard_shape
        if round_up(rows, TILE) % sh or round_up(c, TILE) % sw:
            return False
    return True


def binary_output_source(a: TensorLayout, b: TensorLayout | None) -> TensorLayout:
    """The operand whose memory config a binary_ng output takes when no memory_config is given:
    a's, except that when both are sharded the one on more cores wins (ties: a), and a sharded b
    wins over a DRAM-interleaved a. Measured on ttnn 0.81.1 (mock device): h25 + h49 -> h49,
    h49 + block56 -> block56, L1-interleaved + h49 -> a's interleaved L1, DRAM + h49 -> h49,
    DRAM + L1-interleaved -> DRAM; binary_ng_device_operation.cpp BinaryNgDeviceOperation::invoke /
    compute_output_specs (tt-metal #28085/#28087: "max of A & B grid" for mismatched shard specs)."""
    if b is not None and b.memory.sharded and (
            (a.memory.sharded and core_count(b.memory) > core_count(a.memory)) or
            (not a.memory.sharded and a.memory.buffer == "dram")):
        return b
    return a
