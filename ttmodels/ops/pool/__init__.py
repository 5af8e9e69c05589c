"""The pools: max_pool2d, avg_pool2d (ttnn pool2d), global_avg_pool (ttnn's whole-map avg
reduction) and adaptive_avg_pool2d (ttnn.adaptive_avg_pool2d)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig, SliceConfig, optional
from ..base import Field, OpDef, Parsed, pads, register, window_out
from .rules import _c_pool, _out_pool


@op_attrs
class MaxPool2dAttrs(Attrs):
    """max_pool2d's attrs (``parse_window``)."""
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]          # top, bottom, left, right
    dilation: tuple[int, int]
    ceil_mode: bool


@op_attrs
class AvgPool2dAttrs(Attrs):
    """avg_pool2d's attrs (``parse_window``)."""
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    ceil_mode: bool
    count_include_pad: bool


@op_attrs
class AdaptiveAvgPool2dAttrs(Attrs):
    """adaptive_avg_pool2d's attrs: the output size."""
    size: tuple[int, int]


def parse_window(x) -> Parsed:
    f, op = x.f, x.op
    s_in = x.shape(0)
    k = f.pair("kernel")
    s = f.pair("stride", list(k))
    p = f.pad4("padding", 0)
    d = f.pair("dilation", 1) if op == "max_pool2d" else (1, 1)
    ceil = f.bool("ceil_mode", False)
    sym = p[0] == p[1] and p[2] == p[3]
    if sym:
        for ax, pp in ((0, p[0]), (1, p[2])):
            eff = d[ax] * (k[ax] - 1) + 1 if op == "max_pool2d" else k[ax]
            if 2 * pp > eff:
                raise f.fail(f"pool padding {pp} must be at most half the kernel "
                             f"({eff}) as in PyTorch", "padding")
    oh = window_out(s_in.h, k[0], s[0], p[0], p[1], d[0], ceil, sym)
    ow = window_out(s_in.w, k[1], s[1], p[2], p[3], d[1], ceil, sym)
    if oh < 1 or ow < 1:
        raise f.fail(f"pool kernel {list(k)} does not fit the input {s_in.h}x{s_in.w} of "
                     f"'{x.ins[0]}'", "kernel")
    attrs = dict(kernel=k, stride=s, padding=p)
    if op == "max_pool2d":
        attrs.update(dilation=d, ceil_mode=ceil)
    else:
        attrs.update(ceil_mode=ceil, count_include_pad=f.bool("count_include_pad", True))
    return Parsed(attrs, TensorShape(s_in.n, oh, ow, s_in.c))


def parse_global(x) -> Parsed:
    s = x.shape(0)
    return Parsed({}, TensorShape(s.n, 1, 1, s.c))


def parse_adaptive(x) -> Parsed:
    f, s = x.f, x.shape(0)
    oh, ow = f.pair("size")
    if oh > s.h or ow > s.w:
        raise f.fail(f"adaptive_avg_pool2d size [{oh}, {ow}] is larger than the input "
                     f"{s.h}x{s.w} of '{x.ins[0]}'", "size")
    return Parsed(dict(size=(oh, ow)), TensorShape(s.n, oh, ow, s.c))


def _max_pool(x, a):
    import torch.nn.functional as F
    t, b, l, r = pads(a.get("padding", (0, 0, 0, 0)))
    kw = dict(kernel_size=tuple(a["kernel"]), stride=tuple(a.get("stride") or a["kernel"]),
              dilation=tuple(a.get("dilation", (1, 1))), ceil_mode=bool(a.get("ceil_mode", False)))
    kh, kw_ = ((k - 1) * d + 1 for k, d in zip(kw["kernel_size"], kw["dilation"]))
    if t == b and l == r and t <= kh // 2 and l <= kw_ // 2:
        return F.max_pool2d(x, padding=(t, l), **kw)
    # Asymmetric: pad with -inf so padded cells never win, then pool without padding.
    return F.max_pool2d(F.pad(x, (l, r, t, b), value=float("-inf")), padding=0, **kw)


def _avg_pool(x, a):
    import torch
    import torch.nn.functional as F
    t, b, l, r = pads(a.get("padding", (0, 0, 0, 0)))
    include = bool(a.get("count_include_pad", True))
    kw = dict(kernel_size=tuple(a["kernel"]), stride=tuple(a.get("stride") or a["kernel"]),
              ceil_mode=bool(a.get("ceil_mode", False)))
    kh, kw_ = kw["kernel_size"]
    if t == b and l == r and t <= kh // 2 and l <= kw_ // 2:
        return F.avg_pool2d(x, padding=(t, l), count_include_pad=include, **kw)
    xp = F.pad(x, (l, r, t, b))
    y = F.avg_pool2d(xp, padding=0, count_include_pad=True, **kw)
    if include:
        return y
    # Divide by the number of real (unpadded) cells: both pools share torch's divisor, so the
    # ratio is sum(valid) / count(valid).
    ones = F.pad(torch.ones_like(x[:1, :1]), (l, r, t, b))
    return y / F.avg_pool2d(ones, padding=0, count_include_pad=True, **kw)


def reference_window(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    y = (_max_pool if node.op == "max_pool2d" else _avg_pool)(x, node.attrs)
    # With explicit padding, ceil_mode may add a window that starts in the right/bottom
    # padding, which torch (and the graph's shape inference) drops: crop it.
    return y[:, :, :node.shape.h, :node.shape.w]


def reference_global(model, node: Node, env):
    return model.operand(node.inputs[0], env).mean(dim=(2, 3), keepdim=True)


def reference_adaptive(model, node: Node, env):
    import torch.nn.functional as F
    return F.adaptive_avg_pool2d(model.operand(node.inputs[0], env), tuple(node.attrs.size))


@dataclass(frozen=True)
class PoolPlan(PlanConfig):
    """A planned pool: the shard scheme pool2d is given for an interleaved input
    (``applied_shard_scheme``, None when the input is sharded), its output format, the kernel it
    runs (global / adaptive pools: the window covering the map), the parallel config and the input
    shards it reads; a DRAM-sliced pool's slices."""
    applied_shard_scheme: str | None = None
    shard_scheme: str | None = None
    output_layout: str | None = None
    dtype: str | None = None
    kernel: tuple[int, int] | None = None
    num_cores: int | None = None
    core_grid: tuple[int, int] | None = None
    input_memory: MemSpec | None = None
    out_shape: tuple[int, int, int, int] | None = None
    slice: SliceConfig | None = optional()
    # the global pool's output, asked explicitly: ttnn 0.81.1 reduces some whole-map pools to
    # an interleaved output and runs others as pool2d with sharded outputs (ops/pool/plan.py)
    memory_config: MemSpec | None = optional()
    # "mean": a float32 global pool run as ttnn.mean (ops/pool/exact_global.py)
    lowering: str | None = optional()
    # a float32 max/avg pool run exactly as slices and binaries (ops/pool/exact_window.py)
    exact: bool = optional(False)


_WHY = "pool2d's output keeps the shard grid it reads its input on"


def _def(name, fields, parse, reference, sim_ops, **kw) -> OpDef:
    return OpDef(name, "pool", fields=fields, arity=1, parse=parse, reference=reference,
                 rules=_c_pool,
                 output=_out_pool, sim_ops=sim_ops, config=PoolPlan,
                 **kw)


_WINDOW = (Field("kernel", "pair"), Field("stride", "pair"), Field("padding", "pad4"))

register(
    _def("max_pool2d", _WINDOW + (Field("dilation", "pair"), Field("ceil_mode", "bool")),
         parse_window, reference_window, ("max_pool2d", "reshape"), attrs=MaxPool2dAttrs,
         follows_input=_WHY, doc="max pool (ttnn pool2d)",
         attrs_doc="kernel, stride, padding (t, b, l, r), dilation, ceil_mode"),
    _def("avg_pool2d", _WINDOW + (Field("ceil_mode", "bool"), Field("count_include_pad", "bool")),
         parse_window, reference_window, ("avg_pool2d", "reshape"), attrs=AvgPool2dAttrs,
         follows_input=_WHY, doc="average pool (ttnn pool2d)",
         attrs_doc="kernel, stride, padding (t, b, l, r), ceil_mode, count_include_pad"),
    _def("global_avg_pool", (), parse_global, reference_global,
         ("avg_pool2d", "mean", "reshape"), follows_input=_WHY, doc="mean over H and W",
         attrs_doc="{}"),
    _def("adaptive_avg_pool2d", (Field("size", "pair"),), parse_adaptive, reference_adaptive,
         ("adaptive_avg_pool2d", "mean", "reshape"), attrs=AdaptiveAvgPool2dAttrs,
         doc="average pool to a given size", attrs_doc="size (oh, ow)"),
)
