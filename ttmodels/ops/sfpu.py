"""Bit-level models of the Wormhole SFPU activation kernels that ttnn 0.81.1 JIT-compiles.

Every function mirrors one kernel of the installed wheel, step by step, on float32 torch
tensors. Paths are relative to the ``ttnn`` package of ttnn 0.81.1 (``LLK`` below is
``tt_metal/hw/ckernels/wormhole_b0/metal/llk_api/llk_sfpu``, ``TTLLK`` is
``tt_metal/tt-llk/tt_llk_wormhole_b0/common/inc/sfpu``):

* ``LLK/ckernel_sfpu_exp.h``: ``_sfpu_exp_21f_bf16_`` (Moroz et al.'s exp_21f) and
  ``_sfpu_exp_fp32_accurate_`` (Cody-Waite reduction, degree-7 polynomial);
* ``LLK/ckernel_sfpu_recip.h``: ``sfpu_reciprocal_iter`` (quadratic seed, Newton steps);
* ``LLK/ckernel_sfpu_sigmoid.h``: ``_sfpu_sigmoid_`` = 1 / (1 + exp(-x)), and
  ``LLK/ckernel_sfpu_sigmoid_appx.h``: the fast mode's 3-entry SFPLUT;
* ``LLK/ckernel_sfpu_silu.h``: x * ``_sfpu_sigmoid_(x)``;
* ``LLK/ckernel_sfpu_tanh.h``: the bfloat16 polynomial, the fp32 expm1-based form and the fast
  mode's 6-entry SFPLUTFP32 table;
* ``LLK/ckernel_sfpu_gelu.h``: the bfloat16 piecewise CDF form and the fast mode's table;
* ``LLK/ckernel_sfpu_mish.h``: x * u (u + 2) / (u**2 + 2u + 2) with u = exp(x), x from 8 on;
* ``LLK/ckernel_sfpu_activations.h``: hardsigmoid = relu_max(x * 1/6 + 0.5, 1)
  (``TTLLK/ckernel_sfpu_relu.h`` ``_relu_max_body_``).

Arithmetic (tt-isa-documentation, WormholeB0 SFPMAD): ``mad`` is a*b+c with one round-to-
nearest-even step and denormal inputs read as zero (modelled in float64, then rounded once to
float32). ``convert<vFloat16b>(.., Nearest)`` is round-to-nearest-even to bfloat16 (tt-llk's
own goldens model it with ``torch.bfloat16``); a plain store into a 16-bit Dest truncates
(``store_dest``). ``fp32_dest`` is the kernel's ``is_fp32_dest_acc_en`` (``DST_ACCUM_MODE``).
"""
from __future__ import annotations

import struct

import torch

__all__ = ["mad", "bf16_rne", "store_dest", "exp_21f", "exp_fp32", "reciprocal", "sigmoid",
           "sigmoid_fast", "silu", "tanh", "tanh_fast", "gelu", "gelu_fast", "hardsigmoid", "mish"]

_EXP = 0x7F800000
_MAN = 0x007FFFFF


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", float(v)))[0]


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def _float(b: torch.Tensor) -> torch.Tensor:
    return b.to(torch.int32).view(torch.float32)


def _d(x):
    """An operand in float64 (exact), a denormal read as zero; a literal is the float32 the
    kernel's ``constexpr float`` holds."""
    if not isinstance(x, torch.Tensor):
        return _f32(x)
    d = x.double()
    return d.masked_fill_((_bits(x) & _EXP) == 0, 0.0)


def mad(a, b, c) -> torch.Tensor:
    """SFPMAD: a * b + c, one rounding to float32, denormal inputs as zero (the float64 product
    of two float32 values is exact)."""
    a, b, c = _d(a), _d(b), _d(c)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        out = torch.addcmul(c if isinstance(c, torch.Tensor) else torch.full_like(a, c), a, b)
    else:
        t, k = (a, b) if isinstance(a, torch.Tensor) else (b, a)
        out = t.mul_(k) if isinstance(k, float) else t.mul(k)
        out = out.add_(c)
    return out.float()


def bf16_rne(x: torch.Tensor) -> torch.Tensor:
    """``sfpi::convert<vFloat16b>(x, RoundMode::Nearest)``."""
    return x.to(torch.bfloat16).float()


def store_dest(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """SFPSTORE of a float32 LReg into Dest: kept in a 32-bit Dest, truncated in a 16-bit one."""
    return x if fp32_dest else _float(_bits(x) & -0x10000)


def _exexp_biased(x: torch.Tensor) -> torch.Tensor:
    return (_bits(x) >> 23) & 0xFF


def _setexp(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    return _float((_bits(x) & ~_EXP) | ((e & 0xFF) << 23))


def _copysgn(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return _float((_bits(x) & 0x7FFFFFFF) | (_bits(s) & -0x80000000))


# --- exp ----------------------------------------------------------------------------------

_ONE_LN2 = 1.4426950216293334961
_EXP21F_C = (1.0017248, 7.839635491371155e-08, 4.791750143340323e-15)


def exp_21f(val: torch.Tensor, round_bf16: bool) -> torch.Tensor:
    """``_sfpu_exp_21f_bf16_<!round_bf16>``: z = clamp(x / ln2 + 127, 0, 255) read as the bits
    of 2**int(z) * (1 + frac(z)), the mantissa refined by a degree-2 polynomial."""
    xlog2 = mad(val, _ONE_LN2, 127.0).clamp_(0.0, 255.0)
    # _float_to_int32_for_exp_21f_: the mantissa (implicit one) shifted by the exponent is
    # floor(xlog2 * 2**23); read as float bits, its exponent field is int(xlog2)
    z = torch.floor(xlog2.double() * 2.0 ** 23).to(torch.int64).to(torch.int32)
    e = (z >> 23) & 0xFF
    frac = (z & _MAN).float()                       # exact: < 2**23
    c0, c1, c2 = _EXP21F_C
    p = mad(frac, mad(frac, c2, c1), c0)
    y = _setexp(p, e)
    return bf16_rne(y) if round_bf16 else y


def _round_smag16(j: torch.Tensor) -> torch.Tensor:
    # convert<vSMag16>(Nearest): SFP_STOCH_RND to a 16-bit sign-magnitude integer, ties away
    # from zero, magnitude saturated at 32767
    return (torch.sign(j) * torch.floor(j.abs().double() + 0.5)).clamp_(-32767, 32767)


def exp_fp32(a: torch.Tensor) -> torch.Tensor:
    """``_sfpu_exp_fp32_accurate_`` (Norbert Juffa's expf): j = round(a / ln2), two-part
    Cody-Waite reduction, a degree-7 polynomial, then 2**j by the exponent field; e < 1 gives 0,
    e >= 255 infinity."""
    j = mad(a, 1.442695, 0.0)
    k = _round_smag16(j)
    jf = k.float()
    f = mad(jf, -6.93145752e-1, a)
    f = mad(jf, -1.42860677e-6, f)
    r = torch.full_like(a, 1.37805939e-3)
    for c in (8.37312452e-3, 4.16695364e-2, 1.66664720e-1, 4.99999851e-1, 1.0):
        r = mad(r, f, c)
    r = mad(r, f, 1.0)
    e = _exexp_biased(r).to(torch.int64) + k.to(torch.int64)
    y = torch.where(e >= 255, torch.full_like(a, float("inf")),
                    torch.where(e >= 1, _setexp(r, e.clamp(0, 255).to(torch.int32)),
                                torch.zeros_like(a)))
    return torch.where(torch.isnan(a), a, y)


# --- reciprocal ---------------------------------------------------------------------------

# sfpu_reciprocal_init<false, false>: the shared minimax seed k2 - k1 x + k0 x**2 on [1, 2)
RECIP_SEED = (0.3232325017452239990234375, 1.4545459747314453125, 2.121212482452392578125)
# sfpu_reciprocal_init<false, true>: the seed fitted for one Newton step rounded to bfloat16
RECIP_SEED_BF16 = (0.32133400440216064453125, 1.4514148235321044921875,
                   2.1200883388519287109375)


def reciprocal(x: torch.Tensor, iters: int, round_bf16: bool = False,
               seed: tuple[float, float, float] = RECIP_SEED) -> torch.Tensor:
    """``sfpu_reciprocal_iter<iters, round_bf16>``: x's mantissa as -m in (-2, -1], a quadratic
    seed, ``iters`` Newton steps (0 acts as 1), optionally rounded to bfloat16, then scaled by
    2**(254 - exp) and given x's sign."""
    k0, k1, k2 = seed
    b = _bits(x)
    neg = _float((b & _MAN) | _bits(torch.tensor(-1.0)))          # copyman(-1.0, x)
    y = mad(k0, neg, k1)
    y = mad(y, neg, k2)
    scale = _float(~b & (-0x80000000 | _EXP))                      # setman(~x, 0)
    t = mad(neg, y, 1.0)
    scale = mad(scale, 0.5, 0.0)
    y = mad(y, t, y)
    for _ in range(max(iters, 1) - 1):
        t = mad(neg, y, 1.0)
        y = mad(y, t, y)
    if round_bf16:
        y = bf16_rne(y)
    return _copysgn(mad(y, scale, 0.0), x)


# --- sigmoid, silu ------------------------------------------------------------------------

def _sigmoid_core(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``_sfpu_sigmoid_<fp32_dest>``: the exp of -x is not rounded to bfloat16 (exp_21f is
    instantiated with ``<true>``), 1 + exp is one MAD, then one (two) Newton steps."""
    e = exp_fp32(-x) if fp32_dest else exp_21f(-x, round_bf16=False)
    return reciprocal(mad(e, 1.0, 1.0), 2 if fp32_dest else 1)


def sigmoid(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_sigmoid<false, fp32_dest>``: rounded to bfloat16 (nearest) in a 16-bit Dest."""
    y = _sigmoid_core(x, fp32_dest)
    return y if fp32_dest else bf16_rne(y)


def silu(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_silu<fp32_dest>``: x * sigmoid(x), rounded to bfloat16 in a 16-bit Dest."""
    y = mad(x, _sigmoid_core(x, fp32_dest), 0.0)
    return y if fp32_dest else bf16_rne(y)


def _lut8(v: int) -> float:
    """SFPLUT's 8-bit coefficient: sign, 3-bit negated exponent, 4-bit mantissa; 0xFF is 0."""
    if v == 0xFF:
        return 0.0
    s, e, m = v >> 7, (v >> 4) & 7, v & 15
    return (-1.0) ** s * 2.0 ** -e * (1 + m / 16)


# sigmoid_appx_init: vLut8si(A, B) for |x| < 1, < 2, >= 2; the literals 0.22656, 0.26562,
# -0.04687 are the 8-bit values 0.2265625, 0.265625, -0.046875
_SIGMOID_LUT8 = ((_lut8(0x3D), 0.0), (_lut8(0x21), _lut8(0xD8)), (0.0, _lut8(0x10)))


def sigmoid_fast(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_sigmoid_appx``: SFPLUT (sign retained) + 0.5, stored without rounding."""
    a = x.abs()
    A = torch.where(a < 1.0, _SIGMOID_LUT8[0][0], torch.where(a < 2.0, _SIGMOID_LUT8[1][0],
                                                              _SIGMOID_LUT8[2][0]))
    B = torch.where(a < 1.0, _SIGMOID_LUT8[0][1], torch.where(a < 2.0, _SIGMOID_LUT8[1][1],
                                                              _SIGMOID_LUT8[2][1]))
    lut = _copysgn(mad(A.float(), a, B.float()), x)
    return store_dest(mad(lut, 1.0, 0.5), fp32_dest)


# --- the 6-entry SFPLUTFP32 tables (FP16_6ENTRY_TABLE1: |x| < 0.5, 1, 1.5, 2, 3, beyond) ----

_TABLE1 = (0.5, 1.0, 1.5, 2.0, 3.0)


def _fp16(v: float) -> float:
    return struct.unpack("<e", struct.pack("<e", v))[0]


def _lut6(x: torch.Tensor, slopes, intercepts, retain_sign: bool) -> torch.Tensor:
    a = x.abs()
    idx = torch.bucketize(a, torch.tensor(_TABLE1, dtype=a.dtype), right=True)
    A = torch.tensor([_fp16(s) for s in slopes], dtype=torch.float32)[idx]
    B = torch.tensor([_fp16(c) for c in intercepts], dtype=torch.float32)[idx]
    y = mad(A, a, B)
    return _copysgn(y, x) if retain_sign else y


# tanh_init<true>: vLut16ss (slopes) in LReg0/1/2 and vLut16ii (intercepts) in LReg4/5/6
_TANH_A = (0.96191406, 0.57617188, 0.28710938, 0.0964355469, 0.0390625, 0.0)
_TANH_B = (0.0, 0.192871094, 0.48193359, 0.76806641, 0.8828125, 1.0)
# gelu_init<true>
_GELU_A = (0.1928, 0.4939, 0.6188, 0.6099, 0.5402, 0.5)
_GELU_B = (-0.00010443, -0.1604, -0.2796, -0.2635, -0.1194, 0.0)


def tanh_fast(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_tanh<true>``: sign(x) * (A |x| + B), stored without rounding."""
    return store_dest(_lut6(x, _TANH_A, _TANH_B, True), fp32_dest)


def gelu_fast(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_gelu_appx``: 0.5 x + (A |x| + B) (LutSign::Update: no sign restore)."""
    return store_dest(mad(x, 0.5, _lut6(x, _GELU_A, _GELU_B, False)), fp32_dest)


# --- tanh ---------------------------------------------------------------------------------

# tanh_init<false, false> (vConstFloatPrgm0..2) and TANH_POLY_C1..C3, highest degree first
_TANH_POLY = (5.876733921468257904052734375e-3, -6.6649019718170166015625e-2,
              0.281917631626129150390625, -0.4890659749507904052734375,
              3.0897438526153564453125e-2, 0.999004364013671875)


def _tanh_fp32(x: torch.Tensor) -> torch.Tensor:
    """``_sfpu_tanh_fp32_accurate_``: t = expm1(|2x|) / 2 by a reduction to 2**i * expm1(f),
    then t / (t + 1) by a bit-trick reciprocal with two corrections; |x| < 2**-12 gives x."""
    c0, c1, c2 = 2.0 * 1.442695, -0.6931471805599453, 1.666667163e-1
    j = mad(x, c0, 0.0)
    a = mad(x, 1.0, x)
    i = torch.floor(j.abs().double() + 0.5).clamp_(0, 255)          # vUInt8, nearest
    jf = i.float()
    a = a.abs()
    f = mad(jf, c1, a)
    r = torch.full_like(x, 1.974105835e-04)
    for c in (1.393318176e-3, 8.331298828e-3, 4.166680202e-2):
        r = mad(r, f, c)
    s = mad(f, f, 0.0)
    r = mad(r, f, c2)
    r = mad(r, f, 0.5)
    e = i.to(torch.int32) + 126
    r = mad(r, s, f)
    scale = _setexp(torch.zeros_like(x), e)
    bias0 = mad(scale, 1.0, -0.5)
    x0 = mad(r, scale, bias0)
    y = torch.ones_like(x)
    x1 = mad(x0, 1.0, 1.0)
    rcp = _float(torch.tensor(0xFEF30000 - 2 ** 32, dtype=torch.int64).to(torch.int32)
                 - _bits(x1))
    t = mad(x1, rcp, 1.0)
    t = mad(t, t, t)
    rcp = mad(rcp, t, rcp)
    y0 = mad(x0, rcp, 0.0)
    t = mad(x1, y0, x0)
    refined = mad(t, rcp, y0)
    small = _exexp_biased(x) < 115
    y = torch.where(i < 61, torch.where(small, x, refined), y)
    return torch.where(torch.isnan(x), x, _copysgn(y, x))


def tanh(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_tanh<false, fp32_dest>``: the fp32 form in a 32-bit Dest; otherwise the
    degree-6 odd-free polynomial in |x|, min(., 1), x's sign, rounded to bfloat16."""
    if fp32_dest:
        return _tanh_fp32(x)
    a = x.abs()
    r = torch.full_like(x, _TANH_POLY[0])
    for c in _TANH_POLY[1:]:
        r = mad(r, a, c)
    r = mad(r, a, 0.0).clamp_(max=1.0)
    return bf16_rne(_copysgn(r, x))


# --- gelu ---------------------------------------------------------------------------------

_GELU_CORE = (3.9894227818e-01, -6.6361041488e-02, 9.7720050615e-03, -1.0717806322e-03,
              8.1812159812e-05, -3.8082057209e-06, 7.9821413868e-08)
_GELU_HCORR = (3.0369991064e-01, 9.5413386822e-02, 1.3809983619e-02, 7.5950479368e-04)


def _horner(x, coeffs):
    """PolynomialEvaluator::eval(x, c0, c1, ...): c0 + x * (c1 + x * (...)), one MAD a step."""
    r = torch.full_like(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        r = mad(x, r, c)
    return r


def gelu_bf16(x: torch.Tensor) -> torch.Tensor:
    """``calculate_gelu_piecewise`` rounded to bfloat16: 0 up to -5.54259443, x * H rounded to a
    2**-25 grid up to -3.125 (H = exp_21f(-x**2/2) * a cubic), x * (0.5 + x p(x**2)) up to
    2.78125, x beyond."""
    x2 = mad(x, x, 0.0)
    xlog2 = mad(x2, -0.72134752044, 127.0)
    z = torch.floor(xlog2.clamp(min=0.0).double() * 2.0 ** 23).to(torch.int64).to(torch.int32)
    c0, c1, c2 = _EXP21F_C
    frac = (z & _MAN).float()
    ex = _setexp(mad(frac, mad(frac, c2, c1), c0), (z >> 23) & 0xFF)
    h = mad(ex, _horner(x, _GELU_HCORR), 0.0)
    hs = mad(mad(h, 1.0, 0.375), 1.0, -0.375)
    tail = mad(x, hs, 0.0)
    phi = mad(x, _horner(x2, _GELU_CORE), 0.5)
    core = mad(x, phi, 0.0)
    y = torch.where(x >= 2.78125, x, torch.where(x >= -3.125, core, tail))
    y = torch.where(x > -5.54259443, y, torch.zeros_like(x))
    return bf16_rne(y)


# GELU_ERF_NUM (odd powers 1..15) and GELU_ERF_DEN (even powers 0..16) of ckernel_sfpu_gelu.h
_ERF_NUM = (1.1283791065e+00, 2.1477432549e-01, 6.2133435160e-02, 5.6230435148e-03,
            6.1307044234e-04, 1.7678321456e-05, 2.7384647439e-08, -2.8632063387e-10)
_ERF_DEN = (1.0, 5.2367275953e-01, 1.2961706519e-01, 1.9642570987e-02, 1.9545555115e-03,
            1.3179056987e-04, 1.3156344494e-06, -3.5153888689e-09, -6.7350725691e-12)


def gelu_fp32(x: torch.Tensor) -> torch.Tensor:
    """``calculate_gelu<false, true>``: x (0.5 + 0.5 erf(x / sqrt 2)) with erf a degree-15/16
    rational in x / sqrt 2 (``piecewise_rational_eval_parity_numer_denom<16, 16>``: both
    polynomials by Horner in x**2) over a two-step reciprocal; 0 up to -5.54259443, x * 2**-25
    where erf rounds to -1."""
    s = mad(x, 0.7071067811865475, 0.0).clamp_(max=10.0)
    s2 = mad(s, s, 0.0)
    den = mad(torch.full_like(x, _ERF_DEN[8]), s2, _ERF_DEN[7])
    num = torch.full_like(x, _ERF_NUM[7])
    for k in range(6, -1, -1):
        num = mad(num, s2, _ERF_NUM[k])
        den = mad(den, s2, _ERF_DEN[k])
    erf = mad(mad(num, s, 0.0), reciprocal(den, 2), 0.0).clamp_(-1.0, 1.0)
    y = mad(x, mad(erf, 0.5, 0.5), 0.0)
    y = torch.where(erf == -1.0, mad(x, 2.0 ** -25, 0.0), y)
    return torch.where(x > -5.54259443, y, x - x)


def gelu(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``calculate_gelu<false, fp32_dest>``: the rational erf form in a 32-bit Dest, else the
    piecewise one rounded to bfloat16."""
    return gelu_fp32(x) if fp32_dest else gelu_bf16(x)


# --- hardsigmoid --------------------------------------------------------------------------

_SIXTH = 0.1666666716337204     # hardsigmoid_init: 1/6 as float32


def hardsigmoid(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """``ActivationImpl<Hardsigmoid>``: relu_max(x * 1/6 + 0.5, 1), stored without rounding."""
    return store_dest(mad(x, _SIXTH, 0.5).clamp_(0.0, 1.0), fp32_dest)


# --- mish -----------------------------------------------------------------------------------

def mish(x: torch.Tensor, fp32_dest: bool, approximate: bool = False) -> torch.Tensor:
    """``calculate_mish<approximate, fp32_dest>``: x from 8.0 on is x itself; below, u = exp(x)
    (``_sfpu_exp_21f_bf16_<fp32_dest>`` in the fast mode, ``_sfpu_exp_accurate_<fp32_dest>``
    otherwise: exp_21f rounded to bfloat16 in a 16-bit Dest, the fp32 expf in a 32-bit one),
    numerator u * (u + 2), denominator (1 + u)**2 + 1 (one MAD), its reciprocal (``recip_init``'s
    shared seed; 0 steps in the fast mode -- the same as 1 --, 2 with a 32-bit Dest, else 1), then
    x * (numerator * reciprocal), rounded to bfloat16 (nearest) in a 16-bit Dest."""
    if approximate or not fp32_dest:
        u = exp_21f(x, round_bf16=not fp32_dest)
    else:
        u = exp_fp32(x)
    numer = mad(u, mad(u, 1.0, 2.0), 0.0)
    one_plus_u = mad(u, 1.0, 1.0)
    denom = mad(one_plus_u, one_plus_u, 1.0)
    inv = reciprocal(denom, 0 if approximate else (2 if fp32_dest else 1))
    y = torch.where(x < 8.0, mad(x, mad(numer, inv, 0.0), 0.0), x)
    return y if fp32_dest else bf16_rne(y)
