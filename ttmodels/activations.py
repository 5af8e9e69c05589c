"""The one activation table: each activation's spec name, its ttnn 0.81.1 forms, what the sim
computes for it and its float32 torch reference.

Adding an activation is one row of ``ACTIVATIONS`` (plus its tests): the spec language (``act:``
and the standalone op of the same name), the planner, the layers (conv2d's
``Conv2dConfig.activation``, matmul's ``fused_activation`` / ``linear(activation=)``, binary ops'
``activations=[...]``, the standalone ``ttnn.<name>``), the sim and the reference all read it.

Canonical form in ``Node.attrs["activation"]``: the name (``"relu"``), or ``name(param)`` for a
parametrised one (``"leaky_relu(0.1)"``); ``parse`` turns spec input into it.

What fuses where in ttnn 0.81.1 (tt-metal sources):

* conv2d: ``Conv2dConfig.activation: UnaryWithParam | None``; the sharded conv program factory
  (``conv2d_op_sharded_program_factory.cpp``, ``multi_core_optimized_conv_sharded_v2_impl``)
  turns RELU into the packer's ``PACK_RELU`` and any other op type into SFPU defines through
  ``unary::utils::get_defines(op_type, params, "ACTIVATION", "i")``; a 1x1 conv run as a matmul
  passes the activation on as the matmul's ``fused_activation`` (``conv2d_utils.cpp``
  ``determine_matmul_op_config``). So every UnaryOpType that ``get_defines`` knows fuses into a
  real (non-matmul) conv.
* matmul / linear: program configs' ``fused_activation: UnaryWithParam`` and
  ``linear(activation=str | UnaryWithParam)``; the matmul program factories
  (``bmm_op_multi_core_reuse_mcast_*_program_factory.cpp``) use the same PACK_RELU /
  ``get_defines`` split, but 0.81.1 refuses HARDSWISH and LEAKY_RELU there ('Unsupported
  UnaryOpType for fused activation', matmul_utilities.hpp:354, measured on the mock device), a
  1x1 conv's matmul path included: ``fuses_matmul=False``, and the layers run those standalone
  after the matmul (``matmul_split``).
* binary_ng (add, multiply, subtract): ``activations=[UnaryWithParam]`` (post activations,
  ``binary_ng_device_operation.cpp``; the nanobind type is ``EltwiseUnaryWithParam``, an alias).

Approximations (what the SFPU computes; tt-llk ``tt_llk_wormhole_b0/common/inc/sfpu/``): the sim
models the ones the layers can hit.

* ``silu``: ``ckernel_sfpu_silu.h`` ``_calculate_silu_``: x * s(|x|) with s(t) = 0.229 t + 0.5
  for t <= 1, a degree-4 polynomial for t < 5, 1 beyond, mirrored (1 - s) for x < 0. There is no
  exact silu mode. Checked against the newest tt-llk source; the 0.81.1 build could not be pinned
  to a tt-llk commit, so this is the best available model (docs/sim.md).
* ``sigmoid``: ``ttnn.sigmoid(mode=SigmoidMode.Accurate)`` (the default) and the fused form with
  params (RC vector mode, not fast) compute 1 / (1 + exp(-x)) accurately (float32 torch here);
  ``SigmoidMode.FastApproximate`` uses the 6-piece LUT of ``ckernel_sfpu_sigmoid.h``
  (``_init_sigmoid_``), modelled by ``sigmoid_lut``.
* ``gelu``: accurate (erf) by default and when fused with param 0; ``fast_and_approximate_mode``
  uses the LUT of ``ckernel_sfpu_gelu.h`` (``_init_gelu_``), modelled by ``gelu_lut``.
* ``hardsigmoid``: ``ckernel_sfpu_activations.h`` Hardsigmoid: relu_max(x * 1/6 + 0.5, 1) with
  1/6 as the float32 0.1666666716337204 -- computed the same way here (bitwise like torch's
  hardsigmoid up to the rounding of 1/6). ``hardswish`` = x * hardsigmoid(x).
* ``relu``, ``relu6`` (relu_max 6), ``leaky_relu``, ``tanh`` (accurate mode): exact.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ActivationDef", "ACTIVATIONS", "NAMES", "parse", "split", "get", "torch_apply",
           "sim_apply", "unary_with_param", "binary_activations", "matmul_activation",
           "matmul_split"]


@dataclass(frozen=True)
class ActivationDef:
    name: str                       # spec name: ``act: <name>`` and ``op: <name>``
    unary_op: str                   # ttnn.UnaryOpType member of the fused form
    ttnn_function: str              # the standalone ttnn op (``ttnn.<function>``)
    fused_params: tuple[float, ...] = ()   # UnaryWithParam params after the spec parameter
    param: str | None = None        # spec parameter name (leaky_relu: "slope"), None = none
    default: float | None = None    # its default
    fuses_conv: bool = True         # Conv2dConfig.activation (any get_defines op in 0.81.1)
    fuses_matmul: bool = True       # matmul fused_activation / linear(activation=)
    fuses_binary: bool = True       # binary_ng activations=[...]
    standalone_kwargs: tuple[tuple[str, Any], ...] = ()   # fixed keywords of the standalone call
    source: str = ""                # tt-metal / tt-llk source of what the card computes


_SFPU = "tt-llk tt_llk_wormhole_b0/common/inc/sfpu"
_UNARY = "ttnn/cpp/ttnn/operations/eltwise/unary/common/unary_op_utils.cpp (get_defines)"

# Fused forms pass their mode params explicitly, so the card's choice of accurate vs approximate
# does not rest on a kernel's template default.
ACTIVATIONS: dict[str, ActivationDef] = {a.name: a for a in (
    ActivationDef("relu", "RELU", "relu", source="conv/matmul: PACK_RELU (packer); "
                  f"{_SFPU}/ckernel_sfpu_relu.h"),
    ActivationDef("relu6", "RELU6", "relu6", source=f"{_UNARY}: RELU6 = relu_max 6; "
                  f"{_SFPU}/ckernel_sfpu_relu.h"),
    ActivationDef("leaky_relu", "LEAKY_RELU", "leaky_relu", param="slope", default=0.01,
                  fuses_matmul=False,
                  source=f"{_UNARY}: leaky_relu_tile(slope bits); {_SFPU}/ckernel_sfpu_relu.h"),
    ActivationDef("sigmoid", "SIGMOID", "sigmoid", fused_params=(4.0, 0.0),
                  source=f"{_UNARY}: sigmoid_tile<vector_mode RC=4, fast=0>; accurate; "
                  f"FastApproximate: {_SFPU}/ckernel_sfpu_sigmoid.h _init_sigmoid_ LUT"),
    ActivationDef("hardsigmoid", "HARDSIGMOID", "hardsigmoid",
                  source=f"{_SFPU}/ckernel_sfpu_activations.h (Hardsigmoid: relu_max(x/6+0.5, 1))"),
    ActivationDef("hardswish", "HARDSWISH", "hardswish", fuses_matmul=False,
                  source=f"{_SFPU}/ckernel_sfpu_activations.h (x * hardsigmoid(x))"),
    ActivationDef("silu", "SILU", "silu",
                  source=f"{_SFPU}/ckernel_sfpu_silu.h _calculate_silu_ (piecewise sigmoid)"),
    ActivationDef("gelu", "GELU", "gelu", fused_params=(0.0,),
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  source=f"{_UNARY}: gelu_tile<fast=0> (erf); fast: {_SFPU}/ckernel_sfpu_gelu.h LUT"),
    ActivationDef("tanh", "TANH", "tanh", fused_params=(0.0,),
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  source=f"{_UNARY}: tanh_tile<fast=0>; {_SFPU}/ckernel_sfpu_tanh.h"),
)}
NAMES: tuple[str, ...] = tuple(ACTIVATIONS)

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


def matmul_split(act: str | None) -> tuple[str | None, str | None]:
    """(fused into the matmul, run standalone after it) for ``act`` on a matmul (linear, or a
    conv run as one): the activations the matmul kernels refuse run after it."""
    if act is None or get(act).fuses_matmul:
        return act, None
    return None, act


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


_SIXTH = 0.1666666716337204


def _hardsigmoid_tt(x):
    return (x * _SIXTH + 0.5).clamp_(0.0, 1.0)


def _sigmoid_pwl_positive(t):
    """ckernel_sfpu_silu.h ``_sigmoid_piecewise_linear_positive_`` on t >= 0: 0.229 t + 0.5 up to
    1, the degree-4 polynomial below 5, 1 from there on."""
    import torch
    c = (0.00144462, -0.01055479, -0.01203685, 0.24300185, 0.50437757)
    s = t * c[0] + c[1]
    for k in c[2:]:
        s.mul_(t).add_(k)
    s = torch.where(t <= 1.0, t * 0.229 + 0.5, s)
    return s.masked_fill_(t >= 5.0, 1.0)


def silu_tt(x):
    """x * s(|x|), mirrored (1 - s) for x < 0: x * (1 - s) = x - x * s."""
    import torch
    y = x * _sigmoid_pwl_positive(x.abs())
    return torch.where(x < 0, x - y, y)


def _f16(bits: int) -> float:
    # The SFPU LUT's 16-bit coefficients; 0x7C00 (IEEE +inf) is the LUT's 0 (the sources'
    # comments give those entries as 0.0).
    if bits == 0x7C00:
        return 0.0
    import struct
    return struct.unpack("<e", bits.to_bytes(2, "little"))[0]


# Breakpoints of SFPLUTFP32's 6-entry tables as the two kernels' comments give them: sigmoid's
# pieces end at 0.5, 1, 1.5, 2, 4 (lut_mode 0, FP16_6ENTRY_TABLE1); gelu's at 0.5, 1, 1.5, 2, 3.
_SIGMOID_EDGES = (0.5, 1.0, 1.5, 2.0, 4.0)
_GELU_EDGES = (0.5, 1.0, 1.5, 2.0, 3.0)
_SIGMOID_A = tuple(_f16(b) for b in (0x33D9, 0x32F4, 0x318A, 0x300A, 0x2A35, 0x7C00))
_SIGMOID_B = tuple(_f16(b) for b in (0x9018, 0x23C8, 0x2BAA, 0x3027, 0x34CC, 0x37FF))
_GELU_A = tuple(_f16(b) for b in (0x322B, 0x37E7, 0x38F3, 0x38E1, 0x3852, 0x3800))
_GELU_B = tuple(_f16(b) for b in (0x86D8, 0xB122, 0xB479, 0xB437, 0xAFA4, 0x7C00))


def _lut(t, edges, a, b):
    import torch
    idx = torch.bucketize(t, torch.tensor(edges, dtype=t.dtype), right=True)
    return torch.tensor(a, dtype=t.dtype)[idx] * t + torch.tensor(b, dtype=t.dtype)[idx]


def sigmoid_lut(x):
    """``SigmoidMode.FastApproximate``: sign(x) * lut(|x|) + 0.5 (lut2 restores the sign)."""
    return _lut(x.abs(), _SIGMOID_EDGES, _SIGMOID_A, _SIGMOID_B) * x.sign() + 0.5


def gelu_lut(x):
    """``gelu(fast_and_approximate_mode=True)``: 0.5 x + lut(|x|) (lut2_sign: no sign restore)."""
    return 0.5 * x + _lut(x.abs(), _GELU_EDGES, _GELU_A, _GELU_B)


def sim_apply(act: str | None, x, *, approximate: bool = False):
    """What the card computes for ``act`` on float32 ``x`` (before the output rounding)."""
    if act is None:
        return x
    d, p = split(act)
    if d.name == "silu":
        return silu_tt(x)
    if d.name == "hardsigmoid":
        return _hardsigmoid_tt(x)
    if d.name == "hardswish":
        return x * _hardsigmoid_tt(x)
    if approximate and d.name == "sigmoid":
        return sigmoid_lut(x)
    if approximate and d.name == "gelu":
        return gelu_lut(x)
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
