"""ttnn.linear and ttnn.matmul on the sim backend (the matmul kernel, ``_matmul_bias``, is shared
with conv2d's matmul path: backends/sim/numerics.py)."""
from __future__ import annotations

import torch

from ...backends.sim import types as T
from ...backends.sim.numerics import (_act_name, _apply_unary, _emit, _fidelity, _fidelity_extra, _fp32_dest,
                                      _matmul_bias, _operand, _operand_low, _out_layout)
from ...backends.sim.tensor import _check, _on_device, current_layer, dtype_name, quantize_
from ...errors import Error
from .rules import LinearArgs

__all__ = ["linear", "matmul"]
TTNN_FUNCTIONS = tuple(__all__)


def _mm(op, a, b, bias, transpose_a, transpose_b, memory_config, dtype, program_config, activation,
        compute_kernel_config):
    a = _on_device(a, op, "input_tensor_a")
    b = _on_device(b, op, "input_tensor_b")
    ts = [a, b] + ([_on_device(bias, op, "bias")] if bias is not None else [])
    act = activation
    if act is None and program_config is not None:
        act = getattr(program_config, "fused_activation", None)
    attrs = LinearArgs(program_config=program_config, dtype=dtype_name(dtype) if dtype else None,
                       activation=_act_name(act))
    _check("linear", ts, attrs)
    a_bits, b_bits = _fidelity(compute_kernel_config)
    xa, xb = _operand(a, b_bits), _operand(b, a_bits)                    # in0 -> srcB, in1 -> srcA
    xa = xa.transpose(-1, -2) if transpose_a else xa
    xb = xb.transpose(-1, -2) if transpose_b else xb
    if xa.shape[-1] != xb.shape[-2]:
        raise Error(f"{current_layer(op)}: inner dims differ: a {list(a.shape)} b {list(b.shape)}")
    bv = None
    if bias is not None:
        bv = bias._data.reshape(-1)
        if bv.numel() != xb.shape[-1]:
            bv = bias._data.reshape(-1, bias.shape[-1])[0]
    if xb.dim() == 2 or all(d == 1 for d in xb.shape[:-2]):
        # a 2-D right operand (weights): one [M, K] x [K, N] product, as torch.matmul folds it
        lead = torch.broadcast_shapes(xa.shape[:-2], xb.shape[:-2])
        y = _matmul_bias(xa.reshape(-1, xa.shape[-1]), xb.reshape(xb.shape[-2:]), bv)
        y = y.reshape(*lead, *xa.shape[-2:-1], xb.shape[-1])
    else:
        y = torch.matmul(xa, xb)
        if bv is not None:
            y.add_(bv)                    # y is fresh (and already has the broadcast shape)
    extra = _fidelity_extra(compute_kernel_config)
    lo = _operand_low(a, extra[1]) if extra is not None else None
    if lo is not None:
        # HiFi3's third phase: the activations' low mantissa bits times the weights' high ones
        wa = _operand(b, extra[0])
        y.add_(torch.matmul(lo.transpose(-1, -2) if transpose_a else lo,
                            wa.transpose(-1, -2) if transpose_b else wa).reshape(y.shape))
    fused = getattr(program_config, "fused_activation", None) if program_config is not None else None
    y = _apply_unary(y, fused, inplace=True, fp32_dest=_fp32_dest(compute_kernel_config))
    out_dtype = dtype or a.dtype
    if activation is not None:
        # linear(activation=...) is not fused: ttnn runs a unary op on the stored output (matmul.cpp
        # bound_matmul; on the mock device an eltwise_sfpu program follows the matmul's)
        y = _apply_unary(quantize_(y, out_dtype), activation, inplace=True,
                         fp32_dest=out_dtype == T.DataType.FLOAT32)
    lay = _out_layout("linear", ts, attrs, memory_config, [t._flat4() for t in ts])
    return _emit(y, out_dtype, T.Layout.TILE, lay.memory, a._device, op, owned=True)


def linear(input_tensor_a, input_tensor_b, *, bias=None, transpose_a=False, transpose_b=False, memory_config=None,
           dtype=None, program_config=None, activation=None, compute_kernel_config=None, core_grid=None,
           output_tile=None, optional_output_tensor=None, global_cb=None, sub_device_id=None,
           prefetcher_pipes=(), in0_column_offset=None):
    return _mm("linear", input_tensor_a, input_tensor_b, bias, transpose_a, transpose_b, memory_config, dtype,
               program_config, activation, compute_kernel_config)


def matmul(input_tensor_a, input_tensor_b, *, transpose_a=False, transpose_b=False, memory_config=None, dtype=None,
           program_config=None, activation=None, compute_kernel_config=None, core_grid=None, output_tile=None,
           optional_output_tensor=None, global_cb=None, sub_device_id=None, prefetcher_pipes=()):
    return _mm("matmul", input_tensor_a, input_tensor_b, None, transpose_a, transpose_b, memory_config, dtype,
               program_config, activation, compute_kernel_config)
