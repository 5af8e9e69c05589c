"""ttnn.conv_transpose2d on the sim backend, computed the way ttnn 0.81.1 computes it.

tt-metal lowers a transposed convolution to its conv2d micro-op
(``ttnn/cpp/ttnn/operations/conv/conv_transpose2d/conv_transpose2d.cpp`` conv_transpose2d_L1):

* weights: torch's ``[Cin, Cout/groups, kh, kw]`` (``weights_format="IOHW"``) are turned into a
  conv2d weight ``[Cout, Cin, kh, kw]`` with the kernel mirrored (``mirror_kernel=True``,
  prepare_conv_transpose2d_weights.cpp ``transform_weights_for_conv_transpose2d``); a grouped one
  is first expanded to the dense block-diagonal ``[Cin, Cout, kh, kw]``
  (``convert_conv_weight_tensor_to_grouped_layout_for_conv_transpose2d``) and prepared with
  groups=1. Then conv2d's preparation: the ``[kh*kw*Cin_pad, Cout_pad]`` matrix in the weights
  dtype (the sim quantizes the same matrix, ``ops/conv2d/sim.py _prepare_weight``);
* input: the halo op with ``is_transpose`` inserts ``stride - 1`` zeros between input pixels and
  pads ``dilation * (k - 1) - padding`` on the top/left and that plus ``output_padding`` on the
  bottom/right (sliding_window.cpp ``get_transposed_full_input_shape`` /
  ``get_transposed_real_padding``);
* the conv2d micro-op then runs with stride 1 and no padding over that "full input".

So the sim rounds the input and the prepared weights to their formats, convolves the zero-inserted
padded input with the mirrored weights in float32 (as conv2d does), fuses the activation and
rounds the output to its dtype.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..base import pads
from ...backends.sim import types as T
from ...backends.sim.numerics import (DEVICE_GRID, _apply_unary, _fidelity, _fidelity_extra, _fp32_dest,
                                      _layout_name, _matmul_bias, _operand, _operand_low, _pair)
from ...backends.sim.tensor import SimTensor, _check, _on_device, current_layer, dtype_name
from ...errors import Error
from .rules import ConvTransposeArgs
from ..conv2d.sim import (_bias_operand, _cached_preparation, _check_prepared, _conv_outputs,
                          _conv_weight_form, _is_mm_conv, _prepare_bias, _prepare_weight,
                          _remember_preparation, _weights_dtype)

__all__ = ["conv_transpose2d", "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias"]
TTNN_FUNCTIONS = ("conv_transpose2d", "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias")

OP = "conv_transpose2d"


def transposed_geometry(h: int, w: int, kernel, stride, padding, output_padding, dilation):
    """(out_h, out_w, (top, bottom, left, right) padding of the zero-inserted input) -- the
    sliding-window transform of ttnn's conv_transpose2d (its full input is
    ``(h - 1) * stride + 1 + top + bottom`` rows)."""
    kh, kw = kernel
    sh, sw = stride
    pt, pb, pl, pr = padding
    oph, opw = output_padding
    dh, dw = dilation
    oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
    ow = (w - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
    real = (dh * (kh - 1) - pt, dh * (kh - 1) - pb + oph, dw * (kw - 1) - pl, dw * (kw - 1) - pr + opw)
    return oh, ow, real


def mirrored_conv_weight(w: torch.Tensor, groups: int, mirror: bool = True) -> torch.Tensor:
    """torch ConvTranspose2d weight [Cin, Cout/g, kh, kw] -> the conv2d weight [Cout, Cin/g, kh, kw]
    whose correlation over the zero-inserted input is the transposed convolution (kernel mirrored,
    in/out swapped per group): the diagonal blocks of ttnn's dense transformed weight."""
    cin, og, kh, kw = w.shape
    ig = cin // groups
    out = w.reshape(groups, ig, og, kh, kw).transpose(1, 2).reshape(groups * og, ig, kh, kw)
    return out.flip(2, 3) if mirror else out


def _prepare_transposed(weight: SimTensor, *, in_channels, out_channels, kernel, groups, wdtype,
                        input_layout, device, mirror_kernel, matmul) -> SimTensor:
    weight._live("prepare_conv_transpose2d_weights")
    key = ("wt", in_channels, out_channels, tuple(kernel), groups, wdtype, input_layout, bool(mirror_kernel))
    hit = _cached_preparation(weight, key, OP)
    if hit is not None:
        return hit
    w = weight._data.float()
    kh, kw = kernel
    if tuple(w.shape) != (in_channels, out_channels // groups, kh, kw):
        raise Error(f"{current_layer(OP)}: weight shape {list(w.shape)} does not match "
                    f"[in_channels={in_channels}, out_channels/groups={out_channels // groups}, {kh}, {kw}] "
                    "(IOHW, torch's ConvTranspose2d layout)")
    conv_w = SimTensor(mirrored_conv_weight(w, groups, mirror_kernel).contiguous(), weight.dtype,
                       T.Layout.ROW_MAJOR, None, None)
    # the block-diagonal dense matrix ttnn prepares with groups=1 stores the same bits as the
    # grouped preparation of its diagonal blocks (conv2d's sim, _prepare_grouped)
    out = _prepare_weight(conv_w, in_channels=in_channels, out_channels=out_channels, kernel=(kh, kw),
                          groups=groups, wdtype=wdtype, input_layout=input_layout, device=device,
                          matmul=matmul)
    out._prep = dict(out._prep, kind="conv_transpose_weight", mirror_kernel=bool(mirror_kernel))
    return _remember_preparation(weight, key, out)


def prepare_conv_transpose2d_weights(*, weight_tensor, input_memory_config, input_layout, weights_format,
                                     in_channels, out_channels, batch_size, input_height, input_width,
                                     kernel_size, stride, padding, output_padding=(0, 0), dilation, has_bias,
                                     groups, device, input_dtype, output_dtype=None, conv_config=None,
                                     compute_config=None, dram_slice_config=None, mirror_kernel=True):
    if weights_format != "IOHW":
        raise Error(f"prepare_conv_transpose2d_weights: weights_format {weights_format!r} (PyTorch's "
                    "ConvTranspose2d weights are 'IOHW')")
    kernel = _pair(kernel_size)
    return _prepare_transposed(weight_tensor, in_channels=in_channels, out_channels=out_channels,
                               kernel=kernel, groups=groups, wdtype=_weights_dtype(conv_config, weight_tensor),
                               input_layout=input_layout, device=device, mirror_kernel=mirror_kernel,
                               matmul=_is_mm_conv(kernel, _pair(stride), pads(padding), _pair(dilation), groups))


def prepare_conv_transpose2d_bias(*, bias_tensor, input_memory_config, input_layout, in_channels, out_channels,
                                  batch_size, input_height, input_width, kernel_size, stride, padding, dilation,
                                  groups, device, input_dtype, output_dtype=None, conv_config=None,
                                  compute_config=None, dram_slice_config=None):
    return _prepare_bias(bias_tensor, out_channels, _weights_dtype(conv_config, bias_tensor), device)


def conv_transpose2d(*, input_tensor, weight_tensor, device, in_channels, out_channels, batch_size,
                     input_height, input_width, kernel_size, stride=(1, 1), padding=(0, 0),
                     output_padding=(0, 0), dilation=(1, 1), groups=1, dtype=None, bias_tensor=None,
                     conv_config=None, compute_config=None, memory_config=None, dram_slice_config=None,
                     mirror_kernel=True, return_output_dim=False, return_weights_and_bias=False):
    x = _on_device(input_tensor, OP)
    kh, kw = _pair(kernel_size)
    stride, dilation, opad = _pair(stride), _pair(dilation), _pair(output_padding)
    pad4 = pads(padding)
    n, h, w, c = batch_size, input_height, input_width, in_channels
    if x.logical_volume() != n * h * w * c or x.shape[-1] != c:
        raise Error(f"{current_layer(OP)}: input {list(x.shape)} is not [1, 1, {n}*{h}*{w}, {c}] "
                    "(batch_size, input_height, input_width, in_channels)")
    if in_channels % groups or out_channels % groups:
        raise Error(f"{current_layer(OP)}: channels {in_channels}->{out_channels} not divisible by "
                    f"groups={groups}")
    if dram_slice_config is not None:
        raise Error(f"{current_layer(OP)}: the sim models conv_transpose2d's L1 path only "
                    "(no dram_slice_config)")
    oh, ow, real = transposed_geometry(h, w, (kh, kw), stride, pad4, opad, dilation)
    cfg = conv_config or T.Conv2dConfig()
    out_dtype = dtype or x.dtype
    is_mm = _is_mm_conv((kh, kw), stride, pad4, dilation, groups)
    shard_layout = {T.TensorMemoryLayout.HEIGHT_SHARDED: "height_sharded",
                    T.TensorMemoryLayout.WIDTH_SHARDED: "width_sharded",
                    T.TensorMemoryLayout.BLOCK_SHARDED: "block_sharded"}.get(cfg.shard_layout) \
        if cfg.shard_layout is not None else None
    rows_out = n * oh * ow
    attrs = ConvTransposeArgs(
        shard_layout=shard_layout, output_layout=_layout_name(cfg.output_layout),
        dtype=dtype_name(out_dtype), in_channels=in_channels,
        out_shape=(1, 1, rows_out, out_channels), device_grid=DEVICE_GRID,
        act_block_h_override=int(getattr(cfg, "act_block_h_override", 0) or 0),
        kernel=(kh, kw), padding=pad4, dilation=dilation)
    _check(OP, [x], attrs)

    wdt = _weights_dtype(cfg, weight_tensor)
    if weight_tensor._prep is None:
        wt = _prepare_transposed(weight_tensor, in_channels=in_channels, out_channels=out_channels,
                                 kernel=(kh, kw), groups=groups, wdtype=wdt, input_layout=x.layout,
                                 device=device, mirror_kernel=mirror_kernel, matmul=is_mm)
    else:
        wt = weight_tensor._live(OP)
        _check_prepared(wt, "weight", kind="conv_transpose_weight", in_channels=in_channels,
                        out_channels=out_channels, kernel=(kh, kw), groups=groups,
                        mirror_kernel=bool(mirror_kernel))
    bt = _bias_operand(bias_tensor, out_channels, wt, device, OP)
    bias = bt._cache["vec"] if bt is not None else None

    a_bits, b_bits = _fidelity(compute_config)
    xin = _operand(x, b_bits)
    extra = _fidelity_extra(compute_config)
    lo = _operand_low(x, extra[1]) if extra is not None else None
    if is_mm:
        # 1x1, stride 1, unpadded: ttnn runs it as ttnn::linear, like conv2d's matmul path
        y = _matmul_bias(xin.reshape(rows_out, c), _conv_weight_form(wt, "kn", a_bits), bias)
        if lo is not None:          # HiFi3's third phase (numerics._FIDELITY_EXTRA)
            y.add_(torch.mm(lo.reshape(rows_out, c), _conv_weight_form(wt, "kn", extra[0])))
        y = _apply_unary(y, cfg.activation, inplace=True,
                         fp32_dest=_fp32_dest(compute_config)).reshape(1, 1, rows_out, -1)
    else:
        sh, sw = stride
        xin = xin.reshape(n, h, w, c).permute(0, 3, 1, 2)
        # the halo's zero insertion and real padding (negative padding cannot happen: the
        # rules require padding <= dilation * (kernel - 1))
        full = torch.zeros(n, c, (h - 1) * sh + 1 + real[0] + real[1], (w - 1) * sw + 1 + real[2] + real[3])
        full[:, :, real[0]:real[0] + (h - 1) * sh + 1:sh, real[2]:real[2] + (w - 1) * sw + 1:sw] = xin
        full = full.contiguous(memory_format=torch.channels_last)
        y = F.conv2d(full, _conv_weight_form(wt, "oihw", a_bits), bias, 1, 0, dilation, groups)
        if lo is not None:          # HiFi3's third phase, on the same zero-inserted grid
            full.zero_()
            full[:, :, real[0]:real[0] + (h - 1) * sh + 1:sh, real[2]:real[2] + (w - 1) * sw + 1:sw] = \
                lo.reshape(n, h, w, c).permute(0, 3, 1, 2)
            y.add_(F.conv2d(full, _conv_weight_form(wt, "oihw", extra[0]), None, 1, 0, dilation, groups))
        y = _apply_unary(y, cfg.activation, inplace=True, fp32_dest=_fp32_dest(compute_config))
        y = y.permute(0, 2, 3, 1).reshape(1, 1, rows_out, out_channels)
    return _conv_outputs(OP, y, x, attrs, memory_config, out_dtype, cfg.output_layout, cfg,
                         (oh, ow) if return_output_dim else None,
                         (wt, bt) if return_weights_and_bias else None)
