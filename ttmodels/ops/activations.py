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
``ttmodels/ops/sfpu.py`` (paths relative to the ``ttnn`` package, ``tt_metal/hw/ckernels/
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

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ActivationDef", "Param", "ACTIVATIONS", "NAMES", "FUSION_NOTE", "parse", "split", "get",
           "checked",
           "torch_apply", "sim_apply", "unary_with_param", "binary_activations",
           "matmul_activation", "matmul_split", "op_split", "docs_table",
           "SFPU_VECTORS_PER_TILE", "sfpu_tile_cycles"]


@dataclass(frozen=True)
class Param:
    """One parameter of an activation: its spec name, default, and how the standalone ttnn op
    takes it (``keyword``: by that keyword; None: positionally, in table order)."""
    name: str
    default: float
    keyword: str | None = None
    # the name of a parameter this one may not be below (hardtanh's max_val >= min_val): torch
    # raises at run time otherwise, and the card's clamp would return max_val everywhere
    not_below: str | None = None


def _torch(name: str, **fixed) -> Callable:
    """torch.nn.functional.<name>(x, *params, **fixed), imported when first called."""
    def fn(x, *params):
        import torch.nn.functional as F
        return getattr(F, name)(x, *params, **fixed)
    fn.__name__ = f"F.{name}"
    return fn


def _sigmoid_ref(x):
    import torch
    return torch.sigmoid(x)


def _tanh_ref(x):
    import torch
    return torch.tanh(x)


def _sfpu(accurate: str, fast: str | None = None) -> Callable:
    """The bit-level model of an SFPU kernel (``ttmodels/ops/sfpu.py``): (accurate, fast) forms."""
    def fn(x, params, approximate: bool, fp32_dest: bool):
        from . import sfpu
        return getattr(sfpu, fast if approximate and fast else accurate)(x, fp32_dest)
    fn.__name__ = f"sfpu.{accurate}"
    return fn


def _hardswish_sfpu(x, params, approximate: bool, fp32_dest: bool):
    # hardswish_kernel.cpp: hardsigmoid stored in Dest, then x times it (the FPU's DEST_TO_SRCA
    # multiply of two bfloat16 values is exact; the SFPU's float32 multiply)
    from . import sfpu
    return sfpu.mad(x, sfpu.hardsigmoid(x, fp32_dest), 0.0)


def _mish_sfpu(x, params, approximate: bool, fp32_dest: bool):
    from . import sfpu
    return sfpu.mish(x, fp32_dest, approximate)


@dataclass(frozen=True)
class ActivationDef:
    """One activation: its spec name and parameters, its ttnn 0.81.1 forms (fused
    ``UnaryWithParam`` and standalone op), where the fused form runs, and its numerics: the
    float32 torch reference and what the card computes (``sim``)."""
    name: str                       # spec name: ``act: <name>`` and ``op: <name>``
    unary_op: str                   # ttnn.UnaryOpType member of the fused form
    ttnn_function: str              # the standalone ttnn op (``ttnn.<function>``)
    torch: Callable                 # float32 reference: (x, *params) -> tensor (torch.nn semantics)
    params: tuple[Param, ...] = ()  # spec parameters, in the fused form's order
    fused_params: tuple[float, ...] = ()   # UnaryWithParam params after the spec parameters
    fast_param: int | None = None   # index in ``fused_params`` of the fast-mode flag, if any
    fuses_conv: bool = True         # Conv2dConfig.activation
    fuses_matmul: bool = True       # matmul fused_activation / linear(activation=)
    fuses_binary: bool = True       # binary_ng activations=[...]
    standalone_kwargs: tuple[tuple[str, Any], ...] = ()   # fixed keywords of the standalone call
    # what the card computes, (x, params, approximate, fp32_dest) -> float32 before the output
    # rounding: an SFPU kernel model (its 16-bit Dest form becomes a lookup over the 65,536
    # bfloat16 inputs, ``sim_apply``); None: exactly the torch reference (relu, clamps)
    sim: Callable | None = None
    source: str = ""                # the ttnn 0.81.1 wheel's kernel of what the card computes
    doc: str = "exact"              # what the card computes, for docs/spec.md's table
    # device time (planning/estimate.py): SFPU instructions the accurate, 16-bit-Dest form
    # issues per 32-lane vector op of its kernel's loop body, counted in ``source`` (``SFPU_COUNT``
    # says how); a tile is ``SFPU_VECTORS_PER_TILE`` of them. 0: no SFPU work (a packer relu)
    sfpu_per_vector: int = 0
    # conv2d / matmul apply it in the packer (``PACK_RELU``): no SFPU time fused there
    packer_fused: bool = False


# The SFPU works on 32 lanes of Dest at a time: a 32x32 tile is 4 faces x 8 iterations of each
# kernel's loop (``ITERATIONS = 8`` per face, ``dst_reg++`` between them), 32 vector ops.
SFPU_VECTORS_PER_TILE = 32
# How ``sfpu_per_vector`` was counted (the wheel's kernel source of each row, its accurate form
# with a 16-bit Dest, the default of every form ttmodels emits): one instruction per sfpi
# arithmetic or bit operation (a multiply-add is one SFPMAD), one per load from / store to
# Dest, one for ``dst_reg++``, two per float32 immediate that is not a programmable constant
# (SFPLOADI upper and lower half), two per ``v_if`` / ``v_and`` condition and one per
# ``v_endif``; inlined helpers (``_sfpu_exp_21f_bf16_``, ``sfpu_reciprocal_iter<1>``) counted
# where they are called. At one instruction per cycle that is a floor: the SFPU's 2-cycle
# SFPMAD results add NOPs in dependent chains, so TT's measurements run above it (Blackhole
# gelu accurate 2,849 cycles/tile against the 2,368 counted, tt-metal issue #52407; Wormhole
# silu ~2,000 cycles/tile, tt-metal PR #41949's baseline of 128,919 ns for 4,096 tiles on
# 64 cores, against the 1,280 counted). Not fitted to either.
SFPU_COUNT = "sfpu_per_vector: instructions per 32-lane vector op, counted in the kernel source"

_LLK = "tt_metal/hw/ckernels/wormhole_b0/metal/llk_api/llk_sfpu"
_TTLLK = "tt_metal/tt-llk/tt_llk_wormhole_b0/common/inc/sfpu"

# Fused forms pass their mode params explicitly, so the card's choice of accurate vs approximate
# does not rest on a kernel's template default. Sources: paths in the ttnn 0.81.1 wheel. Where
# each form fuses was measured on the mock device (docstring).
ACTIVATIONS: dict[str, ActivationDef] = {a.name: a for a in (
    ActivationDef("relu", "RELU", "relu", _torch("relu"),
                  sfpu_per_vector=5, packer_fused=True,
                  source=f"conv/matmul: PACK_RELU (packer); {_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("relu6", "RELU6", "relu6", _torch("relu6"),
                  sfpu_per_vector=12,
                  source=f"relu_max_tile(6.0); {_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("leaky_relu", "LEAKY_RELU", "leaky_relu", _torch("leaky_relu"),
                  params=(Param("slope", 0.01),), fuses_matmul=False,
                  sfpu_per_vector=7,
                  source=f"leaky_relu_tile(slope bits); {_TTLLK}/ckernel_sfpu_relu.h"),
    ActivationDef("sigmoid", "SIGMOID", "sigmoid", _sigmoid_ref, fused_params=(4.0, 0.0),
                  fast_param=1, sim=_sfpu("sigmoid", "sigmoid_fast"),
                  sfpu_per_vector=38,
                  source=f"sigmoid_tile<RC, 0u>; {_LLK}/ckernel_sfpu_sigmoid.h; FastApproximate: "
                  f"{_LLK}/ckernel_sfpu_sigmoid_appx.h",
                  doc="1 / (1 + exp(-x)): exp_21f and one Newton reciprocal step, rounded to bfloat16 (fp32 Dest: Juffa's expf, two steps); `FastApproximate`: a 3-entry LUT + 0.5"),
    ActivationDef("hardsigmoid", "HARDSIGMOID", "hardsigmoid", _torch("hardsigmoid"),
                  sim=_sfpu("hardsigmoid"),
                  sfpu_per_vector=13,
                  source=f"hardsigmoid_tile; {_LLK}/ckernel_sfpu_activations.h",
                  doc="`min(max(x * 0.16666667 + 0.5, 0), 1)`, truncated to bfloat16 by the Dest store"),
    # conv2d and binary_ng drop it silently, matmul throws (docstring)
    ActivationDef("hardswish", "HARDSWISH", "hardswish", _torch("hardswish"), fuses_conv=False,
                  fuses_matmul=False, fuses_binary=False, sim=_hardswish_sfpu,
                  sfpu_per_vector=14,
                  source="ttnn/cpp/ttnn/operations/eltwise/unary/device/kernels/compute/"
                  f"hardswish_kernel.cpp; {_LLK}/ckernel_sfpu_activations.h",
                  doc="x * the above (the standalone kernel)"),
    ActivationDef("silu", "SILU", "silu", _torch("silu"), sim=_sfpu("silu"),
                  sfpu_per_vector=40,
                  source=f"silu_tile; {_LLK}/ckernel_sfpu_silu.h",
                  doc="x * the sigmoid above, rounded to bfloat16 (within 1 bfloat16 ulp of torch)"),
    ActivationDef("gelu", "GELU", "gelu", _torch("gelu"), fused_params=(0.0,), fast_param=0,
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  sim=_sfpu("gelu", "gelu_fast"), sfpu_per_vector=74,
                  source=f"gelu_tile<0u>; {_LLK}/ckernel_sfpu_gelu.h",
                  doc="a piecewise CDF polynomial, rounded to bfloat16 (fp32 Dest: x (0.5 + 0.5 erf), a rational erf); fast mode: a 6-entry LUT + x/2"),
    ActivationDef("tanh", "TANH", "tanh", _tanh_ref, fused_params=(0.0,), fast_param=0,
                  standalone_kwargs=(("fast_and_approximate_mode", False),),
                  sim=_sfpu("tanh", "tanh_fast"), sfpu_per_vector=30,
                  source=f"tanh_tile<0u>; {_LLK}/ckernel_sfpu_tanh.h",
                  doc="a degree-6 polynomial in \\|x\\|, rounded to bfloat16 (fp32 Dest: an expm1 form); fast mode: a 6-entry LUT"),
    # two parameters, which the standalone op takes by keyword; a clamp, exact on the card
    ActivationDef("hardtanh", "HARDTANH", "hardtanh", _torch("hardtanh"),
                  params=(Param("min_val", -1.0, "min_val"),
                          Param("max_val", 1.0, "max_val", not_below="min_val")),
                  sfpu_per_vector=13,
                  source=f"hardtanh_tile(i, min bits, max bits); {_LLK}/ckernel_sfpu_hardtanh.h",
                  doc="exact (a clamp)"),
    # conv2d and binary_ng refuse it (unary_op_utils.cpp:974), matmul too
    # (matmul_utilities.hpp:354): it runs standalone after the op
    ActivationDef("mish", "MISH", "mish", _torch("mish"), fuses_conv=False, fuses_matmul=False,
                  fuses_binary=False, standalone_kwargs=(("fast_and_approximate_mode", False),),
                  sim=_mish_sfpu, sfpu_per_vector=44,
                  source=f"mish_tile; {_LLK}/ckernel_sfpu_mish.h",
                  doc="x u (u + 2) / ((1 + u)^2 + 1), u = exp_21f(x) rounded to bfloat16 and one Newton reciprocal step (fp32 Dest: Juffa's expf, two steps), rounded to bfloat16; x itself from 8 on"),
)}
NAMES: tuple[str, ...] = tuple(ACTIVATIONS)
# why an activation does not fuse (spec errors)
FUSION_NOTE = {"hardswish": "conv2d and binary ops drop it silently, matmul refuses it",
               "leaky_relu": "matmul refuses it",
               "mish": "conv2d, matmul and binary ops refuse it"}

_FORM = re.compile(r"^([a-z0-9_]+)(?:\(([^()]*)\))?$")
_NUM = re.compile(r"^\s*-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")


def split(act: str) -> tuple[ActivationDef, tuple[float, ...]]:
    """Canonical ``"name"`` / ``"name(p, ...)"`` -> (definition, parameters: every one, defaults
    filled in)."""
    m = _FORM.match(act or "")
    if m is None or m.group(1) not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; known: {', '.join(NAMES)}")
    d = ACTIVATIONS[m.group(1)]
    given = [] if m.group(2) is None else m.group(2).split(",")
    if not d.params:
        if given:
            raise ValueError(f"activation {d.name} takes no parameter, got {act!r}")
        return d, ()
    if len(given) > len(d.params) or any(not _NUM.match(v) for v in given):
        raise ValueError(f"activation {d.name} takes up to {len(d.params)} number(s) "
                         f"({', '.join(p.name for p in d.params)}), got {act!r}")
    return d, checked(d, [float(v) for v in given])


def get(name: str) -> ActivationDef:
    return split(name)[0]


def canonical(d: ActivationDef, params=()) -> str:
    """``name`` or ``name(p0, p1, ...)`` with every parameter (defaults filled in)."""
    if not d.params:
        return d.name
    vals = list(params) + [p.default for p in d.params[len(params):]]
    return f"{d.name}({', '.join(repr(float(v)) for v in vals)})"


def _number(name: str, key: str, v) -> float:
    """A parameter's value as a finite float (a 400-digit integer overflows float: refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"activation {name}: '{key}' must be a number, got {v!r}")
    try:
        f = float(v)
    except OverflowError:
        raise ValueError(f"activation {name}: '{key}' is too large for a float (an integer of "
                         f"{v.bit_length()} bits)") from None
    if not math.isfinite(f):
        raise ValueError(f"activation {name}: '{key}' must be a finite number, got {v!r}")
    return f


def checked(d: ActivationDef, vals) -> tuple[float, ...]:
    """Every parameter of ``d`` (``vals`` in table order, defaults filling the rest) as finite
    floats in the order their ``not_below`` asks for; ValueError naming the parameter if not."""
    vals = list(vals) + [p.default for p in d.params[len(vals):]]
    by = {p.name: _number(d.name, p.name, v) for p, v in zip(d.params, vals)}
    for p in d.params:
        if p.not_below is not None and by[p.name] < by[p.not_below]:
            raise ValueError(f"activation {d.name}: '{p.name}' ({by[p.name]!r}) is below "
                             f"'{p.not_below}' ({by[p.not_below]!r})")
    return tuple(by[p.name] for p in d.params)


def params_from(d: ActivationDef, given: dict) -> tuple[float, ...]:
    """A mapping of parameter name -> value (missing ones take their defaults); unknown names
    are refused naming the ones that exist."""
    names = [p.name for p in d.params]
    unknown = sorted(set(given) - set(names))
    if unknown:
        if not names:
            raise ValueError(f"activation {d.name} takes no parameter, got {unknown}")
        raise ValueError(f"activation {d.name} takes {', '.join(repr(n) for n in names)}, "
                         f"got {unknown}")
    return checked(d, [given.get(p.name, p.default) for p in d.params])


def parse(value) -> str | None:
    """Spec input -> canonical string. Accepts None, ``"silu"``, ``"leaky_relu(0.2)"``,
    ``"hardtanh(-2, 2)"``, ``{leaky_relu: 0.2}``, ``{hardtanh: [-2, 2]}``,
    ``{hardtanh: {min_val: -2}}`` and ``{name: hardtanh, min_val: -2, max_val: 2}``; raises
    ValueError with the reason."""
    if value is None:
        return None
    if isinstance(value, dict):
        if "name" in value:
            name, rest = value["name"], {k: v for k, v in value.items() if k != "name"}
        elif len(value) == 1:
            name, rest = next(iter(value.items()))
        else:
            raise ValueError(f"activation mapping must be {{name: value}} or "
                             f"{{name: ..., <param>: value}}, got {dict(value)!r}")
        if not isinstance(name, str) or name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")
        d = ACTIVATIONS[name]
        if rest is None or (isinstance(rest, (dict, list, tuple)) and not rest):
            return canonical(d)
        if not d.params:
            raise ValueError(f"activation {name} takes no parameter")
        if isinstance(rest, dict):
            return canonical(d, params_from(d, rest))
        vals = list(rest) if isinstance(rest, (list, tuple)) else [rest]
        if len(vals) > len(d.params):
            raise ValueError(f"activation {name} takes {len(d.params)} parameter(s) "
                             f"({', '.join(p.name for p in d.params)}), got {len(vals)}")
        return canonical(d, checked(d, vals))
    if not isinstance(value, str):
        raise ValueError(f"activation must be a name, got {value!r}")
    d, p = split(value)
    return canonical(d, p)


# ---------------------------------------------------------------------------------------------
# ttnn forms (``tt`` = the ttnn module or the sim)
# ---------------------------------------------------------------------------------------------

def unary_with_param(tt, act: str):
    """The fused form: ``tt.UnaryWithParam(UnaryOpType.X[, params...][, mode params])``."""
    d, p = split(act)
    params = list(p) + list(d.fused_params)
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
    args = tuple(float(v) for q, v in zip(d.params, p) if q.keyword is None)
    kw = {q.keyword: float(v) for q, v in zip(d.params, p) if q.keyword is not None}
    return getattr(tt, d.ttnn_function), args, {**dict(d.standalone_kwargs), **kw}


# ---------------------------------------------------------------------------------------------
# numerics: torch float32 reference and the sim's model of the card
# ---------------------------------------------------------------------------------------------

def torch_apply(act: str | None, x):
    """Float32 torch reference (torch.nn semantics: nn.SiLU, nn.GELU(), nn.Hardsigmoid ...)."""
    if act is None:
        return x
    d, p = split(act)
    return d.torch(x, *p)


def sfpu_model(act: str, x, *, approximate: bool = False, fp32_dest: bool = False):
    """The row's kernel model on ``x`` as it is (no lookup, no Dest rounding of the input)."""
    d, p = split(act)
    return d.torch(x, *p) if d.sim is None else d.sim(x, p, bool(approximate), bool(fp32_dest))


# (name, params, approximate) -> the 16-bit Dest form's output for every bfloat16 bit pattern
_BF16_TABLES: dict = {}


def _bf16_table(d: ActivationDef, params: tuple, approximate: bool):
    """The 16-bit Dest form evaluated once on all 65,536 bfloat16 values (indexed by their bits):
    its input is always one of them, so a lookup gives the kernel model's bits exactly, at the
    cost of a gather instead of a dozen float64 passes (issue 26: efficientnet's SiLU)."""
    key = (d.name, params, bool(approximate))
    table = _BF16_TABLES.get(key)
    if table is None:
        import torch
        # ordered by the bits read as a signed int16, plus 32768 (the cheapest index to make)
        every = (torch.arange(-32768, 32768, dtype=torch.int32) << 16).view(torch.float32)
        table = _BF16_TABLES[key] = d.sim(every, params, bool(approximate), False).contiguous()
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
    if d.sim is None:
        return d.torch(x, *p)
    if fp32_dest:
        return d.sim(x, p, bool(approximate), True)
    import torch
    idx = x.to(torch.bfloat16).view(torch.int16).to(torch.int64).add_(32768)
    return torch.take(_bf16_table(d, p, approximate), idx)


def from_unary(op_type_name: str, params) -> tuple[str, bool]:
    """A fused UnaryWithParam (op type member name, params) -> (canonical act, approximate)."""
    for d in ACTIVATIONS.values():
        if d.unary_op == op_type_name:
            ps = [float(v) for v in params]
            n = len(d.params)
            spec, mode = ps[:n], ps[n:]
            fast = d.fast_param is not None and len(mode) > d.fast_param and \
                bool(mode[d.fast_param])
            return canonical(d, spec), fast
    raise ValueError(f"UnaryOpType.{op_type_name} is not in the activation table")



def sfpu_tile_cycles(act: str | None, where: str) -> int:
    """SFPU cycles per output tile of ``act`` run ``where`` ("conv", "matmul": fused in their
    compute kernel, where relu is the packer's and free; "binary": binary_ng's post activation;
    "standalone": its own ``eltwise_sfpu`` program). 0 for None."""
    if act is None:
        return 0
    d = get(act)
    if d.packer_fused and where in ("conv", "matmul"):
        return 0
    return d.sfpu_per_vector * SFPU_VECTORS_PER_TILE


def docs_table() -> str:
    """docs/spec.md's activation table, made from the rows (tests/test_ops_registry.py holds the
    docs to it)."""
    def yes(b: bool) -> str:
        return "yes" if b else "**no**: runs after"
    head = ("| act | parameters (default) | ttnn fused form (`UnaryWithParam`) | standalone | "
            "fuses in conv2d / matmul / binary | sim (bit-level model of the 0.81.1 kernel, "
            "`ttmodels/ops/sfpu.py`) |\n|---|---|---|---|---|---|")
    rows = []
    for d in ACTIVATIONS.values():
        params = ", ".join(f"`{p.name}` ({p.default:g})" for p in d.params) or "none"
        fused = ", ".join([f"`{d.unary_op}`"] + [p.name for p in d.params] +
                          [f"{v:g}" for v in d.fused_params])
        call = ", ".join(["x"] + [p.name if p.keyword is None else f"{p.keyword}={p.name}" for p in d.params] +
                         [f"{k}={v}" for k, v in d.standalone_kwargs])
        rows.append(f"| `{d.name}` | {params} | {fused} | `ttnn.{d.ttnn_function}({call})` | "
                    f"{' / '.join(yes(getattr(d, f'fuses_{w}')) for w in ('conv', 'matmul', 'binary'))}"
                    f" | {d.doc} |")
    return "\n".join([head] + rows)
