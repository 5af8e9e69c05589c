"""ttnn.conv2d on the sim backend, with its weight and bias preparation (``prepare_conv_weights``
/ ``prepare_conv_bias``: ttnn's prepared weight matrix in the weights dtype, kept in its compute
form); conv_transpose2d's sim (``ops/conv_transpose2d/sim.py``) prepares through the same code."""
from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from .sharding import is_matmul_conv, kernel_stride_fold
from ..base import pads
from ...backends.sim import onednn
from ...backends.sim import types as T
from ...backends.sim.numerics import (DEVICE_GRID, _act_name, _apply_unary, _effective_keep, _emit,
                                      _fidelity, _fidelity_extra, _fp32_dest, _layout_name, _matmul_bias, _operand,
                                      _operand_low,
                                      _out_layout, _pair, _round_up, _truncate)
from ...backends.sim.numerics import _FIDELITY_BITS  # noqa: F401  (the fidelity table the conv reads, tests/test_sim.py)
from ...backends.sim.tensor import _MEM_NAMES  # noqa: E402  (enum -> name: layout.TTNN_MEMORY_LAYOUTS)
from ...backends.sim.tensor import (SimTensor, _check, _on_device, current_layer, dtype_name, quantize,
                                    quantize_)
from ...errors import Error
from .rules import ConvArgs

__all__ = ["conv2d", "prepare_conv_weights", "prepare_conv_bias", "mark_prequantized"]
#: the ttnn functions of ``__all__`` (``mark_prequantized`` is the sim's own, prequantize.py)
TTNN_FUNCTIONS = ("conv2d", "prepare_conv_weights", "prepare_conv_bias")

_log = logging.getLogger(__name__)

# Number of conv weight preparations performed (tests use it to check that prepared weights are
# reused instead of being prepared again).
prepare_count = 0


def _weights_dtype(conv_config, weight: SimTensor) -> T.DataType:
    wd = getattr(conv_config, "weights_dtype", None) if conv_config is not None else None
    return wd or weight.dtype


def _prep_key(in_channels, out_channels, kernel, groups, wdtype, input_layout):
    return ("w", in_channels, out_channels, tuple(kernel), groups, wdtype, input_layout)


def _prepare_weight(weight: SimTensor, *, in_channels: int, out_channels: int, kernel, groups: int,
                    wdtype: T.DataType, input_layout: T.Layout, device, matmul: bool = False) -> SimTensor:
    """Raw OIHW weights -> ttnn's prepared weight matrix [1, 1, kh*kw*Cin_pad, Cout_pad].

    Row r = (kh_i*kw + kw_i)*Cin_pad + ci, column = output channel, zero padded (tt-metal
    prepare_conv2d_weights.cpp: to_weight_tile_layout / to_weight_interleaved_mm_layout; grouped
    convs are first expanded to a dense block-diagonal weight, conv_group_weight_zero_pad_helper).
    Block-float exponents are shared by 16 consecutive columns of one row, so quantizing this
    matrix is what the card stores, whatever the block-sharded row interleaving."""
    global prepare_count
    weight._live("prepare_conv_weights")
    key = _prep_key(in_channels, out_channels, kernel, groups, wdtype, input_layout)
    hit = _cached_preparation(weight, key, "conv2d")
    if hit is not None:
        return hit
    w = weight._data.float()
    kh, kw = kernel
    if tuple(w.shape) != (out_channels, in_channels // groups, kh, kw):
        raise Error(f"{current_layer('conv2d')}: weight shape {list(w.shape)} does not match "
                    f"[out_channels={out_channels}, in_channels/groups={in_channels // groups}, {kh}, {kw}]")
    prepare_count += 1
    cin_pad = _round_up(in_channels, TILE_ALIGN if input_layout == T.Layout.TILE else RM_ALIGN)
    cout_pad = _round_up(out_channels, 32)
    shape = (1, 1, kh * kw * cin_pad, cout_pad)
    # Only the compute form is kept (the matrix is rebuilt from it when asked for, _lazy): for a
    # conv on the matmul path (``matmul``: 1x1, stride 1, unpadded) the [Cin, Cout] matrix it
    # multiplies by, else OIHW (grouped: the diagonal blocks) in channels_last for F.conv2d.
    # A weight marked prequantized (``mark_prequantized``: the weight cache's entries) already
    # holds these values.
    pre = weight._cache is not None and weight._cache.get(("prequantized", wdtype), False)
    q = w if pre else quantized_conv_weight(w, groups, wdtype)
    if matmul and (kh, kw) == (1, 1) and groups == 1:
        form = {"kn": q.permute(2, 3, 1, 0).reshape(in_channels, out_channels).contiguous()}
    else:
        form = {"oihw": q.contiguous(memory_format=torch.channels_last)}
    del q
    out = SimTensor(None, wdtype, T.Layout.TILE, T.DRAM_MEMORY_CONFIG, device, shape)
    out._prep = {"kind": "conv_weight", "in_channels": in_channels, "out_channels": out_channels,
                 "kernel": (kh, kw), "groups": groups, "dtype": wdtype, "cin_pad": cin_pad}
    out._cache = form
    out._lazy = lambda: _weight_matrix(out)
    return _remember_preparation(weight, key, out)


def quantized_conv_weight(w: torch.Tensor, groups: int, wdtype: T.DataType) -> torch.Tensor:
    """OIHW ``w`` (float32) with the values ttnn's prepared weight matrix holds in ``wdtype``
    (``_prepare_weight``): rounded as the rows of the [kh*kw*Cin, Cout] matrix, exponent groups
    along the output channels (the matrix's Cin/Cout zero padding changes no group). Grouped
    convs: as the dense block-diagonal matrix (``_prepare_grouped``). Rounding these values again
    gives them back unchanged. A fresh tensor; ``w`` is not modified."""
    if groups > 1:
        return _prepare_grouped(w, groups, wdtype)
    o, i, kh, kw = w.shape
    m = w.permute(2, 3, 1, 0).clone(memory_format=torch.contiguous_format)    # [kh, kw, I, O]: ours
    m = quantize_(m.reshape(1, 1, kh * kw * i, o), wdtype)
    return m.reshape(kh, kw, i, o).permute(3, 2, 0, 1)


def mark_prequantized(weight, dtype: T.DataType) -> None:
    """Sim only (no ttnn function): host conv weights ``weight`` already hold
    ``quantized_conv_weight``'s values for weights ``dtype`` (the prepared-weight cache stores
    them so, ``backends/sim/prequantize.py``), so their preparation skips the rounding (same
    values: rounding them again changes nothing). A multi-device tensor marks every chip's."""
    for t in getattr(weight, "shards", None) or [weight]:
        if t._cache is None:
            t._cache = {}
        t._cache[("prequantized", dtype)] = True


def _cached_preparation(weight: SimTensor, key: tuple, op: str) -> SimTensor | None:
    """The weight's earlier preparation under ``key`` (layers prepare once per backend and
    geometry), or None; a tensor that is itself a prepared weight is refused."""
    if weight._cache is not None and key in weight._cache:
        return weight._cache[key]
    if weight._prep is not None:
        raise Error(f"{current_layer(op)}: weight is already prepared")
    return None


def _remember_preparation(weight: SimTensor, key: tuple, out: SimTensor) -> SimTensor:
    if weight._cache is None:
        weight._cache = {}
    weight._cache[key] = out
    return out


def _prepare_grouped(w: torch.Tensor, groups: int, wdtype: T.DataType) -> torch.Tensor:
    """The diagonal blocks (OIHW, the compute form) of a grouped conv's dense block-diagonal
    weight matrix (tt-metal convert_conv_weight_tensor_to_grouped_layout: zeros outside each
    group's block) as quantizing that matrix stores them -- without building or quantizing the
    zeros (_weight_matrix rebuilds the dense matrix when asked for).

    Block-float exponents are shared by the 16-aligned column blocks of a row; a row (tap, input
    channel of group j) is nonzero only in group j's output columns, so quantizing, per group, the
    16-aligned column window around them gives the same bits as quantizing the whole matrix (an
    all-zero block stays zero). A depthwise 960-channel 3x3 matrix has 8640 x 960 entries but
    8640 x 16 to convert."""
    out_c, ig, kh, kw = w.shape
    og, kk = out_c // groups, kh * kw
    g = torch.arange(groups)
    first = g * og
    c0 = (first // 16) * 16
    off = first - c0
    width = _round_up(int(off.max()) + og, 16)
    vals = w.reshape(groups, og, ig, kk).permute(0, 3, 2, 1)            # [G, taps, ig, og]
    cols = (off[:, None] + torch.arange(og)[None, :])                     # [G, og]
    idx = cols[:, None, None, :].expand(groups, kk, ig, og)
    win = torch.zeros(groups, kk, ig, width)
    win.scatter_(3, idx, vals)
    # Only the 16-value groups holding a nonzero are converted (two per 32-wide tile row):
    # all-zero groups stay zero, and the converter's slow exact path is for such groups.
    flat = win.reshape(-1, 16)
    nz = (flat != 0).any(dim=1)
    sel = flat[nz]
    if sel.shape[0] % 2:
        sel = torch.cat([sel, sel[-1:]])
    q = quantize(sel.reshape(1, 1, -1, 32), wdtype).reshape(-1, 16)[:int(nz.sum())]
    flat = flat.clone()
    flat[nz] = q
    qv = flat.reshape(win.shape).gather(3, idx)                           # [G, taps, ig, og]
    return qv.permute(0, 3, 2, 1).reshape(out_c, ig, kh, kw)


def _weight_matrix(wt: SimTensor) -> torch.Tensor:
    """The prepared weight's stored matrix [1, 1, kh*kw*Cin_pad, Cout_pad], rebuilt from its
    compute form (zero padding included)."""
    p = wt._prep
    kh, kw = p["kernel"]
    cin, cout, groups, cin_pad = p["in_channels"], p["out_channels"], p["groups"], p["cin_pad"]
    m = torch.zeros(kh, kw, cin_pad, wt.shape[-1])
    oihw = _conv_weight_oihw(wt)
    og, ig = cout // groups, cin // groups
    for g in range(groups):             # grouped: the dense block-diagonal matrix
        m[:, :, g * ig:(g + 1) * ig, g * og:(g + 1) * og] = oihw[g * og:(g + 1) * og].permute(2, 3, 1, 0)
    return m.reshape(1, 1, -1, wt.shape[-1])


def _conv_weight_oihw(wt: SimTensor) -> torch.Tensor:
    """OIHW (channels_last) compute form of a prepared weight; derived (not kept) from its
    oneDNN-packed form when only that is kept (``_conv_weight_for``), or from the [Cin, Cout]
    form of a 1x1 kernel used by a conv that is not a matmul (e.g. stride 2)."""
    c = wt._cache
    if "oihw" in c:
        return c["oihw"]
    packed = c.get(("packed", None))
    if packed is not None:
        return onednn.unpack(packed)
    kn = c["kn"]
    return kn.t().reshape(kn.shape[1], kn.shape[0], 1, 1).contiguous(memory_format=torch.channels_last)


def _conv_weight_form(wt: SimTensor, kind: str, a_bits: int | None, *, keep_form: bool = True) -> torch.Tensor:
    """The compute form ``kind`` ("kn" or "oihw") truncated for fidelity ``a_bits``: kept on the
    weight (unless not ``keep_form``) when the truncation changes values (a second copy, LoFi
    only), else the form itself."""
    keep = _effective_keep(wt.dtype, a_bits)
    key = (kind, keep)
    hit = wt._cache.get(key)
    if hit is not None:
        return hit
    if kind == "kn":
        base = wt._cache.get("kn")
        if base is None:
            o = wt._cache["oihw"]
            base = o.reshape(o.shape[0], o.shape[1]).t().contiguous()
    else:
        base = _conv_weight_oihw(wt)
    if keep is None:
        return base       # the kept form, or one derived per call (a 1x1 kernel with stride 2)
    form = _truncate(base, keep)
    if kind == "oihw":
        form = form.contiguous(memory_format=torch.channels_last)
    if keep_form:
        wt._cache[key] = form
    return form


def _conv_weight_for(wt: SimTensor, a_bits: int | None, stride, pad, dilation, groups: int,
                     input_shape) -> tuple[torch.Tensor, bool]:
    """(the OIHW compute form truncated for fidelity ``a_bits``, packed?) for this conv: packed in
    oneDNN's blocked layout (``onednn.pack``: no per-call weight reorder) when F.conv2d would run
    it on oneDNN, else dense. The form is made once and kept instead of the other one: untruncated,
    it is the weight's only copy (``_conv_weight_oihw`` unpacks it when asked for)."""
    keep = _effective_keep(wt.dtype, a_bits)
    c = wt._cache
    pkey = ("packed", keep)
    wshape = (wt._prep["out_channels"], wt._prep["in_channels"] // groups, *wt._prep["kernel"])
    if onednn.used_by_torch(input_shape, wshape, stride, pad, dilation, groups):
        packed = c.get(pkey)
        if packed is None and onednn.available():
            dense = _conv_weight_form(wt, "oihw", a_bits, keep_form=False)
            c.pop(("oihw", keep), None)           # the packed form replaces the dense one
            base = keep is None and c.get("oihw") is dense
            if base:
                del c["oihw"]
            box = [dense]
            del dense
            packed, back = onednn.pack(box.pop, stride, pad, dilation, groups, input_shape)
            if packed is not None:
                c[pkey] = packed
            else:                                 # packing failed: keep the dense form
                c["oihw" if base else ("oihw", keep)] = back
        if packed is not None:
            return packed, True
    elif keep is None and "oihw" not in c and pkey in c:
        c["oihw"] = onednn.unpack(c.pop(pkey))          # this geometry (or thread count) wants it dense
    return _conv_weight_form(wt, "oihw", a_bits), False


def _conv_call_padding(h: int, w: int, pad4) -> tuple[tuple[int, int] | None, tuple[int, int], tuple[int, int]]:
    """(explicit F.pad amounts or None, the conv's own symmetric padding, padded input H x W): the
    sim pads an asymmetrically padded input itself and runs the conv unpadded."""
    pt, pb, pl, pr = pad4
    if (pt, pl) != (pb, pr):
        return (pl, pr, pt, pb), (0, 0), (h + pt + pb, w + pl + pr)
    return None, (pt, pl), (h, w)


TILE_ALIGN = 32     # Cin padding of the weight matrix for TILE inputs (rows only; values unaffected)
RM_ALIGN = 16


def _bias_operand(bias_tensor, out_channels: int, wt: SimTensor, device, op: str):
    """A conv's bias (conv2d, conv_transpose2d): prepared here from a raw host tensor (once per
    raw tensor), or checked when the caller prepared it; None without one."""
    if bias_tensor is None:
        return None
    if bias_tensor._prep is None:
        return _prepare_bias(bias_tensor, out_channels, wt.dtype, device)
    bt = bias_tensor._live(op)
    _check_prepared(bt, "bias", kind="conv_bias", out_channels=out_channels)
    return bt


def _prepare_bias(bias: SimTensor, out_channels: int, wdtype: T.DataType, device) -> SimTensor:
    bias._live("prepare_conv_bias")
    key = ("b", out_channels, wdtype)
    if bias._cache is not None and key in bias._cache:
        return bias._cache[key]
    if bias._prep is not None:
        raise Error(f"{current_layer('conv2d')}: bias is already prepared")
    b = bias._data.float().reshape(-1)
    if b.numel() != out_channels:
        raise Error(f"{current_layer('conv2d')}: bias has {b.numel()} values, expected out_channels="
                    f"{out_channels}")
    row = torch.zeros(1, 1, 1, _round_up(out_channels, 32))
    row[..., :out_channels] = b
    row = quantize(row, wdtype)        # tt-metal converts the bias to the weights dtype
    out = SimTensor(row, wdtype, T.Layout.TILE, T.DRAM_MEMORY_CONFIG, device)
    out._prep = {"kind": "conv_bias", "out_channels": out_channels, "dtype": wdtype}
    out._cache = {"vec": row.reshape(-1)[:out_channels].contiguous()}
    if bias._cache is None:
        bias._cache = {}
    bias._cache[key] = out
    return out


def prepare_conv_weights(*, weight_tensor, input_memory_config, input_layout, weights_format, in_channels,
                         out_channels, batch_size, input_height, input_width, kernel_size, stride,
                         padding, dilation, has_bias, groups, device, input_dtype, output_dtype=None,
                         conv_config=None, compute_config=None, slice_config=None):
    if weights_format != "OIHW":
        raise Error(f"prepare_conv_weights: weights_format {weights_format!r} (only 'OIHW' is supported)")
    kernel, stride, pad4, dilation = _pair(kernel_size), _pair(stride), pads(padding), _pair(dilation)
    is_mm = _is_mm_conv(kernel, stride, pad4, dilation, groups)
    wt = _prepare_weight(weight_tensor, in_channels=in_channels, out_channels=out_channels,
                         kernel=kernel, groups=groups, wdtype=_weights_dtype(conv_config, weight_tensor),
                         input_layout=input_layout, device=device, matmul=is_mm)
    if not is_mm:
        # the compute form conv2d will use, made now so that the first call costs what every call costs
        _, pad_arg, (hp, wp) = _conv_call_padding(input_height, input_width, pad4)
        for a_bits in (_fidelity(compute_config)[0], *(_fidelity_extra(compute_config) or ())[:1]):
            _conv_weight_for(wt, a_bits, stride, pad_arg, dilation, groups, (batch_size, in_channels, hp, wp))
    return wt


def _is_mm_conv(kernel, stride, pad4, dilation, groups) -> bool:
    """conv2d_utils.cpp use_matmul_for_1x1_conv: such convs run as ttnn::linear inside conv2d
    (ops/conv2d/sharding.py is_matmul_conv holds the one definition)."""
    return is_matmul_conv(kernel, stride, pad4, dilation, groups)


def prepare_conv_bias(*, bias_tensor, input_memory_config, input_layout, in_channels, out_channels,
                      batch_size, input_height, input_width, kernel_size, stride, padding, dilation,
                      groups, device, input_dtype, output_dtype=None, conv_config=None,
                      compute_config=None, slice_config=None):
    return _prepare_bias(bias_tensor, out_channels, _weights_dtype(conv_config, bias_tensor), device)


def _check_prepared(t: SimTensor, what: str, **want):
    p = t._prep
    for k, v in want.items():
        if p.get(k) != v:
            raise Error(f"{current_layer('conv2d')}: prepared {what} has {k}={p.get(k)}, the conv asks {v}")


_SLICE_NAMES = {T.SliceTypeEnum.DRAMSliceHeight: "height", T.SliceTypeEnum.DRAMSliceWidth: "width"}


def _dram_slice(slice_config) -> dict | None:
    """The rules' ``slice`` attr for a DRAM slice_config; None when conv2d takes its L1 path.

    conv2d_utils.cpp determine_conv2d_execution_path: an L1_FULL slice_config (ttnn.Op2DL1FullSliceConfig)
    means the L1 path, a DRAM_HEIGHT / DRAM_WIDTH one means conv2d_DRAM."""
    if slice_config is None:
        return None
    st = getattr(slice_config, "slice_type", None)
    if not isinstance(st, T.SliceTypeEnum):
        raise Error(f"{current_layer('conv2d')}: slice_config must be a ttnn.Op2DSliceConfig, got {slice_config!r}")
    if st == T.SliceTypeEnum.L1Full:
        return None
    return {"type": _SLICE_NAMES[st], "num_slices": slice_config.num_slices}


def conv2d(*, input_tensor, weight_tensor, device, in_channels, out_channels, batch_size, input_height,
           input_width, kernel_size, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, dtype=None,
           bias_tensor=None, conv_config=None, compute_config=None, memory_config=None, slice_config=None,
           return_output_dim=False, return_weights_and_bias=False):
    op = "conv2d"
    x = _on_device(input_tensor, op)
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    pt, pb, pl, pr = pads(padding)
    n, h, w, c = batch_size, input_height, input_width, in_channels
    if x.logical_volume() != n * h * w * c or x.shape[-1] != c:
        raise Error(f"{current_layer(op)}: input {list(x.shape)} is not [1, 1, {n}*{h}*{w}, {c}] "
                    "(batch_size, input_height, input_width, in_channels)")
    if in_channels % groups or out_channels % groups:
        raise Error(f"{current_layer(op)}: channels {in_channels}->{out_channels} not divisible by groups={groups}")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise Error(f"{current_layer(op)}: output {oh}x{ow} is empty")
    cfg = conv_config or T.Conv2dConfig()
    out_dtype = dtype or x.dtype
    out_layout = cfg.output_layout
    is_mm = _is_mm_conv((kh, kw), (sh, sw), (pt, pb, pl, pr), (dh, dw), groups)
    sliced = _dram_slice(slice_config)
    shard_layout = _MEM_NAMES.get(cfg.shard_layout) if cfg.shard_layout is not None else None
    rows_out = n * oh * ow
    attrs = ConvArgs(shard_layout=shard_layout, output_layout=_layout_name(out_layout),
                     dtype=dtype_name(out_dtype), is_mm_conv=is_mm, in_channels=in_channels,
                     out_shape=(1, 1, rows_out, out_channels), device_grid=DEVICE_GRID,
                     override_sharding_config=cfg.override_sharding_config,
                     act_block_h_override=int(getattr(cfg, "act_block_h_override", 0) or 0),
                     activation=_act_name(cfg.activation), slice=sliced,
                     output_hw=(oh, ow) if sliced is not None else None,
                     fold=1 if sliced is not None else kernel_stride_fold(
                         (kh, kw), (sh, sw), (pt, pb, pl, pr), (dh, dw), (h, w), x._layout().memory))
    if sliced is not None:
        if memory_config is not None:
            # conv2d_DRAM only logs this; the output is DRAM interleaved whatever was asked
            _log.warning("%s: Conv2D DRAM doesn't support specifying memory config, as the output will "
                         "always be DRAM Interleaved", current_layer(op))
    _check(op, [x], attrs)

    # weights: raw host OIHW (prepared here, once per raw tensor) or already prepared
    wdt = _weights_dtype(cfg, weight_tensor)
    if weight_tensor._prep is None:
        wt = _prepare_weight(weight_tensor, in_channels=in_channels, out_channels=out_channels,
                             kernel=(kh, kw), groups=groups, wdtype=wdt, input_layout=x.layout, device=device,
                             matmul=is_mm)
    else:
        wt = weight_tensor._live(op)
        _check_prepared(wt, "weight", kind="conv_weight", in_channels=in_channels,
                        out_channels=out_channels, kernel=(kh, kw), groups=groups)
    bt = _bias_operand(bias_tensor, out_channels, wt, device, op)

    a_bits, b_bits = _fidelity(compute_config)
    xin = _operand(x, b_bits)
    extra = _fidelity_extra(compute_config)
    lo = _operand_low(x, extra[1]) if extra is not None else None
    if is_mm:
        # tt-metal runs a 1x1 stride-1 conv as ttnn::linear (conv2d.cpp mm_conv branch); compute it
        # as the sim's linear does -- one [M, K] x [K, N] torch.matmul on the stored weights, bias
        # added in place -- so both lowerings accumulate in the same order and give the same bits.
        y = _matmul_bias(xin.reshape(rows_out, c), _conv_weight_form(wt, "kn", a_bits),
                         bt._cache["vec"] if bt is not None else None).reshape(1, 1, rows_out, -1)
        if lo is not None:          # HiFi3's third phase (numerics._FIDELITY_EXTRA)
            y.add_(torch.mm(lo.reshape(rows_out, c), _conv_weight_form(wt, "kn", extra[0])).reshape(y.shape))
        y = _apply_unary(y, cfg.activation, inplace=True, fp32_dest=_fp32_dest(compute_config))
    else:
        xin = xin.reshape(n, h, w, c).permute(0, 3, 1, 2)           # NCHW view, channels_last strides
        explicit, pad_arg, _ = _conv_call_padding(h, w, (pt, pb, pl, pr))
        if explicit is not None:
            xin = F.pad(xin, explicit)
        # A DRAM-sliced conv computes the same sums: every output pixel's dot product over
        # (kh, kw, Cin) is the same, each slice only reads the input rows it needs (halo included).
        bias = bt._cache["vec"] if bt is not None else None
        weight, packed = _conv_weight_for(wt, a_bits, (sh, sw), pad_arg, (dh, dw), groups, tuple(xin.shape))
        y = _conv_form(xin, weight, packed, bias, (sh, sw), pad_arg, (dh, dw), groups)
        if lo is not None:          # HiFi3's third phase (numerics._FIDELITY_EXTRA)
            lo = lo.reshape(n, h, w, c).permute(0, 3, 1, 2)
            lo = F.pad(lo, explicit) if explicit is not None else lo
            weight, packed = _conv_weight_for(wt, extra[0], (sh, sw), pad_arg, (dh, dw), groups, tuple(lo.shape))
            y.add_(_conv_form(lo, weight, packed, None, (sh, sw), pad_arg, (dh, dw), groups))
        y = _apply_unary(y, cfg.activation, inplace=True, fp32_dest=_fp32_dest(compute_config))
        y = y.permute(0, 2, 3, 1).reshape(1, 1, rows_out, out_channels)

    return _conv_outputs(op, y, x, attrs, memory_config, out_dtype, out_layout, cfg,
                         (oh, ow) if return_output_dim else None,
                         (wt, bt) if return_weights_and_bias else None)


def _conv_form(xin, weight, packed: bool, bias, stride, pad, dilation, groups) -> torch.Tensor:
    """The conv of NCHW ``xin`` by a compute form of ``_conv_weight_for`` (packed or dense)."""
    if packed:
        return onednn.conv(xin, weight, bias, stride, pad, dilation, groups)
    return F.conv2d(xin, weight, bias, stride, pad, dilation, groups)


def _conv_outputs(op, y, x, attrs, memory_config, out_dtype, out_layout, cfg, dims, weights):
    """What conv2d / conv_transpose2d return: the output in its format and memory config (the
    input freed when ``deallocate_activation``), then the output size and the prepared weights
    when asked for (``return_output_dim`` / ``return_weights_and_bias``)."""
    lay = _out_layout(op, [x], attrs, memory_config, [x._flat4()])
    out = _emit(y, out_dtype, out_layout, lay.memory, x._device, op, owned=True)
    if cfg.deallocate_activation:
        x._allocated, x._data = False, None
    result = [out] + [r for r in (dims, weights) if r is not None]
    return result[0] if len(result) == 1 else tuple(result)
