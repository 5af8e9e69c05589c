"""ttnn.layer_norm on the sim backend."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import _check, _on_device, memspec
from .rules import LayerNormArgs

__all__ = ["layer_norm"]
TTNN_FUNCTIONS = tuple(__all__)


def layer_norm(input_tensor, *, epsilon=1e-12, weight=None, bias=None, residual_input_tensor=None,
               memory_config=None, program_config=None, compute_kernel_config=None, recip_tensor=None):
    """ttnn.layer_norm over the last dim (the channels of [1, 1, rows, C]): float32 statistics,
    the output rounded to the input's dtype (no dtype argument), the input's layout, the
    argument's or the input's memory config. The kernel's own bfloat16 intermediates are not
    modelled (float32 Dest assumed)."""
    op = "layer_norm"
    x = _on_device(input_tensor, op)
    for t, k in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            _on_device(t, op, k)
    _check(op, [x], LayerNormArgs(program_config=program_config),
           memspec(memory_config) if memory_config is not None else None)
    xv = x._data.to(torch.float32)
    if residual_input_tensor is not None:
        xv = xv + _on_device(residual_input_tensor, op, "residual_input_tensor")._data
    c = xv.shape[-1]
    w = weight._data.reshape(-1)[:c] if weight is not None else None
    b = bias._data.reshape(-1)[:c] if bias is not None else None
    y = F.layer_norm(xv, (c,), w, b, float(epsilon))
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    return _emit(y, x.dtype, x.layout, lay.memory, x._device, op, owned=True)
