"""conv_transpose2d's L1 estimate: conv2d's (``ops/conv2d/l1.py``) over the sliding window of
its stride-1 conv2d micro-op."""
from __future__ import annotations

from ...planning.l1 import ConvGeometry


def conv_transpose_geometry(n: int, ih: int, iw: int, oh: int, ow: int, kernel, stride, padding,
                            output_padding, dilation) -> ConvGeometry:
    """The sliding window of the stride-1 conv2d micro-op ttnn runs for a conv_transpose2d: over
    the halo's zero-inserted, really padded "full input" (conv_transpose2d.cpp,
    sliding_window.cpp get_transposed_full_input_shape: output + dilation * (kernel - 1))."""
    kh, kw = kernel
    dh, dw = dilation
    return ConvGeometry(n, oh + dh * (kh - 1), ow + dw * (kw - 1), oh, ow, (kh, kw))
