"""The sim's activations against the SFPU kernels of the installed ttnn 0.81.1 wheel (issue 23).

``kernel_*`` below is a second, per-element model of each kernel, written line by line from the
wheel's sources (``ttnn/tt_metal/hw/ckernels/wormhole_b0/metal/llk_api/llk_sfpu/``) on Python
floats and raw bit patterns (exexp / exman / shft / setexp as the SFPU instructions do them),
independent of ``ttmodels/ops/sfpu.py``'s vectorised torch form. The sim must equal it bit for bit on a
grid of inputs, and differ from torch where the kernel does.
"""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import ttmodels
from ttmodels.ops import activations as A, sfpu
from ttmodels.errors import SpecError


def _wheel_kernel(name: str) -> Path:
    import importlib.util
    spec = importlib.util.find_spec("ttnn")
    root = Path(spec.submodule_search_locations[0])
    return root / "tt_metal/hw/ckernels/wormhole_b0/metal/llk_api/llk_sfpu" / name


# ---- float32 / SFPU primitives on Python floats ----------------------------------------------

def bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", np.float32(v)))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def f32(v: float) -> float:
    return float(np.float32(v))


def ftz(v: float) -> float:
    return 0.0 if bits(v) & 0x7F800000 == 0 else v


def mad(a: float, b: float, c: float) -> float:
    """SFPMAD: a * b + c rounded once to float32, denormal inputs read as zero."""
    with np.errstate(over="ignore"):
        return f32(ftz(f32(a)) * ftz(f32(b)) + ftz(f32(c)))


def to_bf16(v: float) -> float:
    """convert<vFloat16b>(v, Nearest): round to nearest, ties to even, on the bit pattern."""
    b = bits(v)
    return from_bits((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000)


def trunc_bf16(v: float) -> float:
    return from_bits(bits(v) & 0xFFFF0000)


def setexp(v: float, e: int) -> float:
    return from_bits((bits(v) & 0x807FFFFF) | ((e & 0xFF) << 23))


def exexp_biased(v: float) -> int:
    return (bits(v) >> 23) & 0xFF


def copysgn(v: float, s: float) -> float:
    return from_bits((bits(v) & 0x7FFFFFFF) | (bits(s) & 0x80000000))


# ---- the kernels, line by line ---------------------------------------------------------------

def kernel_exp_21f(val: float) -> float:
    """_sfpu_exp_21f_bf16_<true> (ckernel_sfpu_exp.h), no bfloat16 rounding."""
    xlog2 = mad(val, 1.4426950216293334961, 127.0)
    xlog2 = min(max(xlog2, 0.0), 255.0)
    # _float_to_int32_for_exp_21f_: exexp, exman(ImplicitOne), shft(man, exp) (logical)
    b = bits(xlog2)
    e = ((b >> 23) & 0xFF) - 127
    man = (b & 0x7FFFFF) | 0x800000
    z = man << e if e >= 0 else man >> -e
    exponential_part = (z >> 23) & 0xFF          # exexp(z, Biased)
    fractional_part = z & 0x7FFFFF               # exman(z)
    frac = float(fractional_part)
    frac = mad(frac, mad(frac, 4.791750143340323e-15, 7.839635491371155e-08), 1.0017248)
    return setexp(frac, exponential_part)


def kernel_exp_fp32(a: float) -> float:
    """_sfpu_exp_fp32_accurate_ (ckernel_sfpu_exp.h)."""
    j = mad(1.442695, a, 0.0)
    sm = int(math.copysign(math.floor(abs(j) + 0.5), j))        # vSMag16, nearest
    sm = max(-32767, min(32767, sm))
    j = float(sm)
    f = mad(j, -6.93145752e-1, a)
    f = mad(j, -1.42860677e-6, f)
    r = 1.37805939e-3
    r = mad(r, f, 8.37312452e-3)
    r = mad(r, f, 4.16695364e-2)
    r = mad(r, f, 1.66664720e-1)
    r = mad(r, f, 4.99999851e-1)
    y = mad(r, f, 1.0)
    r = mad(y, f, 1.0)
    e = exexp_biased(r) + sm
    if e >= 255:
        return math.inf
    if e >= 1:
        return setexp(r, e)
    return 0.0


def kernel_recip(x: float, max_iter: int) -> float:
    """sfpu_reciprocal_iter<max_iter> with sfpu_reciprocal_init<false, false> (recip_init)."""
    k0, k1, k2 = 0.3232325017452239990234375, 1.4545459747314453125, 2.121212482452392578125
    negative_x = from_bits((bits(-1.0) & 0xFF800000) | (bits(x) & 0x7FFFFF))   # copyman
    y = mad(k0, negative_x, k1)
    scale_bits = ~bits(x) & 0xFFFFFFFF
    y = mad(y, negative_x, k2)
    scale = from_bits(scale_bits & 0xFF800000)                                  # setman(., 0)
    t = mad(negative_x, y, 1.0)
    scale = mad(scale, 0.5, 0.0)
    y = mad(y, t, y)
    if max_iter > 1:
        t = mad(negative_x, y, 1.0)
        y = mad(y, t, y)
    y = mad(y, scale, 0.0)
    return copysgn(y, x)


def kernel_sigmoid_core(x: float, fp32: bool) -> float:
    """_sfpu_sigmoid_<fp32> (ckernel_sfpu_sigmoid.h)."""
    exp_neg_x = kernel_exp_fp32(-x) if fp32 else kernel_exp_21f(-x)
    denominator = mad(1.0, exp_neg_x, 1.0)
    return kernel_recip(denominator, 2 if fp32 else 1)


def kernel_sigmoid(x: float, fp32: bool) -> float:
    r = kernel_sigmoid_core(x, fp32)
    return r if fp32 else to_bf16(r)


def kernel_silu(x: float, fp32: bool) -> float:
    r = mad(x, kernel_sigmoid_core(x, fp32), 0.0)
    return r if fp32 else to_bf16(r)


def kernel_mish(x: float, fp32: bool, fast: bool) -> float:
    """calculate_mish<fast, fp32> (ckernel_sfpu_mish.h): x from 8.0 on; else u = exp(x)
    (_sfpu_exp_21f_bf16_<fp32> fast, _sfpu_exp_accurate_<fp32> otherwise: exp_21f rounded to
    bfloat16 with a 16-bit Dest, the fp32 expf with a 32-bit one), x * (u (u + 2) * 1/denom)."""
    if not x < 8.0:
        return x
    if fast or not fp32:
        u = kernel_exp_21f(x)
        u = u if fp32 else to_bf16(u)
    else:
        u = kernel_exp_fp32(x)
    numer = mad(u, mad(u, 1.0, 2.0), 0.0)
    one_plus_u = mad(u, 1.0, 1.0)
    denom = mad(one_plus_u, one_plus_u, 1.0)
    inv = kernel_recip(denom, 0 if fast else (2 if fp32 else 1))
    r = mad(x, mad(numer, inv, 0.0), 0.0)
    return r if fp32 else to_bf16(r)


def _lut8_nearest(v: float) -> float:
    """The SFPLUT 8-bit coefficient a vLut8si literal becomes (s, 3-bit -exponent, 4-bit
    mantissa; 0xFF = 0)."""
    codes = [0.0] + [s * 2.0 ** -e * (1 + m / 16) for s in (1, -1) for e in range(8)
                     for m in range(16)]
    return min(codes, key=lambda c: abs(c - v))


def kernel_sigmoid_fast(x: float, fp32: bool) -> float:
    """calculate_sigmoid_appx: lut(val, LReg0..2) + 0.5 (sign retained), a plain store."""
    table = [(0.22656, 0.0), (0.26562, -0.04687), (0.0, 0.5)]       # sigmoid_appx_init
    a = abs(x)
    A_, B_ = table[0 if a < 1.0 else 1 if a < 2.0 else 2]
    r = copysgn(mad(_lut8_nearest(A_), a, _lut8_nearest(B_)), x)
    r = mad(r, 1.0, 0.5)
    return r if fp32 else trunc_bf16(r)


def kernel_tanh_bf16(x: float) -> float:
    """calculate_tanh<false, false>: _sfpu_tanh_polynomial_x2_, min 1, copysgn, bfloat16."""
    a = abs(x)
    r = 5.876733921468257904052734375e-3
    r = mad(r, a, -6.6649019718170166015625e-2)
    r = mad(r, a, 0.281917631626129150390625)
    r = mad(r, a, -0.4890659749507904052734375)
    r = mad(r, a, 3.0897438526153564453125e-2)
    r = mad(r, a, 0.999004364013671875)
    r = mad(r, a, 0.0)
    return to_bf16(copysgn(min(r, 1.0), x))


def kernel_hardsigmoid(x: float, fp32: bool) -> float:
    r = mad(x, 0.1666666716337204, 0.5)
    r = 1.0 if r > 1.0 else r
    r = 0.0 if r < 0.0 else r
    return r if fp32 else trunc_bf16(r)


def kernel_gelu_bf16(x: float) -> float:
    """calculate_gelu_piecewise, then convert<vFloat16b> (ckernel_sfpu_gelu.h)."""
    result = 0.0
    x2 = mad(x, x, 0.0)
    if x > -5.54259443:
        xlog2 = mad(x2, -0.72134752044, 127.0)
        b = bits(xlog2)
        e = ((b >> 23) & 0xFF) - 127
        man = (b & 0x7FFFFF) | 0x800000
        z = man << e if e >= 0 else man >> -e
        frac = float(z & 0x7FFFFF)
        frac = mad(frac, mad(frac, 4.791750143340323e-15, 7.839635491371155e-08), 1.0017248)
        exp_val = setexp(frac, (z >> 23) & 0xFF)
        corr = mad(x, mad(x, mad(x, 7.5950479368e-04, 1.3809983619e-02), 9.5413386822e-02),
                   3.0369991064e-01)
        h = mad(exp_val, corr, 0.0)
        hs = mad(mad(h, 1.0, 0.375), 1.0, -0.375)
        result = mad(x, hs, 0.0)
        if x >= -3.125:
            c = (3.9894227818e-01, -6.6361041488e-02, 9.7720050615e-03, -1.0717806322e-03,
                 8.1812159812e-05, -3.8082057209e-06, 7.9821413868e-08)
            p = c[-1]
            for k in reversed(c[:-1]):
                p = mad(x2, p, k)
            phi = mad(x, p, 0.5)
            result = mad(x, phi, 0.0)
            if x >= 2.78125:
                result = x
    return to_bf16(result)


def kernel_gelu_fp32(x: float) -> float:
    """calculate_gelu<false, true> (ckernel_sfpu_gelu.h) with
    piecewise_rational_eval_parity_numer_denom<16, 16> (ckernel_sfpu_piecewise_rational.h)."""
    num_c = [0.0, 1.1283791065e+00, 0.0, 2.1477432549e-01, 0.0, 6.2133435160e-02, 0.0,
             5.6230435148e-03, 0.0, 6.1307044234e-04, 0.0, 1.7678321456e-05, 0.0,
             2.7384647439e-08, 0.0, -2.8632063387e-10, 0.0]
    den_c = [1.0, 0.0, 5.2367275953e-01, 0.0, 1.2961706519e-01, 0.0, 1.9642570987e-02, 0.0,
             1.9545555115e-03, 0.0, 1.3179056987e-04, 0.0, 1.3156344494e-06, 0.0,
             -3.5153888689e-09, 0.0, -6.7350725691e-12]
    result = mad(x, 1.0, -x)
    if x > -5.54259443:
        scaled = min(mad(x, 0.7071067811865475, 0.0), 10.0)
        x2 = mad(scaled, scaled, 0.0)
        num_top, den_top = 15, 16                   # NUM_DEGREE 16 is even: its top is 15
        num_steps, den_steps = (num_top - 1) // 2, den_top // 2
        numer, denom = num_c[num_top], den_c[den_top]
        for k in range(den_steps - num_steps):
            denom = mad(denom, x2, den_c[den_top - 2 * (k + 1)])
        den_pos = den_top - 2 * (den_steps - num_steps)
        for k in range(1, num_steps + 1):
            numer = mad(numer, x2, num_c[num_top - 2 * k])
            denom = mad(denom, x2, den_c[den_pos - 2 * k])
        erf_n = mad(numer, scaled, 0.0)
        erf_val = mad(erf_n, kernel_recip(denom, 2), 0.0)
        erf_val = min(max(erf_val, -1.0), 1.0)
        result = mad(x, mad(0.5, erf_val, 0.5), 0.0)
        if erf_val == -1.0:
            result = mad(x, 2.9802322387695313e-08, 0.0)
    return result


def _lut6(x: float, slopes, intercepts, retain: bool) -> float:
    a = abs(x)
    i = sum(a >= bp for bp in (0.5, 1.0, 1.5, 2.0, 3.0))
    y = mad(float(np.float16(slopes[i])), a, float(np.float16(intercepts[i])))
    return copysgn(y, x) if retain else y


def kernel_tanh_fast(x: float, fp32: bool) -> float:
    """calculate_tanh<true>: tanh_init<true>'s vLut16ss / vLut16ii pairs, SGN_RETAIN."""
    r = _lut6(x, (0.96191406, 0.57617188, 0.28710938, 0.0964355469, 0.0390625, 0.0),
              (0.0, 0.192871094, 0.48193359, 0.76806641, 0.8828125, 1.0), True)
    return r if fp32 else trunc_bf16(r)


def kernel_gelu_fast(x: float, fp32: bool) -> float:
    """calculate_gelu_appx: x * 0.5 + lut(x) (LutSign::Update)."""
    lut = _lut6(x, (0.1928, 0.4939, 0.6188, 0.6099, 0.5402, 0.5),
                (-0.00010443, -0.1604, -0.2796, -0.2635, -0.1194, 0.0), False)
    r = mad(x, 0.5, lut)
    return r if fp32 else trunc_bf16(r)


# (activation, fast mode, 32-bit Dest) -> kernel model
KERNELS = {
    ("silu", False, False): lambda v: kernel_silu(v, False),
    ("silu", False, True): lambda v: kernel_silu(v, True),
    ("sigmoid", False, False): lambda v: kernel_sigmoid(v, False),
    ("sigmoid", False, True): lambda v: kernel_sigmoid(v, True),
    ("sigmoid", True, False): lambda v: kernel_sigmoid_fast(v, False),
    ("sigmoid", True, True): lambda v: kernel_sigmoid_fast(v, True),
    ("tanh", False, False): kernel_tanh_bf16,
    ("tanh", True, False): lambda v: kernel_tanh_fast(v, False),
    ("tanh", True, True): lambda v: kernel_tanh_fast(v, True),
    ("gelu", False, False): kernel_gelu_bf16,
    ("gelu", False, True): kernel_gelu_fp32,
    ("gelu", True, False): lambda v: kernel_gelu_fast(v, False),
    ("hardsigmoid", False, False): lambda v: kernel_hardsigmoid(v, False),
    ("hardsigmoid", False, True): lambda v: kernel_hardsigmoid(v, True),
    ("hardswish", False, False): lambda v: mad(v, kernel_hardsigmoid(v, False), 0.0),
    ("mish", False, False): lambda v: kernel_mish(v, False, False),
    ("mish", False, True): lambda v: kernel_mish(v, True, False),
    ("mish", True, False): lambda v: kernel_mish(v, False, True),
    ("mish", True, True): lambda v: kernel_mish(v, True, True),
}


def _grid(fp32: bool) -> torch.Tensor:
    """bfloat16 inputs across the kernels' regions (what a 16-bit Dest holds), plus unrounded
    float32 values for the 32-bit Dest forms."""
    g = torch.cat([torch.linspace(-16, 16, 1201), torch.linspace(-1, 1, 401),
                   torch.tensor([0.0, -0.0, 1e-3, -1e-3, 5.5, -5.54, -5.6, 2.78125, -3.125,
                                 0.5, 1.0, 1.5, 2.0, 3.0, -2.0, 40.0, -40.0, 87.0, -87.0])])
    g = g.to(torch.bfloat16).float().unique()
    if fp32:
        g = torch.cat([g, torch.randn(600, generator=torch.Generator().manual_seed(0)) * 6])
    return g


@pytest.mark.parametrize("act, fast, fp32", sorted(KERNELS))
def test_sim_activation_is_the_kernel_bit_for_bit(act, fast, fp32):
    x = _grid(fp32)
    got = A.sim_apply(act, x, approximate=fast, fp32_dest=fp32)
    want = torch.tensor([KERNELS[act, fast, fp32](float(v)) for v in x], dtype=torch.float32)
    bad = (got.view(torch.int32) != want.view(torch.int32)) & ~(got == want)   # +0 == -0
    assert not bad.any(), [(float(x[i]), float(got[i]), float(want[i]))
                           for i in bad.nonzero().flatten()[:5]]


def test_sim_differs_from_torch_where_the_kernel_does():
    x = _grid(False)
    torch_bf16 = lambda f: f(x).to(torch.bfloat16).float()   # noqa: E731
    # the accurate bfloat16 kernels: within a few bfloat16 ulps of torch, not always equal
    for act, ref in (("silu", torch.nn.functional.silu), ("sigmoid", torch.sigmoid),
                     ("tanh", torch.tanh), ("gelu", torch.nn.functional.gelu)):
        got = A.sim_apply(act, x)
        want = torch_bf16(ref)
        assert not torch.equal(got, want), act
        big = want.abs() > 1e-2
        rel = ((got - want).abs() / want.abs())[big]
        assert rel.max() <= 2 * 2.0 ** -8, (act, float(rel.max()))
    # the fast sigmoid is a 3-piece LUT: 0.265625 * 1.5 - 0.046875 + 0.5 at 1.5, 1 from 2 on
    fast = A.sim_apply("sigmoid", torch.tensor([1.5, 2.0, -2.0]), approximate=True)
    assert fast.tolist() == [0.8515625, 1.0, 0.0]
    # hardsigmoid's store into a 16-bit Dest truncates: 1/6 + 0.5 -> 0.66406, not 0.66797
    assert A.sim_apply("hardsigmoid", torch.tensor([1.0])).item() == trunc_bf16(f32(1 / 6 + 0.5))
    # with a 32-bit Dest the accurate kernels are float32-accurate
    x32 = _grid(True)
    for act, ref in (("silu", torch.nn.functional.silu), ("sigmoid", torch.sigmoid),
                     ("tanh", torch.tanh)):
        d = (A.sim_apply(act, x32, fp32_dest=True) - ref(x32)).abs()
        assert d.max() <= 4e-6 * max(1.0, float(ref(x32).abs().max())), act


def test_the_old_piecewise_linear_sigmoid_is_gone():
    """silu was x times a newer tt-llk's 0.229 t + 0.5 sigmoid (errors up to ~0.04, YOLOv8n's P5
    at PCC 0.945); the 0.81.1 kernel is within a bfloat16 ulp or two of torch (on its input, a
    bfloat16 value in a 16-bit Dest)."""
    x = torch.linspace(-8, 8, 4001).to(torch.bfloat16).float()
    d = (A.sim_apply("silu", x) - torch.nn.functional.silu(x)).abs()
    assert d.max() < 0.02 and (d / torch.nn.functional.silu(x).abs().clamp(min=1e-2)).max() < 0.01
    source = _wheel_kernel("ckernel_sfpu_silu.h")
    if source.exists():         # the model's premise, from the installed wheel itself
        text = source.read_text()
        assert "_sfpu_sigmoid_" in text and "0.229" not in text


def test_sim_ops_pick_the_dest_width_ttnn_uses():
    """Standalone ops on a float32 tensor and binary ops with a float32 operand use the kernels'
    32-bit Dest forms; a conv's fused activation follows fp32_dest_acc_en (mock-device defines)."""
    import ttmodels.backends.sim as tt
    dev = tt.open_device(device_id=0, l1_small_size=24576)
    x = torch.linspace(-6, 6, 64 * 32).reshape(1, 1, 64, 32)
    for dtype, fp32 in ((tt.bfloat16, False), (tt.float32, True)):
        t = tt.from_torch(x, dtype=dtype, layout=tt.TILE_LAYOUT, device=dev)
        xin = tt.to_torch(t).float()
        got = tt.to_torch(tt.silu(t)).float()
        want = A.sim_apply("silu", xin, fp32_dest=fp32)
        assert torch.equal(got, want.to(torch.bfloat16).float() if not fp32 else want), dtype
        s = tt.to_torch(tt.add(t, t, activations=[tt.UnaryWithParam(tt.UnaryOpType.SILU)])).float()
        want = A.sim_apply("silu", xin + xin, fp32_dest=fp32)
        assert torch.equal(s, want.to(torch.bfloat16).float() if not fp32 else want), dtype


def test_hardswish_is_not_fused_anywhere_but_runs_after_the_op():
    """ttnn 0.81.1 drops a fused hardswish silently (conv2d, binary_ng) or refuses it (matmul):
    the layers pass no fused activation and run ttnn.hardswish (hardswish_kernel.cpp) on the
    op's output, so `act: hardswish` computes hardswish wherever it is written."""
    from ttmodels.ops import activations as A
    assert not any((A.get("hardswish").fuses_conv, A.get("hardswish").fuses_matmul,
                    A.get("hardswish").fuses_binary))
    for layer in ({"name": "c", "op": "conv2d", "out": 8, "kernel": 3, "padding": 1,
                   "act": "hardswish"},
                  {"name": "c", "op": "add", "in": ["x", "x"], "act": "hardswish"},
                  {"name": "c", "op": "linear", "out": 8, "act": "hardswish"}):
        size = 1 if layer["op"] == "linear" else 8
        spec = {"name": "hs", "inputs": {"x": {"channels": 8, "size": size}},
                "layers": ([{"name": "g", "op": "global_avg_pool"}] if size == 1 else []) +
                [layer]}
        if size == 1:
            spec["inputs"]["x"]["size"] = 8
            layer["in"] = "g"
        m = ttmodels.build(spec, weights="random", backend="sim")
        with m.executor.record() as calls:
            x = torch.randn(1, 8, 8, 8, generator=torch.Generator().manual_seed(1))
            m(x)
        names = [c.name for c in calls]
        op = {"conv2d": "conv2d", "add": "add", "linear": "linear"}[layer["op"]]
        assert op in names and "hardswish" in names
        assert names.index("hardswish") > names.index(op), names
        fused = [c for c in calls if c.name == op][0]
        kw = fused.kwargs
        cfg = kw.get("conv_config")
        assert (cfg is None or getattr(cfg, "activation", None) is None) and \
            not kw.get("activations") and not kw.get("activation"), kw


def test_linear_activation_runs_on_the_stored_output():
    """ttnn.linear(activation=...) is a matmul program then a unary program on its stored output
    (mock device); a program config's fused_activation runs on the float32 sum inside."""
    import ttmodels.backends.sim as tt
    from ttmodels.backends.sim.tensor import quantize
    dev = tt.open_device(device_id=0, l1_small_size=24576)
    g = torch.Generator().manual_seed(3)
    a = tt.from_torch(torch.randn(1, 1, 64, 64, generator=g), dtype=tt.bfloat16,
                      layout=tt.TILE_LAYOUT, device=dev)
    w = tt.from_torch(torch.randn(64, 64, generator=g) / 8, dtype=tt.bfloat16,
                      layout=tt.TILE_LAYOUT, device=dev)
    plain = tt.to_torch(tt.linear(a, w)).float()
    got = tt.to_torch(tt.linear(a, w, activation=tt.UnaryWithParam(tt.UnaryOpType.SILU))).float()
    want = A.sim_apply("silu", quantize(plain, tt.bfloat16)).to(torch.bfloat16).float()
    assert torch.equal(got, want)
    # in a 32-bit Dest the kernel would read the unrounded sum, which gives other bits somewhere:
    # the test can tell the two apart
    xa, xw = tt.to_torch(a).float().reshape(64, 64), tt.to_torch(w).float()
    fused = A.sim_apply("silu", xa @ xw, fp32_dest=True).to(torch.bfloat16).float()
    assert not torch.equal(got, fused.reshape(got.shape))


def test_a_16_bit_dest_feeds_the_sfpu_bfloat16():
    """A 16-bit Dest holds bfloat16: the kernel's input is the value rounded to bfloat16, and the
    sim's lookup over all 65,536 of them equals the bit-level model on the rounded input; a 32-bit
    Dest feeds the float32 value itself."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4096, generator=g) * 4
    x = torch.cat([x, torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"),
                                    1e-40, -1e-40, 3.0e38])])
    xb = x.to(torch.bfloat16).float()
    for act, fast in (("silu", False), ("sigmoid", False), ("sigmoid", True), ("gelu", False),
                      ("gelu", True), ("tanh", False), ("tanh", True), ("hardsigmoid", False),
                      ("hardswish", False), ("mish", False), ("mish", True)):
        got = A.sim_apply(act, x, approximate=fast)
        want = A.sfpu_model(act, xb, approximate=fast)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (act, fast)
    exact = A.sim_apply("silu", x, fp32_dest=True)
    assert torch.equal(exact.view(torch.int32), sfpu.silu(x, True).view(torch.int32))
    assert not torch.equal(exact, A.sim_apply("silu", x))
