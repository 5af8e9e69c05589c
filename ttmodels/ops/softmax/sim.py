"""ttnn.softmax on the sim backend."""
from __future__ import annotations

import torch

from ...backends.sim import types as T
from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import _check, _on_device

__all__ = ["softmax"]
TTNN_FUNCTIONS = tuple(__all__)


def softmax(input_tensor, dim=-1, *, memory_config=None, compute_kernel_config=None,
            numeric_stable=True):
    """ttnn.softmax: float32 softmax over ``dim``, rounded to the input's dtype; the output is
    TILE (a row-major input is tilized, measured on the 0.81.1 mock device) with the argument's
    or the input's memory config. The SFPU exp/reciprocal are not modelled."""
    op = "softmax"
    x = _on_device(input_tensor, op)
    _check(op, [x], {})                  # no softmax rule reads an argument
    y = torch.softmax(x._data.to(torch.float32), dim=int(dim))
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    return _emit(y, x.dtype, T.Layout.TILE, lay.memory, x._device, op, owned=True)
