"""``ttmodels import``: a PyTorch module -> the spec a person would write (issue 24).

    text = ttmodels.import_module(torchvision.models.resnet18(), torch.randn(1, 3, 224, 224))

Three steps, each a plain function:

1. **trace** (``trace``): torch.fx on the example input; every fx node goes through one table row
   of its kind (``MODULE_OPS`` for leaf modules by class name, ``FUNCTION_OPS`` for functions,
   ``METHOD_OPS`` for tensor methods). A row turns the node into a spec layer, an alias (Dropout,
   a flatten of a 1x1 map), or says why it cannot (``Unsupported``). BatchNorm after a conv is
   folded into the conv's ``bn:``, an activation into ``act:`` where ttnn fuses it
   (``ttmodels.activations``). Layer names are module paths, so ``module.state_dict()`` loads.
2. **emit** (``emit_spec``): module classes with several instances become blocks (what differs
   between instances becomes a parameter, a layer only some have gets ``when:``), chains of equal
   instances ``repeat``; every layer carries a comment with its module path and source line.
   The blocked spec must expand to exactly the flat layer list (checked, ``_same_graph``).
3. **check** (``check_spec``): the spec built in the float32 profile on the sim, compared with the
   module's own output (PCC, max abs error) and, below ``PCC_MIN``, layer by layer against the
   module's intermediate values to name the first layer that differs.

Enrolling an op (when the spec language gets one) is one row in a table below.
"""
from __future__ import annotations

import inspect
import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import Error

PCC_MIN = 0.9999

__all__ = ["import_module", "ImportError_", "UnsupportedError", "ImportedSpec", "trace",
           "emit_spec", "check_spec", "resolve_module_ref", "MODULE_OPS", "FUNCTION_OPS",
           "METHOD_OPS", "PCC_MIN"]


class ImportError_(Error):
    """The module cannot be imported as it is (a self-check failure, a bad module reference)."""


class UnsupportedError(ImportError_):
    """Nodes the spec language has no op for, all of them, grouped by kind."""

    def __init__(self, unsupported: list["Unsupported"]):
        self.unsupported = unsupported
        super().__init__(format_unsupported(unsupported))


class ImportedSpec(str):
    """The spec's YAML text, with the self-check's figures (``pcc``, ``max_abs``, ``report``)."""
    pcc: float | None = None
    max_abs: float | None = None
    report: str = ""
    layers: int = 0
    blocks: tuple[str, ...] = ()      # the blocks it uses (its own and the library's)
    ignored_prefixes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# the intermediate form
# ---------------------------------------------------------------------------------------------

@dataclass
class Layer:
    name: str                     # full name (module path, or owner path + function name)
    op: str
    fields: dict                  # spec fields (all of them, defaults included)
    inputs: list[str]             # tensor names
    stack: list[tuple[str, str]]  # enclosing (module path, class qualname), outermost first
    parts: list[str]              # what it was made of ("Conv2d", "+ BatchNorm2d bn1", ...)
    source: str                   # "file:line" of the call
    fx: str                       # the fx node whose value is this layer's output
    fx_node: Any = None
    outputs: list[str] | None = None   # split: named outputs (full tensor names)
    in_channels: int | None = None     # of the first input


@dataclass
class Unsupported:
    kind: str                     # "call_module Flatten", "function view", ...
    where: str                    # module path
    source: str
    reason: str
    fx: str


@dataclass
class Traced:
    layers: list[Layer]
    input_name: str
    input_shape: tuple[int, ...]  # NCHW
    outputs: list[str]            # tensor names of the module's outputs (or the partial output)
    output_fx: list[str]
    unsupported: list[Unsupported]
    module_class: str
    unused_prefixes: tuple[str, ...] = ()
    partial_stop: Unsupported | None = None
    gm: Any = None


class _Skip(Exception):
    """A table row's verdict: this node cannot be expressed in the spec language."""


def _unsupported(reason: str):
    raise _Skip(reason)


@dataclass
class _Val:
    """What an fx node's value is to the importer."""
    kind: str                     # "tensor", "shape", "tuple", "const", "bad"
    tensor: str | None = None     # tensor name
    items: list | None = None     # tuple / list elements (_Val)
    const: Any = None
    layer: Layer | None = None    # the layer producing it (when a layer output)
    shape: tuple | None = None    # torch shape (NCHW)


# ---------------------------------------------------------------------------------------------
# the tables: one row per kind of module / function / method
# ---------------------------------------------------------------------------------------------

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
    return cx.batch_norm(node, mod, x)


def _m_linear(cx, node, mod, x):
    if x.kind != "tensor" or x.shape is None or len(x.shape) != 2:
        _unsupported(f"a linear over a {list(x.shape or [])} tensor (only [N, C] after a global "
                     "pool: per-pixel linear is another op)")
    return cx.layer(node, "linear", {"out": mod.out_features, "bias": mod.bias is not None,
                                     "act": None}, [x])


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


def _m_upsample(cx, node, mod, x):
    return cx.upsample(node, mod.size, mod.scale_factor, mod.mode, mod.align_corners, x)


#: leaf module class name -> row. Not listed = unsupported (reported with its class name).
MODULE_OPS: dict[str, Callable] = {
    "Conv2d": _m_conv2d,
    "ConvTranspose2d": _m_conv_transpose2d,
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
    # enrolled when the spec language has them (h23ops): "ChannelShuffle", "LayerNorm", ...
}


def _f_binary(op):
    def row(cx, node, a, b, *rest, **kw):
        if rest or kw.get("alpha", 1) != 1:
            _unsupported("an alpha / out argument")
        return cx.binary(node, op, a, b)
    return row


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
    _unsupported("indexing or slicing a tensor")


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
    "chunk": _f_chunk,
    "mean": _f_mean,
    "getattr": _shape_op, "floordiv": _shape_op,
    # enrolled when the spec language has them (h23ops): "permute", "reshape", "transpose",
    # "channel_shuffle", "layer_norm", "softmax", ...
}

#: tensor method name -> row (rows of FUNCTION_OPS where the method means the same)
METHOD_OPS: dict[str, Callable] = {
    "add": FUNCTION_OPS["add"], "add_": FUNCTION_OPS["add"], "mul": FUNCTION_OPS["mul"],
    "mul_": FUNCTION_OPS["mul"], "sub": FUNCTION_OPS["sub"],
    "relu": _f_act("relu"), "relu_": _f_act("relu"), "sigmoid": _f_act("sigmoid"),
    "tanh": _f_act("tanh"),
    "flatten": _f_flatten,
    "chunk": _f_chunk,
    "mean": _f_mean,
    "contiguous": _f_dropout,
    "size": _shape_op, "dim": _shape_op,
}


# ---------------------------------------------------------------------------------------------
# tracing
# ---------------------------------------------------------------------------------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _short_path(path: str) -> str:
    """A source path without the machine's part: relative to site-packages or the cwd."""
    p = path.replace(os.sep, "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in p:
            return p.split(marker, 1)[1]
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    except ValueError:
        pass
    return os.path.basename(path)


def _source_of(node) -> str:
    """The innermost frame of the node's stack outside torch itself: the model's own line."""
    import torch
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    frames = _FRAME.findall(node.stack_trace or "")
    for f, line, _fn in reversed(frames):
        if os.path.abspath(f).startswith(torch_dir):
            continue
        return f"{_short_path(f)}:{line}"
    return "?"


def _stack_of(node) -> list[tuple[str, str]]:
    st = node.meta.get("nn_module_stack") or {}
    out = []
    for key, v in st.items():
        path, cls = v if isinstance(v, tuple) else (key, None)
        qual = cls if isinstance(cls, str) else (f"{cls.__module__}.{cls.__qualname__}"
                                                 if cls is not None else "?")
        out.append((path, qual))
    return out


class _Ctx:
    """What the table rows build with: layers, fusions, names."""

    def __init__(self, gm, mods):
        self.gm = gm
        self.mods = mods
        self.layers: list[Layer] = []
        self.taken: set[str] = set()
        self._renamed: dict[str, str] = {}     # an add renamed after its activation module

    # -- names
    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def name_for(self, node) -> str:
        if node.op == "call_module":
            return str(node.target)
        stack = _stack_of(node)
        owner = stack[-1][0] if stack else ""
        base = node.target.__name__ if callable(node.target) else str(node.target)
        base = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_") or "op"
        base = {"iadd": "add", "imul": "mul", "isub": "sub", "relu_": "relu", "add_": "add",
                "mul_": "mul"}.get(base, base)
        return f"{owner}.{base}" if owner else base

    def layer(self, node, op, fields, inputs, name=None) -> _Val:
        for v in inputs:
            if v.kind != "tensor":
                _unsupported(f"{op} of a {v.kind} value")
        stack = _stack_of(node)
        if node.op == "call_module" and stack:
            stack = stack[:-1]
        cls = type(self.mods[node.target]).__name__ if node.op == "call_module" else (
            f"{getattr(node.target, '__name__', node.target)}()")
        lay = Layer(self._unique(name or self.name_for(node)), op, fields,
                    [v.tensor for v in inputs], stack, [cls], _source_of(node), node.name, node,
                    in_channels=(inputs[0].shape[1] if inputs and inputs[0].shape and
                                 len(inputs[0].shape) > 1 else None))
        self.layers.append(lay)
        return _Val("tensor", lay.name, layer=lay, shape=_shape(node))

    def _sole_user(self, v: _Val) -> bool:
        return v.layer is not None and v.layer.fx_node is not None and \
            len(v.layer.fx_node.users) == 1 and v.layer.name == v.tensor

    def _absorb(self, v: _Val, node, part: str) -> _Val:
        v.layer.parts.append(part)
        v.layer.fx, v.layer.fx_node = node.name, node
        return _Val("tensor", v.tensor, layer=v.layer, shape=_shape(node))

    def batch_norm(self, node, mod, x):
        eps = float(mod.eps)
        if x.kind == "tensor" and self._sole_user(x) and x.layer.op == "conv2d" and \
                x.layer.fields["bn"] is None and x.layer.fields["act"] is None:
            x.layer.fields["bn"] = {"name": str(node.target), "eps": eps}
            return self._absorb(x, node, f"+ {type(mod).__name__} {node.target}")
        return self.layer(node, "batch_norm", {"weights": None, "eps": eps, "act": None}, [x])

    def activation(self, node, act, x):
        from . import activations
        d = activations.get(act)
        if x.kind == "tensor" and self._sole_user(x) and x.layer.fields.get("act", 0) is None:
            op = x.layer.op
            fuses = {"conv2d": d.fuses_conv, "conv_transpose2d": d.fuses_conv,
                     "linear": d.fuses_matmul, "batch_norm": True,
                     "add": d.fuses_binary, "multiply": d.fuses_binary,
                     "subtract": d.fuses_binary}.get(op, False)
            if fuses:
                x.layer.fields["act"] = act
                what = type(self.mods[node.target]).__name__ if node.op == "call_module" else \
                    f"{getattr(node.target, '__name__', node.target)}()"
                if node.op == "call_module" and op in ("add", "multiply", "subtract"):
                    # a parameter-free layer takes the activation module's name (torchvision's
                    # BasicBlock: the add + relu is "relu")
                    self.taken.discard(x.layer.name)
                    old = x.layer.name
                    x.layer.name = self._unique(str(node.target))
                    v = self._absorb(x, node, f"+ {what} {node.target}")
                    v.tensor = x.layer.name
                    self._renamed[old] = x.layer.name
                    return v
                return self._absorb(x, node, f"+ {what}" + (
                    f" {node.target}" if node.op == "call_module" else ""))
        # standalone: the table's parameters become the op's fields
        d, params = activations.split(act)
        return self.layer(node, d.name, {p.name: v for p, v in zip(d.params, params)}, [x])

    def binary(self, node, op, a, b):
        if not isinstance(a, _Val) or not isinstance(b, _Val) or a.kind != "tensor" or \
                b.kind != "tensor":
            _unsupported(f"{op} with a Python number or constant (only tensor {op} tensor)")
        sa, sb = tuple(a.shape or ()), tuple(b.shape or ())
        if sa != sb:
            vec = lambda s: len(s) == 4 and s[2:] == (1, 1)         # noqa: E731
            if not ((vec(sa) or vec(sb)) and sa[:2] == sb[:2]):
                _unsupported(f"{op} of shapes {list(sa)} and {list(sb)} (equal shapes, or a "
                             "map and a per-image [N, C, 1, 1] vector)")
            if op == "subtract" and vec(sa):
                _unsupported("subtract of a map from a vector")
        return self.layer(node, op, {"act": None}, [a, b])

    def pool(self, node, op, kernel, stride, padding, extra, x):
        kernel = _pair(kernel)
        stride = kernel if stride is None or stride == [] else _pair(stride)
        padding = _pair(padding)
        return self.layer(node, op, {"kernel": kernel, "stride": stride, "padding": padding,
                                     **extra}, [x])

    def adaptive(self, node, size, x):
        h, w = (size, size) if not isinstance(size, (tuple, list)) else tuple(size)
        ih, iw = (x.shape or (0, 0, 0, 0))[2:4]
        h, w = h or ih, w or iw
        if (h, w) == (1, 1):
            return self.layer(node, "global_avg_pool", {}, [x])
        if (h, w) == (ih, iw):
            return x                          # e.g. VGG's 7x7 pool on a 7x7 map
        if h > ih or w > iw:
            _unsupported(f"adaptive_avg_pool2d to {h}x{w} from {ih}x{iw} (larger than the input)")
        return self.layer(node, "adaptive_avg_pool2d", {"size": _pair((h, w))}, [x])

    def flatten(self, node, start, end, x):
        s = tuple(x.shape or ())
        if len(s) == 4 and start == 1 and end in (-1, 3) and s[2:] == (1, 1):
            return _Val("tensor", x.tensor, layer=x.layer, shape=(s[0], s[1]))
        if len(s) == 2 and start == 1:
            return x
        if len(s) == 4 and start == 1 and end in (-1, 3):
            # a map: the spec's flatten keeps torch's C, H, W order (VGG's classifier)
            return self.layer(node, "flatten", {}, [x])
        _unsupported(f"flatten of a {list(s)} tensor from dim {start} to {end} (only "
                     "flatten(1) of an NCHW map)")

    def upsample(self, node, size, scale, mode, align_corners, x):
        if mode not in ("nearest", "bilinear"):
            _unsupported(f"upsampling mode {mode!r}")
        s = x.shape or (0, 0, 1, 1)
        if size is not None:
            hw = (size, size) if isinstance(size, int) else tuple(size)
            if hw[0] % s[2] or hw[1] % s[3]:
                _unsupported(f"upsampling {s[2]}x{s[3]} to {hw[0]}x{hw[1]} (not an integer factor)")
            scale = (hw[0] // s[2], hw[1] // s[3])
        sc = scale if isinstance(scale, (tuple, list)) else (scale, scale)
        if any(float(v) != int(v) or int(v) < 1 for v in sc):
            _unsupported(f"scale factor {scale} (integers only)")
        fields = {"scale": _pair([int(v) for v in sc]), "mode": mode,
                  "align_corners": bool(align_corners) if mode == "bilinear" else False}
        return self.layer(node, "upsample", fields, [x])

    def split(self, node, counts, x):
        v = self.layer(node, "split", {"channels": {f"c{i}": c for i, c in enumerate(counts)}},
                       [x])
        lay = v.layer
        lay.outputs = [f"{lay.name}.c{i}" for i in range(len(counts))]
        c = [s for s in (x.shape or ())]
        items = []
        for i, t in enumerate(lay.outputs):
            items.append(_Val("tensor", t, layer=None, shape=(c[0], counts[i], c[2], c[3])))
        return _Val("tuple", items=items)


def _shape(node):
    tm = node.meta.get("tensor_meta")
    return tuple(int(s) for s in tm.shape) if tm is not None and hasattr(tm, "shape") else None


def _is_bad(v) -> bool:
    return isinstance(v, _Val) and (v.kind == "bad" or (v.kind == "tuple" and any(
        _is_bad(x) for x in v.items)))


def _kind(node, mods) -> str:
    if node.op == "call_module":
        return f"module {type(mods[node.target]).__name__}"
    if node.op == "call_function":
        return f"function {getattr(node.target, '__name__', node.target)}"
    if node.op == "call_method":
        return f"method Tensor.{node.target}"
    return node.op


def trace(module, example_input, *, partial: bool = False) -> Traced:
    """The module's fx graph on ``example_input`` (NCHW), turned into spec layers.

    Unsupported nodes are collected (all of them); with ``partial`` the layers stop at the first
    one, whose input becomes the output."""
    import torch
    import torch.fx as fx
    from torch.fx.passes.shape_prop import ShapeProp

    class Tracer(fx.Tracer):
        def __init__(self):
            super().__init__()
            self.record_stack_traces = True

        def is_leaf_module(self, m, qualname):
            return type(m).__name__ in MODULE_OPS and not list(m.children()) or \
                super().is_leaf_module(m, qualname)

    was_training = module.training
    module.eval()                        # traced as in inference; the user's flag is restored
    tracer = Tracer()
    try:
        graph = tracer.trace(module)
        gm = fx.GraphModule(tracer.root, graph)
        with torch.no_grad():
            ShapeProp(gm).propagate(example_input)
    except Exception as e:               # data-dependent control flow, etc.
        raise ImportError_(f"torch.fx cannot trace {type(module).__name__}: "
                           f"{type(e).__name__}: {str(e).strip()[:2000]}") from e
    finally:
        module.train(was_training)
    mods = dict(gm.named_modules())
    cx = _Ctx(gm, mods)
    env: dict[str, _Val] = {}
    dry_env: dict[str, _Val] = {}      # what poisoned nodes would be (to judge their users)
    bad: list[Unsupported] = []
    input_name, outputs, out_fx = None, [], []
    stop = None

    def val(a):
        if isinstance(a, fx.Node):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            vs = [val(x) for x in a]
            if any(isinstance(v, _Val) for v in vs):
                return _Val("tuple", items=vs)
            return type(a)(vs)
        return a

    for node in gm.graph.nodes:
        if stop is not None and node.op != "output":
            env[node.name] = _Val("bad")
            continue
        if node.op == "placeholder":
            if input_name is not None:
                bad.append(Unsupported("a second input", node.name, "?",
                                       "one image input only", node.name))
                env[node.name] = _Val("bad")
                continue
            input_name = "input"
            env[node.name] = _Val("tensor", input_name, shape=_shape(node))
            continue
        if node.op == "output":
            res = node.args[0]
            res = res if isinstance(res, (list, tuple)) else [res]
            for r in res:
                v = val(r)
                if isinstance(v, _Val) and v.kind == "tensor":
                    outputs.append(v.tensor)
                    out_fx.append(r.name)
            continue
        kind = _kind(node, mods)
        if node.op == "call_module":
            row = MODULE_OPS.get(type(mods[node.target]).__name__)
        elif node.op == "call_function":
            row = FUNCTION_OPS.get(getattr(node.target, "__name__", ""))
        elif node.op == "call_method":
            row = METHOD_OPS.get(node.target)
        else:
            row = None
        args = [val(a) for a in node.args]
        kwargs = {k: val(v) for k, v in node.kwargs.items()}
        poisoned = any(_is_bad(a) for a in list(args) + list(kwargs.values()))
        try:
            if row is None:
                _unsupported("no spec op for it yet")
            if poisoned:
                # downstream of an unsupported node: only what this node itself lacks is said,
                # by its row on stand-in inputs in a throwaway context
                dry = _Ctx(gm, mods)

                def stand(a):
                    if isinstance(a, fx.Node):
                        if not _is_bad(env[a.name]):
                            return env[a.name]
                        return dry_env.get(a.name) or _Val("tensor", "?", shape=_shape(a))
                    if isinstance(a, (list, tuple)):
                        vs = [stand(x) for x in a]
                        return _Val("tuple", items=vs) if any(isinstance(v, _Val) for v in vs) \
                            else type(a)(vs)
                    return a
                try:
                    dargs = [stand(a) for a in node.args]
                    dkw = {k: stand(v) for k, v in node.kwargs.items()}
                    if node.op == "call_module":
                        r = row(dry, node, mods[node.target], *dargs, **dkw)
                    else:
                        r = row(dry, node, *dargs, **dkw)
                    if isinstance(r, _Val):
                        dry_env[node.name] = r
                except _Skip:
                    raise
                except Exception:          # noqa: BLE001 (stand-ins can upset a row: no verdict)
                    pass
                env[node.name] = _Val("bad")
                continue
            if node.op == "call_module":
                v = row(cx, node, mods[node.target], *args, **kwargs)
            else:
                v = row(cx, node, *args, **kwargs)
        except _Skip as e:
            stack = _stack_of(node)
            where = str(node.target) if node.op == "call_module" else (
                stack[-1][0] if stack else "(top level)")
            u = Unsupported(kind, where, _source_of(node), str(e), node.name)
            bad.append(u)
            env[node.name] = _Val("bad")
            if partial:
                stop = u
                ins = [a for a in node.all_input_nodes if env.get(a.name) is not None
                       and env[a.name].kind == "tensor"]
                if not ins:
                    raise UnsupportedError([u]) from None
                outputs, out_fx = [env[ins[0].name].tensor], [ins[0].name]
            continue
        env[node.name] = v if isinstance(v, _Val) else _Val("const", const=v)

    unused = _unused_prefixes(module, cx.layers)
    # tensor renames (an add named after its activation module) in later layers' inputs
    ren = cx._renamed
    if ren:
        for lay in cx.layers:
            lay.inputs = [ren.get(t, t) for t in lay.inputs]
        outputs = [ren.get(t, t) for t in outputs]
    return Traced(cx.layers, input_name or "input", tuple(example_input.shape), outputs, out_fx,
                  bad, f"{type(module).__module__}.{type(module).__qualname__}", unused, stop, gm)


def _unused_prefixes(module, layers: list[Layer]) -> tuple[str, ...]:
    """Key prefixes of the modules holding parameters that no layer reads (GoogLeNet's aux
    heads, everything after a --partial stop): the highest such module of each subtree."""
    used = set()
    for lay in layers:
        if lay.op in ("conv2d", "conv_transpose2d", "linear", "batch_norm"):
            used.add(lay.name if lay.op != "batch_norm" or not lay.fields.get("weights")
                     else lay.fields["weights"])
        if lay.fields.get("bn"):
            used.add(lay.fields["bn"]["name"])
    holders = [p for p, m in module.named_modules() if p and
               (any(True for _ in m.parameters(recurse=False)) or
                any(True for _ in m.buffers(recurse=False)))]
    unused = [p for p in holders if p not in used]
    if not unused:
        return ()
    out = set()
    for p in unused:
        parts = p.split(".")
        best = p
        for k in range(1, len(parts)):
            anc = ".".join(parts[:k])
            if not any(h == anc or h.startswith(anc + ".") for h in holders if h in used):
                best = anc
                break
        out.add(best + ".")
    return tuple(sorted(out))


def format_unsupported(bad: list[Unsupported]) -> str:
    groups: dict[str, list[Unsupported]] = defaultdict(list)
    for u in bad:
        groups[u.kind].append(u)
    lines = [f"{len(bad)} node(s) the spec language has no op for, in {len(groups)} kind(s) "
             "(no spec written; --partial writes the part before the first):"]
    for kind, us in groups.items():
        lines.append(f"  {kind} ({len(us)}): {us[0].reason}")
        for u in us[:20]:
            extra = f" ({u.reason})" if u.reason != us[0].reason else ""
            lines.append(f"    {u.where}  {u.source}{extra}")
        if len(us) > 20:
            lines.append(f"    ... and {len(us) - 20} more")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# emitting: blocks, repeats, YAML text with a comment per layer
# ---------------------------------------------------------------------------------------------

_DEFAULTS = {
    "conv2d": {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": False, "bn": None,
               "act": None},
    "conv_transpose2d": {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1,
                         "groups": 1, "bias": False, "act": None},
    "linear": {"bias": True, "act": None},
    "batch_norm": {"weights": None, "eps": 1e-5, "act": None},
    "add": {"act": None}, "multiply": {"act": None}, "subtract": {"act": None},
    "max_pool2d": {"padding": 0, "dilation": 1, "ceil_mode": False},
    "avg_pool2d": {"padding": 0, "ceil_mode": False, "count_include_pad": True},
    "upsample": {"mode": "nearest", "align_corners": False},
    "leaky_relu": {"slope": 0.01},
}
_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


@dataclass
class _Entry:
    name: str                    # full name
    kind: str                    # "op" | "inst"
    layer: Layer | None = None
    block: str | None = None     # inst: block name
    params: dict = field(default_factory=dict)   # inst: every parameter's value
    inputs: list = field(default_factory=list)   # full tensor names read from outside
    output: str = ""             # the tensor it produces (inst: its output)
    produced: tuple = ()         # every tensor made inside
    comment: str = ""
    repeat: dict | None = None   # repeat fields when this entry stands for a run


@dataclass
class _BlockDef:
    name: str
    cls: str
    rows: list                   # [(rel name, spec mapping without name, comment)]
    params: dict                 # param -> default
    inputs: list[str]
    output: str                  # rel name of the output
    comment: str
    instance_params: dict        # instance path -> {param: value}
    library: bool = False        # one of the library's blocks (ttmodels/<file>/<block>)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return re.sub(r"[^a-z0-9_]", "_", s.lower()).strip("_") or "block"


def _ident(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", s).strip("_")
    return s if s and not s[0].isdigit() else f"p{s}"


def _rel(name: str, scope: str) -> str | None:
    if not scope:
        return name
    return name[len(scope) + 1:] if name.startswith(scope + ".") else None


class _Emitter:
    def __init__(self, tr: Traced, module, use_library: bool = True):
        self.use_library = use_library
        self.tr = tr
        self.layers = tr.layers
        self.index = {id(l): i for i, l in enumerate(self.layers)}
        self.producer: dict[str, Layer] = {}
        for lay in self.layers:
            for t in (lay.outputs or [lay.name]):
                self.producer[t] = lay
        self.consumers: dict[str, list[Layer]] = defaultdict(list)
        for lay in self.layers:
            for t in lay.inputs:
                self.consumers[t].append(lay)
        self.containers = set()
        self.class_src = {}
        for path, m in module.named_modules():
            if any(c.__name__ in _CONTAINERS for c in type(m).__mro__):
                self.containers.add(path)
        self.classes: dict[str, str] = {}
        self.members: dict[str, list[Layer]] = defaultdict(list)
        for lay in self.layers:
            for path, cls in lay.stack:
                self.classes[path] = cls
                self.members[path].append(lay)
        self.chosen: set[str] = set()
        self.blocks: dict[str, _BlockDef] = {}      # block name -> def
        self.block_of: dict[str, _BlockDef] = {}    # instance path -> its block
        self._temps: dict[str, tuple] = {}
        self.block_names: dict[str, str] = {}
        self._pick_blocks(module)

    # -- which module instances are blocks
    def _valid_instance(self, path: str) -> bool:
        ls = self.members[path]
        if path in self.containers or not path or len(ls) < 2:
            return False
        idx = [self.index[id(l)] for l in ls]
        if idx != list(range(idx[0], idx[0] + len(idx))):
            return False
        inside = {t for l in ls for t in (l.outputs or [l.name])}
        for l in ls:
            if _rel(l.name, path) is None:
                return False
            bn = l.fields.get("bn")
            if bn and _rel(bn["name"], path) is None:
                return False
        escaping = {t for t in inside if t in self.tr.outputs or
                    any(id(c) not in {id(x) for x in ls} for c in self.consumers[t])}
        return len(escaping) == 1

    def _pick_blocks(self, module):
        by_class: dict[str, list[str]] = defaultdict(list)
        for path in self.members:
            if self._valid_instance(path):
                by_class[self.classes[path]].append(path)
        cands = {c: ps for c, ps in by_class.items() if len(ps) >= 2}
        for c, ps in cands.items():
            self.chosen.update(ps)
        # deepest classes first: an outer block's rows name the inner block's parameters
        depth = {c: max(p.count(".") for p in ps) for c, ps in cands.items()}
        used_names = set()
        for c in sorted(cands, key=lambda c: -depth[c]):
            # instances whose layers line up form one block; a class can give several
            groups: list[list[str]] = []
            for p in cands[c]:
                for g in groups:
                    # one instance's layers a subset of the other's (ResNet's block without /
                    # with a downsample), never two different shapes merged into one
                    mine = set(self._rows(p))
                    if all(mine <= set(self._rows(q)) or mine >= set(self._rows(q)) for q in g) \
                            and self._make_block(c, "?", g + [p]) is not None:
                        g.append(p)
                        break
                else:
                    groups.append([p])
            short = _snake(c.rsplit(".", 1)[-1])
            for g in groups:
                bd = self._make_block(c, "?", g) if len(g) >= 2 else None
                if bd is None:
                    self.chosen.difference_update(g)
                    continue
                name, k = short, 2
                while name in used_names:
                    name, k = f"{short}_{k}", k + 1
                bd.name = name
                lib = self._library(c, g) if self.use_library else None
                if lib is not None:
                    bd.name, bd.params, bd.instance_params, bd.library = lib
                    name = bd.name
                used_names.add(name)
                self.blocks[name] = bd
                for p in g:
                    self.block_of[p] = bd

    def _library(self, cls: str, paths: list[str]):
        """The library's block for these instances (``LIBRARY_BLOCKS``), when its parameters
        can be read off every instance: (name, defaults, per-instance params, True)."""
        row = LIBRARY_BLOCKS.get(cls)
        if row is None:
            return None
        block, defaults, read = row
        inst = {}
        for p in paths:
            by_rel = {_rel(l.name, p): l for l in self.members[p]}
            try:
                params = read(by_rel)
            except (KeyError, TypeError, ZeroDivisionError, AttributeError):
                params = None
            if params is None:
                return None
            inst[p] = params
        return block, dict(defaults), inst, True

    def _rows(self, path: str) -> list[str]:
        if path not in self._temps:
            self._temps[path] = self._template(path)
        return self._temps[path][1]

    # -- entries of a scope
    def entries(self, scope: str, layers: list[Layer]) -> list[_Entry]:
        out, i = [], 0
        while i < len(layers):
            lay = layers[i]
            inst = None
            for path, _ in lay.stack:
                if path in self.chosen and path != scope and (not scope or
                                                             path.startswith(scope + ".")):
                    if path in self.block_of:
                        inst = path
                        break
            if inst is None:
                out.append(self._op_entry(lay))
                i += 1
                continue
            ms = self.members[inst]
            out.append(self._inst_entry(inst, ms))
            i += len(ms)
        return out

    def _op_entry(self, lay: Layer) -> _Entry:
        return _Entry(lay.name, "op", layer=lay, inputs=list(lay.inputs),
                      output=(lay.outputs or [lay.name])[0],
                      produced=tuple(lay.outputs or [lay.name]),
                      comment=_layer_comment(lay))

    def _inst_entry(self, path: str, ms: list[Layer]) -> _Entry:
        bd = self.block_of[path]
        inside = [t for l in ms for t in (l.outputs or [l.name])]
        ins = []
        for l in ms:
            for t in l.inputs:
                if t not in inside and t not in ins:
                    ins.append(t)
        out = next(t for t in inside if t in self.tr.outputs or
                   any(c not in ms for c in self.consumers[t]))
        return _Entry(path, "inst", block=bd.name, params=dict(bd.instance_params[path]),
                      inputs=ins, output=out, produced=tuple(inside),
                      comment=f"{bd.cls.rsplit('.', 1)[-1]} {path}")

    # -- a block from the instances of one class
    def _template(self, path: str):
        ms = self.members[path]
        ents = self.entries(path, ms)
        ext = []
        for e in ents:
            for t in e.inputs:
                if not any(t in x.produced for x in ents) and t not in ext:
                    ext.append(t)
        names = ["x"] + [f"x{i}" for i in range(1, len(ext))]
        local = {}
        for e in ents:
            r = _rel(e.name, path)
            if e.kind == "inst":
                local[e.output] = r
            else:
                for t in e.produced:
                    local[t] = _rel(t, path)
        rows = {}
        order = []
        for e in ents:
            r = _rel(e.name, path)
            ins = [local.get(t) or names[ext.index(t)] for t in e.inputs]
            if e.kind == "op":
                spec = _op_fields(e.layer, path)
                key = ("op", e.layer.op)
            else:
                spec = dict(e.params)
                key = ("block", e.block)
            rows[r] = (key, spec, ins, e.comment.replace(path + ".", ""))
            order.append(r)
        out_rel = local[next(t for e in ents for t in e.produced
                             if t in self.tr.outputs or any(
                                 c not in ms for c in self.consumers[t]))]
        return rows, order, names, out_rel

    def _make_block(self, cls: str, name: str, paths: list[str]) -> _BlockDef | None:
        for p in paths:
            if p not in self._temps:
                self._temps[p] = self._template(p)
        temps = {p: self._temps[p] for p in paths}
        if len({len(t[2]) for t in temps.values()}) != 1:
            return None
        outs = {t[3] for t in temps.values()}
        if all(t[3] == t[1][-1] for t in temps.values()):
            out_rel = None               # each instance's last layer: the default output
        elif len(outs) == 1:
            out_rel = outs.pop()
        else:
            return None
        kinds: dict[str, tuple] = {}
        for rows, order, _, _ in temps.values():
            for r in order:
                if kinds.setdefault(r, rows[r][0]) != rows[r][0]:
                    return None
        order = _merge_orders([t[1] for t in temps.values()])
        if order is None:
            return None
        # values per (row, key) across instances; _ABSENT = the row is absent there
        slots: dict[tuple, list] = {}
        ins_lit: dict[str, list] = {}
        for r in order:
            here = [temps[p][0].get(r) for p in paths]
            if not all(here):
                slots[(r, "when")] = [h is not None for h in here]
            keys = []
            for h in here:
                for k in (h[1] if h else ()):
                    if k not in keys:
                        keys.append(k)
            for k in keys:
                vals = [h[1].get(k, _Missing) if h else _ABSENT for h in here]
                if any(v is _Missing for v in vals):
                    return None          # a field some instances leave out
                slots[(r, k)] = vals
            ins = [tuple(h[2]) if h else _ABSENT for h in here]
            known = [v for v in ins if v is not _ABSENT]
            if len({len(v) for v in known}) != 1:
                return None
            lit = list(known[0])
            for i in range(len(lit)):
                col = [v[i] if v is not _ABSENT else _ABSENT for v in ins]
                if len({c for c in col if c is not _ABSENT}) > 1:
                    slots[(r, f"in{i}")] = col
                    lit[i] = None
            ins_lit[r] = lit
        params: dict[str, Any] = {}
        slot_param: dict[tuple, str] = {}
        by_values: dict[str, tuple] = {}
        # a field that varies in one layer only gives its bare name ("stride"), else the
        # layer's too ("branch2_0_conv_out")
        varying = Counter(key[1] for key, vals in slots.items() if key[1] != "when" and len(
            {_hashable(v) for v in vals if v is not _ABSENT}) > 1)
        self._varying = varying
        for key, vals in slots.items():
            known = [v for v in vals if v is not _ABSENT]
            if key[1] != "when" and len({_hashable(v) for v in known}) <= 1:
                continue
            vt = tuple(_hashable(v) for v in vals)
            # an existing parameter that agrees wherever both are known
            pname = next((n for n, t in by_values.items() if all(
                a is _ABSENT or b is _ABSENT or (a == b and type(a) is type(b))
                for a, b in zip(t, vt))), None)
            if pname is None:
                pname = self._param_name(key, params)
                by_values[pname] = vt
            else:
                by_values[pname] = tuple(a if a is not _ABSENT else b
                                         for a, b in zip(by_values[pname], vt))
            common = Counter(v for v in by_values[pname] if v is not _ABSENT).most_common(1)
            params[pname] = _unhash(common[0][0]) if common else None
            slot_param[key] = pname
        inst_params = {p: {n: (_unhash(by_values[n][j]) if by_values[n][j] is not _ABSENT
                               else params[n]) for n in params}
                       for j, p in enumerate(paths)}
        rows_out = []
        t0 = temps[paths[0]]
        prev, prev_cond = "x", False
        for r in order:
            (kind, what), spec, _, comment = next(
                (h[0], h[1], h[2], h[3]) for h in (temps[p][0].get(r) for p in paths) if h)
            m: dict[str, Any] = {}
            if (r, "when") in slot_param:
                m["when"] = "${%s}" % slot_param[(r, "when")]
            m["op" if kind == "op" else "block"] = what
            ins = ["${%s}" % slot_param[(r, f"in{i}")] if v is None else v
                   for i, v in enumerate(ins_lit[r])]
            if ins != [prev] or prev_cond:
                m["in"] = ins[0] if len(ins) == 1 else ins
            for k, v in spec.items():
                m[k] = "${%s}" % slot_param[(r, k)] if (r, k) in slot_param else v
            rows_out.append((r, m, comment))
            prev, prev_cond = r, "when" in m
        src = _class_source(cls, self.tr)
        return _BlockDef(name, cls, rows_out, params, t0[2], out_rel,
                         f"{cls}{'  ' + src if src else ''} ({len(paths)} instances)",
                         inst_params)

    def _param_name(self, key, params) -> str:
        r, k = key
        if k == "when":
            base = _ident(f"has_{r}")
        elif k == "in":
            base = _ident(f"{r}_in")
        else:
            base = _ident(k)
            if base in params or self._varying.get(k, 0) > 1:
                base = _ident(f"{r}_{k}")
        name, i = base, 2
        while name in params or name in ("x",):
            name, i = f"{base}_{i}", i + 1
        return name


class _MissingT:
    def __repr__(self):
        return "<missing>"


_Missing = _MissingT()
_ABSENT = _MissingT()


def _hashable(v):
    if isinstance(v, dict):
        return ("__dict__",) + tuple((k, _hashable(x)) for k, x in v.items())
    if isinstance(v, list):
        return ("__list__",) + tuple(_hashable(x) for x in v)
    return v


def _unhash(v):
    if isinstance(v, tuple) and v and v[0] == "__dict__":
        return {k: _unhash(x) for k, x in v[1:]}
    if isinstance(v, tuple) and v and v[0] == "__list__":
        return [_unhash(x) for x in v[1:]]
    return v


def _merge_orders(orders: list[list[str]]) -> list[str] | None:
    """One order of every row name that keeps each instance's order (None: there is none)."""
    succ: dict[str, set] = defaultdict(set)
    names: list[str] = []
    for o in orders:
        for a in o:
            if a not in names:
                names.append(a)
        for a, b in zip(o, o[1:]):
            succ[a].add(b)
    indeg = Counter(b for a in succ for b in succ[a])
    ready = [n for n in names if indeg[n] == 0]
    out = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for b in sorted(succ[n], key=names.index):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
        ready.sort(key=names.index)
    return out if len(out) == len(names) else None


def _op_fields(lay: Layer, scope: str) -> dict:
    """The layer's spec fields (name and in excluded), names relative to ``scope``."""
    f = dict(lay.fields)
    if f.get("bn"):
        f["bn"] = {"name": _rel(f["bn"]["name"], scope) if scope else f["bn"]["name"],
                   "eps": f["bn"]["eps"]}
    if lay.op == "batch_norm":
        f["weights"] = None
    return f


def _layer_comment(lay: Layer) -> str:
    return f"{' '.join(lay.parts)}  {lay.source}"


def _class_source(cls: str, tr: Traced) -> str:
    import importlib
    mod, _, qual = cls.rpartition(".")
    try:
        obj = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        f = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
        return f"{_short_path(f)}:{line}"
    except Exception:          # classes defined in __main__, C extensions: no source line
        return ""


def _yaml_scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return f"{v:.1f}"
        s = repr(v)
        if "e" in s and "." not in s.split("e")[0]:
            a, b = s.split("e")
            s = f"{a}.0e{b}"
        return s
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(x)}" for k, x in v.items()) + "}"
    s = str(v)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./\-]*", s) and s.lower() not in (
            "true", "false", "null", "yes", "no", "on", "off", "y", "n", "none", "~"):
        return s
    return json.dumps(s)


def _flow(m: dict, indent: str, width: int = 100, prefix: str = "- ") -> list[str]:
    """``- {k: v, ...}`` wrapped at ``width``."""
    parts = [f"{k}: {_yaml_scalar(v)}" for k, v in m.items()]
    lines, cur = [], indent + prefix + "{"
    for i, p in enumerate(parts):
        piece = p + ("}" if i == len(parts) - 1 else ",")
        if len(cur) + len(piece) + 1 > width and not cur.endswith("{"):
            lines.append(cur)
            cur = indent + " " * (len(prefix) + 1) + piece
        else:
            cur += ("" if cur.endswith("{") else " ") + piece
    lines.append(cur)
    return lines


def _spec_fields(op: str, f: dict) -> dict:
    """Fields without their defaults; ``bn`` in its short form when the eps is torch's."""
    d = _DEFAULTS.get(op, {})
    out = {}
    for k, v in f.items():
        if k in d and d[k] == v and not (isinstance(v, str) and "${" in v):
            continue
        if k == "stride" and op in ("max_pool2d", "avg_pool2d") and v == f.get("kernel"):
            continue
        if k == "bn" and isinstance(v, dict) and v.get("eps") == 1e-5:
            v = v["name"]
        out[k] = v
    return out


def _entry_line(m: dict, comment: str, indent: str) -> list[str]:
    lines = _flow(m, indent)
    return [f"{indent}# {comment}"] + lines if comment else lines


class _Spec:
    """Assembles the YAML text."""

    def __init__(self, em: _Emitter, tr: Traced, name: str, flat: bool):
        self.em, self.tr, self.name, self.flat = em, tr, name, flat

    def text(self) -> str:
        tr = self.tr
        n, c, h, w = tr.input_shape
        out = [f"# Imported from {tr.module_class} by `ttmodels import` (torch.fx trace on a "
               f"{n}x{c}x{h}x{w} input).",
               "# Layer names are the module's paths, so its state_dict() loads as it is; each "
               "layer's comment",
               "# names the module(s) it was made of and the source line that calls it.",
               f"name: {_yaml_scalar(self.name)}"]
        if tr.unused_prefixes:
            out.append("# Modules the forward pass does not use (their keys: build(..., ignore="
                       f"{list(tr.unused_prefixes)})): " + ", ".join(tr.unused_prefixes))
        if tr.partial_stop is not None:
            u = tr.partial_stop
            out.append(f"# PARTIAL: stops before {u.kind} at {u.where} ({u.source}): {u.reason}")
        out += ["inputs:",
                f"  {tr.input_name}: {{channels: {c}, size: [{h}, {w}]}}",
                "defaults:",
                "  layout: auto",
                "  precision: {activations: bfloat16, weights: bfloat8_b, math_fidelity: HiFi2}",
                "profiles:",
                "  tt-perf: {activations: bfloat8_b, weights: bfloat8_b, math_fidelity: LoFi}",
                "  float32: {activations: float32, weights: float32, math_fidelity: HiFi4, "
                "fp32_accum: true}"]
        if any(not b.library for b in self.em.blocks.values()) and not self.flat:
            out.append("blocks:")
            for bd in self.em.blocks.values():
                if not bd.library:
                    out += self._block_text(bd)
        out.append("layers:")
        ents = self.em.entries("", self.tr.layers) if not self.flat else \
            [self.em._op_entry(l) for l in self.tr.layers]
        if not self.flat:
            ents = _find_repeats(ents, self.em)
        prev = tr.input_name
        for e in ents:
            m: dict[str, Any] = {"name": e.name}
            if e.kind == "op":
                m["op"] = e.layer.op
            else:
                m["block"] = e.block
            if e.inputs != [prev]:
                m["in"] = e.inputs[0] if len(e.inputs) == 1 else list(e.inputs)
            if e.kind == "op":
                m.update(_spec_fields(e.layer.op, _op_fields(e.layer, "")))
            else:
                bd = next(b for b in self.em.blocks.values() if b.name == e.block)
                if e.repeat:
                    m.update(e.repeat["head"])
                m.update({k: v for k, v in e.params.items() if bd.params[k] != v})
                if e.repeat and e.repeat.get("first"):
                    m["first"] = e.repeat["first"]
            out += _entry_line(m, e.comment, "  ")
            prev = e.output
        outs = tr.outputs
        out.append("outputs: " + (_yaml_scalar(outs[0]) if len(outs) == 1 else _yaml_scalar(outs)))
        return "\n".join(out) + "\n"

    def _block_text(self, bd: _BlockDef) -> list[str]:
        out = [f"  # {bd.comment}", f"  {bd.name}:"]
        if bd.params:
            out += _flow(bd.params, "    ", prefix="params: ")
        if bd.inputs and len(bd.inputs) > 1:
            out.append(f"    inputs: {_yaml_scalar(['x'] + [f'x{i}' for i in range(1, len(bd.inputs))])}")
        out.append("    layers:")
        for r, m, comment in bd.rows:
            mm = {"name": r}
            mm.update({k: m[k] for k in ("when", "op", "block", "in") if k in m})
            rest = {k: v for k, v in m.items() if k not in mm}
            if "op" in m:
                rest = _spec_fields(m["op"], rest)
            else:
                inner = next(b for b in self.em.blocks.values() if b.name == m["block"])
                rest = {k: v for k, v in rest.items()
                        if not (inner.params.get(k) == v and "${" not in str(v))}
            mm.update(rest)
            out += _entry_line(mm, comment, "      ")
        last = bd.rows[-1][0] if bd.rows else None
        if bd.output is not None and bd.output != last:
            out.append(f"    outputs: {_yaml_scalar(bd.output)}")
        return out


_INDEXED = re.compile(r"^(.*)\.([A-Za-z_\-]*?)(\d+)$")


def _find_repeats(ents: list[_Entry], em: _Emitter) -> list[_Entry]:
    """Chains of instances of one block that are all the children of a container become one
    entry with ``repeat`` (``first:`` for what the first one differs in)."""
    out, i = [], 0
    names = [e.name for e in ents]
    while i < len(ents):
        e = ents[i]
        m = _INDEXED.match(e.name) if e.kind == "inst" else None
        if m is None:
            out.append(e)
            i += 1
            continue
        cont, pre, k0 = m.group(1), m.group(2), int(m.group(3))
        j = i + 1
        while j < len(ents):
            f = ents[j]
            mf = _INDEXED.match(f.name) if f.kind == "inst" else None
            if not (mf and f.block == e.block and mf.group(1) == cont and mf.group(2) == pre
                    and int(mf.group(3)) == k0 + (j - i) and f.inputs == [ents[j - 1].output]
                    and (j == i + 1 or f.params == ents[i + 1].params)):
                break
            j += 1
        run = ents[i:j]
        others = [n for n in names if (n == cont or n.startswith(cont + ".")) and
                  n not in {r.name for r in run}]
        if len(run) < 2 or others or cont in em.tr.outputs:
            out.append(e)
            i += 1
            continue
        common = run[1].params
        head: dict[str, Any] = {"repeat": len(run)}
        if k0:
            head["repeat_start"] = k0
        if pre:
            head["repeat_name"] = "{name}.%s{i}" % pre
        first = {k: v for k, v in run[0].params.items() if common[k] != v}
        cls = em.classes[run[0].name].rsplit(".", 1)[-1]
        out.append(_Entry(cont, "inst", block=e.block, params=dict(common), inputs=run[0].inputs,
                          output=run[-1].output, produced=tuple(t for r in run for t in r.produced),
                          comment=f"{cls} x{len(run)}: {run[0].name} .. {run[-1].name}",
                          repeat={"head": head, "first": first}))
        i = j
    return out


def emit_spec(tr: Traced, module, *, name: str | None = None, flat: bool = False,
              library: bool = True) -> str:
    """The spec text of a traced module: blocks and repeats (``flat``: one line per layer;
    ``library``: the library's blocks where they match)."""
    if not tr.layers:
        raise ImportError_(f"{tr.module_class}: nothing to import (no layers before the first "
                           "unsupported node)")
    em = _Emitter(tr, module, use_library=library)
    nm = name or _snake(tr.module_class.rsplit(".", 1)[-1])
    return _Spec(em, tr, nm, flat).text()


_REQUIRED = _MissingT()


def _eps(lay: Layer) -> float:
    return lay.fields["bn"]["eps"]


def _lib_basic(L):
    c1, c2 = L["conv1"], L["conv2"]
    if set(L) - {"conv1", "conv2", "downsample.0", "relu"}:
        return None
    return {"planes": c1.fields["out"], "stride": c1.fields["stride"],
            "downsample": "downsample.0" in L, "bn_eps": _eps(c1)}


def _lib_bottleneck(L):
    c1, c2, c3 = L["conv1"], L["conv2"], L["conv3"]
    if set(L) - {"conv1", "conv2", "conv3", "downsample.0", "relu"}:
        return None
    planes, groups = c3.fields["out"] // 4, c2.fields["groups"]
    return {"planes": planes, "stride": c2.fields["stride"], "downsample": "downsample.0" in L,
            "groups": groups, "width_per_group": c1.fields["out"] // groups * 64 // planes,
            "bn_eps": _eps(c1)}


def _lib_inverted_residual(L):
    first = L["conv.0.0"]
    expand = "conv.1.0" in L
    dw = L["conv.1.0"] if expand else first
    proj = L["conv.2"] if expand else L["conv.1"]
    inp = first.in_channels
    return {"inp": inp, "out": proj.fields["out"], "stride": dw.fields["stride"],
            "expand": dw.fields["out"] // inp if expand else 1, "bn_eps": _eps(first)}


#: module class -> (library block, its parameters' defaults, reader of an instance's params from
#: its layers by relative name). Used only when the blocked spec then still expands to exactly
#: the traced layers (checked); otherwise the importer's own block stands.
LIBRARY_BLOCKS: dict[str, tuple] = {
    "torchvision.models.resnet.BasicBlock": (
        "ttmodels/resnet/basic_block",
        {"planes": _REQUIRED, "stride": 1, "downsample": False, "bn_eps": 1e-5}, _lib_basic),
    "torchvision.models.resnet.Bottleneck": (
        "ttmodels/resnet/bottleneck",
        {"planes": _REQUIRED, "stride": 1, "downsample": False, "groups": 1,
         "width_per_group": 64, "bn_eps": 1e-5}, _lib_bottleneck),
    "torchvision.models.mobilenetv2.InvertedResidual": (
        "ttmodels/mobilenet/inverted_residual",
        {"inp": _REQUIRED, "out": _REQUIRED, "stride": 1, "expand": 6, "bn_eps": 1e-5},
        _lib_inverted_residual),
}


# ---------------------------------------------------------------------------------------------
# checking: the blocked spec is the flat one; the spec computes what the module computes
# ---------------------------------------------------------------------------------------------

def _graph_key(g) -> list:
    # an add of two equal shapes is the same either way round (the library's
    # inverted_residual adds [conv, x], torchvision x + conv)
    def ins(n):
        if n.op == "add" and len({str(g.shape_of(i)) for i in n.inputs}) == 1:
            return tuple(sorted(n.inputs))
        return tuple(n.inputs)
    return [(n.name, n.op, ins(n), repr(sorted(n.attrs.items())), n.weights, n.bn,
             tuple(n.outputs)) for n in g.nodes]


def _same_graph(text: str, flat: str, batch: int, size) -> str | None:
    """None when ``text`` expands to exactly the layers of ``flat``; else the first difference."""
    from .spec import load_graph
    a = _graph_key(load_graph(text, batch_size=batch, input_size=size))
    b = _graph_key(load_graph(flat, batch_size=batch, input_size=size))
    for x, y in zip(a, b):
        if x != y:
            return f"{x} != {y}"
    return None if len(a) == len(b) else f"{len(a)} layers != {len(b)}"


def _module_values(gm, x, wanted: set[str]) -> dict:
    """The values of the fx nodes in ``wanted`` on input ``x`` (copies: in-place ops later in
    the module would change them)."""
    import torch
    import torch.fx as fx
    got = {}

    class Rec(fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if n.name in wanted and isinstance(v, torch.Tensor):
                got[n.name] = v.detach().clone()
            return v

    flags = [(m, m.training) for m in gm.modules()]
    gm.eval()                    # shares the user's submodules: their flags are put back
    try:
        with torch.no_grad():
            Rec(gm).run(x)
    finally:
        for m, f in flags:
            m.training = f
    return got


@dataclass
class CheckResult:
    pcc: float
    max_abs: float
    first_bad: str | None = None     # the first layer below PCC_MIN, with its PCC
    rows: list = field(default_factory=list)

    def summary(self) -> str:
        s = f"float32-profile sim vs the module: PCC {self.pcc:.6f}, max abs error {self.max_abs:.3g}"
        if self.first_bad:
            s += f"; first layer below {PCC_MIN}: {self.first_bad}"
        return s


def _pcc(a, b) -> float:
    from .reference import pcc
    a, b = a.double().flatten(), b.double().flatten()
    if a.numel() and float((a - b).abs().max()) <= 1e-6 * max(1.0, float(a.abs().max())):
        return 1.0
    return float(pcc(a, b))


def check_spec(text: str, module, tr: Traced, example_input, *, per_layer: bool | None = None
               ) -> CheckResult:
    """Build ``text`` in the float32 profile on the sim with the module's weights, run it on
    ``example_input`` and compare with the module (its output; per layer when the output is
    below ``PCC_MIN`` or ``per_layer``)."""
    from .backends import open_backend
    from .planner import plan_graph
    from .runtime import Executor, to_torch_nchw
    from .spec import load_graph
    from .weights import load_state_dict, prepare_parameters

    n, c, h, w = tr.input_shape
    graph = load_graph(text, batch_size=n, input_size=(h, w), profile="float32")
    sd = load_state_dict(module, graph, ignore=list(tr.unused_prefixes) or None)
    by_fx = {l.name: l.fx for l in tr.layers if not l.outputs}
    wanted = set(by_fx.values()) | set(tr.output_fx)
    ref = _module_values(tr.gm, example_input, wanted)
    plan = plan_graph(graph)
    be = open_backend("sim")
    try:
        ex = Executor(plan, prepare_parameters(graph, sd), be)
        got = ex.run({tr.input_name: example_input}, keep_all=True)
        outs = []
        for t, fxn in zip(tr.outputs, tr.output_fx):
            o = to_torch_nchw(be, got[t], graph.shape_of(t))
            r = ref[fxn].reshape(o.shape)
            outs.append((_pcc(r, o), float((r - o).abs().max())))
        res = CheckResult(min(p for p, _ in outs), max(m for _, m in outs))
        if per_layer or (per_layer is None and res.pcc < PCC_MIN):
            for node in graph.nodes:
                fxn = by_fx.get(node.name)
                if fxn is None or fxn not in ref or node.name not in got:
                    continue
                o = to_torch_nchw(be, got[node.name], graph.shape_of(node.name))
                r = ref[fxn].reshape(o.shape)
                p = _pcc(r, o)
                res.rows.append((node.name, p, float((r - o).abs().max())))
                if p < PCC_MIN and res.first_bad is None:
                    lay = next(l for l in tr.layers if l.name == node.name)
                    res.first_bad = (f"'{node.name}' ({' '.join(lay.parts)}, {lay.source}): "
                                     f"PCC {p:.6f}")
        return res
    finally:
        be.close()


# ---------------------------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------------------------

def import_module(module, example_input, *, name: str | None = None, partial: bool = False,
                  check: bool = True) -> ImportedSpec:
    """The spec (YAML text) of ``module`` traced on ``example_input`` (an NCHW tensor).

    Raises ``UnsupportedError`` listing every node the spec language has no op for (``partial``:
    the spec stops before the first one, which it names). With ``check`` the spec is built in
    the float32 profile on the sim with the module's weights and compared with the module;
    below ``PCC_MIN`` that is an ``ImportError_`` naming the first layer that differs."""
    import torch
    if not isinstance(example_input, torch.Tensor) or example_input.dim() != 4:
        raise ImportError_("example_input must be an NCHW tensor (one image input)")
    tr = trace(module, example_input, partial=partial)
    if tr.unsupported and not partial:
        raise UnsupportedError(tr.unsupported)
    n, c, h, w = tr.input_shape
    text = emit_spec(tr, module, name=name)
    flat = emit_spec(tr, module, name=name, flat=True)
    diff = _same_graph(text, flat, n, (h, w))
    note = ""
    if diff is not None:              # a library block that does not fit after all: own blocks
        text = emit_spec(tr, module, name=name, library=False)
        diff = _same_graph(text, flat, n, (h, w))
    if diff is not None:              # the block finder got it wrong: the flat spec is exact
        text, note = flat, f"blocks dropped (they did not expand to the traced layers: {diff})"
    out = ImportedSpec(text)
    out.layers = len(tr.layers)
    out.blocks = tuple(sorted(set(re.findall(r"block: \"?([A-Za-z0-9_/]+)", text))))
    out.ignored_prefixes = tr.unused_prefixes
    out.report = note
    if check:
        res = check_spec(text, module, tr, example_input)
        out.pcc, out.max_abs = res.pcc, res.max_abs
        out.report = (note + "\n" if note else "") + res.summary()
        if res.pcc < PCC_MIN:
            raise ImportError_(f"{tr.module_class}: the imported spec does not reproduce the "
                               f"module: {res.summary()}")
    return out


_REF = re.compile(r"^(?P<mod>[^:]+):(?P<fn>[A-Za-z_][A-Za-z0-9_.]*)(?:\((?P<args>.*)\))?$")


def _parse_args(text: str):
    """``resnet50d, pretrained=False`` -> (args, kwargs): literals, bare names as strings."""
    import ast
    if not text.strip():
        return [], {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as e:
        raise ImportError_(f"cannot read the arguments ({text}): {e.msg}") from None

    def lit(n):
        if isinstance(n, ast.Name):
            return n.id
        try:
            return ast.literal_eval(n)
        except ValueError:
            raise ImportError_(f"argument {ast.unparse(n)!r}: only literals and bare names") \
                from None
    return [lit(a) for a in call.args], {k.arg: lit(k.value) for k in call.keywords}


def resolve_module_ref(ref: str):
    """``package.module:callable``, ``package:callable(arg, k=v)`` or ``path/file.py:callable``
    -> (the nn.Module it returns, a default name)."""
    import importlib
    import importlib.util
    m = _REF.match(ref.strip())
    if m is None:
        raise ImportError_(f"module reference {ref!r}: use package.module:callable, "
                           "package:callable(args) or path/to/file.py:callable")
    mod_name, fn_name, args = m.group("mod"), m.group("fn"), m.group("args") or ""
    if mod_name.endswith(".py"):
        if not os.path.isfile(mod_name):
            raise ImportError_(f"module reference {ref!r}: no file {mod_name}")
        spec = importlib.util.spec_from_file_location(
            f"_ttmodels_import_{abs(hash(os.path.abspath(mod_name)))}", mod_name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ImportError_(f"module reference {ref!r}: {e}") from None
    obj = mod
    for part in fn_name.split("."):
        if not hasattr(obj, part):
            raise ImportError_(f"module reference {ref!r}: {mod_name} has no {fn_name}")
        obj = getattr(obj, part)
    a, kw = _parse_args(args)
    module = obj(*a, **kw) if callable(obj) and not _is_module(obj) else obj
    if not _is_module(module):
        raise ImportError_(f"module reference {ref!r} gave a {type(module).__name__}, "
                           "not a torch.nn.Module")
    default = str(a[0]) if a and isinstance(a[0], str) else fn_name.rsplit(".", 1)[-1]
    return module, _ident(default)


def _is_module(obj) -> bool:
    import torch
    return isinstance(obj, torch.nn.Module)


def run_import(ref: str, output: str, *, batch: int = 1, input_size=(224, 224), channels: int = 3,
               name: str | None = None, partial: bool = False, check: bool = True) -> int:
    """``ttmodels import``: write the spec, print what was imported and the self-check."""
    import sys

    from .weights import synthetic_images
    if batch < 1 or min(input_size) < 1 or channels < 1:
        raise ImportError_("--batch, --input-size and --channels must be positive")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise ImportError_(f"-o {output}: directory {parent} does not exist")
    module, default = resolve_module_ref(ref)
    h, w = input_size
    x = synthetic_images(batch, channels, h, w, seed=0)
    try:
        text = import_module(module, x, name=name or default, partial=partial, check=check)
    except UnsupportedError as e:
        print(f"error: {ref}: {e}", file=sys.stderr)
        return 2
    with open(output, "w") as f:
        f.write(text)
    print(f"wrote {output}: {text.layers} layers, {len(text.blocks)} block(s)"
          + (f" ({', '.join(text.blocks)})" if text.blocks else ""))
    if text.ignored_prefixes:
        print(f"  modules unused by forward (build with ignore={list(text.ignored_prefixes)}): "
              + ", ".join(text.ignored_prefixes))
    if text.report:
        print("  " + text.report.replace("\n", "\n  "))
    return 0
