"""ttnn.slice on the sim backend (split runs one per output)."""
from __future__ import annotations

import builtins

from ...backends.sim.numerics import _emit
from ...backends.sim.tensor import _check, _on_device, current_layer
from ...errors import Error

__all__ = ["slice"]
TTNN_FUNCTIONS = tuple(__all__)

builtins_slice = builtins.slice   # ``slice`` below is ttnn.slice


def slice(input_tensor, starts, ends, steps=None, *, memory_config=None, output_tensor=None, pad_value=None,
          sub_core_grids=None):
    """ttnn.slice(x, starts, ends, steps): the logical sub-tensor [starts, ends) with steps."""
    op = "slice"
    x = _on_device(input_tensor, op)
    _check(op, [x], {})
    nd = len(x.shape)
    starts, ends = [int(v) for v in starts], [int(v) for v in ends]
    steps = [int(v) for v in steps] if steps is not None else [1] * nd
    if not (len(starts) == len(ends) == len(steps) == nd):
        raise Error(f"{current_layer(op)}: slice needs {nd} starts/ends/steps")
    idx = tuple(builtins_slice(a, b, c) for a, b, c in zip(starts, ends, steps))
    y = x._data[idx].contiguous()
    shape = tuple(y.shape)
    mc = memory_config if memory_config is not None else x.memory_config()
    return _emit(y, x.dtype, x.layout, mc, x._device, op, shape=shape, owned=True)
