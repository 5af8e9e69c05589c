"""ttnn.upsample on the sim backend, and ttnn.grid_sample with its host-side grid preparation
(bilinear upsample with align_corners=True runs as this, docs/spec.md)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...backends.sim import types as T
from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import SimTensor, _check, _on_device, current_layer, dtype_name, memspec
from ...errors import Error
from ...planning.layout import ROW_MAJOR
from .rules import GridSampleArgs, UpsampleArgs

__all__ = ["upsample", "grid_sample", "prepare_grid_sample_grid"]
TTNN_FUNCTIONS = tuple(__all__)


def upsample(input_tensor, scale_factor, *, mode="nearest", memory_config=None, compute_kernel_config=None):
    op = "upsample"
    x = _on_device(input_tensor, op)
    if len(x.shape) != 4:
        raise Error(f"{current_layer(op)}: upsample expects an NHWC [N, H, W, C] tensor, got {list(x.shape)}")
    if isinstance(scale_factor, (int, float)):
        sh = sw = scale_factor
    else:
        sh, sw = scale_factor
    _check(op, [x], UpsampleArgs(mode=mode))
    n, h, w, c = x.shape
    oh, ow = int(h * sh), int(w * sw)
    xin = x._data.permute(0, 3, 1, 2)
    if mode == "nearest":
        y = F.interpolate(xin, size=(oh, ow), mode="nearest")
    elif mode == "bilinear":
        y = F.interpolate(xin, size=(oh, ow), mode="bilinear", align_corners=False)
    else:
        raise Error(f"{current_layer(op)}: upsample mode {mode!r}")
    y = y.permute(0, 2, 3, 1).contiguous()
    attrs = UpsampleArgs(mode=mode, out_shape=(1, 1, n * oh * ow, c))
    lay = _out_layout(op, [x], attrs, memory_config, [x._flat4()])
    # the rules' layout: nearest of an interleaved TILE input comes out ROW_MAJOR (as ttnn's)
    layout = T.Layout.ROW_MAJOR if lay.layout == ROW_MAJOR else x.layout
    return _emit(y, x.dtype, layout, lay.memory, x._device, op)


def _bits_as_bf16(v: torch.Tensor) -> torch.Tensor:
    """int16 bit patterns stored in bfloat16 elements (as a float32 tensor holding bf16 values)."""
    return (v.to(torch.int32) << 16).view(torch.float32)


def _bf16_bits(v: torch.Tensor) -> torch.Tensor:
    """The int16 pattern of bfloat16 values held in a float32 tensor (inverse of _bits_as_bf16)."""
    return (v.contiguous().view(torch.int32) >> 16).to(torch.int16)


def _bilinear_corners(grid: torch.Tensor, h: int, w: int, align_corners: bool):
    """grid_sample_prepare_grid.cpp ``create_host_buffer_for_grid_preprocessing`` (bilinear), in
    float32 like the C++: pixel coordinates, the north-west corner and the four weights (zero
    for a corner outside the image)."""
    x, y = grid[..., 0], grid[..., 1]
    if align_corners:
        hs = torch.tensor((h - 1) * 0.5 if h > 1 else 0.0, dtype=torch.float32)
        ws = torch.tensor((w - 1) * 0.5 if w > 1 else 0.0, dtype=torch.float32)
        hc, wc = (y + 1.0) * hs, (x + 1.0) * ws
    else:
        hc = (y + 1.0) * torch.tensor(h * 0.5, dtype=torch.float32) - 0.5
        wc = (x + 1.0) * torch.tensor(w * 0.5, dtype=torch.float32) - 0.5
    h0f, w0f = torch.floor(hc), torch.floor(wc)
    hf, wf = hc - h0f, wc - w0f
    hi, wi = 1.0 - hf, 1.0 - wf
    h0, w0 = h0f.to(torch.int64), w0f.to(torch.int64)

    def ok(hh, ww):
        return (hh >= 0) & (hh < h) & (ww >= 0) & (ww < w)

    zero = torch.zeros((), dtype=torch.float32)
    wts = torch.stack([torch.where(ok(h0, w0), hi * wi, zero), torch.where(ok(h0, w0 + 1), hi * wf, zero),
                       torch.where(ok(h0 + 1, w0), hf * wi, zero), torch.where(ok(h0 + 1, w0 + 1), hf * wf, zero)],
                      dim=-1)
    return h0, w0, wts


def prepare_grid_sample_grid(grid, input_shape, *, mode="bilinear", padding_mode="zeros", align_corners=False,
                             output_dtype=None):
    """Host-side precomputation (grid_sample_prepare_grid.cpp): [N, Ho, Wo, 2] float32 normalized
    coordinates -> [N, Ho, Wo, 6] bfloat16 = h0, w0 (int16 bit patterns) and the nw/ne/sw/se
    weights rounded to bfloat16 (round to nearest even; bit-exact with ttnn's, tests/test_contracts.py)."""
    op = "prepare_grid_sample_grid"
    if not isinstance(grid, SimTensor):
        raise Error(f"{op}: grid must be a ttnn tensor, got {type(grid).__name__}")
    if grid._device is not None:
        raise Error(f"{op}: Prepare_grid_sample_grid only supports host tensors")
    if grid.layout != T.Layout.ROW_MAJOR or len(grid.shape) != 4 or grid.shape[-1] != 2:
        raise Error(f"{op}: grid must be a ROW_MAJOR [N, H, W, 2] tensor, got {list(grid.shape)} {grid.layout.name}")
    if grid.dtype != T.DataType.FLOAT32:
        raise Error(f"{op}: Currently only float32 input grid is supported, got {dtype_name(grid.dtype)}")
    if padding_mode != "zeros":
        raise Error(f"{op}: Currently only 'zeros' padding mode is supported")
    if output_dtype not in (None, T.DataType.BFLOAT16):
        raise Error(f"{op}: Currently only BFLOAT16 is supported for the grid output dtype")
    if len(input_shape) != 4:
        raise Error(f"{op}: input_shape must be [N, H, W, C], got {list(input_shape)}")
    if mode != "bilinear":
        raise Error(f"{op}: mode {mode!r} is not modelled by the sim backend (bilinear only)")
    _, h, w, _ = (int(v) for v in input_shape)
    h0, w0, wts = _bilinear_corners(grid._data, h, w, bool(align_corners))
    idx = torch.stack([h0.clamp(-32768, 32767), w0.clamp(-32768, 32767)], dim=-1).to(torch.int16)
    data = torch.cat([_bits_as_bf16(idx), wts.to(torch.bfloat16).float()], dim=-1).contiguous()
    # built directly: quantize() must not touch the index bit patterns (denormals / NaN payloads)
    return SimTensor(data, T.DataType.BFLOAT16, T.Layout.ROW_MAJOR, T.DRAM_MEMORY_CONFIG, None)


def grid_sample(input_tensor, grid, *, mode="bilinear", padding_mode="zeros", align_corners=False,
                use_precomputed_grid=False, batch_output_channels=False, memory_config=None,
                compute_kernel_config=None):
    """Bilinear grid_sample with one grid point per output pixel (K = 1). The four corner products
    are summed in float32 and rounded once to the input's dtype (the kernel's reduce on the FPU is
    modelled as exact). A standard (normalized) grid is turned into weights as the precomputed
    path does; the device's own float math for that case is not modelled bit for bit."""
    op = "grid_sample"
    x = _on_device(input_tensor, op)
    g = _on_device(grid, op, "grid")
    if len(x.shape) != 4 or len(g.shape) != 4:
        raise Error(f"{current_layer(op)}: input and grid must be 4D, got {list(x.shape)} and {list(g.shape)}")
    n, h, w, c = (int(v) for v in x.shape)
    gn, ho, wo, gc = (int(v) for v in g.shape)
    attrs = GridSampleArgs(mode=mode, padding_mode=padding_mode,
                           use_precomputed_grid=bool(use_precomputed_grid), batch=n, grid_batch=gn,
                           out_shape=(1, 1, gn * ho * wo, c))
    _check(op, [x, g], attrs, memspec(memory_config) if memory_config is not None else None)
    per = 6 if use_precomputed_grid else 2
    if mode != "bilinear" or batch_output_channels or gc != per:
        raise Error(f"{current_layer(op)}: sim models bilinear grid_sample with one point per output "
                    f"(grid [N, H, W, {per}]), got mode {mode!r}, grid {list(g.shape)}, "
                    f"batch_output_channels={batch_output_channels}")
    if use_precomputed_grid:
        bits = _bf16_bits(g._data[..., 0:2]).to(torch.int64)
        h0, w0, wts = bits[..., 0], bits[..., 1], g._data[..., 2:6]
    else:
        h0, w0, wts = _bilinear_corners(g._data.float(), h, w, bool(align_corners))
        wts = wts.to(torch.bfloat16).float()   # the reader hands the weights to the FPU as bf16
    flat = x._data.reshape(n, h * w, c)
    y = torch.zeros((n, ho * wo, c), dtype=torch.float32)
    for k, (dh, dw) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        hh, ww = h0 + dh, w0 + dw
        valid = ((hh >= 0) & (hh < h) & (ww >= 0) & (ww < w)).reshape(n, -1, 1)
        idx = (hh.clamp(0, h - 1) * w + ww.clamp(0, w - 1)).reshape(n, -1, 1).expand(-1, -1, c)
        corner = torch.gather(flat, 1, idx)
        y += torch.where(valid, wts[..., k].reshape(n, -1, 1) * corner, torch.zeros(()))
    y = y.reshape(n, ho, wo, c)
    lay = _out_layout(op, [x, g], attrs, memory_config, [x._flat4(), g._flat4()])
    return _emit(y, x.dtype, T.Layout.ROW_MAJOR, lay.memory, x._device, op, owned=True)
