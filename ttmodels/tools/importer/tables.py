"""The tables: one row per kind of module (``MODULE_OPS``), function (``FUNCTION_OPS``) or tensor
method (``METHOD_OPS``), each turning an fx node into a spec layer, an alias, or a reason it
cannot (enrolling an op is one row here).
"""
from __future__ import annotations

from typing import Callable

from .intermediate import _Val, _unsupported


def _pair(v):
    if isinstance(v, (tuple, list)):
        a, b = (int(v[0]), int(v[1])) if len(v) == 2 else (int(v[0]), int(v[0]))
        return a if a == b else [a, b]
    return int(v)


_ACT_MODULES = {"ReLU": "relu", "ReLU6": "relu6", "SiLU": "silu", "Sigmoid": "sigmoid",
                "Hardsigmoid": "hardsigmoid", "Hardswish": "hardswish", "Tanh": "tanh",
                "Mish": "mish"}
_ACT_FUNCTIONS = {"relu": "relu", "relu_": "relu", "relu6": "relu6", "silu": "silu",
                  "sigmoid": "sigmoid", "hardsigmoid": "hardsigmoid", "hardswish": "hardswish",
                  "tanh": "tanh", "gelu": "gelu", "leaky_relu": "leaky_relu", "mish": "mish"}


def _m_conv2d(cx, node, mod, x):
    if mod.padding_mode != "zeros":
        _unsupported(f"padding_mode={mod.padding_mode!r} (only zeros)")
    pad = mod.padding
    if isinstance(pad, str):
        if pad == "valid":
            pad = (0, 0)
        else:                                  # "same", stride 1
            pad = tuple(d * (k - 1) // 2 for d, k in zip(mod.dilation, mod.kernel_size))
            if any(d * (k - 1) % 2 for d, k in zip(mod.dilation, mod.kernel_size)):
                _unsupported("padding='same' with an even kernel (asymmetric)")
    return cx.layer(node, "conv2d", {
        "out": mod.out_channels, "kernel": _pair(mod.kernel_size), "stride": _pair(mod.stride),
        "padding": _pair(pad), "dilation": _pair(mod.dilation), "groups": mod.groups,
        "bias": mod.bias is not None, "bn": None, "act": None}, [x])


def _m_conv1d(cx, node, mod, x):
    """ECA attention's conv over the pooled channels: the [N, C] vector viewed [N, 1, C], a
    Conv1d of one channel, an odd kernel k and padding k // 2 along C. It is the product by a
    banded [C, C] matrix: a ``linear`` with ``band: k``, whose key is the Conv1d's own [1, 1, k]
    weight. Any other Conv1d is refused with what it is (the spec's convs are 2-D)."""
    s = tuple(x.shape or ())
    k = mod.kernel_size[0]
    pad = mod.padding if isinstance(mod.padding, str) else mod.padding[0]
    pad = k // 2 if pad == "same" else pad
    eca = x.kind == "tensor" and len(s) == 3 and s[1] == 1 and (mod.in_channels,
                                                                mod.out_channels) == (1, 1)
    ok = (mod.groups, mod.stride[0], mod.dilation[0], mod.padding_mode) == (1, 1, 1, "zeros") \
        and k % 2 == 1 and pad == k // 2 and mod.bias is None
    if not (eca and ok):
        _unsupported(f"Conv1d (kernel {k}, {mod.in_channels} -> {mod.out_channels} channels"
                     f"{', a bias' if mod.bias is not None else ''}) on a {list(s)} tensor: the "
                     "spec has no 1-D convolution; only ECA attention's (one channel, an odd "
                     "kernel, padding k // 2, no bias, over the pooled channels viewed [N, 1, C]) "
                     "is a linear")
    v = cx.layer(node, "linear", {"out": s[2], "bias": False, "act": None, "band": k}, [x])
    v.layer.in_channels = s[2]
    v.layer.parts.append(f"over the {s[2]} pooled channels: a banded [{s[2]}, {s[2]}] matrix")
    return v


def _m_conv_transpose2d(cx, node, mod, x, *rest):
    if rest:
        _unsupported("an output_size argument")
    if mod.padding_mode != "zeros":
        _unsupported(f"padding_mode={mod.padding_mode!r}")
    return cx.layer(node, "conv_transpose2d", {
        "out": mod.out_channels, "kernel": _pair(mod.kernel_size), "stride": _pair(mod.stride),
        "padding": _pair(mod.padding), "output_padding": _pair(mod.output_padding),
        "dilation": _pair(mod.dilation), "groups": mod.groups, "bias": mod.bias is not None,
        "act": None}, [x])


def _m_batch_norm(cx, node, mod, x):
    if not (mod.affine and mod.track_running_stats):
        _unsupported("BatchNorm without affine parameters or running statistics")
    return cx.batch_norm(node, str(node.target), mod.eps, type(mod).__name__, x)


def _f_batch_norm(cx, node, x, running_mean, running_var, weight=None, bias=None,
                  training=False, momentum=0.1, eps=1e-5, *rest, **kw):
    """``F.batch_norm`` on a module's own buffers (timm's BatchNormAct2d, any module copying
    BatchNorm2d's forward): the batch norm of the module whose keys they are."""
    kw.pop("cudnn_enabled", None)
    training = kw.get("training", training)
    eps = kw.get("eps", eps)
    parts = [running_mean, running_var, weight, bias]
    if training is not False or not all(isinstance(p, _Val) and p.kind == "param" for p in parts):
        _unsupported("batch_norm other than eval mode on a module's own running statistics, "
                     "weight and bias")
    keys = [str(p.const) for p in parts]
    prefix = keys[0].rpartition(".")[0]
    want = [f"{prefix}.{k}" if prefix else k for k in
            ("running_mean", "running_var", "weight", "bias")]
    if keys != want:
        _unsupported(f"batch_norm on parameters {keys} (only one module's running_mean, "
                     "running_var, weight and bias)")
    return cx.batch_norm(node, prefix, eps, "batch_norm()", x)


def _f_conv2d(cx, node, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv2d`` on a module's own weight (timm's Conv2dSame: F.pad, then this): the conv of
    the module whose keys they are, named after it."""
    if not (isinstance(weight, _Val) and weight.kind == "param") or \
            (bias is not None and not (isinstance(bias, _Val) and bias.kind == "param")):
        _unsupported("conv2d other than on a module's own weight and bias")
    prefix, _, leaf = str(weight.const).rpartition(".")
    if leaf != "weight" or (bias is not None and str(bias.const) != f"{prefix}.bias"):
        _unsupported(f"conv2d on parameters {weight.const}, {getattr(bias, 'const', None)}")
    if isinstance(padding, str):
        _unsupported(f"conv2d padding={padding!r}")
    out_c, _, kh, kw = weight.shape
    return cx.layer(node, "conv2d", {
        "out": int(out_c), "kernel": _pair((kh, kw)), "stride": _pair(stride),
        "padding": _pair(padding), "dilation": _pair(dilation), "groups": int(groups),
        "bias": bias is not None, "bn": None, "act": None}, [x], name=prefix)


def _f_assert(cx, node, *args, **kw):
    return None                   # a shape check (timm's _assert(x.ndim == 4)): holds as traced


def _f_compare(cx, node, a, b, *rest):
    """A comparison of shapes or numbers (timm's ``x.ndim == 4``): known from the trace."""
    if any(isinstance(v, _Val) and v.kind not in ("shape", "const") for v in (a, b)):
        _unsupported("a comparison of tensors")
    return _Val("shape")


def _m_linear(cx, node, mod, x):
    if not (x.kind == "tensor" and len(x.shape or ()) == 2 or x.kind == "nhwc"):
        _unsupported(f"a linear over a {list(x.shape or [])} tensor (only [N, C] after a global "
                     "pool, or every pixel of a channels-last map)")
    return cx.layer(node, "linear", {"out": mod.out_features, "bias": mod.bias is not None,
                                     "act": None}, [x])


def _m_layer_norm(cx, node, mod, x):
    return cx.layer_norm(node, mod.normalized_shape, mod.weight, mod.bias, mod.eps, x,
                         channels_first=False)


def _m_layer_norm2d(cx, node, mod, x):
    return cx.layer_norm(node, mod.normalized_shape, mod.weight, mod.bias, mod.eps, x,
                         channels_first=True)


def _m_group_norm(cx, node, mod, x):
    if x.kind != "tensor" or len(x.shape or ()) != 4:
        _unsupported(f"a group norm of a {list(x.shape or [])} "
                     f"{'channels-last ' if x.kind == 'nhwc' else ''}tensor (only NCHW maps)")
    return cx.layer(node, "group_norm", {"groups": int(mod.num_groups), "eps": float(mod.eps),
                                         "affine": bool(mod.affine)}, [x])


def _m_grn(cx, node, mod, x):
    """timm's GlobalResponseNorm: channels-last (over dims 1, 2 of NHWC) or NCHW (2, 3)."""
    nhwc = tuple(mod.spatial_dim) == (1, 2)
    if (x.kind == "nhwc") != nhwc or len(x.shape or ()) != 4:
        _unsupported(f"a global response norm over dims {list(mod.spatial_dim)} of a "
                     f"{list(x.shape or [])} {'channels-last ' if x.kind == 'nhwc' else ''}tensor")
    return cx.layer(node, "grn", {"eps": float(mod.eps)}, [x])


def _m_act(cx, node, mod, x):
    return cx.activation(node, _ACT_MODULES[type(mod).__name__], x)


def _m_hardtanh(cx, node, mod, x):
    if (mod.min_val, mod.max_val) == (0.0, 6.0):
        return cx.activation(node, "relu6", x)
    return cx.activation(node, f"hardtanh({float(mod.min_val)!r}, {float(mod.max_val)!r})", x)


def _m_leaky_relu(cx, node, mod, x):
    return cx.activation(node, f"leaky_relu({float(mod.negative_slope)!r})", x)


def _m_gelu(cx, node, mod, x):
    if mod.approximate != "none":
        _unsupported(f"GELU(approximate={mod.approximate!r})")
    return cx.activation(node, "gelu", x)


def _m_max_pool(cx, node, mod, x):
    if mod.return_indices:
        _unsupported("return_indices=True")
    return cx.pool(node, "max_pool2d", mod.kernel_size, mod.stride, mod.padding,
                   {"dilation": _pair(mod.dilation), "ceil_mode": bool(mod.ceil_mode)}, x)


def _m_avg_pool(cx, node, mod, x):
    if mod.divisor_override:
        _unsupported("divisor_override")
    return cx.pool(node, "avg_pool2d", mod.kernel_size, mod.stride, mod.padding,
                   {"ceil_mode": bool(mod.ceil_mode),
                    "count_include_pad": bool(mod.count_include_pad)}, x)


def _m_adaptive_avg(cx, node, mod, x):
    return cx.adaptive(node, mod.output_size, x)


def _m_identity(cx, node, mod, x, *rest):
    return x


def _m_flatten(cx, node, mod, x):
    return cx.flatten(node, mod.start_dim, mod.end_dim, x)


def _m_channel_shuffle(cx, node, mod, x):
    return cx.layer(node, "channel_shuffle", {"groups": int(mod.groups)}, [x])


def _m_upsample(cx, node, mod, x):
    return cx.upsample(node, mod.size, mod.scale_factor, mod.mode, mod.align_corners, x)


#: leaf module class name -> row. Not listed = unsupported (reported with its class name).
MODULE_OPS: dict[str, Callable] = {
    "Conv2d": _m_conv2d,
    "ConvTranspose2d": _m_conv_transpose2d,
    "Conv1d": _m_conv1d,
    "BatchNorm2d": _m_batch_norm,
    "Linear": _m_linear,
    **{k: _m_act for k in _ACT_MODULES},
    "Hardtanh": _m_hardtanh,
    "LeakyReLU": _m_leaky_relu,
    "GELU": _m_gelu,
    "MaxPool2d": _m_max_pool,
    "AvgPool2d": _m_avg_pool,
    "AdaptiveAvgPool2d": _m_adaptive_avg,
    "Dropout": _m_identity, "Dropout2d": _m_identity, "AlphaDropout": _m_identity,
    "Identity": _m_identity, "StochasticDepth": _m_identity,
    "Flatten": _m_flatten,
    "Upsample": _m_upsample,
    "ChannelShuffle": _m_channel_shuffle,
    # nn.LayerNorm over the channels of a channels-last map (or a vector); torchvision's / timm's
    # LayerNorm2d (a LayerNorm subclass permuting around it) over the channels of NCHW
    "LayerNorm": _m_layer_norm, "LayerNorm2d": _m_layer_norm2d,
    "GroupNorm": _m_group_norm,
    "GlobalResponseNorm": _m_grn,
}

#: classes outside torch.nn that compute what a MODULE_OPS row says, by qualified name (each
#: read: LayerNorm2d permutes around a layer norm over the channels; timm's LayerNorm and Linear
#: only add a fast path). Any other class is traced into, whatever it is called (timm's GELU).
FOREIGN_MODULES: dict[str, str] = {
    "torchvision.models.convnext.LayerNorm2d": "LayerNorm2d",
    "timm.layers.norm.LayerNorm2d": "LayerNorm2d",
    "timm.layers.norm.LayerNorm": "LayerNorm",
    "timm.layers.linear.Linear": "Linear",
    "timm.layers.grn.GlobalResponseNorm": "GlobalResponseNorm",
    "torchvision.ops.stochastic_depth.StochasticDepth": "StochasticDepth",
}


def module_row(mod) -> tuple[str, Callable] | None:
    """The row of a module, by what it is: a torch.nn class of MODULE_OPS (or a subclass that
    keeps its forward), or a listed foreign class; None = trace into it. A subclass with its own
    forward (timm's BatchNormAct2d: batch norm, drop, act) is what that forward does, not its
    base: it is traced into."""
    cls = type(mod)
    short = FOREIGN_MODULES.get(f"{cls.__module__}.{cls.__qualname__}")
    if short is not None and short in MODULE_OPS:
        return short, MODULE_OPS[short]
    for base in cls.__mro__:
        if base.__module__.startswith("torch.nn") and base.__name__ in MODULE_OPS:
            if getattr(cls, "forward", None) is getattr(base, "forward", None):
                return base.__name__, MODULE_OPS[base.__name__]
            return None
    return None


def _f_binary(op):
    def row(cx, node, a, b, *rest, **kw):
        if rest or kw.get("alpha", 1) != 1:
            _unsupported("an alpha / out argument")
        # the neutral Python number (timm's MobileOne starts its sum at 0): no layer
        neutral = 1 if op == "multiply" else 0
        for t, n in ((a, b), (b, a)) if op != "subtract" else ((a, b),):
            if isinstance(t, _Val) and t.kind == "tensor" and not isinstance(n, (_Val, bool)) \
                    and isinstance(n, (int, float)) and n == neutral:
                return t
        if op == "multiply" and isinstance(a, _Val) and isinstance(b, _Val) and \
                {a.kind, b.kind} in ({"shuffle", "radix_attn"}, {"radix_maps", "radix_attn"}):
            return cx.radix_multiply(node, *((a, b) if b.kind == "radix_attn" else (b, a)))
        if isinstance(a, _Val) and isinstance(b, _Val) and "param" in (a.kind, b.kind) and \
                _numel(b if b.kind == "param" else a) == 1 and (op != "subtract" or
                                                                 b.kind == "param"):
            # a learned scalar (hgnetv2's ``scale * x + bias``): a spec constant from its key
            return cx.scalar_param(node, op, *((b, a) if a.kind == "param" else (a, b)))
        if op == "multiply" and isinstance(a, _Val) and isinstance(b, _Val) and \
                "param" in (a.kind, b.kind):
            return cx.layer_scale(node, *((a, b) if a.kind == "param" else (b, a)))
        return cx.binary(node, op, a, b)
    return row


def _numel(v: _Val) -> int | None:
    if v.shape is None:
        return None
    n = 1
    for d in v.shape:
        n *= int(d)
    return n


def _f_act(name):
    def row(cx, node, x, *rest, **kw):
        act = _ACT_FUNCTIONS[name]
        if act == "leaky_relu":
            slope = rest[0] if rest and not isinstance(rest[0], bool) else kw.get(
                "negative_slope", 0.01)
            act = f"leaky_relu({float(slope)!r})"
        if act == "gelu" and kw.get("approximate", "none") != "none":
            _unsupported(f"gelu(approximate={kw['approximate']!r})")
        return cx.activation(node, act, x)
    return row


def _f_cat(cx, node, xs, dim=0, **kw):
    dim = kw.get("dim", dim)
    if xs.kind != "tuple":
        _unsupported("cat of a non-list")
    nd = len(xs.items[0].shape or ())
    if dim % max(nd, 1) != 1 or nd != 4:
        _unsupported(f"cat along dim {dim} (only channels, dim 1, of NCHW maps)")
    if len(xs.items) == 1:
        return xs.items[0]
    return cx.layer(node, "concat", {}, list(xs.items))


def _f_flatten(cx, node, x, start_dim=0, end_dim=-1):
    return cx.flatten(node, start_dim, end_dim, x)


def _f_adaptive_avg(cx, node, x, size):
    return cx.adaptive(node, size, x)


def _f_max_pool(cx, node, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    if return_indices:
        _unsupported("return_indices=True")
    return cx.pool(node, "max_pool2d", kernel_size, stride, padding,
                   {"dilation": _pair(dilation), "ceil_mode": bool(ceil_mode)}, x)


def _f_avg_pool(cx, node, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    if divisor_override:
        _unsupported("divisor_override")
    return cx.pool(node, "avg_pool2d", kernel_size, stride, padding,
                   {"ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}, x)


def _f_interpolate(cx, node, x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                   *rest, **kw):
    return cx.upsample(node, size, scale_factor, mode, align_corners, x)


def _f_getitem(cx, node, seq, idx):
    if seq.kind == "tuple" and isinstance(idx, int):
        return seq.items[idx]
    if seq.kind == "shape":
        return _Val("shape")
    if seq.kind == "tuple" and isinstance(idx, slice):
        return _Val("tuple", items=seq.items[idx])
    return cx.channel_slice(node, seq, idx)


def _f_split(cx, node, x, size, dim=0):
    """``torch.split(x, 16, 1)``, ``x.split([8, 24], dim=1)`` on the channels: a split layer."""
    nd = len(x.shape or ())
    if nd != 4 or dim % nd != 1:
        _unsupported(f"split along dim {dim} (only channels)")
    c = x.shape[1]
    if isinstance(size, int):
        counts = [size] * (c // size) + ([c % size] if c % size else [])
    elif isinstance(size, (list, tuple)) and all(isinstance(v, int) for v in size):
        counts = list(size)
    else:
        _unsupported(f"split sizes {size!r}")
    if sum(counts) != c or len(counts) < 2:
        if len(counts) == 1:
            return _Val("tuple", items=[x])
        _unsupported(f"split of {c} channels into {counts}")
    return cx.split(node, counts, x)


def _f_pad(cx, node, x, pad, mode="constant", value=None):
    """``F.pad(x, (l, r, t, b), value=v)`` of H and W: a pad layer."""
    if mode != "constant":
        _unsupported(f"pad mode {mode!r} (only constant)")
    if not isinstance(pad, (list, tuple)) or len(pad) not in (2, 4) or \
            not all(isinstance(v, int) for v in pad):
        _unsupported(f"pad {pad!r} (only the last two dims, integers)")
    l, r, t, b = (list(pad) + [0, 0])[:4]
    if min(l, r, t, b) < 0:
        _unsupported(f"negative padding {list(pad)} (a crop)")
    if len(x.shape or ()) != 4:
        _unsupported(f"pad of a {list(x.shape or ())} tensor")
    if (l, r, t, b) == (0, 0, 0, 0):
        return x
    padding = t if t == b == l == r else [t, l] if (t, l) == (b, r) else [t, b, l, r]
    return cx.layer(node, "pad", {"padding": padding, "value": float(value or 0.0)}, [x])


def _f_stack(cx, node, xs, dim=0):
    """``torch.stack(maps)`` read only by ``.sum(0)`` (smp FPN's merge): the sum, as adds."""
    if xs.kind == "tuple" and dim == 1 and len(xs.items) > 1 and all(
            isinstance(v, _Val) and v.kind == "tensor" and len(v.shape or ()) == 4 and
            v.shape == xs.items[0].shape for v in xs.items):
        # SKNet's paths stacked on a new dim 1, summed or weighted over it (split attention)
        return _Val("radix_maps", items=list(xs.items), shape=_shape_of(node))
    if xs.kind != "tuple" or dim != 0:
        _unsupported("stack other than of maps along a new dim 0 summed at once")
    return _Val("stack", items=list(xs.items), shape=_shape_of(node))


def _f_softmax(cx, node, x, dim=None, *rest, **kw):
    """Refused with what it is: the radix softmax of split attention (ResNeSt's ``rSoftMax``,
    SKNet's selective kernel) runs across a reshaped attention vector, which the spec's
    channel-wise softmax is not."""
    dim = kw.get("dim", dim)
    if isinstance(x, _Val) and x.kind in ("radix", "shuffle"):
        return cx.radix_softmax(node, x, dim)
    _unsupported(f"softmax over dim {dim} of a {list(getattr(x, 'shape', None) or [])} tensor "
                 "(a split attention's softmax across its radix, ResNeSt / SKNet: no spec form "
                 "yet)")


def _m_sum(cx, node, x, dim=None, keepdim=False, **kw):
    dim = kw.get("dim", dim)
    if x.kind in ("shuffle", "radix_prod", "radix_maps"):
        return cx.radix_sum(node, x, dim)
    if x.kind != "stack" or dim not in (0, (0,), [0]) or keepdim:
        _unsupported("sum other than of a stack of maps over its dim 0")
    acc = x.items[0]
    for i, item in enumerate(x.items[1:], 1):
        if acc.layer is not None and i > 1:
            acc.layer.fx = ""            # a partial sum: no module value to compare it with
        acc = cx.binary(node, "add", acc, item, name=cx.name_for(node, "add"))
    return acc


def _shape_of(node):
    tm = node.meta.get("tensor_meta")
    return tuple(int(s) for s in tm.shape) if tm is not None and hasattr(tm, "shape") else None


def _f_dropout(cx, node, x, *rest, **kw):
    return x


def _f_chunk(cx, node, x, chunks, dim=0):
    nd = len(x.shape or ())
    if nd != 4 or dim % nd != 1:
        _unsupported(f"chunk along dim {dim} (only channels)")
    c = x.shape[1]
    if c % chunks:
        _unsupported(f"chunk of {c} channels into {chunks} unequal parts")
    return cx.split(node, [c // chunks] * chunks, x)


def _f_mean(cx, node, x, dim=None, keepdim=False, **kw):
    dims = sorted(d % 4 for d in (dim if isinstance(dim, (list, tuple)) else [dim])) \
        if dim is not None else None
    if dims != [2, 3] or len(x.shape or ()) != 4:
        _unsupported(f"mean over dims {dim} (only the spatial dims 2, 3)")
    return cx.adaptive(node, 1, x)


def _f_view(cx, node, x, *shape, **kw):
    return cx.view(node, x)             # the target shape is the node's (shape propagation)


def _f_transpose(cx, node, x, dim0, dim1):
    return cx.transpose(node, x, dim0, dim1)


def _f_channel_shuffle(cx, node, x, groups):
    return cx.layer(node, "channel_shuffle", {"groups": int(groups)}, [x])


def _f_permute(cx, node, x, *dims):
    dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
    return cx.permute(node, x, dims)


def _m_expand_as(cx, node, x, other):
    """``v.expand_as(x)`` of a per-image ``[N, C, 1, 1]`` vector: the vector (the binary op after
    it broadcasts it); anything else is no broadcast the spec has."""
    s, o = tuple(x.shape or ()), tuple(getattr(other, "shape", None) or ())
    if s == o:
        return x
    if x.kind == "tensor" and len(s) == 4 and len(o) == 4 and s[2:] == (1, 1) and s[:2] == o[:2]:
        return x
    _unsupported(f"expand_as of a {list(s)} tensor to {list(o)} (only a per-image vector)")


def _shape_op(cx, node, *args, **kw):
    return _Val("shape")


#: function name (torch.*, torch.nn.functional.*, operator.*) -> row
FUNCTION_OPS: dict[str, Callable] = {
    "add": _f_binary("add"), "iadd": _f_binary("add"),
    "mul": _f_binary("multiply"), "imul": _f_binary("multiply"),
    "sub": _f_binary("subtract"), "isub": _f_binary("subtract"),
    **{k: _f_act(k) for k in _ACT_FUNCTIONS},
    "cat": _f_cat, "concat": _f_cat,
    "flatten": _f_flatten,
    "adaptive_avg_pool2d": _f_adaptive_avg,
    "max_pool2d": _f_max_pool, "avg_pool2d": _f_avg_pool,
    "interpolate": _f_interpolate,
    "getitem": _f_getitem,
    "dropout": _f_dropout,
    "chunk": _f_chunk, "split": _f_split, "pad": _f_pad, "stack": _f_stack,
    "mean": _f_mean, "sum": _m_sum,
    "getattr": _shape_op, "floordiv": _shape_op,
    "batch_norm": _f_batch_norm, "_assert": _f_assert, "conv2d": _f_conv2d,
    "eq": _f_compare, "ne": _f_compare, "lt": _f_compare, "le": _f_compare, "gt": _f_compare,
    "ge": _f_compare,
    "reshape": _f_view, "transpose": _f_transpose, "channel_shuffle": _f_channel_shuffle,
    "permute": _f_permute, "softmax": _f_softmax,
    # enrolled when the spec language has them (h23ops): "softmax", ...
}

#: tensor method name -> row (rows of FUNCTION_OPS where the method means the same)
METHOD_OPS: dict[str, Callable] = {
    "add": FUNCTION_OPS["add"], "add_": FUNCTION_OPS["add"], "mul": FUNCTION_OPS["mul"],
    "mul_": FUNCTION_OPS["mul"], "sub": FUNCTION_OPS["sub"],
    "relu": _f_act("relu"), "relu_": _f_act("relu"), "sigmoid": _f_act("sigmoid"),
    "tanh": _f_act("tanh"),
    "flatten": _f_flatten,
    "chunk": _f_chunk, "split": _f_split, "sum": _m_sum, "softmax": _f_softmax,
    "mean": _f_mean,
    "contiguous": _f_dropout,
    "view": _f_view, "reshape": _f_view, "transpose": _f_transpose, "permute": _f_permute,
    "size": _shape_op, "dim": _shape_op, "expand_as": _m_expand_as,
}
