"""The one activation table: each activation's spec name, its ttnn 0.81.1 forms, what the sim
computes for it and its float32 torch reference.

Adding an activation is one row of ``ACTIVATIONS`` (plus its tests): the spec language (``act:``
and the standalone op of the same name), the planner, the layers (conv2d's
``Conv2dConfig.activation``, matmul's ``fused_activation`` / ``linear(activation=)``, binary ops'
``activations=[...]``, the standalone ``ttnn.<name>``), the sim and the reference all read it.

Canonical form in ``Node.attrs["activation"]``: the name (``"relu"``), or ``name(param)`` for a
parametrised one (``"leaky_relu(0.1)"``); ``parse`` turns spec input into it.

What fuses where in ttnn 0.81.1 (seen on the mock device: the defines and
``APPROX`` / ``DST_ACCUM_MODE`` of the programs ttnn JIT-builds for each form):

* conv2d: ``Conv2dConfig.activation: UnaryWithParam | None``; the conv's compute kernel
  (``conv_bmm_tilize``) gets ``SFPU_OP_FUNC_ACTIVATION <act>_tile(i)`` (RELU: the packer's
  ``PACK_RELU``); a 1x1 conv run as a matmul passes it on as the matmul's ``fused_activation``.
* matmul: program configs' ``fused_activation`` runs in the matmul kernel. ``linear(activation=)``
  is *not* fused: ttnn runs a separate ``eltwise_sfpu`` program on the stored output.
* binary_ng (add, multiply, subtract): ``activations=[UnaryWithParam]`` become
  ``PROCESS_POST_ACTIVATIONS``; a 32-bit Dest for float32 operands (``eltwise_binary_sfpu``).
* ``hardswish`` fuses nowhere: conv2d and binary_ng get an *empty* activation define (ttnn drops
  it silently) and the matmul path throws ``Unknown unary op: hardswish``
  (unary_op_utils.cpp:1102; matmul_utilities.hpp:354 "Unsupported UnaryOpType for fused
  activation: UnaryOpType::HARDSWISH"). The standalone ``ttnn.hardswish`` has its own kernel
  (``hardswish_kernel.cpp``: hardsigmoid on the SFPU, then x times it).
* the matmul kernels refuse LEAKY_RELU as a fused activation too ('Unsupported UnaryOpType for
  fused activation', matmul_utilities.hpp:354, measured on the mock device), a 1x1 conv's
  matmul path included.
* Where an activation does not fuse, the layer runs it standalone right after the op, in the
  same layer (``op_split``), so ``act:`` means the same on every op.

Every form runs with ``APPROX = false``; the fast modes are template parameters of the call
(``sigmoid_tile<RC, 1u>``, ``gelu_tile<1u>``, ``tanh_tile<1u>``), set by
``SigmoidMode.FastApproximate`` / ``fast_and_approximate_mode=True`` or the fused params. The
kernel's ``is_fp32_dest_acc_en`` is ``DST_ACCUM_MODE``: the standalone op on a float32 tensor,
binary_ng with a float32 operand, conv2d / matmul with ``fp32_dest_acc_en``.

What the SFPU computes is modelled bit by bit from the wheel's own kernel sources in
``ttmodels/sfpu.py`` (paths relative to the ``ttnn`` package, ``tt_metal/hw/ckernels/
wormhole_b0/metal/llk_api/llk_sfpu/``):

* ``silu``: ``ckernel_sfpu_silu.h``: x * (1 / (1 + exp(-x))): ``_sfpu_exp_21f_bf16_`` and one
  Newton reciprocal step (``ckernel_sfpu_sigmoid.h``, ``ckernel_sfpu_recip.h``), rounded to
  bfloat16; with a 32-bit Dest ``_sfpu_exp_fp32_accurate_`` and two steps, not rounded.
* ``sigmoid``: the same 1 / (1 + exp(-x)); ``FastApproximate``: ``ckernel_sfpu_sigmoid_appx.h``,
  a 3-entry SFPLUT (0.2265625 |x| below 1, 0.265625 |x| - 0.046875 below 2, 0.5 beyond) + 0.5.
* ``gelu``: ``ckernel_sfpu_gelu.h`` ``calculate_gelu_piecewise`` (a CDF polynomial, an exp-based
  tail, 0 below -5.54) rounded to bfloat16; fast: its 6-entry SFPLUTFP32 table + x/2; with a
  32-bit Dest x (0.5 + 0.5 erf) with a degree-15/16 rational erf.
* ``tanh``: ``ckernel_sfpu_tanh.h``: a degree-6 polynomial in |x| rounded to bfloat16; with a
  32-bit Dest an expm1-based form; fast: its 6-entry SFPLUTFP32 table.
* ``hardsigmoid``: ``ckernel_sfpu_activations.h``: relu_max(x * 0.1666666716337204 + 0.5, 1),
  truncated to bfloat16 by the store into a 16-bit Dest. ``hardswish`` = x times that.
* ``relu``, ``relu6`` (relu_max 6), ``leaky_relu``: exact.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ActivationDef", "ACTIVATIONS", "NAMES", "FUSION_NOTE", "parse", "split", "get",
           "torch_apply", "sim_apply", "unary_with_param", "binary_activations",
           "matmul_activation", "matmul_split", "op_split"]


@dataclass(frozen=True)
class ActivationDef:
    name: str                       # spec name: ``act: <name>`` and ``op: <name>``
    unary_op: str                   # ttnn.UnaryOpType member of the fused form
    ttnn_function: str              # the standalone ttnn op (``ttnn.<function>``)
    fused_params: tuple[float, ...] = ()   # UnaryWithParam params after the spec parameter
    param: str | None = None        # spec parameter name (leaky_relu: "slope"), None = none
    default: float | None = None    # its default
    fuses_conv: bool = True         # Conv2dConfig.activation
    fuses_matmul: bool = True       # matmul fused_activation / linear(activation=)
    fuses_binary: bool = True       # binary_ng activations=[...]
    standalone_kwargs: tuple[tuple[str, Any], ...] = ()   # fixed keywords of the standalone call
    source: str = ""                # the ttnn 0.81.1 wheel's kernel of what the card computes


_LLK = "tt_metal/hw/ckernels/wormhole_b0/metal/llk_api/llk_sfpu"
_TTLLK = "tt_metal/tt-llk/tt_llk_wormhole_b0/common/inc/sfpu"

# Fused forms pass their mode params explicitly, so the card's choice of accurate vs approximate
# does not rest on a kernel's template default. Sources: paths in the ttnn 0.81.1 wheel.
ACTIVATIONS: dict[str, ActivationDef] = {a.name: a for a in (
    ActivationDef("relu", "RELU", "relu", source="conv/matmul: PACK_RELU (packer); "
                  f"{_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("relu6", "RELU6", "relu6", source=f"relu_max_tile(6.0); {_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("leaky_relu", "LEAKY_RELU", "leaky_relu", param="slope", default=0.01,
                  fuses_matmul=False,
                  source=f"leaky_relu_tile(slope bits); {_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("sigmoid", "SIGMOID", "sigmoid", fused_params=(4.0, 0.0),
                  source=f"sigmoid_tile<RC, 0u>; {_LLK}/ckernel_sfpu_sigmoid.h; FastApproximate: "
                  f"{_LLK}/ckernel_sfpu_sigmoid_appx.h"),
    ActivationDef("hardsigmoid", "HARDSIGMOID", "hardsigmoid",
                  source=f"hardsigmoid_tile; {_LLK}/ckernel_sfpu_activations.h"),
    # conv2d and binary_ng drop it silently, matmul throws (docstring)
    ActivationDef("hardswish", "HARDSWISH", "hardswish", fuses_conv=False, fuses_matmul=False,
                  fuses_binary=False,
                  source="ttnn/cpp/ttnn/operations/eltwise/unary/device/kernels/compute/"
                  f"hardswish_kernel.cpp; {_LLK}/ckernel_sfpu_activations.h"),
    ActivationDef("silu", "SILU", "silu", source=f"silu_tile; {_LLK}/ckernel_sfpu_silu.h"),
    ActivationDef("gelu", "GELU", "gelu", fused_params=(0.0,),
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  source=f"gelu_tile<0u>; {_LLK}/ckernel_sfpu_gelu.h"),
    ActivationDef("tanh", "TANH", "tanh", fused_params=(0.0,),
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  source=f"tanh_tile<0u>; {_LLK}/ckernel_sfpu_tanh.h"),
)}
NAMES: tuple[str, ...] = tuple(ACTIVATIONS)
# why an activation does not fuse (spec errors)
FUSION_NOTE = {"hardswish": "conv2d and binary ops drop it silently, matmul refuses it",
               "leaky_relu": "matmul refuses it"}

_FORM = re.compile(r"^([a-z0-9_]+)(?:\((-?[0-9.eE+-]+)\))?$")


def split(act: str) -> tuple[ActivationDef, float | None]:
    """Canonical ``"name"`` / ``"name(p)"`` -> (definition, parameter or None)."""
    m = _FORM.match(act or "")
    if m is None or m.group(1) not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; known: {', '.join(NAMES)}")
    d = ACTIVATIONS[m.group(1)]
    if d.param is None:
        if m.group(2) is not None:
            raise ValueError(f"activation {d.name} takes no parameter, got {act!r}")
        return d, None
    return d, float(m.group(2)) if m.group(2) is not None else d.default


def get(name: str) -> ActivationDef:
    return split(name)[0]


def canonical(d: ActivationDef, param: float | None) -> str:
    return d.name if d.param is None else f"{d.name}({float(param)!r})"


def parse(value) -> str | None:
    """Spec input -> canonical string. Accepts None, ``"silu"``, ``"leaky_relu(0.2)"`` and
    ``{leaky_relu: 0.2}`` / ``{name: leaky_relu, slope: 0.2}``; raises ValueError with the reason."""
    if value is None:
        return None
    if isinstance(value, dict):
        if "name" in value:
            rest = {k: v for k, v in value.items() if k != "name"}
            name = value["name"]
        elif len(value) == 1:
            name, v = next(iter(value.items()))
            rest = {"_": v}
        else:
            raise ValueError(f"activation mapping must be {{name: value}} or "
                             f"{{name: ..., <param>: value}}, got {dict(value)!r}")
        if not isinstance(name, str) or name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")
        d = ACTIVATIONS[name]
        if not rest:
            return canonical(d, d.default)
        if d.param is None:
            raise ValueError(f"activation {name} takes no parameter")
        if len(rest) != 1:
            raise ValueError(f"activation {name} takes one parameter '{d.param}', got {sorted(rest)}")
        k, v = next(iter(rest.items()))
        if k not in ("_", d.param):
            raise ValueError(f"activation {name} takes '{d.param}', got {sorted(rest)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"activation {name}: '{d.param}' must be a number, got {v!r}")
        return canonical(d, float(v))
    if not isinstance(value, str):
        raise ValueError(f"activation must be a name, got {value!r}")
    d, p = split(value)
    return canonical(d, p)


# ---------------------------------------------------------------------------------------------
# ttnn forms (``tt`` = the ttnn module or the sim)
# ---------------------------------------------------------------------------------------------

def unary_with_param(tt, act: str):
    """The fused form: ``tt.UnaryWithParam(UnaryOpType.X[, param][, mode params])``."""
    d, p = split(act)
    params = ([p] if d.param is not None else []) + list(d.fused_params)
    return tt.UnaryWithParam(getattr(tt.UnaryOpType, d.unary_op), *[float(x) for x in params])


def binary_activations(tt, act: str | None) -> list:
    if act is None:
        return []
    d = get(act)
    if not d.fuses_binary:
        raise ValueError(f"binary ops cannot fuse {d.name}")
    return [unary_with_param(tt, act)]


def op_split(act: str | None, where: str) -> tuple[str | None, str | None]:
    """(fused into the op, run standalone right after it) for ``act`` on an op of kind
    ``where`` ("conv", "matmul": linear or a conv run as one, "binary"): what ttnn 0.81.1 cannot
    fuse there (refuses, or drops silently) runs after it."""
    if act is None or getattr(get(act), f"fuses_{where}"):
        return act, None
    return None, act


def matmul_split(act: str | None) -> tuple[str | None, str | None]:
    return op_split(act, "matmul")


def matmul_activation(tt, act: str | None):
    if act is None:
        return None
    if not get(act).fuses_matmul:
        raise ValueError(f"matmul cannot fuse {act}")
    return unary_with_param(tt, act)


def standalone(tt, act: str) -> tuple[Callable, tuple, dict]:
    """(function, positional args after the input, keywords) of the standalone ttnn op."""
    d, p = split(act)
    args = (float(p),) if d.param is not None else ()
    return getattr(tt, d.ttnn_function), args, dict(d.standalone_kwargs)


# ---------------------------------------------------------------------------------------------
# numerics: torch float32 reference and the sim's model of the card
# ---------------------------------------------------------------------------------------------

def torch_apply(act: str | None, x):
    """Float32 torch reference (torch.nn semantics: nn.SiLU, nn.GELU(), nn.Hardsigmoid ...)."""
    if act is None:
        return x
    import torch
    import torch.nn.functional as F
    d, p = split(act)
    fn = {"relu": F.relu, "relu6": F.relu6, "sigmoid": torch.sigmoid, "hardsigmoid": F.hardsigmoid,
          "hardswish": F.hardswish, "silu": F.silu, "gelu": F.gelu, "tanh": torch.tanh}.get(d.name)
    if fn is not None:
        return fn(x)
    if d.name == "leaky_relu":
        return F.leaky_relu(x, p)
    raise AssertionError(d.name)  # pragma: no cover - every row has a reference


# The SFPU kernel of each modelled activation (ttmodels/sfpu.py): (accurate, fast) forms.
_KERNELS = {"silu": ("silu", "silu"), "sigmoid": ("sigmoid", "sigmoid_fast"),
            "gelu": ("gelu", "gelu_fast"), "tanh": ("tanh", "tanh_fast"),
            "hardsigmoid": ("hardsigmoid", "hardsigmoid")}


def _sfpu_kernel(name: str, approximate: bool, fp32_dest: bool):
    """The bit-level model (ttmodels/sfpu.py) of one SFPU form, on float32 input."""
    from . import sfpu
    if name == "hardswish":
        # hardswish_kernel.cpp: hardsigmoid stored in Dest, then x times it (the FPU's
        # DEST_TO_SRCA multiply of two bfloat16 values is exact; the SFPU's float32 multiply)
        return lambda x: sfpu.mad(x, sfpu.hardsigmoid(x, fp32_dest), 0.0)
    fn = getattr(sfpu, _KERNELS[name][bool(approximate)])
    return lambda x: fn(x, fp32_dest)


# (name, approximate) -> the 16-bit Dest form's output for every bfloat16 bit pattern
_BF16_TABLES: dict = {}


def _bf16_table(name: str, approximate: bool):
    """The 16-bit Dest form evaluated once on all 65,536 bfloat16 values (indexed by their bits):
    its input is always one of them, so a lookup gives the kernel model's bits exactly, at the
    cost of a gather instead of a dozen float64 passes (issue 26: efficientnet's SiLU)."""
    key = (name, bool(approximate))
    table = _BF16_TABLES.get(key)
    if table is None:
        import torch
        # ordered by the bits read as a signed int16, plus 32768 (the cheapest index to make)
        every = (torch.arange(-32768, 32768, dtype=torch.int32) << 16).view(torch.float32)
        table = _BF16_TABLES[key] = _sfpu_kernel(name, approximate, False)(every).contiguous()
    return table


def sim_apply(act: str | None, x, *, approximate: bool = False, fp32_dest: bool = False):
    """What the card computes for ``act`` on float32 ``x`` (before the output rounding):
    ``approximate`` is the kernel's fast mode, ``fp32_dest`` its ``is_fp32_dest_acc_en`` (a 32-bit
    Dest: the standalone op on a float32 tensor, a fused form under ``fp32_dest_acc_en``).

    The SFPU reads its input from Dest. A 16-bit Dest holds bfloat16, so there the kernel's input
    is ``x`` rounded to bfloat16 (to nearest, as the sim rounds every op's bfloat16 result): a
    fused activation sees the op's sum as Dest holds it, not the sim's float32 sum. A 32-bit Dest
    holds the float32 value itself."""
    if act is None:
        return x
    d, p = split(act)
    if d.name in _KERNELS or d.name == "hardswish":
        if fp32_dest:
            return _sfpu_kernel(d.name, approximate, True)(x)
        import torch
        idx = x.to(torch.bfloat16).view(torch.int16).to(torch.int64).add_(32768)
        return torch.take(_bf16_table(d.name, approximate), idx)
    return torch_apply(act, x)


def from_unary(op_type_name: str, params) -> tuple[str, bool]:
    """A fused UnaryWithParam (op type member name, params) -> (canonical act, approximate)."""
    for d in ACTIVATIONS.values():
        if d.unary_op == op_type_name:
            ps = list(params)
            if d.param is not None:
                return canonical(d, ps[0] if ps else d.default), False
            if d.name == "sigmoid":
                return d.name, len(ps) >= 2 and bool(ps[1])
            if d.name in ("gelu", "tanh"):
                return d.name, bool(ps[0]) if ps else False
            return d.name, False
    raise ValueError(f"UnaryOpType.{op_type_name} is not in the activation table")
