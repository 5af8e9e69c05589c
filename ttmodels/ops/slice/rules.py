"""slice's layout rule (ttnn.slice on interleaved tensors) and check."""
from __future__ import annotations

from ...planning.rules import CallArgs, Rule, _v, reads

_SLICE = "ttnn/cpp/ttnn/operations/data_movement/slice/device/slice_device_operation.cpp"

RULE_LIST = (
    Rule("slice.memory", "slice|split",
         "ttnn.slice with starts/ends/steps works on interleaved tensors (row-major: any start; TILE: "
         "tile-aligned or padded path); sharded inputs are moved to interleaved first",
         f"{_SLICE}: SliceDeviceOperation::validate (sharded slice only for specific row-major "
         "height-sharded cases)"),
)


@reads(CallArgs)
def _c_slice(inputs, args: CallArgs, output, shapes):
    x = inputs[0]
    if x is not None and x.memory.sharded:
        return [_v("slice.memory", f"slice input {x.memory.short()}: slice takes interleaved tensors")]
    return []
