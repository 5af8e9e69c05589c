"""The standalone eltwise unary ops on the sim backend: relu, sigmoid, every other row of the
activation table (``ttnn.<ttnn_function>``, made from the row), and identity."""
from __future__ import annotations

from typing import Callable

import torch

from .. import activations as A
from ...backends.sim import types as T
from ...backends.sim.numerics import _emit, _out_layout, _write_into
from ...backends.sim.tensor import _check, _on_device, quantize_

def relu(input_tensor, *, memory_config=None, output_tensor=None, sub_core_grids=None):
    op = "relu"
    x = _on_device(input_tensor, op)
    _check(op, [x], {})
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    # relu of a stored value is exactly representable: no second rounding needed, but _emit keeps
    # the invariant uniform (bfloat16/float32 rounding is idempotent and cheap).
    return _emit(torch.relu(x._data), x.dtype, x.layout, lay.memory, x._device, op, owned=True)


def _unary(op: str, input_tensor, act: str, memory_config, output_tensor, *, approximate: bool = False):
    """A standalone eltwise unary op: no dtype argument (output dtype = input dtype), memory config
    = the argument or the input's (unary_device_operation.cpp compute_output_specs)."""
    x = _on_device(input_tensor, op)
    _check("relu", [x], {})
    lay = _out_layout("relu", [x], {}, memory_config, [x._flat4()])
    # unary_program_factory: a 32-bit Dest for float32 (and integer) tensors
    y = A.sim_apply(act, x._data, approximate=approximate, fp32_dest=x.dtype == T.DataType.FLOAT32)
    if output_tensor is not None:
        out = _on_device(output_tensor, op, "output_tensor")
        return _write_into(out, quantize_(y.clone() if y is x._data else y, out.dtype))
    return _emit(y if y is not x._data else y.clone(), x.dtype, x.layout, lay.memory, x._device, op, owned=True,
                 padded_shape=x._padded)


def sigmoid(input_tensor, *, vector_mode=4, mode=None, memory_config=None, output_tensor=None, sub_core_grids=None):
    mode = T.SigmoidMode.Accurate if mode is None else mode
    return _unary("sigmoid", input_tensor, "sigmoid", memory_config, output_tensor,
                  approximate=mode == T.SigmoidMode.FastApproximate)


def _table_standalone(d) -> Callable:
    """``ttnn.<d.ttnn_function>`` for a row of the activation table: its parameters positionally or
    by keyword as the row says (``Param.keyword``), the fast mode by ``fast_and_approximate_mode``
    where ttnn has it; anything else is refused as ttnn's binding would."""
    def fn(input_tensor, *args, memory_config=None, output_tensor=None, sub_core_grids=None, **kw):
        fast = bool(kw.pop("fast_and_approximate_mode", False)) \
            if ("fast_and_approximate_mode", False) in d.standalone_kwargs else False
        positional = [p for p in d.params if p.keyword is None]
        if len(args) != len(positional):
            raise TypeError(f"{d.ttnn_function}() takes {len(positional)} positional parameter(s) "
                            f"after the input, got {len(args)}")
        it = iter(args)
        vals = [next(it) if p.keyword is None else kw.pop(p.keyword, p.default) for p in d.params]
        if kw:
            raise TypeError(f"{d.ttnn_function}() got unexpected keyword(s) {sorted(kw)}")
        return _unary(d.ttnn_function, input_tensor, A.canonical(d, vals), memory_config,
                      output_tensor, approximate=fast)
    fn.__name__ = fn.__qualname__ = d.ttnn_function
    fn.__doc__ = f"ttnn.{d.ttnn_function}: the activation table's {d.name!r} ({d.source})"
    return fn


# every activation's standalone op but relu and sigmoid (their own signatures above) comes from
# its row of the table
for _d in A.ACTIVATIONS.values():
    if _d.ttnn_function not in ("relu", "sigmoid"):
        globals()[_d.ttnn_function] = _table_standalone(_d)


def identity(input_tensor, *, memory_config=None, output_tensor=None, sub_core_grids=None):
    """ttnn.identity: a copy (the SFPU identity op); values are unchanged."""
    x = _on_device(input_tensor, "identity")
    _check("relu", [x], {})
    lay = _out_layout("relu", [x], {}, memory_config, [x._flat4()])
    return _emit(x._data.clone(), x.dtype, x.layout, lay.memory, x._device, "identity", owned=True,
                 padded_shape=x._padded)


__all__ = ["relu", "sigmoid", "identity"] + [d.ttnn_function for d in A.ACTIVATIONS.values()
                                             if d.ttnn_function not in ("relu", "sigmoid", "identity")]
#: the ttnn functions of ``__all__`` whose signatures are checked against ttnn's and that run
#: once per chip on a mesh (as before the split: the table's later rows are not listed)
TTNN_FUNCTIONS = ("relu", "relu6", "leaky_relu", "sigmoid", "hardsigmoid", "hardswish", "silu", "gelu",
                  "tanh", "identity")
