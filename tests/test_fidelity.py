"""Math fidelity on the sim follows the FPU's phases (docs/sim.md, "Math fidelity"; issue 33).

The multiplier reads srcA (in1: the weights) as A_hi (hidden one + 4 mantissa bits) and A_lo (the
bits below), srcB (in0: the activations) as B_hi (hidden one + 6 bits) and B_lo; phase 0 adds
A_hi*B_hi, phase 1 A_lo*B_hi, phase 2 A_hi*B_lo, phase 3 A_lo*B_lo. LoFi runs phase 0, HiFi2
phases 0-1, HiFi3 0-2, HiFi4 all four, and the dropped bits are truncated (bit masks), never
rounded. The hand-checked cases below put one product in one output element."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ttmodels.backends.sim as tt
from ttmodels.backends.sim import numerics

MF = tt.MathFidelity
HS = tt.TensorMemoryLayout.HEIGHT_SHARDED

# x (activation, srcB): 1 + 2^-7, the last bfloat16 mantissa bit set (B_hi = 1, B_lo = 2^-7).
# w (weight, srcA): 1 + 2^-5 + 2^-7: A_hi = 1, A_lo = 2^-5 + 2^-7.
X, W = 1 + 2**-7, 1 + 2**-5 + 2**-7
EXPECTED = {
    MF.LoFi: 1.0,                                  # A_hi * B_hi
    MF.HiFi2: W,                                   # (A_hi + A_lo) * B_hi
    MF.HiFi3: W + 2**-7,                           # + A_hi * B_lo
    MF.HiFi4: X * W,                               # + A_lo * B_lo: the exact product
}


@pytest.fixture(scope="module")
def dev():
    d = tt.open_device(device_id=0, l1_small_size=24576)
    yield d
    tt.close_device(d)


def _cc(dev, mf):
    return tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=mf)


def _linear(dev, a, b, mf):
    at = tt.from_torch(a, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    bt = tt.from_torch(b, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    return tt.to_torch(tt.linear(at, bt, dtype=tt.float32, compute_kernel_config=_cc(dev, mf))).float()


def _conv(dev, x, w, mf, padding):
    n, c, h, wd = x.shape
    cout, _, kh, kw = w.shape
    xt = tt.from_torch(x.permute(0, 2, 3, 1).reshape(1, 1, n * h * wd, c), dtype=tt.bfloat16,
                       layout=tt.TILE_LAYOUT, device=dev)
    cfg = tt.Conv2dConfig(weights_dtype=tt.bfloat16, shard_layout=HS)
    y = tt.conv2d(input_tensor=xt, weight_tensor=tt.from_torch(w, dtype=tt.float32), bias_tensor=None,
                  device=dev, in_channels=c, out_channels=cout, batch_size=n, input_height=h,
                  input_width=wd, kernel_size=(kh, kw), stride=(1, 1), padding=(padding, padding),
                  dilation=(1, 1), groups=1, dtype=tt.float32, conv_config=cfg,
                  compute_config=_cc(dev, mf))
    return tt.to_torch(y).float().reshape(n, h, wd, cout).permute(0, 3, 1, 2)


@pytest.mark.parametrize("mf", list(EXPECTED), ids=lambda m: m.name)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_product_per_fidelity_linear(dev, mf, sign):
    a = torch.zeros(1, 1, 32, 32)
    b = torch.zeros(32, 32)
    a[0, 0, 0, 0], b[0, 0] = sign * X, W
    y = _linear(dev, a, b, mf)
    assert y[0, 0, 0, 0].item() == sign * EXPECTED[mf]        # truncation is toward zero
    assert torch.count_nonzero(y) == 1


@pytest.mark.parametrize("mf", list(EXPECTED), ids=lambda m: m.name)
@pytest.mark.parametrize("kernel", [1, 3])            # 1x1: the matmul path; 3x3: the conv path
def test_one_product_per_fidelity_conv2d(dev, mf, kernel):
    x = torch.zeros(1, 32, 4, 4)
    w = torch.zeros(32, 32, kernel, kernel)
    x[0, 0, 1, 1] = X
    w[0, 0, kernel // 2, kernel // 2] = W
    y = _conv(dev, x, w, mf, padding=kernel // 2)
    assert y[0, 0, 1, 1].item() == EXPECTED[mf]
    assert torch.count_nonzero(y) == 1


def test_dropped_bits_are_truncated_not_rounded(dev):
    """srcB keeps 6 explicit bits: 1 + 2^-6 + 2^-7 -> 1 + 2^-6 (rounding would give 1 + 2^-5)."""
    a = torch.zeros(1, 1, 32, 32)
    b = torch.zeros(32, 32)
    a[0, 0, 0, 0], b[0, 0] = 1 + 2**-6 + 2**-7, 1.0
    assert _linear(dev, a, b, MF.HiFi2)[0, 0, 0, 0].item() == 1 + 2**-6
    # srcA keeps 4 explicit bits in LoFi: 1 + 2^-5 + 2^-6 + 2^-7 -> 1 (rounding: 1 + 2^-4)
    a[0, 0, 0, 0], b[0, 0] = 1.0, 1 + 2**-5 + 2**-6 + 2**-7
    assert _linear(dev, a, b, MF.LoFi)[0, 0, 0, 0].item() == 1.0


def _phases(x, w, mf):
    """Sum of the fidelity's phase products over float64 (the reference for random data)."""
    def hi(t, keep):
        return numerics._truncate(t.float().contiguous(), keep).double()
    xh, wh = hi(x, 6), hi(w, 4)
    parts = {0: (wh, xh), 1: (w.double() - wh, xh), 2: (wh, x.double() - xh),
             3: (w.double() - wh, x.double() - xh)}
    n = {MF.LoFi: 1, MF.HiFi2: 2, MF.HiFi3: 3, MF.HiFi4: 4}[mf]
    return sum(F.conv2d(parts[p][1], parts[p][0], None, 1, 1) for p in range(n))


@pytest.mark.parametrize("mf", list(EXPECTED), ids=lambda m: m.name)
def test_conv2d_is_the_sum_of_its_phases(dev, mf):
    torch.manual_seed(33)
    x = torch.randn(1, 32, 6, 6).bfloat16().float()
    w = (torch.randn(32, 32, 3, 3) * 0.1).bfloat16().float()
    y = _conv(dev, x, w, mf, padding=1).double()
    ref = _phases(x, w, mf)
    assert torch.allclose(y, ref, rtol=1e-6, atol=1e-6)
    if mf != MF.HiFi4:          # each fidelity differs from the exact product on bfloat16 data
        assert not torch.allclose(y, F.conv2d(x.double(), w.double(), None, 1, 1), rtol=1e-6, atol=1e-6)


def test_fidelity_table():
    assert numerics._FIDELITY_BITS == {MF.LoFi: (4, 6), MF.HiFi2: (None, 6), MF.HiFi3: (None, 6),
                                       MF.HiFi4: (None, None)}
    assert numerics._FIDELITY_EXTRA == {MF.HiFi3: (4, 6)}
