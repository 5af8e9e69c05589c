"""ttnn.add, multiply and subtract (binary_ng) on the sim backend: tensor (op) tensor or scalar,
numpy broadcasting of the second operand, fused activations, in place into an operand."""
from __future__ import annotations

import torch

from dataclasses import replace

from ...backends.sim import types as T
from ...backends.sim.numerics import _apply_unary, _emit, _out_layout, _write_into
from .rules import BinaryArgs
from ...backends.sim.tensor import SimTensor, _check, _on_device, _violation, dtype_name, memspec, quantize_

__all__ = ["add", "multiply", "subtract", "maximum"]
TTNN_FUNCTIONS = tuple(__all__)


def _binary(op, fn, a, b, dtype, memory_config, activations, a_acts, b_acts, output_tensor=None):
    scalar_a = not isinstance(a, SimTensor)
    if scalar_a:
        a, b = b, a                       # scalar op tensor: commutative for add/multiply
    a = _on_device(a, op, "input_tensor_a")
    tb = b if isinstance(b, SimTensor) else None
    if tb is not None:
        _on_device(tb, op, "input_tensor_b")
    attrs = BinaryArgs(dtype=dtype_name(dtype) if dtype else None)
    out_t = None
    if output_tensor is not None:
        out_t = _on_device(output_tensor, op, "output_tensor")
        if out_t is a or out_t is tb:
            # in place into an operand (ttnn.add_): the rule table checks shape, dtype and memory
            attrs = replace(attrs, inplace=True, swap_operands=out_t is tb and out_t is not a)
    _check(op, [a, tb], attrs, memspec(memory_config) if memory_config is not None else None)
    if tb is not None:
        out_shape = _broadcast_shape(tuple(int(v) for v in a.shape), tuple(int(v) for v in tb.shape))
        if out_shape is None:
            raise _violation("binary.broadcast", f"shapes {list(a.shape)} and {list(tb.shape)} do not broadcast", op)
        if tuple(out_shape) != tuple(a.shape):
            raise _violation("binary.broadcast", f"output shape {list(out_shape)} differs from input a "
                             f"{list(a.shape)} (only b broadcasts)", op)
    if out_t is not None:
        _check_output_tensor(op, out_t, a, dtype, memory_config)
    # binary_ng's kernels get a 32-bit Dest for float32 operands or output
    f32 = T.DataType.FLOAT32
    fp32 = a.dtype == f32 or (tb is not None and tb.dtype == f32) or (dtype or a.dtype) == f32
    xa = _apply_unary(a._data, a_acts, fp32_dest=fp32) if a_acts else a._data
    xb = tb._data if tb is not None else float(b)
    if b_acts and tb is not None:
        xb = _apply_unary(xb, b_acts, fp32_dest=fp32)
    y = fn(xa, xb)                        # a fresh tensor: activations and rounding in place
    if activations:
        y = _apply_unary(y, activations, inplace=True, fp32_dest=fp32)
    if out_t is not None:
        return _write_into(out_t, quantize_(y, out_t.dtype))
    out_dtype = dtype or a.dtype
    shapes = [a._flat4(), tb._flat4() if tb is not None else None]
    lay = _out_layout(op, [a, tb], attrs, memory_config, shapes)
    layout = T.Layout.TILE if lay.layout == "tile" else a.layout     # the rules' (mixed: TILE)
    return _emit(y, out_dtype, layout, lay.memory, a._device, op, owned=True)


def _broadcast_shape(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy broadcasting of two shapes (None when they do not broadcast)."""
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    out = []
    for x, y in zip(sa, sb):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def _check_output_tensor(op, out: SimTensor, a: SimTensor, dtype, memory_config) -> None:
    """binary_ng with a preallocated output: its spec is the output spec (compute_output_specs),
    so its logical shape must be the broadcast shape (leading 1s aside), a dtype argument must be
    its dtype ('If both output dtype and output tensor provided dtype should match'), and a
    memory_config, which binary_ng would use for its sharding decisions, must be its memory config.
    Checked here for any output tensor; the rule table checks the same for in-place operands."""
    def strip(shape):
        s = list(shape)
        while len(s) > 1 and s[0] == 1:
            s.pop(0)
        return s
    if strip(out.shape) != strip(a.shape):
        raise _violation("binary.output_tensor", f"Shape of Output tensor {list(out.shape)} provided does not "
                         f"match the broadcasted output shape {list(a.shape)}", op)
    if dtype is not None and dtype != out.dtype:
        raise _violation("binary.output_tensor", f"dtype {dtype_name(dtype)} but output_tensor is "
                         f"{dtype_name(out.dtype)}: if both output dtype and output tensor are provided "
                         "their dtypes should match", op)
    if memory_config is not None and memory_config != out.memory_config():
        raise _violation("binary.output_tensor", f"memory_config {memspec(memory_config).short()} but "
                         f"output_tensor is {memspec(out.memory_config()).short()}", op)
    if out.layout != a.layout:
        raise _violation("binary.output_tensor", f"output_tensor is {out.layout.name}, the result of a "
                         f"{a.layout.name} operand is {a.layout.name}", op)


def add(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
        output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
        sub_core_grids=None, sub_device_id=None):
    return _binary("add", torch.add, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def multiply(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
             output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
             sub_core_grids=None, sub_device_id=None):
    return _binary("multiply", torch.mul, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def subtract(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
             output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
             sub_core_grids=None, sub_device_id=None):
    if not isinstance(input_tensor_a, SimTensor):
        # scalar - tensor: binary_ng computes it as -(b - a); the result is the same value
        return _binary("subtract", lambda xa, xb: xb - xa, input_tensor_b, input_tensor_a, dtype, memory_config,
                       activations, input_tensor_b_activations, input_tensor_a_activations, output_tensor)
    return _binary("subtract", torch.sub, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def maximum(input_tensor_a, input_tensor_b, *, dtype=None, memory_config=None, output_tensor=None,
            activations=(), input_tensor_a_activations=(), input_tensor_b_activations=()):
    """binary_ng's MAXIMUM, always on the SFPU (``is_binary_sfpu_op``), so float32 operands
    compare in float32: exact (the exact float32 max pool's fold, ops/pool/exact_window.py)."""
    return _binary("maximum", torch.maximum, input_tensor_a, input_tensor_b, dtype, memory_config,
                   activations, input_tensor_a_activations, input_tensor_b_activations,
                   output_tensor)
