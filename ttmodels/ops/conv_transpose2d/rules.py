"""conv_transpose2d's layout rules: conv2d's (its stride-1 conv2d micro-op over the halo's
zero-inserted input), plus its own geometry and L1-path rules. Its output is conv2d's."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...planning.rules import _CONV, Rule, _v, reads
from ..conv2d.rules import ConvArgs, _c_conv

_CONVT = "ttnn/cpp/ttnn/operations/conv/conv_transpose2d/conv_transpose2d.cpp"
_SW = "ttnn/cpp/ttnn/operations/sliding_window/sliding_window.cpp"

RULE_LIST = (
    # --- conv_transpose2d (a conv2d micro-op over the halo's zero-inserted input) -------------
    Rule("conv_transpose2d.real_padding", "conv_transpose2d",
         "padding <= dilation * (kernel - 1) on each axis: the halo pads the zero-inserted input "
         "by dilation * (kernel - 1) - padding (unsigned) before the stride-1 conv2d micro-op",
         f"{_SW}: SlidingWindowConfig::get_transposed_real_padding (uint32 input_pad_top = "
         "base_pad_height - padding[0]; 0.81.1 wheel: 'full_input_shape[1] - strided_input_height "
         "== input_pad_top + input_pad_bottom + output_pad_hw.first'); "
         f"{_CONVT}: conv_transpose2d_L1"),
    Rule("conv_transpose2d.l1_path", "conv_transpose2d",
         "the plan runs conv_transpose2d on its L1 path: its input is in L1 (sharded or "
         "interleaved); an input in DRAM without a slice config takes the DRAM path, whose "
         "output is DRAM interleaved (the sim models the L1 path only)",
         f"{_CONVT}: determine_conv_transpose2d_execution_path (conv2d's rule: "
         f"{_CONV} determine_conv2d_execution_path)"),
)


@dataclass(frozen=True)
class ConvTransposeArgs(ConvArgs):
    """conv2d's arguments, plus the geometry its own rule reads (the spec's attrs)."""
    kernel: tuple[int, int] | None = None
    padding: tuple[int, int, int, int] | None = None
    dilation: tuple[int, int] = (1, 1)


@reads(ConvTransposeArgs)
def _c_conv_transpose(inputs, a: ConvTransposeArgs, output, shapes):
    """conv_transpose2d: conv2d's input/config rules, plus its own geometry and L1-path rules."""
    x = inputs[0]
    if x is None:
        return [_v("conv2d.shard_scheme", "conv_transpose2d input is missing")]
    # its conv2d micro-op is neither DRAM-sliced nor lowered to linear
    vs = _c_conv(inputs, replace(a, slice=None, lowering=None), output, shapes)
    k, p, d = a.kernel, a.padding, a.dilation
    if k is not None and p is not None:
        t, b, l, r = p
        if max(t, b) > d[0] * (k[0] - 1) or max(l, r) > d[1] * (k[1] - 1):
            vs.append(_v("conv_transpose2d.real_padding",
                         f"padding {list(p)} exceeds dilation * (kernel - 1) = "
                         f"[{d[0] * (k[0] - 1)}, {d[1] * (k[1] - 1)}]"))
    if x.memory.buffer == "dram":
        vs.append(_v("conv_transpose2d.l1_path", f"conv_transpose2d input {x.memory.short()}: "
                     "a DRAM input without a slice config takes the DRAM-sliced path"))
    return vs
