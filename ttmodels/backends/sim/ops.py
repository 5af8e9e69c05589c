"""Compute ops of the sim backend: conv2d (+ weight/bias preparation), pools, eltwise, matmul,
upsample, concat, pad.

Every op: checks its operands' layouts with ``rules.check`` (raising LayoutError with the rule id),
computes in float32 with torch on NHWC data viewed as NCHW (channels_last strides, no copies),
rounds the output to the op's output dtype with ``formats.quantize`` in TTNN's [.., rows, C]
layout, and gives the output the memory config ttnn 0.81 would (``rules.output_layout``).
"""
from __future__ import annotations

import builtins
import logging
import math

from typing import Callable

import torch
import torch.nn.functional as F

from ... import activations as A
from ...arch import DEFAULT_GRID
from ...ops.base import window_out
from ... import rules
from ...ops.conv2d.sharding import is_matmul_conv
from ...ops.pool.sharding import pool_output_padded_shape
from ...errors import Error
from ...layout import MemSpec
from . import onednn
from . import types as T
from .tensor import _MEM_NAMES  # noqa: E402  (enum -> name: layout.TTNN_MEMORY_LAYOUTS)
from .tensor import (SimTensor, _check, _on_device, _violation, current_layer, dtype_name, memo_key,
                     memoized, memory_config_for, memspec, memspec_token, quantize, quantize_,
                     validate_memory)

_log = logging.getLogger(__name__)
builtins_slice = builtins.slice   # ``slice`` below is ttnn.slice
DEVICE_GRID = DEFAULT_GRID

# Number of conv weight preparations performed (tests use it to check that prepared weights are
# reused instead of being prepared again).
prepare_count = 0


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _pair(v) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    return v if len(v) == 2 else (v[0], v[0])


def _pad4(p) -> tuple[int, int, int, int]:
    """(pad_h, pad_w) or (top, bottom, left, right) -> (top, bottom, left, right)."""
    if isinstance(p, int):
        return (p, p, p, p)
    p = tuple(int(x) for x in p)
    if len(p) == 2:
        return (p[0], p[0], p[1], p[1])
    if len(p) == 4:
        return p
    raise Error(f"padding must have 2 or 4 values, got {list(p)}")


def _layout_name(layout: T.Layout) -> str:
    return "tile" if layout == T.Layout.TILE else "row_major"


def _out_layout(op, inputs, attrs, requested: T.MemoryConfig | None, shapes):
    req = memspec_token(requested) if requested is not None else None
    key = memo_key("out:" + op, inputs, attrs, (req, tuple(shapes)))
    return memoized(key, lambda: rules.output_layout(
        op, [t._layout() if t is not None else None for t in inputs], attrs,
        memspec(requested) if requested is not None else None, shapes))


def _emit(data: torch.Tensor, dtype: T.DataType, layout: T.Layout, mem: MemSpec | T.MemoryConfig,
          device, op: str, shape=None, owned: bool = False, padded_shape=None) -> SimTensor:
    """The op's output tensor, ``data`` rounded to ``dtype``; ``owned``: ``data`` is a fresh
    result no other tensor shares, so it may be rounded in place; ``padded_shape``: the op's own
    physical shape when it pads beyond the layout's default."""
    mc = mem if isinstance(mem, T.MemoryConfig) else memory_config_for(mem)
    shape = tuple(shape) if shape is not None else tuple(data.shape)
    validate_memory(shape, layout, dtype, mc, op, device, padded_shape)
    return SimTensor(quantize_(data, dtype) if owned else quantize(data, dtype), dtype, layout, mc,
                     device, shape, padded_shape)


# ---------------------------------------------------------------------------------------------
# activations and math fidelity
# ---------------------------------------------------------------------------------------------

def _act_name(act) -> str | None:
    """The canonical table name of a fused activation argument (for the rules), or None."""
    if act is None or isinstance(act, (list, tuple)):
        return None
    if isinstance(act, str):
        return act.lower() if act.lower() in A.ACTIVATIONS else None
    name = act.op_type.name if isinstance(act, T.UnaryWithParam) else getattr(act, "name", "")
    try:
        return A.from_unary(name, getattr(act, "params", []))[0]
    except ValueError:
        return None


def _apply_unary(x: torch.Tensor, act, inplace: bool = False, fp32_dest: bool = False) -> torch.Tensor:
    """``act`` (None, "relu", UnaryWithParam, UnaryOpType or a list of them) applied to ``x``;
    ``inplace`` lets relu reuse ``x`` when the caller owns it. The activations of the one table
    (``ttmodels.activations``) compute what the card's SFPU computes (``sim_apply``) with a 32-bit
    Dest when ``fp32_dest`` (the program's ``fp32_dest_acc_en``)."""
    if act is None:
        return x
    if isinstance(act, (list, tuple)):
        for a in act:
            x = _apply_unary(x, a, inplace, fp32_dest)
        return x
    if isinstance(act, str):
        name, params = act.lower(), []
    elif isinstance(act, T.UnaryWithParam):
        name, params = act.op_type.name.lower(), act.params
    elif isinstance(act, T.UnaryOpType):
        name, params = act.name.lower(), []
    else:
        raise Error(f"unsupported activation {act!r}")
    if name == "relu":
        return x.relu_() if inplace else torch.relu(x)
    if name == "relu6" and inplace:
        # Same kernel as the table's F.relu6 (hardtanh's clamp), NaN and -0.0 bits included
        # (tests/test_sim.py checks it against activations.sim_apply); in place on an owned output
        # it saves a fresh tensor per conv, whose page faults cost 4x the clamp (MobileNetV2).
        return F.relu6(x, inplace=True)
    if name == "relu_max":
        return x.clamp(0.0, params[0])
    if name == "relu_min":
        return torch.maximum(x, torch.tensor(params[0]))
    if name == "exp":
        return torch.exp(x)
    if name == "sqrt":
        return torch.sqrt(x)
    if name == "identity":
        return x
    try:
        canon, approx = A.from_unary(name.upper(), params)
    except ValueError:
        raise Error(f"activation {name!r} is not modelled by the sim backend") from None
    return A.sim_apply(canon, x, approximate=approx, fp32_dest=fp32_dest)


def _fp32_dest(compute_config) -> bool:
    return bool(getattr(compute_config, "fp32_dest_acc_en", False)) if compute_config is not None else False


# Mantissa bits (explicit, hidden one excluded) the FPU multiplier sees per fidelity:
# (srcA = in1 / weights, srcB = in0 / activations). None = all bits of the stored operand.
_FIDELITY_BITS = {T.MathFidelity.LoFi: (4, 6), T.MathFidelity.HiFi2: (None, 6),
                  T.MathFidelity.HiFi3: (None, None), T.MathFidelity.HiFi4: (None, None)}


def _truncate(x: torch.Tensor, keep: int | None) -> torch.Tensor:
    if keep is None or keep >= 23:
        return x
    mask = ~((1 << (23 - keep)) - 1)
    if not x.is_contiguous():
        x = x.contiguous()
    return torch.bitwise_and(x.view(torch.int32), mask).view(torch.float32)


# Explicit mantissa bits a stored value of each format can have: a block-float value keeps at
# most M - 1 bits after its leading one (M = 7 for bfloat8_b, 3 for bfloat4_b).
_STORED_BITS = {T.DataType.FLOAT32: 23, T.DataType.BFLOAT16: 7, T.DataType.BFLOAT8_B: 6,
                T.DataType.BFLOAT4_B: 2}


def _operand(t: SimTensor, keep: int | None) -> torch.Tensor:
    """``t``'s values as the FPU multiplier sees them at fidelity ``keep`` (see ``_truncate``),
    truncated once per tensor: a tensor read by several convs/matmuls (a bottleneck's input feeds
    its conv1 and its downsample) keeps the truncated form until it is deallocated."""
    keep = _effective_keep(t.dtype, keep)
    if keep is None:
        return t._data
    key = ("fidelity", keep)
    if t._cache is None:
        t._cache = {}
    hit = t._cache.get(key)
    if hit is None or hit[0] is not t._data:      # in-place writes replace or rewrite _data
        hit = (t._data, _truncate(t._data, keep))
        t._cache[key] = hit
    return hit[1]


def _effective_keep(dtype: T.DataType, keep: int | None) -> int | None:
    """``keep``, or None when values stored as ``dtype`` have no more mantissa bits than the
    fidelity keeps (the truncation would change nothing, so it is skipped)."""
    return None if keep is None or _STORED_BITS.get(dtype, 23) <= keep else keep


def _fidelity(compute_config) -> tuple[int | None, int | None]:
    mf = getattr(compute_config, "math_fidelity", None) if compute_config is not None else None
    if mf is None or mf == T.MathFidelity.Invalid:
        mf = T.MathFidelity.LoFi        # ttnn's init_device_compute_kernel_config default
    return _FIDELITY_BITS[mf]


# ---------------------------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------------------------

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
    kernel, stride, pad4, dilation = _pair(kernel_size), _pair(stride), _pad4(padding), _pair(dilation)
    is_mm = _is_mm_conv(kernel, stride, pad4, dilation, groups)
    wt = _prepare_weight(weight_tensor, in_channels=in_channels, out_channels=out_channels,
                         kernel=kernel, groups=groups, wdtype=_weights_dtype(conv_config, weight_tensor),
                         input_layout=input_layout, device=device, matmul=is_mm)
    if not is_mm:
        # the compute form conv2d will use, made now so that the first call costs what every call costs
        _, pad_arg, (hp, wp) = _conv_call_padding(input_height, input_width, pad4)
        _conv_weight_for(wt, _fidelity(compute_config)[0], stride, pad_arg, dilation, groups,
                         (batch_size, in_channels, hp, wp))
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
    pt, pb, pl, pr = _pad4(padding)
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
    attrs = {"shard_layout": shard_layout, "output_layout": _layout_name(out_layout),
             "dtype": dtype_name(out_dtype), "is_mm_conv": is_mm, "in_channels": in_channels,
             "out_shape": (1, 1, rows_out, out_channels), "device_grid": DEVICE_GRID,
             "override_sharding_config": cfg.override_sharding_config,
             "act_block_h_override": int(getattr(cfg, "act_block_h_override", 0) or 0),
             "activation": _act_name(cfg.activation)}
    if sliced is not None:
        attrs["slice"] = sliced
        attrs["output_hw"] = (oh, ow)
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
    bt = None
    if bias_tensor is not None:
        if bias_tensor._prep is None:
            bt = _prepare_bias(bias_tensor, out_channels, wt.dtype, device)
        else:
            bt = bias_tensor._live(op)
            _check_prepared(bt, "bias", kind="conv_bias", out_channels=out_channels)

    a_bits, b_bits = _fidelity(compute_config)
    xin = _operand(x, b_bits)
    if is_mm:
        # tt-metal runs a 1x1 stride-1 conv as ttnn::linear (conv2d.cpp mm_conv branch); compute it
        # as the sim's linear does -- one [M, K] x [K, N] torch.matmul on the stored weights, bias
        # added in place -- so both lowerings accumulate in the same order and give the same bits.
        y = _matmul_bias(xin.reshape(rows_out, c), _conv_weight_form(wt, "kn", a_bits),
                         bt._cache["vec"] if bt is not None else None).reshape(1, 1, rows_out, -1)
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
        if packed:
            y = onednn.conv(xin, weight, bias, (sh, sw), pad_arg, (dh, dw), groups)
        else:
            y = F.conv2d(xin, weight, bias, (sh, sw), pad_arg, (dh, dw), groups)
        y = _apply_unary(y, cfg.activation, inplace=True, fp32_dest=_fp32_dest(compute_config))
        y = y.permute(0, 2, 3, 1).reshape(1, 1, rows_out, out_channels)

    return _conv_outputs(op, y, x, attrs, memory_config, out_dtype, out_layout, cfg,
                         (oh, ow) if return_output_dim else None,
                         (wt, bt) if return_weights_and_bias else None)


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


# ---------------------------------------------------------------------------------------------
# pools
# ---------------------------------------------------------------------------------------------

def _shard_scheme_name(s):
    return None if s is None else _MEM_NAMES[s]


def _pool_input(x: SimTensor, op, n, h, w, c) -> torch.Tensor:
    if x.logical_volume() != n * h * w * c or x.shape[-1] != c:
        raise Error(f"{current_layer(op)}: input {list(x.shape)} is not [1, 1, {n}*{h}*{w}, {c}]")
    return x._data.reshape(n, h, w, c).permute(0, 3, 1, 2)


def _pool_out_hw(h, w, k, s, p, d, ceil_mode):
    # PyTorch's window arithmetic, the spec's own (ops.window_out)
    return (window_out(h, k[0], s[0], p[0], p[1], d[0], ceil_mode),
            window_out(w, k[1], s[1], p[2], p[3], d[1], ceil_mode))


def _pool_finish(op, x, y_nchw, n, oh, ow, c, dtype, output_layout, memory_config, applied_shard_scheme,
                 global_pool=False):
    rows = n * oh * ow
    y = y_nchw.permute(0, 2, 3, 1).reshape(1, 1, rows, c)
    attrs = {"output_layout": _layout_name(output_layout), "dtype": dtype_name(dtype),
             "out_shape": (1, 1, rows, c), "applied_shard_scheme": _shard_scheme_name(applied_shard_scheme),
             "device_grid": DEVICE_GRID, "global_pool": global_pool}
    lay = _out_layout(op if op != "global_avg_pool" else op, [x], attrs, memory_config, [x._flat4()])
    owned = y.untyped_storage().data_ptr() != x._data.untyped_storage().data_ptr()
    padded = pool_output_padded_shape(lay.memory, rows, c, out_tiled=output_layout == T.Layout.TILE)
    return _emit(y, dtype, output_layout, lay.memory, x._device, op, owned=owned, padded_shape=padded)


def max_pool2d(input_tensor, batch_size, input_h, input_w, channels, kernel_size, stride, padding, dilation,
               ceil_mode=False, *, memory_config=None, dram_slice_config=None, applied_shard_scheme=None,
               deallocate_input=False, reallocate_halo_output=True, return_indices=False,
               dtype=T.DataType.BFLOAT16, output_layout=T.Layout.ROW_MAJOR, config_tensor_in_dram=False):
    op = "max_pool2d"
    x = _on_device(input_tensor, op)
    if return_indices:
        raise Error("max_pool2d: return_indices is not modelled by the sim backend")
    k, s, d = _pair(kernel_size), _pair(stride), _pair(dilation)
    p = _pad4(padding)
    _check(op, [x], {"output_layout": _layout_name(output_layout), "dtype": dtype_name(dtype)})
    xin = _pool_input(x, op, batch_size, input_h, input_w, channels)
    oh, ow = _pool_out_hw(input_h, input_w, k, s, p, d, ceil_mode)
    if (p[0], p[2]) != (p[1], p[3]) or p[0] > k[0] // 2 or p[2] > k[1] // 2:
        xin = F.pad(xin, (p[2], p[3], p[0], p[1]), value=float("-inf"))
        y = F.max_pool2d(xin, k, s, 0, d, ceil_mode=ceil_mode)
    else:
        y = F.max_pool2d(xin, k, s, (p[0], p[2]), d, ceil_mode=ceil_mode)
    y = y[:, :, :oh, :ow]
    memory_config = _sliced_pool_memory(op, x, dram_slice_config, memory_config)
    out = _pool_finish(op, x, y, batch_size, oh, ow, channels, dtype, output_layout, memory_config,
                       applied_shard_scheme)
    if deallocate_input:
        x._allocated, x._data = False, None
    return out


def _sliced_pool_memory(op, x, dram_slice_config, memory_config):
    """pool2d with ``dram_slice_config`` (ttnn 0.81.1 generic_pools.cpp, the DRAM-sliced path):
    the input is read from DRAM slice by slice and the output is written to DRAM interleaved
    (seen on the mock device: a [N*H*W, C] DRAM input gives a DRAM-interleaved output in the
    requested output_layout). The slices change only where the work happens, not the values.
    ttnn returns that output as [N, OH, OW, C]; the sim keeps [1, 1, N*OH*OW, C], which the
    pool layers reshape ttnn's result to."""
    if dram_slice_config is None:
        return memory_config
    m = memspec(x.memory_config())
    if m.buffer != "dram" or m.sharded:
        raise _violation("pool2d.slice_input", f"{op}: a DRAM-sliced pool reads its input from "
                         f"DRAM interleaved, got {m.short()}", op)
    return T.MemoryConfig(T.TensorMemoryLayout.INTERLEAVED, T.BufferType.DRAM)


def avg_pool2d(input_tensor, batch_size, input_h, input_w, channels, kernel_size, stride, padding,
               ceil_mode=False, count_include_pad=True, divisor_override=None, *, memory_config=None,
               dram_slice_config=None, applied_shard_scheme=None, compute_kernel_config=None,
               deallocate_input=False, reallocate_halo_output=True, dtype=T.DataType.BFLOAT16,
               output_layout=T.Layout.ROW_MAJOR, config_tensor_in_dram=False):
    op = "avg_pool2d"
    x = _on_device(input_tensor, op)
    k, s = _pair(kernel_size), _pair(stride)
    p = _pad4(padding)
    _check(op, [x], {"output_layout": _layout_name(output_layout), "dtype": dtype_name(dtype)})
    xin = _pool_input(x, op, batch_size, input_h, input_w, channels)
    oh, ow = _pool_out_hw(input_h, input_w, k, s, p, (1, 1), ceil_mode)
    global_pool = (k[0], k[1]) == (input_h, input_w) and p == (0, 0, 0, 0) and (oh, ow) == (1, 1)
    if global_pool:
        y = xin.mean(dim=(2, 3), keepdim=True) if divisor_override is None else \
            xin.sum(dim=(2, 3), keepdim=True) / divisor_override
    else:
        xp = F.pad(xin, (p[2], p[3], p[0], p[1]))
        ssum = F.avg_pool2d(xp, k, s, 0, ceil_mode=ceil_mode, count_include_pad=True, divisor_override=1)
        ssum = ssum[:, :, :oh, :ow]
        if divisor_override is not None:
            y = ssum / divisor_override
        elif count_include_pad:
            y = ssum / (k[0] * k[1])
        else:
            ones = F.pad(torch.ones(1, 1, input_h, input_w), (p[2], p[3], p[0], p[1]))
            cnt = F.avg_pool2d(ones, k, s, 0, ceil_mode=ceil_mode, count_include_pad=True, divisor_override=1)
            y = ssum / cnt[:, :, :oh, :ow]
    memory_config = _sliced_pool_memory(op, x, dram_slice_config, memory_config)
    out = _pool_finish(op, x, y, batch_size, oh, ow, channels, dtype, output_layout, memory_config,
                       applied_shard_scheme, global_pool=global_pool)
    if deallocate_input:
        x._allocated, x._data = False, None
    return out


def global_avg_pool2d(input_tensor, *, memory_config=None, dtype=None):
    """Mirrors ttnn 0.81's python wrapper: NHWC (rank 2-4) input, sharded inputs are first moved
    to interleaved (same buffer), avg_pool2d over the whole plane, TILE output reshaped to
    [N, 1, 1, C]."""
    from .tensor import reshape, to_memory_config
    x = _on_device(input_tensor, "global_avg_pool2d")
    shape = list(x.shape)
    if len(shape) == 4:
        n, h, w, c = shape
    elif len(shape) == 3:
        (h, w, c), n = shape, 1
    elif len(shape) == 2:
        (h, w), n, c = shape, 1, 1
    else:
        raise Error(f"global_avg_pool2d expects rank 2, 3, or 4 input, got rank {len(shape)}")
    if x.memory_config().is_sharded():
        x = to_memory_config(x, T.MemoryConfig(T.TensorMemoryLayout.INTERLEAVED, x.memory_config().buffer_type))
    out = avg_pool2d(x, n, h, w, c, (h, w), (1, 1), (0, 0), memory_config=memory_config,
                     dtype=dtype if dtype is not None else T.DataType.BFLOAT16, output_layout=T.Layout.TILE)
    return reshape(out, (n, 1, 1, c))


def adaptive_avg_pool2d(input_tensor, batch_size, input_h, input_w, channels, output_size, *, memory_config=None,
                        dram_slice_config=None, applied_shard_scheme=None, compute_kernel_config=None,
                        deallocate_input=False, reallocate_output=True):
    op = "avg_pool2d"
    x = _on_device(input_tensor, "adaptive_avg_pool2d")
    _check(op, [x], {"output_layout": "row_major", "dtype": "bfloat16"})
    xin = _pool_input(x, "adaptive_avg_pool2d", batch_size, input_h, input_w, channels)
    oh, ow = _pair(output_size)
    y = F.adaptive_avg_pool2d(xin, (oh, ow))
    return _pool_finish(op, x, y, batch_size, oh, ow, channels, T.DataType.BFLOAT16, T.Layout.ROW_MAJOR,
                        memory_config, applied_shard_scheme)


# ---------------------------------------------------------------------------------------------
# eltwise
# ---------------------------------------------------------------------------------------------

def _binary(op, fn, a, b, dtype, memory_config, activations, a_acts, b_acts, output_tensor=None):
    scalar_a = not isinstance(a, SimTensor)
    if scalar_a:
        a, b = b, a                       # scalar op tensor: commutative for add/multiply
    a = _on_device(a, op, "input_tensor_a")
    tb = b if isinstance(b, SimTensor) else None
    if tb is not None:
        _on_device(tb, op, "input_tensor_b")
    attrs = {"dtype": dtype_name(dtype) if dtype else None}
    out_t = None
    if output_tensor is not None:
        out_t = _on_device(output_tensor, op, "output_tensor")
        if out_t is a or out_t is tb:
            # in place into an operand (ttnn.add_): the rule table checks shape, dtype and memory
            attrs.update(inplace=True, swap_operands=out_t is tb and out_t is not a)
    _check(op, [a, tb], attrs, memspec(memory_config) if memory_config is not None else None)
    if tb is not None:
        out_shape = _broadcast_shape(tuple(int(v) for v in a.shape), tuple(int(v) for v in tb.shape))
        if out_shape is None:
            raise _violation("binary.broadcast", f"shapes {list(a.shape)} and {list(tb.shape)} do not broadcast", op)
        if tuple(out_shape) != tuple(a.shape):
            raise _violation("binary.broadcast", f"output shape {list(out_shape)} differs from input a "
                             f"{list(a.shape)} (only b broadcasts)", op)
    if out_t is not None:
        _check_output_tensor(op, out_t, a, dtype, memory_config)
    # binary_ng's kernels get a 32-bit Dest for float32 operands or output
    f32 = T.DataType.FLOAT32
    fp32 = a.dtype == f32 or (tb is not None and tb.dtype == f32) or (dtype or a.dtype) == f32
    xa = _apply_unary(a._data, a_acts, fp32_dest=fp32) if a_acts else a._data
    xb = tb._data if tb is not None else float(b)
    if b_acts and tb is not None:
        xb = _apply_unary(xb, b_acts, fp32_dest=fp32)
    y = fn(xa, xb)                        # a fresh tensor: activations and rounding in place
    if activations:
        y = _apply_unary(y, activations, inplace=True, fp32_dest=fp32)
    if out_t is not None:
        return _write_into(out_t, quantize_(y, out_t.dtype))
    out_dtype = dtype or a.dtype
    shapes = [a._flat4(), tb._flat4() if tb is not None else None]
    lay = _out_layout(op, [a, tb], attrs, memory_config, shapes)
    return _emit(y, out_dtype, a.layout, lay.memory, a._device, op, owned=True)


def _broadcast_shape(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy broadcasting of two shapes (None when they do not broadcast)."""
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    out = []
    for x, y in zip(sa, sb):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def _check_output_tensor(op, out: SimTensor, a: SimTensor, dtype, memory_config) -> None:
    """binary_ng with a preallocated output: its spec is the output spec (compute_output_specs),
    so its logical shape must be the broadcast shape (leading 1s aside), a dtype argument must be
    its dtype ('If both output dtype and output tensor provided dtype should match'), and a
    memory_config, which binary_ng would use for its sharding decisions, must be its memory config.
    Checked here for any output tensor; the rule table checks the same for in-place operands."""
    def strip(shape):
        s = list(shape)
        while len(s) > 1 and s[0] == 1:
            s.pop(0)
        return s
    if strip(out.shape) != strip(a.shape):
        raise _violation("binary.output_tensor", f"Shape of Output tensor {list(out.shape)} provided does not "
                         f"match the broadcasted output shape {list(a.shape)}", op)
    if dtype is not None and dtype != out.dtype:
        raise _violation("binary.output_tensor", f"dtype {dtype_name(dtype)} but output_tensor is "
                         f"{dtype_name(out.dtype)}: if both output dtype and output tensor are provided "
                         "their dtypes should match", op)
    if memory_config is not None and memory_config != out.memory_config():
        raise _violation("binary.output_tensor", f"memory_config {memspec(memory_config).short()} but "
                         f"output_tensor is {memspec(out.memory_config()).short()}", op)
    if out.layout != a.layout:
        raise _violation("binary.output_tensor", f"output_tensor is {out.layout.name}, the result of a "
                         f"{a.layout.name} operand is {a.layout.name}", op)


def _write_into(out: SimTensor, values: torch.Tensor) -> SimTensor:
    """``values`` written into ``out``'s storage (views of it see them, as views of a device buffer
    do); storage the sim shares with tensors that are separate buffers on a card is copied first."""
    out._own()
    out._data.copy_(values.reshape(out._data.shape))
    return out


def add(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
        output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
        sub_core_grids=None, sub_device_id=None):
    return _binary("add", torch.add, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def multiply(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
             output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
             sub_core_grids=None, sub_device_id=None):
    return _binary("multiply", torch.mul, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def relu(input_tensor, *, memory_config=None, output_tensor=None, sub_core_grids=None):
    op = "relu"
    x = _on_device(input_tensor, op)
    _check(op, [x], {})
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    # relu of a stored value is exactly representable: no second rounding needed, but _emit keeps
    # the invariant uniform (bfloat16/float32 rounding is idempotent and cheap).
    return _emit(torch.relu(x._data), x.dtype, x.layout, lay.memory, x._device, op, owned=True)


def subtract(input_tensor_a, input_tensor_b, *, fast_and_approximate_mode=True, dtype=None, memory_config=None,
             output_tensor=None, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
             sub_core_grids=None, sub_device_id=None):
    if not isinstance(input_tensor_a, SimTensor):
        # scalar - tensor: binary_ng computes it as -(b - a); the result is the same value
        return _binary("subtract", lambda xa, xb: xb - xa, input_tensor_b, input_tensor_a, dtype, memory_config,
                       activations, input_tensor_b_activations, input_tensor_a_activations, output_tensor)
    return _binary("subtract", torch.sub, input_tensor_a, input_tensor_b, dtype, memory_config, activations,
                   input_tensor_a_activations, input_tensor_b_activations, output_tensor)


def _unary(op: str, input_tensor, act: str, memory_config, output_tensor, *, approximate: bool = False):
    """A standalone eltwise unary op: no dtype argument (output dtype = input dtype), memory config
    = the argument or the input's (unary_device_operation.cpp compute_output_specs)."""
    x = _on_device(input_tensor, op)
    _check("relu", [x], {})
    lay = _out_layout("relu", [x], {}, memory_config, [x._flat4()])
    # unary_program_factory: a 32-bit Dest for float32 (and integer) tensors
    y = A.sim_apply(act, x._data, approximate=approximate, fp32_dest=x.dtype == T.DataType.FLOAT32)
    if output_tensor is not None:
        out = _on_device(output_tensor, op, "output_tensor")
        return _write_into(out, quantize_(y.clone() if y is x._data else y, out.dtype))
    return _emit(y if y is not x._data else y.clone(), x.dtype, x.layout, lay.memory, x._device, op, owned=True,
                 padded_shape=x._padded)


def sigmoid(input_tensor, *, vector_mode=4, mode=None, memory_config=None, output_tensor=None, sub_core_grids=None):
    mode = T.SigmoidMode.Accurate if mode is None else mode
    return _unary("sigmoid", input_tensor, "sigmoid", memory_config, output_tensor,
                  approximate=mode == T.SigmoidMode.FastApproximate)


def _table_standalone(d) -> Callable:
    """``ttnn.<d.ttnn_function>`` for a row of the activation table: its parameters positionally or
    by keyword as the row says (``Param.keyword``), the fast mode by ``fast_and_approximate_mode``
    where ttnn has it; anything else is refused as ttnn's binding would."""
    def fn(input_tensor, *args, memory_config=None, output_tensor=None, sub_core_grids=None, **kw):
        fast = bool(kw.pop("fast_and_approximate_mode", False)) \
            if ("fast_and_approximate_mode", False) in d.standalone_kwargs else False
        positional = [p for p in d.params if p.keyword is None]
        if len(args) != len(positional):
            raise TypeError(f"{d.ttnn_function}() takes {len(positional)} positional parameter(s) "
                            f"after the input, got {len(args)}")
        it = iter(args)
        vals = [next(it) if p.keyword is None else kw.pop(p.keyword, p.default) for p in d.params]
        if kw:
            raise TypeError(f"{d.ttnn_function}() got unexpected keyword(s) {sorted(kw)}")
        return _unary(d.ttnn_function, input_tensor, A.canonical(d, vals), memory_config,
                      output_tensor, approximate=fast)
    fn.__name__ = fn.__qualname__ = d.ttnn_function
    fn.__doc__ = f"ttnn.{d.ttnn_function}: the activation table's {d.name!r} ({d.source})"
    return fn


# every activation's standalone op but relu and sigmoid (their own signatures above) comes from
# its row of the table
for _d in A.ACTIVATIONS.values():
    if _d.ttnn_function not in ("relu", "sigmoid"):
        globals()[_d.ttnn_function] = _table_standalone(_d)


def identity(input_tensor, *, memory_config=None, output_tensor=None, sub_core_grids=None):
    """ttnn.identity: a copy (the SFPU identity op); values are unchanged."""
    x = _on_device(input_tensor, "identity")
    _check("relu", [x], {})
    lay = _out_layout("relu", [x], {}, memory_config, [x._flat4()])
    return _emit(x._data.clone(), x.dtype, x.layout, lay.memory, x._device, "identity", owned=True,
                 padded_shape=x._padded)


def slice(input_tensor, starts, ends, steps=None, *, memory_config=None, output_tensor=None, pad_value=None,
          sub_core_grids=None):
    """ttnn.slice(x, starts, ends, steps): the logical sub-tensor [starts, ends) with steps."""
    op = "slice"
    x = _on_device(input_tensor, op)
    _check(op, [x], {})
    nd = len(x.shape)
    starts, ends = [int(v) for v in starts], [int(v) for v in ends]
    steps = [int(v) for v in steps] if steps is not None else [1] * nd
    if not (len(starts) == len(ends) == len(steps) == nd):
        raise Error(f"{current_layer(op)}: slice needs {nd} starts/ends/steps")
    idx = tuple(builtins_slice(a, b, c) for a, b, c in zip(starts, ends, steps))
    y = x._data[idx].contiguous()
    shape = tuple(y.shape)
    mc = memory_config if memory_config is not None else x.memory_config()
    return _emit(y, x.dtype, x.layout, mc, x._device, op, shape=shape, owned=True)


# ---------------------------------------------------------------------------------------------
# normalization over the last dim: layer_norm, softmax
# ---------------------------------------------------------------------------------------------

def layer_norm(input_tensor, *, epsilon=1e-12, weight=None, bias=None, residual_input_tensor=None,
               memory_config=None, program_config=None, compute_kernel_config=None, recip_tensor=None):
    """ttnn.layer_norm over the last dim (the channels of [1, 1, rows, C]): float32 statistics,
    the output rounded to the input's dtype (no dtype argument), the input's layout, the
    argument's or the input's memory config. The kernel's own bfloat16 intermediates are not
    modelled (float32 Dest assumed)."""
    op = "layer_norm"
    x = _on_device(input_tensor, op)
    for t, k in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            _on_device(t, op, k)
    _check(op, [x], {"program_config": program_config},
           memspec(memory_config) if memory_config is not None else None)
    xv = x._data.to(torch.float32)
    if residual_input_tensor is not None:
        xv = xv + _on_device(residual_input_tensor, op, "residual_input_tensor")._data
    c = xv.shape[-1]
    w = weight._data.reshape(-1)[:c] if weight is not None else None
    b = bias._data.reshape(-1)[:c] if bias is not None else None
    y = F.layer_norm(xv, (c,), w, b, float(epsilon))
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    return _emit(y, x.dtype, x.layout, lay.memory, x._device, op, owned=True)


def softmax(input_tensor, dim=-1, *, memory_config=None, compute_kernel_config=None,
            numeric_stable=True):
    """ttnn.softmax: float32 softmax over ``dim``, rounded to the input's dtype; the output is
    TILE (a row-major input is tilized, measured on the 0.81.1 mock device) with the argument's
    or the input's memory config. The SFPU exp/reciprocal are not modelled."""
    op = "softmax"
    x = _on_device(input_tensor, op)
    _check(op, [x], {"dim": int(dim)})
    y = torch.softmax(x._data.to(torch.float32), dim=int(dim))
    lay = _out_layout(op, [x], {}, memory_config, [x._flat4()])
    return _emit(y, x.dtype, T.Layout.TILE, lay.memory, x._device, op, owned=True)


# ---------------------------------------------------------------------------------------------
# matmul / linear
# ---------------------------------------------------------------------------------------------

def _mm(op, a, b, bias, transpose_a, transpose_b, memory_config, dtype, program_config, activation,
        compute_kernel_config):
    a = _on_device(a, op, "input_tensor_a")
    b = _on_device(b, op, "input_tensor_b")
    ts = [a, b] + ([_on_device(bias, op, "bias")] if bias is not None else [])
    act = activation
    if act is None and program_config is not None:
        act = getattr(program_config, "fused_activation", None)
    attrs = {"program_config": program_config, "dtype": dtype_name(dtype) if dtype else None,
             "activation": _act_name(act)}
    _check("linear", ts, attrs)
    a_bits, b_bits = _fidelity(compute_kernel_config)
    xa, xb = _operand(a, b_bits), _operand(b, a_bits)                    # in0 -> srcB, in1 -> srcA
    xa = xa.transpose(-1, -2) if transpose_a else xa
    xb = xb.transpose(-1, -2) if transpose_b else xb
    if xa.shape[-1] != xb.shape[-2]:
        raise Error(f"{current_layer(op)}: inner dims differ: a {list(a.shape)} b {list(b.shape)}")
    bv = None
    if bias is not None:
        bv = bias._data.reshape(-1)
        if bv.numel() != xb.shape[-1]:
            bv = bias._data.reshape(-1, bias.shape[-1])[0]
    if xb.dim() == 2 or all(d == 1 for d in xb.shape[:-2]):
        # a 2-D right operand (weights): one [M, K] x [K, N] product, as torch.matmul folds it
        lead = torch.broadcast_shapes(xa.shape[:-2], xb.shape[:-2])
        y = _matmul_bias(xa.reshape(-1, xa.shape[-1]), xb.reshape(xb.shape[-2:]), bv)
        y = y.reshape(*lead, *xa.shape[-2:-1], xb.shape[-1])
    else:
        y = torch.matmul(xa, xb)
        if bv is not None:
            y.add_(bv)                    # y is fresh (and already has the broadcast shape)
    fused = getattr(program_config, "fused_activation", None) if program_config is not None else None
    y = _apply_unary(y, fused, inplace=True, fp32_dest=_fp32_dest(compute_kernel_config))
    out_dtype = dtype or a.dtype
    if activation is not None:
        # linear(activation=...) is not fused: ttnn runs a unary op on the stored output (matmul.cpp
        # bound_matmul; on the mock device an eltwise_sfpu program follows the matmul's)
        y = _apply_unary(quantize_(y, out_dtype), activation, inplace=True,
                         fp32_dest=out_dtype == T.DataType.FLOAT32)
    lay = _out_layout("linear", ts, attrs, memory_config, [t._flat4() for t in ts])
    return _emit(y, out_dtype, T.Layout.TILE, lay.memory, a._device, op, owned=True)


def _matmul_bias(a2d: torch.Tensor, b2d: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``a2d @ b2d``, then ``+ bias`` in place: the bias added to the finished dot products, as a
    card adds it after the K accumulation. Not ``torch.addmm``: BLAS initialises the output with
    the bias and accumulates the K blocks onto it, a different summation order that moves float32
    results by an ulp (caught by the float32 bit pins, tests/test_sim_bits.py)."""
    y = torch.mm(a2d, b2d)
    return y if bias is None else y.add_(bias)


def linear(input_tensor_a, input_tensor_b, *, bias=None, transpose_a=False, transpose_b=False, memory_config=None,
           dtype=None, program_config=None, activation=None, compute_kernel_config=None, core_grid=None,
           output_tile=None, optional_output_tensor=None, global_cb=None, sub_device_id=None,
           prefetcher_pipes=(), in0_column_offset=None):
    return _mm("linear", input_tensor_a, input_tensor_b, bias, transpose_a, transpose_b, memory_config, dtype,
               program_config, activation, compute_kernel_config)


def matmul(input_tensor_a, input_tensor_b, *, transpose_a=False, transpose_b=False, memory_config=None, dtype=None,
           program_config=None, activation=None, compute_kernel_config=None, core_grid=None, output_tile=None,
           optional_output_tensor=None, global_cb=None, sub_device_id=None, prefetcher_pipes=()):
    return _mm("matmul", input_tensor_a, input_tensor_b, None, transpose_a, transpose_b, memory_config, dtype,
               program_config, activation, compute_kernel_config)


# ---------------------------------------------------------------------------------------------
# data movement with compute: upsample, concat, pad
# ---------------------------------------------------------------------------------------------

def upsample(input_tensor, scale_factor, *, mode="nearest", memory_config=None, compute_kernel_config=None):
    op = "upsample"
    x = _on_device(input_tensor, op)
    if len(x.shape) != 4:
        raise Error(f"{current_layer(op)}: upsample expects an NHWC [N, H, W, C] tensor, got {list(x.shape)}")
    if isinstance(scale_factor, (int, float)):
        sh = sw = scale_factor
    else:
        sh, sw = scale_factor
    _check(op, [x], {"mode": mode})
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
    attrs = {"mode": mode, "out_shape": (1, 1, n * oh * ow, c)}
    lay = _out_layout(op, [x], attrs, memory_config, [x._flat4()])
    return _emit(y, x.dtype, x.layout, lay.memory, x._device, op)


def concat(tensors, dim=0, *, memory_config=None, output_tensor=None, groups=1, sub_core_grids=None):
    op = "concat"
    ts = [_on_device(t, op, f"tensors[{i}]") for i, t in enumerate(tensors)]
    if not ts:
        raise Error("concat needs at least one tensor")
    rank = len(ts[0].shape)
    d = dim + rank if dim < 0 else dim
    # the rule table's concat.same_format (one dtype) and concat.same_layout (sharded inputs
    # share one layout; interleaved ones may mix TILE and ROW_MAJOR, ttnn 0.81.1's wrapper
    # converts them, and the output has the first input's layout, as the planner plans it)
    attrs = {"dim": -1 if d == rank - 1 else d}
    _check(op, ts, attrs, memspec(memory_config) if memory_config is not None else None)
    try:
        y = torch.cat([t._data for t in ts], dim=d)
    except RuntimeError as e:
        raise Error(f"{current_layer(op)}: {e}")
    lay = _out_layout(op, ts, attrs, memory_config, [t._flat4() for t in ts])
    return _emit(y, ts[0].dtype, ts[0].layout, lay.memory, ts[0]._device, op)


def pad(input_tensor, padding=None, value=None, input_tensor_start=None, *, output_padded_shape=None,
        use_multicore=True, memory_config=None, sub_core_grids=None):
    """Overloads: pad(t, [(before, after), ...] per dim, value) and
    pad(t, output_padded_shape, input_tensor_start, value)."""
    op = "pad"
    x = _on_device(input_tensor, op)
    rank = len(x.shape)
    if output_padded_shape is None and padding is not None and len(padding) and isinstance(padding[0], int):
        # second overload called positionally: (output_padded_shape, input_tensor_start, value)
        output_padded_shape, input_tensor_start, value = padding, value, input_tensor_start
    if output_padded_shape is not None:
        start = list(input_tensor_start or [0] * rank)
        pairs = [(s, o - i - s) for o, i, s in zip(output_padded_shape, x.shape, start)]
    else:
        pairs = [tuple(p) for p in padding]
    value = 0.0 if value is None else value
    if len(pairs) != rank or any(p0 < 0 or p1 < 0 for p0, p1 in pairs):
        raise Error(f"{current_layer(op)}: padding {pairs} does not fit a rank-{rank} tensor")
    _check(op, [x], {})
    flat = []
    for p0, p1 in reversed(pairs):
        flat += [p0, p1]
    y = F.pad(x._data, flat, value=float(value))
    rows = math.prod(y.shape[:-1])
    lay = _out_layout(op, [x], {"out_shape": (1, 1, rows, y.shape[-1])}, memory_config, [x._flat4()])
    return _emit(y, x.dtype, x.layout, lay.memory, x._device, op)


# ---------------------------------------------------------------------------------------------
# grid_sample (bilinear upsample with align_corners=True runs as this, docs/spec.md)
# ---------------------------------------------------------------------------------------------

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
    attrs = {"mode": mode, "padding_mode": padding_mode, "use_precomputed_grid": bool(use_precomputed_grid),
             "batch": n, "grid_batch": gn, "out_shape": (1, 1, gn * ho * wo, c)}
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
