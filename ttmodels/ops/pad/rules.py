"""pad's layout rule (the Pad layer pads in ROW_MAJOR) and check; its output keeps the input's
memory config."""
from __future__ import annotations

from dataclasses import dataclass

from ...formats import BLOCK_FLOAT_DTYPES
from ...planning.layout import ROW_MAJOR, TensorLayout
from ...planning.layout import MemSpec
from ...planning.rules import CallArgs, Rule, _tensor_checks, _v, reads

RULE_LIST = (
    # --- pad --------------------------------------------------------------------------------
    Rule("pad.memory", "pad",
         "the Pad layer pads in ROW_MAJOR (a TILE input via to_layout); its output keeps the "
         "input's memory config unless memory_config is given, and that memory config must be a "
         "valid shard spec for the padded (row-major) shape, e.g. width shards never are (their "
         "height must equal the tensor's); a bare ttnn.pad of a sharded TILE tensor is refused "
         "(no front padding of tiles on device)",
         "ttnn/cpp/ttnn/operations/data_movement/pad/pad.cpp ('ttnn.pad: on device tile padding "
         "does not support front padding', 0.81.1 wheel: line 454); output spec: "
         "tt_metal/impl/tensor/spec/tensor_spec.cpp validate_shard_spec_with_tensor_shape"),
)


@dataclass(frozen=True)
class PadArgs(CallArgs):
    """The Pad layer's call (``padding`` set) or a bare ttnn.pad (the sim: no ``padding``)."""
    padding: tuple[int, int, int, int] | None = None
    memory_config: MemSpec | None = None


@reads(PadArgs)
def _c_pad(inputs, args: PadArgs, output, shapes):
    x = inputs[0]
    if x is None:
        return []
    if args.padding is None:
        # a bare ttnn.pad call (the sim): on-device TILE padding cannot pad at the front
        # (pad.cpp 'on device tile padding does not support front padding'), so a spatial pad of
        # a sharded TILE tensor is refused; the Pad layer pads in ROW_MAJOR instead.
        if x.memory.sharded and x.layout != ROW_MAJOR:
            return [_v("pad.memory", f"pad of a {x.memory.short()} {x.layout} tensor")]
        return []
    # The Pad layer: ROW_MAJOR ttnn.pad (a TILE input goes through to_layout, which keeps its
    # memory config); the output is memory_config or the input's, on the padded shape, and must
    # be a valid tensor there (tensor_spec.cpp).
    mem = args.memory_config or x.memory
    if mem.sharded and args.out_shape is not None:
        rm_dtype = "bfloat16" if x.dtype in BLOCK_FLOAT_DTYPES else x.dtype    # what the layer pads
        vs = _tensor_checks(TensorLayout(mem, ROW_MAJOR, rm_dtype), tuple(args.out_shape),
                            "pad output", l1_shards=False)
        return [_v("pad.memory", f"{v.message} (the padded tensor keeps "
                   f"{'memory_config' if args.memory_config else 'the input memory config'})")
                for v in vs]
    return []
