"""The eltwise unary ops' layout rule (no dtype argument) and check; their output keeps the
input's memory config (``rules._out_same_memory``)."""
from __future__ import annotations

from .. import activations as A
from ...planning.rules import CallArgs, Rule, _v, reads

_UNARY_H = "ttnn/cpp/ttnn/operations/eltwise/unary/unary.hpp"
_UNARY_OP = "ttnn/cpp/ttnn/operations/eltwise/unary/device/unary_device_operation.cpp"
_UN_OPS = "|".join([*A.ACTIVATIONS, "identity"])     # the unary family (__init__.py)

RULE_LIST = (
    # --- unary ------------------------------------------------------------------------------
    Rule("relu.dtype", _UN_OPS,
         "ttnn's eltwise unary ops (relu, relu6, sigmoid, silu, ..., identity) have no dtype "
         "argument: the output dtype is the input dtype, the memory config the input's unless given",
         f"{_UNARY_H}: relu/sigmoid/silu/... signatures (input_tensor, memory_config, output_tensor, "
         f"sub_core_grids; nanobind signatures of 0.81.1); {_UNARY_OP}: compute_output_specs"),
)


@reads(CallArgs)
def _c_relu(inputs, args: CallArgs, output, shapes):
    x = inputs[0]
    want = args.dtype
    if x is not None and want is not None and want != x.dtype:
        return [_v("relu.dtype", f"relu cannot convert {x.dtype} to {want} (no dtype argument)")]
    return []
