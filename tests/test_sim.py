"""The sim backend against torch float32 references, its storage formats, memory-config tracking,
weight-preparation caching and signature parity with the real ttnn 0.81."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import ttmodels.backends.sim as tt
from ttmodels import formats
from ttmodels.ops.conv2d import sim as sim_ops

HS = tt.TensorMemoryLayout.HEIGHT_SHARDED


@pytest.fixture(scope="module")
def dev():
    d = tt.open_device(device_id=0, l1_small_size=24576)
    yield d
    tt.close_device(d)


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.flatten().float(), b.flatten().float()]))[0, 1])


def nhwc_flat(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(1, 1, n * h * w, c)


def act(dev, x_nchw, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, mc=None):
    return tt.from_torch(nhwc_flat(x_nchw), dtype=dtype, layout=layout, device=dev, memory_config=mc)


def height_mc(rows, c, cores, layout_tile=True):
    pad = 32 if layout_tile else 1
    sh = -(-rows // (cores * 32)) * 32
    grid = tt.num_cores_to_corerangeset(cores, tt.CoreCoord(8, 8), True)
    return tt.MemoryConfig(HS, tt.BufferType.L1, tt.ShardSpec(grid, [sh, -(-c // pad) * pad],
                                                             tt.ShardOrientation.ROW_MAJOR))


def torch_of(t):
    return tt.to_torch(t).float()


def assert_stored_exactly(t, dtype_name):
    v = torch_of(t)
    assert torch.equal(formats.quantize(v, dtype_name), v), f"values are not {dtype_name}-representable"


# ---------------------------------------------------------------------------------------------
# tensors and storage
# ---------------------------------------------------------------------------------------------

def test_from_torch_stores_declared_format_and_pads_tiles(dev):
    x = torch.randn(1, 1, 50, 70)
    t = tt.from_torch(x, dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT, device=dev)
    assert t.shape == [1, 1, 50, 70] and t.padded_shape == [1, 1, 64, 96]
    assert torch.equal(torch_of(t), formats.quantize(x, "bfloat8_b"))
    assert not torch.equal(torch_of(t), x)
    rm = tt.from_torch(x, dtype=tt.bfloat16)
    assert rm.layout == tt.ROW_MAJOR_LAYOUT and rm.padded_shape == [1, 1, 50, 70]
    assert tt.to_torch(rm).dtype == torch.bfloat16
    # block-float tensors are tiled by from_torch on its own, like ttnn
    assert tt.from_torch(x, dtype=tt.bfloat8_b).layout == tt.TILE_LAYOUT
    x0 = x.clone()
    tt.from_torch(x, dtype=tt.float32).to_torch()
    assert torch.equal(x, x0)


def test_to_device_from_device_and_deallocate(dev):
    t = tt.from_torch(torch.randn(1, 1, 64, 32), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT)
    assert t.storage_type() == tt.StorageType.HOST
    d = tt.to_device(t, dev, tt.L1_MEMORY_CONFIG)
    assert d.storage_type() == tt.StorageType.DEVICE and d.memory_config() == tt.L1_MEMORY_CONFIG
    h = tt.from_device(d)
    assert h.device() is None and torch.equal(torch_of(h), torch_of(t))
    tt.deallocate(d)
    assert not d.is_allocated()
    with pytest.raises(ValueError, match="deallocated"):
        tt.relu(d)


def test_reshape_permute_to_layout_typecast(dev):
    x = torch.randn(1, 1, 2 * 5 * 5, 16)
    t = tt.from_torch(x, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    r = tt.reshape(t, (2, 5, 5, 16))
    assert r.shape == [2, 5, 5, 16] and torch.equal(torch_of(r), torch_of(t).reshape(2, 5, 5, 16))
    p = tt.permute(r, (0, 3, 1, 2))
    assert p.shape == [2, 16, 5, 5]
    rm = tt.to_layout(t, tt.ROW_MAJOR_LAYOUT)
    assert rm.layout == tt.ROW_MAJOR_LAYOUT and torch.equal(torch_of(rm), torch_of(t))
    b8 = tt.typecast(t, tt.bfloat8_b)
    assert b8.dtype == tt.bfloat8_b
    assert torch.equal(torch_of(b8), formats.quantize(torch_of(t), "bfloat8_b"))


# ---------------------------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------------------------

def _conv(dev, x, w, b, *, stride=1, padding=1, groups=1, wdtype=tt.bfloat8_b, out_dtype=tt.bfloat16,
          fidelity=tt.MathFidelity.HiFi4, activation=None, mc=None, layout=tt.TILE_LAYOUT, **extra):
    n, c, h, wd = x.shape
    cout, _, kh, kw = w.shape
    xt = act(dev, x, layout=layout, mc=mc)
    wt = tt.from_torch(w, dtype=tt.float32)
    bt = tt.from_torch(b.reshape(1, 1, 1, -1), dtype=tt.float32) if b is not None else None
    cfg = tt.Conv2dConfig(weights_dtype=wdtype, shard_layout=None if mc is not None else HS,
                          activation=activation)
    cc = tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=fidelity)
    return tt.conv2d(input_tensor=xt, weight_tensor=wt, bias_tensor=bt, device=dev, in_channels=c,
                     out_channels=cout, batch_size=n, input_height=h, input_width=wd, kernel_size=(kh, kw),
                     stride=(stride, stride), padding=(padding, padding), dilation=(1, 1), groups=groups,
                     dtype=out_dtype, conv_config=cfg, compute_config=cc, **extra)


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 3, 1), (1, 0, 1), (1, 1, 4)])
def test_conv2d_matches_torch(dev, stride, padding, groups):
    torch.manual_seed(0)
    k = 7 if padding == 3 else (1 if padding == 0 else 3)
    x = torch.randn(2, 32, 14, 14)
    w = torch.randn(64, 32 // groups, k, k) * 0.1
    b = torch.randn(64) * 0.1
    y = _conv(dev, x, w, b, stride=stride, padding=padding, groups=groups)
    ref = F.conv2d(x, w, b, stride, padding, 1, groups)
    out = torch_of(y)
    assert y.shape == [1, 1, ref.shape[0] * ref.shape[2] * ref.shape[3], 64]
    assert pcc(out, nhwc_flat(ref)) > 0.999
    # bfloat16 activations + bfloat8_b weights: a few percent of the output scale at most
    assert (out - nhwc_flat(ref)).abs().max() < 0.05 * ref.abs().max()
    assert_stored_exactly(y, "bfloat16")


def test_conv2d_output_really_quantized_and_activation_fused(dev):
    torch.manual_seed(1)
    x, w, b = torch.randn(1, 16, 8, 8), torch.randn(32, 16, 3, 3) * 0.2, torch.randn(32)
    y8 = _conv(dev, x, w, b, out_dtype=tt.bfloat8_b, activation=tt.UnaryWithParam(tt.UnaryOpType.RELU))
    y32 = _conv(dev, x, w, b, out_dtype=tt.float32, activation=tt.UnaryWithParam(tt.UnaryOpType.RELU))
    o8, o32 = torch_of(y8), torch_of(y32)
    assert (o32 >= 0).all() and (o8 >= 0).all()
    assert not torch.equal(o8, o32)
    assert_stored_exactly(y8, "bfloat8_b")
    assert torch.equal(o8, formats.quantize(o32, "bfloat8_b"))


def test_conv2d_math_fidelity_lofi_truncates_operands(dev):
    torch.manual_seed(2)
    x, w = torch.randn(1, 32, 8, 8), torch.randn(32, 32, 3, 3) * 0.1
    lo = torch_of(_conv(dev, x, w, None, wdtype=tt.bfloat16, out_dtype=tt.float32, fidelity=tt.MathFidelity.LoFi))
    hi = torch_of(_conv(dev, x, w, None, wdtype=tt.bfloat16, out_dtype=tt.float32, fidelity=tt.MathFidelity.HiFi4))
    ref = nhwc_flat(F.conv2d(x, w, None, 1, 1))
    assert not torch.equal(lo, hi)
    assert (hi - ref).abs().mean() < (lo - ref).abs().mean()
    assert pcc(lo, ref) > 0.99


def _bf16_edge_values() -> torch.Tensor:
    """float32 values that exercise bfloat16 rounding: ties (to even, both ways), carries into the
    exponent, overflow to inf, subnormals, signed zeros, inf and NaNs with various payloads."""
    bits = [0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F808001, 0x3F7FFFFF, 0x7F7FFFFF, 0x7F7F8000,
            0x7F7F7FFF, 0x00000001, 0x00008000, 0x00018000, 0x807FFFFF, 0x00000000, -0x80000000,
            0x7F800000, -0x00800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, -1, -0x003FFFFF,
            0x7FBF8000, 0x7F808000]
    edge = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    torch.manual_seed(5)
    # long enough for torch's vectorised conversion loop and its scalar tail, the edge values
    # at both ends
    rnd = torch.randn(4099) * torch.logspace(-40, 38, 4099)
    return torch.cat([edge, rnd, edge])


@pytest.mark.parametrize("dtype", [tt.bfloat16, tt.float32, tt.bfloat8_b])
def test_in_place_rounding_is_bit_exact(dtype):
    from ttmodels.backends.sim.tensor import quantize, quantize_
    x = _bf16_edge_values().reshape(-1, 5)
    want = x.to(torch.bfloat16).float() if dtype == tt.bfloat16 else quantize(x, dtype)
    y = x.clone()
    got = quantize_(y, dtype)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))       # NaN payloads too
    if dtype in (tt.bfloat16, tt.float32):
        assert got.data_ptr() == y.data_ptr()                                 # really in place
    # bfloat16 agrees with the format model everywhere but in torch's NaN bit patterns
    q = formats.quantize(x, "bfloat16")
    fin = ~torch.isnan(x)
    if dtype == tt.bfloat16:
        assert torch.equal(got[fin].view(torch.int32), q[fin].view(torch.int32))
        assert torch.isnan(got[~fin]).all()
    # a non-contiguous input is never written to
    t = x.t()
    before = t.clone()
    quantize_(t, dtype)
    assert torch.equal(t.view(torch.int32), before.view(torch.int32))


@pytest.mark.parametrize("act_dtype,fidelity", [(tt.bfloat8_b, tt.MathFidelity.LoFi),
                                                (tt.bfloat4_b, tt.MathFidelity.HiFi2),
                                                (tt.bfloat16, tt.MathFidelity.HiFi2)])
def test_skipped_fidelity_truncation_changes_nothing(dev, act_dtype, fidelity):
    """The conv skips truncating operands whose format has no more mantissa bits than the fidelity
    keeps; the output must equal a conv on explicitly truncated operands."""
    torch.manual_seed(6)
    x, w, b = torch.randn(2, 32, 9, 9), torch.randn(64, 32, 3, 3) * 0.1, torch.randn(64) * 0.1
    xt = act(dev, x, dtype=act_dtype)
    a_bits, b_bits = sim_ops._FIDELITY_BITS[fidelity]
    stored = xt._data.clone()
    assert sim_ops._effective_keep(act_dtype, b_bits) == (b_bits if act_dtype == tt.bfloat16 else None)
    if act_dtype != tt.bfloat16:      # the skipped truncation would not change a stored value
        assert torch.equal(sim_ops._truncate(stored, b_bits), stored)
    wt = tt.from_torch(w, dtype=tt.float32)
    bt = tt.from_torch(b.reshape(1, 1, 1, -1), dtype=tt.float32)
    cfg = tt.Conv2dConfig(weights_dtype=tt.bfloat8_b, shard_layout=HS)
    cc = tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=fidelity)
    y = tt.conv2d(input_tensor=xt, weight_tensor=wt, bias_tensor=bt, device=dev, in_channels=32,
                  out_channels=64, batch_size=2, input_height=9, input_width=9, kernel_size=(3, 3),
                  padding=(1, 1), dtype=tt.float32, conv_config=cfg, compute_config=cc)
    assert torch.equal(xt._data, stored)                                  # the input is untouched
    prepared = next(iter(wt._cache.values()))
    wref = sim_ops._truncate(sim_ops._conv_weight_oihw(prepared), a_bits)
    xin = sim_ops._truncate(stored, b_bits).reshape(2, 9, 9, 32).permute(0, 3, 1, 2)
    bias = next(iter(bt._cache.values()))._cache["vec"]
    ref = F.conv2d(xin, wref, bias, 1, 1)
    assert torch.equal(torch_of(y), nhwc_flat(ref))


def test_fused_relu_and_rounding_leave_inputs_untouched(dev):
    torch.manual_seed(7)
    a = act(dev, torch.randn(1, 64, 8, 8))
    b = act(dev, torch.randn(1, 64, 8, 8))
    da, db = a._data.clone(), b._data.clone()
    y = tt.add(a, b, activations=[tt.UnaryWithParam(tt.UnaryOpType.RELU)])
    assert torch.equal(a._data, da) and torch.equal(b._data, db)
    assert torch.equal(torch_of(y), torch.relu(da + db).to(torch.bfloat16).float())
    r = tt.relu(a)
    assert torch.equal(a._data, da) and torch.equal(torch_of(r), torch.relu(da))


def test_fused_relu6_is_in_place_with_the_tables_bits():
    """A fused relu6 on an op's own output runs in place (no fresh tensor per conv) and gives
    bit for bit what the activation table computes, NaN patterns and -0.0 included."""
    from ttmodels.ops import activations as A
    torch.manual_seed(3)
    x = torch.randn(4096) * 8
    x[:10] = torch.tensor([float("nan"), -float("nan"), -0.0, 0.0, -1e-45, 6.0, 6.0001,
                           float("inf"), -float("inf"), 5.9999])
    want = A.sim_apply("relu6", x.clone()).view(torch.int32)
    owned = x.clone()
    y = sim_ops._apply_unary(owned, tt.UnaryWithParam(tt.UnaryOpType.RELU6), inplace=True)
    assert y.data_ptr() == owned.data_ptr(), "relu6 on an owned output must not allocate"
    assert torch.equal(y.view(torch.int32), want)
    kept = x.clone()
    y = sim_ops._apply_unary(kept, tt.UnaryWithParam(tt.UnaryOpType.RELU6))
    assert torch.equal(kept.view(torch.int32), x.view(torch.int32)), "not owned: input untouched"
    assert torch.equal(y.view(torch.int32), want)


@pytest.mark.parametrize("xs,ws,stride,pad,dil,groups", [
    ((1, 3, 30, 30), (16, 3, 7, 7), 2, 3, 1, 1),          # a stem
    ((2, 64, 14, 14), (128, 64, 1, 1), 2, 0, 1, 1),       # a strided 1x1 (ResNet downsample)
    ((1, 64, 9, 9), (64, 64, 3, 3), 1, 1, 1, 1),
    ((1, 32, 9, 9), (32, 1, 3, 3), 1, 2, 2, 32),          # depthwise, dilated
    ((1, 32, 9, 9), (32, 2, 3, 3), 2, 1, 1, 16),          # grouped
])
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_conv_weights_give_f_conv2d_bits(xs, ws, stride, pad, dil, groups, threads):
    """The sim's conv on oneDNN-packed weights (onednn.py) computes what F.conv2d computes on the
    dense weight, bit for bit, for every conv F.conv2d itself runs on oneDNN: only the per-call
    weight reorder is skipped."""
    from ttmodels.backends.sim import onednn
    if not onednn.available():
        pytest.skip("torch without oneDNN: the sim runs F.conv2d itself")
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(11)
        x = torch.randn(xs, generator=g).contiguous(memory_format=torch.channels_last)
        w = torch.randn(ws, generator=g).contiguous(memory_format=torch.channels_last)
        b = torch.randn(ws[0], generator=g)
        geo = ((stride,) * 2, (pad,) * 2, (dil,) * 2, groups)
        used = onednn.used_by_torch(xs, ws, *geo)
        assert used or stride == 1          # torch runs every strided conv on oneDNN
        if used:                            # else the sim runs F.conv2d on the dense weight
            p, back = onednn.pack(w, *geo[:3], groups, xs)
            assert back is None
            got = onednn.conv(x, p, b, *geo)
            assert torch.equal(got, F.conv2d(x, w, b, stride, pad, dil, groups))
            assert torch.equal(onednn.unpack(p), w)
    finally:
        torch.set_num_threads(old)


def test_conv2d_weight_preparation_is_cached_and_bit_exact(dev):
    torch.manual_seed(3)
    x, w, b = torch.randn(1, 16, 10, 10), torch.randn(48, 16, 3, 3), torch.randn(48)
    before = sim_ops.prepare_count
    y, (oh, ow), (pw, pb) = _conv(dev, x, w, b, return_output_dim=True, return_weights_and_bias=True)
    assert (oh, ow) == (10, 10) and sim_ops.prepare_count == before + 1
    # prepared matrix: rows (kh, kw, Cin padded to 32), columns Cout padded to 32
    assert pw.shape == [1, 1, 3 * 3 * 32, 64] and pw.dtype == tt.bfloat8_b
    m = torch.zeros(3, 3, 32, 64)
    m[:, :, :16, :48] = w.permute(2, 3, 1, 0)
    assert torch.equal(torch_of(pw), formats.quantize(m.reshape(1, 1, -1, 64), "bfloat8_b"))
    xt = act(dev, x)
    cfg = tt.Conv2dConfig(weights_dtype=tt.bfloat8_b, shard_layout=HS)
    again = tt.conv2d(input_tensor=xt, weight_tensor=pw, bias_tensor=pb, device=dev, in_channels=16,
                      out_channels=48, batch_size=1, input_height=10, input_width=10, kernel_size=(3, 3),
                      stride=(1, 1), padding=(1, 1), conv_config=cfg,
                      compute_config=tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=tt.MathFidelity.HiFi4))
    assert sim_ops.prepare_count == before + 1
    assert torch.equal(torch_of(again), torch_of(y))
    # the same raw weight tensor is prepared once, too
    wt = tt.from_torch(w, dtype=tt.float32)
    p1 = tt.prepare_conv_weights(weight_tensor=wt, input_memory_config=tt.L1_MEMORY_CONFIG,
                                 input_layout=tt.TILE_LAYOUT, weights_format="OIHW", in_channels=16,
                                 out_channels=48, batch_size=1, input_height=10, input_width=10,
                                 kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                 has_bias=True, groups=1, device=dev, input_dtype=tt.bfloat16,
                                 conv_config=cfg)
    n = sim_ops.prepare_count
    p2 = tt.prepare_conv_weights(weight_tensor=wt, input_memory_config=tt.L1_MEMORY_CONFIG,
                                 input_layout=tt.TILE_LAYOUT, weights_format="OIHW", in_channels=16,
                                 out_channels=48, batch_size=1, input_height=10, input_width=10,
                                 kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                 has_bias=True, groups=1, device=dev, input_dtype=tt.bfloat16,
                                 conv_config=cfg)
    assert p1 is p2 and sim_ops.prepare_count == n
    # a prepared weight used with another conv's geometry is refused
    with pytest.raises(ValueError, match="prepared weight"):
        tt.conv2d(input_tensor=xt, weight_tensor=pw, device=dev, in_channels=16, out_channels=48,
                  batch_size=1, input_height=10, input_width=10, kernel_size=(1, 1), conv_config=cfg)


def test_conv2d_output_memory_config_is_height_sharded(dev):
    x, w = torch.randn(1, 16, 28, 28), torch.randn(32, 16, 3, 3)
    y = _conv(dev, x, w, None)
    mc = y.memory_config()
    assert mc.memory_layout == HS and mc.buffer_type == tt.BufferType.L1
    ss = mc.shard_spec
    assert ss.shape[1] == 32 and ss.num_cores() * ss.shape[0] >= 28 * 28


# ---------------------------------------------------------------------------------------------
# pools, eltwise, matmul, upsample, concat, pad, adapters
# ---------------------------------------------------------------------------------------------

def test_max_pool2d_keeps_sharding(dev):
    torch.manual_seed(4)
    x = torch.randn(2, 64, 16, 16)
    rows = 2 * 16 * 16
    xt = act(dev, x, layout=tt.ROW_MAJOR_LAYOUT, mc=height_mc(rows, 64, 16, layout_tile=False))
    y = tt.max_pool2d(xt, 2, 16, 16, 64, [3, 3], [2, 2], [1, 1], [1, 1])
    ref = F.max_pool2d(x.bfloat16().float(), 3, 2, 1)
    assert y.shape == [1, 1, 2 * 8 * 8, 64]
    assert torch.equal(torch_of(y), nhwc_flat(ref))
    mc = y.memory_config()
    assert mc.memory_layout == HS and mc.shard_spec.num_cores() == 16
    assert y.layout == tt.ROW_MAJOR_LAYOUT and y.dtype == tt.bfloat16


def test_avg_and_global_pools(dev):
    torch.manual_seed(5)
    x = torch.randn(2, 32, 7, 7)
    xt = act(dev, x)
    g = tt.global_avg_pool2d(tt.reshape(xt, (2, 7, 7, 32)))
    assert g.shape == [2, 1, 1, 32] and g.layout == tt.TILE_LAYOUT
    ref = x.bfloat16().float().mean(dim=(2, 3))
    assert (torch_of(g).reshape(2, 32) - ref).abs().max() < 1e-2
    assert_stored_exactly(g, "bfloat16")
    a = tt.avg_pool2d(xt, 2, 7, 7, 32, [3, 3], [2, 2], [1, 1], count_include_pad=False)
    ref = F.avg_pool2d(x.bfloat16().float(), 3, 2, 1, count_include_pad=False)
    assert (torch_of(a) - nhwc_flat(ref)).abs().max() < 2e-2
    ad = tt.adaptive_avg_pool2d(xt, 2, 7, 7, 32, [1, 1])
    assert (torch_of(ad).reshape(2, 32) - x.bfloat16().float().mean(dim=(2, 3))).abs().max() < 1e-2


def test_binary_ops_broadcast_dtype_and_memory(dev):
    torch.manual_seed(6)
    a, b = torch.randn(1, 1, 64, 64), torch.randn(1, 1, 64, 64)
    mc = height_mc(64, 64, 2)
    ta = tt.from_torch(a, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev, memory_config=mc)
    tb = tt.from_torch(b, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev, memory_config=mc)
    s = tt.add(ta, tb, activations=[tt.UnaryWithParam(tt.UnaryOpType.RELU)])
    ref = torch.relu(a.bfloat16().float() + b.bfloat16().float())
    assert torch.equal(torch_of(s), ref.bfloat16().float())
    assert s.memory_config() == mc
    scale = tt.from_torch(torch.randn(1, 1, 1, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    m = tt.multiply(ta, scale, dtype=tt.bfloat8_b)
    assert m.dtype == tt.bfloat8_b and m.shape == [1, 1, 64, 64]
    assert torch.equal(torch_of(m), formats.quantize(torch_of(ta) * torch_of(scale), "bfloat8_b"))
    k = tt.multiply(ta, 0.5)
    assert torch.equal(torch_of(k), torch_of(ta) * 0.5)
    r = tt.relu(tt.add(ta, -1.0))
    assert (torch_of(r) >= 0).all() and r.memory_config() == mc


def test_linear_and_matmul(dev):
    torch.manual_seed(7)
    a, w, b = torch.randn(1, 1, 8, 256), torch.randn(256, 100) * 0.05, torch.randn(100)
    ta = tt.from_torch(a, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    tw = tt.from_torch(w, dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT, device=dev)
    tb = tt.from_torch(b.reshape(1, 1, 1, 100), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    cc = tt.WormholeComputeKernelConfig(math_fidelity=tt.MathFidelity.HiFi4, fp32_dest_acc_en=True)
    y = tt.linear(ta, tw, bias=tb, activation="relu", compute_kernel_config=cc)
    ref = torch.relu(a @ w + b)
    assert y.shape == [1, 1, 8, 100]
    assert pcc(torch_of(y), ref) > 0.999
    assert_stored_exactly(y, "bfloat16")
    mm = tt.matmul(ta, tw, dtype=tt.float32, compute_kernel_config=cc)
    assert torch.allclose(torch_of(mm), torch_of(ta) @ torch_of(tw), atol=1e-4)


def test_upsample_concat_pad(dev):
    torch.manual_seed(8)
    x = torch.randn(1, 4, 4, 32)
    t = tt.from_torch(x, dtype=tt.bfloat16, layout=tt.ROW_MAJOR_LAYOUT, device=dev)
    u = tt.upsample(t, 2)
    ref = F.interpolate(x.bfloat16().float().permute(0, 3, 1, 2), scale_factor=2).permute(0, 2, 3, 1)
    assert u.shape == [1, 8, 8, 32] and torch.equal(torch_of(u), ref)
    a = tt.from_torch(torch.randn(1, 1, 64, 32), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    b = tt.from_torch(torch.randn(1, 1, 64, 16), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    c = tt.concat([a, b], dim=3)
    assert c.shape == [1, 1, 64, 48] and torch.equal(torch_of(c), torch.cat([torch_of(a), torch_of(b)], 3))
    p = tt.pad(t, [(0, 0), (1, 1), (1, 1), (0, 0)], 0.0)
    assert p.shape == [1, 6, 6, 32] and torch.equal(torch_of(p)[:, 1:5, 1:5], torch_of(t))
    assert torch_of(p)[:, 0].abs().sum() == 0


def test_memory_adapters_round_trip(dev):
    x = torch.randn(1, 1, 128, 64)
    t = tt.from_torch(x, dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev, memory_config=tt.DRAM_MEMORY_CONFIG)
    mc = tt.create_sharded_memory_config((1, 1, 128, 64), tt.CoreGrid(x=4, y=1), tt.ShardStrategy.HEIGHT)
    assert mc.shard_spec.shape == [32, 64]
    s = tt.interleaved_to_sharded(t, mc)
    assert s.memory_config() == mc and s.is_sharded()
    s2 = tt.interleaved_to_sharded(t, tt.CoreCoord(2, 1), [64, 64], HS, tt.ShardOrientation.ROW_MAJOR)
    assert s2.memory_config().shard_spec.num_cores() == 2
    r = tt.reshard(s, s2.memory_config())
    assert r.memory_config() == s2.memory_config()
    i = tt.sharded_to_interleaved(r, tt.DRAM_MEMORY_CONFIG, output_dtype=tt.bfloat8_b)
    assert not i.is_sharded() and i.dtype == tt.bfloat8_b
    assert torch.equal(torch_of(i), formats.quantize(torch_of(t), "bfloat8_b"))
    m = tt.to_memory_config(t, mc)
    assert m.memory_config() == mc and torch.equal(torch_of(m), torch_of(t))


def test_memspec_round_trip():
    mc = tt.MemoryConfig(HS, tt.BufferType.L1, tt.ShardSpec(
        tt.num_cores_to_corerangeset(60, tt.CoreCoord(8, 8), True), [64, 64], tt.ShardOrientation.ROW_MAJOR))
    ms = tt.memspec(mc)
    assert (ms.grid, ms.num_cores, ms.shard_shape, ms.memory_layout) == ((8, 8), 60, (64, 64), "height_sharded")
    assert tt.memory_config_of(ms) == mc


def test_memo_tokens_name_one_value_and_are_never_reused(dev, monkeypatch):
    """Memo keys name layouts and memory specs by int tokens: equal values share a token while
    interned, a config whose fields change gets a new one, and after the tables are cleared a
    token is never handed to another value (a stale memo entry can miss, never hit wrongly)."""
    from ttmodels.backends.sim import tensor as simt
    a = act(dev, torch.randn(1, 32, 4, 4))
    b = act(dev, torch.randn(1, 32, 4, 4))
    c = act(dev, torch.randn(1, 32, 4, 4), dtype=tt.bfloat8_b)
    assert a._layout_token() == b._layout_token() != c._layout_token()
    old = {a._layout_token(), c._layout_token()}
    monkeypatch.setattr(simt, "_LAYOUTS", {})            # as when the table overflows
    d = act(dev, torch.randn(1, 32, 4, 4))
    assert d._layout() == a._layout() and d._layout_token() not in old
    mc = tt.MemoryConfig(tt.TensorMemoryLayout.INTERLEAVED, tt.BufferType.L1)
    t0 = simt.memspec_token(mc)
    assert simt.memspec_token(mc) == t0
    mc.buffer_type = tt.BufferType.DRAM                  # a field reassigned: a new token
    assert simt.memspec_token(mc) != t0 and tt.memspec(mc).buffer == "dram"
    # an op's output config found by identity is remade when its fields were changed
    ms = tt.memspec(height_mc(64, 32, 2))
    out = simt.memory_config_for(ms)
    assert simt.memory_config_for(ms) is out
    out.buffer_type = tt.BufferType.DRAM
    again = simt.memory_config_for(ms)
    assert again is not out and tt.memspec(again) == ms

# ---------------------------------------------------------------------------------------------
# parity with the real ttnn
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ttnn():
    import ttnn
    return ttnn


def _real_keywords(obj) -> set[str] | None:
    """Keyword names accepted by a real ttnn callable: union over nanobind overloads, or the
    python signature; None when neither is readable."""
    import re
    fn = getattr(obj, "function", obj)
    sigs = None
    for cand in (getattr(type(fn).__call__, "__nb_signature__", None), getattr(fn, "__nb_signature__", None),
                 getattr(getattr(fn, "__init__", None), "__nb_signature__", None)):
        if cand:
            sigs = cand
            break
    if sigs:
        names = set()
        for s in sigs:
            head = s[0][s[0].index("(") + 1:]
            names |= set(re.findall(r"(?:^|,\s*)\\?\*?(\w+)\s*:", head))
        return names - {"self"}
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def _sim_keywords(obj) -> set[str]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and hasattr(obj, "_FIELDS"):
        return set(obj._FIELDS) | set(obj._REQUIRED)
    ps = inspect.signature(target).parameters
    return {n for n, p in ps.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


# Keywords the sim accepts that ttnn documents but does not list in its nanobind signature.
_DOCUMENTED_EXTRA = {"open_device": {"num_command_queues"}}


@pytest.mark.parametrize("name", tt.TTNN_FUNCTIONS + tt.TTNN_CLASSES)
def test_keywords_exist_in_real_ttnn(ttnn, name):
    real = _real_keywords(getattr(ttnn, name))
    assert real is not None, f"ttnn.{name} has no readable signature: its keywords go unchecked"
    if name in ("prepare_conv_weights", "prepare_conv_bias", "prepare_conv_transpose2d_weights",
                "prepare_conv_transpose2d_bias"):     # Python wrappers of the nanobind functions
        real = _real_keywords(getattr(ttnn._ttnn.operations.conv, name))
    if name == "interleaved_to_sharded":
        real |= {"input_tensor"}
    if name == "prepare_grid_sample_grid":      # a Python wrapper of the nanobind function
        real = _real_keywords(ttnn._ttnn.operations.pool.prepare_grid_sample_grid)
    ours = _sim_keywords(getattr(tt, name)) - _DOCUMENTED_EXTRA.get(name, set())
    missing = ours - real
    assert not missing, f"sim {name} accepts keywords ttnn does not: {sorted(missing)}"


@pytest.mark.parametrize("name", ["conv2d", "max_pool2d", "avg_pool2d", "linear", "add", "from_torch",
                                  "to_layout", "Conv2dConfig", "WormholeComputeKernelConfig"])
def test_required_keywords_of_real_ttnn_are_accepted(ttnn, name):
    real = _real_keywords(getattr(ttnn, name))
    ours = _sim_keywords(getattr(tt, name))
    ignore = {"spec", "tile", "mesh_mapper", "global_cb", "prefetcher_pipes", "sub_device_id",
              "in0_column_offset", "output_tile", "optional_output_tensor"}
    assert (real - ours) - ignore == set()


def test_enums_and_configs_match_real(ttnn):
    for enum_name in ("DataType", "Layout", "TensorMemoryLayout", "BufferType", "ShardOrientation",
                      "MathFidelity", "ShardStrategy"):
        ours = getattr(tt, enum_name)
        real = getattr(ttnn, enum_name)
        for m in ours:
            assert getattr(real, m.name).value == m.value, f"{enum_name}.{m.name}"
    for m in tt.UnaryOpType:
        assert getattr(ttnn.UnaryOpType, m.name).value == m.value
    for cls in ("Conv2dConfig", "WormholeComputeKernelConfig"):
        r, o = getattr(ttnn, cls)(), getattr(tt, cls)()
        for f in getattr(tt, cls)._FIELDS:
            rv, ov = getattr(r, f), getattr(o, f)
            assert (rv.name if hasattr(rv, "name") else rv) == (ov.name if hasattr(ov, "name") else ov), f"{cls}.{f}"
    for n in (1, 7, 8, 60, 64):
        for row_wise in (True, False):
            real = ttnn.num_cores_to_corerangeset(n, ttnn.CoreCoord(8, 8), row_wise)
            ours = tt.num_cores_to_corerangeset(n, tt.CoreCoord(8, 8), row_wise)
            assert sorted((r.start.x, r.start.y, r.end.x, r.end.y) for r in real.ranges()) == \
                sorted((r.start.x, r.start.y, r.end.x, r.end.y) for r in ours.ranges())
    rk = ttnn.init_device_compute_kernel_config(ttnn.Arch.WORMHOLE_B0)
    ok = tt.init_device_compute_kernel_config(tt.Arch.WORMHOLE_B0)
    assert rk.math_fidelity.name == ok.math_fidelity.name and rk.fp32_dest_acc_en == ok.fp32_dest_acc_en


# ---------------------------------------------------------------------------------------------
# DRAM-sliced conv2d, the 1x1 matmul path, in-place binary ops
# ---------------------------------------------------------------------------------------------

def _sliced_conv(dev, xt, wt, bt, slice_config=None, memory_config=None, deallocate=False):
    cfg = tt.Conv2dConfig(weights_dtype=tt.bfloat8_b, shard_layout=HS, deallocate_activation=deallocate,
                          activation=tt.UnaryWithParam(tt.UnaryOpType.RELU))
    cc = tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=tt.MathFidelity.HiFi2)
    kw = {} if memory_config is None else {"memory_config": memory_config}
    return tt.conv2d(input_tensor=xt, weight_tensor=wt, bias_tensor=bt, device=dev, in_channels=32,
                     out_channels=48, batch_size=2, input_height=20, input_width=36, kernel_size=(3, 3),
                     stride=(1, 1), padding=(1, 1), dtype=tt.bfloat8_b, conv_config=cfg, compute_config=cc,
                     slice_config=slice_config, return_output_dim=True, return_weights_and_bias=True, **kw)


@pytest.mark.parametrize("slice_type,num_slices", [(tt.Op2DDRAMSliceHeight, 4), (tt.Op2DDRAMSliceHeight, 20),
                                                   (tt.Op2DDRAMSliceWidth, 2)])
def test_dram_sliced_conv2d_gives_the_unsliced_bits(dev, slice_type, num_slices):
    """conv2d_DRAM computes every output pixel from the same inputs and weights as the unsliced
    conv (each slice reads its rows plus halo), so the bits agree; the output is DRAM interleaved
    whatever memory_config says, and the input stays allocated."""
    torch.manual_seed(11)
    x, w, b = torch.randn(2, 32, 20, 36), torch.randn(48, 32, 3, 3) * 0.1, torch.randn(48) * 0.1
    xt = act(dev, x, mc=tt.DRAM_MEMORY_CONFIG)
    wt = tt.from_torch(w, dtype=tt.float32)
    bt = tt.from_torch(b.reshape(1, 1, 1, -1), dtype=tt.float32)
    ref, hw, (pw, pb) = _sliced_conv(dev, xt, wt, bt)
    assert ref.is_sharded()          # no slice_config: the sim takes conv2d's L1 path
    sl = tt.Op2DSliceConfig(slice_type=slice_type, num_slices=num_slices)
    l1_sharded = ref.memory_config()
    y, hw2, (pw2, pb2) = _sliced_conv(dev, xt, pw, pb, sl, memory_config=l1_sharded, deallocate=False)
    assert hw2 == hw == (20, 36) and y.shape == ref.shape and y.dtype == tt.bfloat8_b
    assert torch.equal(torch_of(y), torch_of(ref))
    assert y.memory_config() == tt.DRAM_MEMORY_CONFIG        # memory_config ignored, as conv2d_DRAM does
    assert pw2 is pw and pb2 is pb and xt.is_allocated()
    # L1_FULL is conv2d's L1 path: same output memory as without a slice_config
    y1, _, _ = _sliced_conv(dev, xt, pw, pb, tt.Op2DL1FullSliceConfig)
    assert y1.memory_config() == l1_sharded and torch.equal(torch_of(y1), torch_of(ref))


def test_1x1_conv2d_is_the_linear_matmul(dev):
    """A 1x1 stride-1 conv runs as the [M, K] x [K, N] matmul of ttnn.linear (tt-metal's
    is_mm_conv): same bits as ttnn.linear on the same weights, for K well above 64."""
    torch.manual_seed(12)
    x, w, b = torch.randn(2, 256, 10, 12), torch.randn(96, 256, 1, 1) * 0.05, torch.randn(96) * 0.1
    relu = tt.UnaryWithParam(tt.UnaryOpType.RELU)
    y = _conv(dev, x, w, b, padding=0, activation=relu, fidelity=tt.MathFidelity.LoFi)
    xt = act(dev, x)
    wt = tt.from_torch(w.reshape(96, 256).t().contiguous(), dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT, device=dev)
    bt = tt.from_torch(b.reshape(1, 1, 1, 96), dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT, device=dev)
    cc = tt.init_device_compute_kernel_config(dev.arch(), math_fidelity=tt.MathFidelity.LoFi)
    lin = tt.linear(xt, wt, bias=bt, activation=relu, compute_kernel_config=cc)
    assert torch.equal(torch_of(y), torch_of(lin))
    ref = nhwc_flat(F.relu(F.conv2d(x, w, b)))
    assert pcc(torch_of(y), ref) > 0.99


def test_in_place_add_writes_into_the_output_tensor(dev):
    torch.manual_seed(13)
    mc = height_mc(128, 64, 4)
    a0 = tt.from_torch(torch.randn(1, 1, 128, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev,
                       memory_config=tt.DRAM_MEMORY_CONFIG)
    a = tt.to_memory_config(a0, mc)               # the sim shares a0's values: must stay untouched
    b = tt.from_torch(torch.randn(1, 1, 1, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, device=dev)
    before = torch_of(a0)
    relu = [tt.UnaryWithParam(tt.UnaryOpType.RELU)]
    want = torch_of(tt.add(a, b, activations=relu))
    out = tt.add(a, b, activations=relu, output_tensor=a)
    assert out is a and out.memory_config() == mc and torch.equal(torch_of(a), want)
    assert torch.equal(torch_of(a0), before)
    ptr = a._data.data_ptr()
    m = tt.multiply(a, 0.5, output_tensor=a)
    assert m is a and a._data.data_ptr() == ptr and torch.equal(torch_of(a), want * 0.5)
    # a separate preallocated output of another dtype: the result is rounded to it
    o = tt.from_torch(torch.zeros(1, 1, 128, 64), dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT, device=dev)
    r = tt.add(a, b, output_tensor=o)
    assert r is o and torch.equal(torch_of(o), formats.quantize(torch_of(a) + torch_of(b), "bfloat8_b"))


def test_slice_config_matches_real(ttnn):
    for m in tt.Op2DSliceConfig.SliceTypeEnum:
        assert getattr(ttnn.Op2DSliceConfig.SliceTypeEnum, m.name).value == m.value
    assert tt.Op2DDRAMSliceHeight.name == ttnn.Op2DDRAMSliceHeight.name
    assert tt.Op2DDRAMSliceWidth.name == ttnn.Op2DDRAMSliceWidth.name
    for name in ("Op2DL1FullSliceConfig", "Conv2dL1FullSliceConfig"):
        r, o = getattr(ttnn, name), getattr(tt, name)
        assert (r.slice_type.name, r.num_slices) == (o.slice_type.name, o.num_slices)
    assert tt.Conv2dSliceConfig is tt.Op2DSliceConfig and tt.Conv2dDRAMSliceWidth is tt.Op2DDRAMSliceWidth
    for kind in ("Op2DDRAMSliceHeight", "Op2DDRAMSliceWidth"):
        r = ttnn.Op2DSliceConfig(slice_type=getattr(ttnn, kind), num_slices=6)
        o = tt.Op2DSliceConfig(slice_type=getattr(tt, kind), num_slices=6)
        assert repr(r) == repr(o) and (r.num_slices, r.slice_type.name) == (o.num_slices, o.slice_type.name)
        # num_slices may be left out (0: conv2d picks the count); positional arguments are refused
        assert repr(ttnn.Op2DSliceConfig(slice_type=getattr(ttnn, kind))) == \
            repr(tt.Op2DSliceConfig(slice_type=getattr(tt, kind)))
        for mod in (ttnn, tt):
            with pytest.raises(TypeError):
                mod.Op2DSliceConfig(getattr(mod, kind), 2)
            with pytest.raises(TypeError):
                mod.Op2DSliceConfig(num_slices=2)
            with pytest.raises(TypeError):
                mod.Op2DSliceConfig(slice_type=getattr(mod, kind), num_slices=-1)
