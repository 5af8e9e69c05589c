"""The reshape family's layout rule (flatten, reshape, permute, channel_shuffle on interleaved
bfloat16 or float32 TILE) and check."""
from __future__ import annotations

from ...planning.rules import _RESHAPE, Rule

_PERMUTE = "ttnn/cpp/ttnn/operations/data_movement/permute/permute.cpp"

RULE_LIST = (
    Rule("reshape.interleaved", "flatten|reshape|permute|channel_shuffle",
         "flatten/reshape/permute/channel_shuffle run as ttnn.reshape and ttnn.permute on an "
         "interleaved bfloat16 (float32 stays float32) TILE input (the sharded and block-float paths are not planned: a "
         "permute re-tiles the data, which changes a bfloat8_b tensor's shared exponents); "
         "ttnn.reshape of a TILE tensor whose padding changes copies, ttnn.permute takes the "
         "memory config of its output",
         f"{_RESHAPE}: reshape; {_PERMUTE}: permute", kind="perf"),
)


def _c_reshape(inputs, attrs, output, shapes):
    return []
