"""What the sim's ops share (each op's own function is in ``ttmodels/ops/<op>/sim.py``): the
output tensor of an op (``_emit``: rounded to its dtype, the memory config ttnn 0.81 gives it via
``rules.output_layout``), the fused activations, math fidelity (the operand bits the FPU sees), the
matmul kernel and the small argument normalisers.

Every op: checks its operands' layouts with ``rules.check`` (raising LayoutError with the rule id),
computes in float32 with torch on NHWC data viewed as NCHW (channels_last strides, no copies),
rounds the output to the op's output dtype with ``formats.quantize`` in TTNN's [.., rows, C]
layout, and gives the output the memory config ttnn 0.81 would (``rules.output_layout``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...ops import activations as A
from ...arch import DEFAULT_GRID
from ...planning import rules
from ...errors import Error
from ...planning.layout import MemSpec
from . import types as T
from .tensor import (SimTensor, memo_key, memoized, memory_config_for, memspec, memspec_token, quantize,  # noqa: F401
                     quantize_, validate_memory)

DEVICE_GRID = DEFAULT_GRID


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _pair(v) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    return v if len(v) == 2 else (v[0], v[0])




def _layout_name(layout: T.Layout) -> str:
    return "tile" if layout == T.Layout.TILE else "row_major"


def _out_layout(op, inputs, attrs, requested: T.MemoryConfig | None, shapes):
    req = memspec_token(requested) if requested is not None else None
    key = memo_key("out:" + op, inputs, attrs, (req, tuple(shapes)))
    return memoized(key, lambda: rules.output_layout(
        op, [t._layout() if t is not None else None for t in inputs], attrs,
        memspec(requested) if requested is not None else None, shapes))


def _emit(data: torch.Tensor, dtype: T.DataType, layout: T.Layout, mem: MemSpec | T.MemoryConfig,
          device, op: str, shape=None, owned: bool = False, padded_shape=None) -> SimTensor:
    """The op's output tensor, ``data`` rounded to ``dtype``; ``owned``: ``data`` is a fresh
    result no other tensor shares, so it may be rounded in place; ``padded_shape``: the op's own
    physical shape when it pads beyond the layout's default."""
    mc = mem if isinstance(mem, T.MemoryConfig) else memory_config_for(mem)
    shape = tuple(shape) if shape is not None else tuple(data.shape)
    validate_memory(shape, layout, dtype, mc, op, device, padded_shape)
    return SimTensor(quantize_(data, dtype) if owned else quantize(data, dtype), dtype, layout, mc,
                     device, shape, padded_shape)


# ---------------------------------------------------------------------------------------------
# activations and math fidelity
# ---------------------------------------------------------------------------------------------

def _act_name(act) -> str | None:
    """The canonical table name of a fused activation argument (for the rules), or None."""
    if act is None or isinstance(act, (list, tuple)):
        return None
    if isinstance(act, str):
        return act.lower() if act.lower() in A.ACTIVATIONS else None
    name = act.op_type.name if isinstance(act, T.UnaryWithParam) else getattr(act, "name", "")
    try:
        return A.from_unary(name, getattr(act, "params", []))[0]
    except ValueError:
        return None


def _apply_unary(x: torch.Tensor, act, inplace: bool = False, fp32_dest: bool = False) -> torch.Tensor:
    """``act`` (None, "relu", UnaryWithParam, UnaryOpType or a list of them) applied to ``x``;
    ``inplace`` lets relu reuse ``x`` when the caller owns it. The activations of the one table
    (``ttmodels.ops.activations``) compute what the card's SFPU computes (``sim_apply``) with a 32-bit
    Dest when ``fp32_dest`` (the program's ``fp32_dest_acc_en``)."""
    if act is None:
        return x
    if isinstance(act, (list, tuple)):
        for a in act:
            x = _apply_unary(x, a, inplace, fp32_dest)
        return x
    if isinstance(act, str):
        name, params = act.lower(), []
    elif isinstance(act, T.UnaryWithParam):
        name, params = act.op_type.name.lower(), act.params
    elif isinstance(act, T.UnaryOpType):
        name, params = act.name.lower(), []
    else:
        raise Error(f"unsupported activation {act!r}")
    if name == "relu":
        return x.relu_() if inplace else torch.relu(x)
    if name == "relu6" and inplace:
        # Same kernel as the table's F.relu6 (hardtanh's clamp), NaN and -0.0 bits included
        # (tests/test_sim.py checks it against activations.sim_apply); in place on an owned output
        # it saves a fresh tensor per conv, whose page faults cost 4x the clamp (MobileNetV2).
        return F.relu6(x, inplace=True)
    if name == "relu_max":
        return x.clamp(0.0, params[0])
    if name == "relu_min":
        return torch.maximum(x, torch.tensor(params[0]))
    if name == "exp":
        return torch.exp(x)
    if name == "sqrt":
        return torch.sqrt(x)
    if name == "identity":
        return x
    try:
        canon, approx = A.from_unary(name.upper(), params)
    except ValueError:
        raise Error(f"activation {name!r} is not modelled by the sim backend") from None
    return A.sim_apply(canon, x, approximate=approx, fp32_dest=fp32_dest)


def _fp32_dest(compute_config) -> bool:
    return bool(getattr(compute_config, "fp32_dest_acc_en", False)) if compute_config is not None else False


# The FPU multiplier (MVMUL, ELWMUL) reads at most 5 mantissa bits of srcA and 7 of srcB (hidden
# one included); each fidelity phase multiplies one part of each (docs/sim.md, "Math fidelity"):
#   phase 0: A_hi x B_hi   phase 1: A_lo x B_hi   phase 2: A_hi x B_lo   phase 3: A_lo x B_lo
# with A_hi = srcA truncated to 4 explicit mantissa bits, B_hi = srcB truncated to 6, and the
# lo parts the bits below them (tt-llk golden_generators.py FP_FIDELITY_ITER_MASK: bit masks,
# so the dropped bits are truncated, never rounded). LoFi runs phase 0, HiFi2 phases 0-1, HiFi3
# 0-2 and HiFi4 0-3; in0 (activations) is srcB, in1 (weights) srcA. Grouped by operand that is
# one main product plus, for HiFi3 only, a second one:
#   LoFi  A_hi x B_hi             HiFi2  A x B_hi
#   HiFi3 A x B_hi + A_hi x B_lo  HiFi4  A x B
# _FIDELITY_BITS: the main product's (srcA, srcB) explicit mantissa bits, None = all stored bits;
# _FIDELITY_EXTRA: the second product's (srcA bits, srcB bits kept by the main product: it reads
# srcB's bits below them).
_FIDELITY_BITS = {T.MathFidelity.LoFi: (4, 6), T.MathFidelity.HiFi2: (None, 6),
                  T.MathFidelity.HiFi3: (None, 6), T.MathFidelity.HiFi4: (None, None)}
_FIDELITY_EXTRA = {T.MathFidelity.HiFi3: (4, 6)}


def _truncate(x: torch.Tensor, keep: int | None) -> torch.Tensor:
    if keep is None or keep >= 23:
        return x
    mask = ~((1 << (23 - keep)) - 1)
    if not x.is_contiguous():
        x = x.contiguous()
    return torch.bitwise_and(x.view(torch.int32), mask).view(torch.float32)


# Explicit mantissa bits a stored value of each format can have: a block-float value keeps at
# most M - 1 bits after its leading one (M = 7 for bfloat8_b, 3 for bfloat4_b).
_STORED_BITS = {T.DataType.FLOAT32: 23, T.DataType.BFLOAT16: 7, T.DataType.BFLOAT8_B: 6,
                T.DataType.BFLOAT4_B: 2}


def _operand(t: SimTensor, keep: int | None) -> torch.Tensor:
    """``t``'s values as the FPU multiplier sees them at fidelity ``keep`` (see ``_truncate``),
    truncated once per tensor: a tensor read by several convs/matmuls (a bottleneck's input feeds
    its conv1 and its downsample) keeps the truncated form until it is deallocated."""
    keep = _effective_keep(t.dtype, keep)
    if keep is None:
        return t._data
    key = ("fidelity", keep)
    if t._cache is None:
        t._cache = {}
    hit = t._cache.get(key)
    if hit is None or hit[0] is not t._data:      # in-place writes replace or rewrite _data
        hit = (t._data, _truncate(t._data, keep))
        t._cache[key] = hit
    return hit[1]


def _effective_keep(dtype: T.DataType, keep: int | None) -> int | None:
    """``keep``, or None when values stored as ``dtype`` have no more mantissa bits than the
    fidelity keeps (the truncation would change nothing, so it is skipped)."""
    return None if keep is None or _STORED_BITS.get(dtype, 23) <= keep else keep


def _math_fidelity(compute_config):
    mf = getattr(compute_config, "math_fidelity", None) if compute_config is not None else None
    if mf is None or mf == T.MathFidelity.Invalid:
        mf = T.MathFidelity.LoFi        # ttnn's init_device_compute_kernel_config default
    return mf


def _fidelity(compute_config) -> tuple[int | None, int | None]:
    """The main product's (srcA = weights, srcB = activations) mantissa bits (``_FIDELITY_BITS``)."""
    return _FIDELITY_BITS[_math_fidelity(compute_config)]


def _fidelity_extra(compute_config) -> tuple[int, int] | None:
    """HiFi3's second product (``_FIDELITY_EXTRA``): srcA at ``[0]`` bits times srcB's bits below
    ``[1]``; None for the other fidelities."""
    return _FIDELITY_EXTRA.get(_math_fidelity(compute_config))


def _operand_low(t: SimTensor, keep: int) -> torch.Tensor | None:
    """``t``'s mantissa bits below the ``keep`` the main product reads (``x - _truncate(x, keep)``,
    exact in float32), or None when ``t``'s format has no such bits (the product would be 0)."""
    keep_ = _effective_keep(t.dtype, keep)
    if keep_ is None:
        return None
    return t._data - _operand(t, keep_)


def _write_into(out: SimTensor, values: torch.Tensor) -> SimTensor:
    """``values`` written into ``out``'s storage (views of it see them, as views of a device buffer
    do); storage the sim shares with tensors that are separate buffers on a card is copied first."""
    out._own()
    out._data.copy_(values.reshape(out._data.shape))
    return out


def _matmul_bias(a2d: torch.Tensor, b2d: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``a2d @ b2d``, then ``+ bias`` in place: the bias added to the finished dot products, as a
    card adds it after the K accumulation. Not ``torch.addmm``: BLAS initialises the output with
    the bias and accumulates the K blocks onto it, a different summation order that moves float32
    results by an ulp (caught by the float32 bit pins, tests/test_sim_bits.py)."""
    y = torch.mm(a2d, b2d)
    return y if bias is None else y.add_(bias)
