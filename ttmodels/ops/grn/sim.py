"""The ttnn functions grn's composition calls that the sim had not got: ``sum`` and ``mean``
over one dim, ``sqrt``, ``divide``."""
from __future__ import annotations

import torch

from ...backends.sim.numerics import _emit
from ...backends.sim.tensor import SimTensor, _on_device

__all__ = ["sum", "mean", "sqrt", "divide"]
TTNN_FUNCTIONS = tuple(__all__)


def _reduce(op, fn, x, dim, keepdim, memory_config, compute_kernel_config=None):
    t = _on_device(x, op)
    y = fn(t._data.to(torch.float32), dim=int(dim), keepdim=bool(keepdim))
    if _accurate_fp32_rows(t, dim, compute_kernel_config):
        # ttnn's accurate fp32 reduce over the rows, in its order (ops/pool/exact_global.py)
        from ..pool import exact_global as eg
        rows = t._data.shape[-2]
        y = eg.accurate_fp32_row_sum(t._data) if op == "sum" else \
            eg.accurate_fp32_row_mean(t._data, rows)
        y = y if keepdim else y.squeeze(-2)
    mc = memory_config if memory_config is not None else t.memory_config()
    return _emit(y, t.dtype, t.layout, mc, t._device, op, owned=True)


def _accurate_fp32_rows(t, dim, compute_kernel_config) -> bool:
    """ttnn's accurate fp32 path (SFPU, Dest float32): a FLOAT32 input reduced over its rows
    (dim -2 of rank 4) with ``fp32_dest_acc_en`` (reduce_op: ``fp32_sfpu_reduce``)."""
    from ...backends.sim import types as T
    return (t.dtype == T.DataType.FLOAT32 and int(dim) in (-2, t._data.dim() - 2)
            and bool(getattr(compute_kernel_config, "fp32_dest_acc_en", False)))


def sum(input_tensor, dim=None, keepdim=False, *, memory_config=None, compute_kernel_config=None):  # noqa: A001
    """ttnn.sum over one dim: float32 accumulation, rounded once to the input's dtype (the
    reduce kernel's bfloat16 partials are not modelled), in the input's layout and memory config
    (or the argument's). A float32 sum over the rows with ``fp32_dest_acc_en`` is ttnn's
    accurate fp32 reduce, in its order of adds."""
    return _reduce("sum", torch.sum, input_tensor, dim, keepdim, memory_config,
                   compute_kernel_config)


def mean(input_tensor, dim=None, keepdim=False, *, memory_config=None, compute_kernel_config=None):
    """ttnn.mean over one dim of the logical shape (tile padding not counted), as ``sum``; the
    accurate fp32 mean multiplies the sum by the float32 1/count."""
    return _reduce("mean", torch.mean, input_tensor, dim, keepdim, memory_config,
                   compute_kernel_config)


def sqrt(input_tensor, *, memory_config=None):
    """ttnn.sqrt: float32 sqrt rounded to the input's dtype (the SFPU's approximation is not
    modelled)."""
    t = _on_device(input_tensor, "sqrt")
    mc = memory_config if memory_config is not None else t.memory_config()
    return _emit(torch.sqrt(t._data.to(torch.float32)), t.dtype, t.layout, mc, t._device, "sqrt",
                 owned=True)


def divide(input_tensor_a, input_tensor_b, *, memory_config=None):
    """ttnn.divide of two tensors, b broadcast over a (a's shape, dtype, layout, memory config
    or the argument's); float32 division rounded once."""
    a = _on_device(input_tensor_a, "divide", "input_tensor_a")
    b = input_tensor_b
    bv = _on_device(b, "divide", "input_tensor_b")._data if isinstance(b, SimTensor) else float(b)
    y = a._data.to(torch.float32) / bv
    if tuple(y.shape) != tuple(a._data.shape):
        raise RuntimeError(f"divide: {list(a.shape)} by {list(b.shape)} does not keep a's shape")
    mc = memory_config if memory_config is not None else a.memory_config()
    return _emit(y, a.dtype, a.layout, mc, a._device, "divide", owned=True)
