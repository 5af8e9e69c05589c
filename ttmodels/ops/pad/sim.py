"""ttnn.pad on the sim backend."""
from __future__ import annotations

import math

import torch.nn.functional as F

from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import _check, _on_device, current_layer
from ...errors import Error
from ...planning.rules import CallArgs

__all__ = ["pad"]
TTNN_FUNCTIONS = tuple(__all__)


def pad(input_tensor, padding=None, value=None, input_tensor_start=None, *, output_padded_shape=None,
        use_multicore=True, memory_config=None, sub_core_grids=None):
    """Overloads: pad(t, [(before, after), ...] per dim, value) and
    pad(t, output_padded_shape, input_tensor_start, value)."""
    op = "pad"
    x = _on_device(input_tensor, op)
    rank = len(x.shape)
    if output_padded_shape is None and padding is not None and len(padding) and isinstance(padding[0], int):
        # second overload called positionally: (output_padded_shape, input_tensor_start, value)
        output_padded_shape, input_tensor_start, value = padding, value, input_tensor_start
    if output_padded_shape is not None:
        start = list(input_tensor_start or [0] * rank)
        pairs = [(s, o - i - s) for o, i, s in zip(output_padded_shape, x.shape, start)]
    else:
        pairs = [tuple(p) for p in padding]
    value = 0.0 if value is None else value
    if len(pairs) != rank or any(p0 < 0 or p1 < 0 for p0, p1 in pairs):
        raise Error(f"{current_layer(op)}: padding {pairs} does not fit a rank-{rank} tensor")
    _check(op, [x], {})
    flat = []
    for p0, p1 in reversed(pairs):
        flat += [p0, p1]
    y = F.pad(x._data, flat, value=float(value))
    rows = math.prod(y.shape[:-1])
    lay = _out_layout(op, [x], CallArgs(out_shape=(1, 1, rows, y.shape[-1])), memory_config,
                      [x._flat4()])
    return _emit(y, x.dtype, x.layout, lay.memory, x._device, op)
