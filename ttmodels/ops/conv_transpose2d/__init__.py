"""conv_transpose2d: torch.nn.ConvTranspose2d (``ttnn.conv_transpose2d``): torch's [in,
out / groups, kh, kw] weight, symmetric padding, output_padding, a fused activation; no BatchNorm
folding and no lowering choice (ttnn 0.81.1's conv_transpose2d has no linear path of its own)."""
from __future__ import annotations

from dataclasses import dataclass, fields

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ..base import Field, OpDef, Parsed, activation, prepare_weight_bias, register
from ..conv2d.rules import _out_conv
from .rules import _c_conv_transpose
from ..conv2d import Conv2dPlan, _rescale_to_unit_rms, check_channels, need_prefix


@op_attrs
class ConvTranspose2dAttrs(Attrs):
    """conv_transpose2d's attrs (``parse``)."""
    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]          # top, bottom, left, right (symmetric)
    output_padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    bias: bool
    activation: str | None


def parse(x) -> Parsed:
    """torch.nn.ConvTranspose2d's arguments and output size: (H - 1) * stride - 2 * padding
    + dilation * (kernel - 1) + output_padding + 1."""
    f, s_in, src = x.f, x.shape(0), x.ins[0]
    out = f.int("out")
    k = f.pair("kernel")
    s = f.pair("stride", 1)
    p = f.pair("padding", 0, lo=0)
    op_ = f.pair("output_padding", 0, lo=0)
    d = f.pair("dilation", 1)
    g = f.int("groups", 1)
    check_channels(f, s_in, out, g, src)
    for ax in (0, 1):
        if op_[ax] >= max(s[ax], d[ax]):
            raise f.fail(f"output_padding {list(op_)} must be smaller than the stride or the "
                         f"dilation ({list(s)}, {list(d)}), as in PyTorch", "output_padding")
    oh = (s_in.h - 1) * s[0] - 2 * p[0] + d[0] * (k[0] - 1) + op_[0] + 1
    ow = (s_in.w - 1) * s[1] - 2 * p[1] + d[1] * (k[1] - 1) + op_[1] + 1
    if oh < 1 or ow < 1:
        raise f.fail(f"padding {list(p)} leaves no output for kernel {list(k)} on the "
                     f"{s_in.h}x{s_in.w} input of '{src}'", "padding")
    attrs = dict(in_channels=s_in.c, out_channels=out, kernel=k, stride=s,
                 padding=(p[0], p[0], p[1], p[1]), output_padding=op_, dilation=d, groups=g,
                 bias=f.bool("bias", False), activation=f.act(fused_in="conv"))
    return Parsed(attrs, TensorShape(s_in.n, oh, ow, out), weights=x.key("weights"))


def params(node: Node) -> dict[str, tuple[int, ...]]:
    # torch.nn.ConvTranspose2d: weight [in, out / groups, kh, kw]
    a, p = node.attrs, need_prefix(node)
    kh, kw = a["kernel"]
    o = int(a["out_channels"])
    out = {f"{p}.weight": (int(a["in_channels"]), o // int(a.get("groups", 1)), int(kh), int(kw))}
    if a.get("bias"):
        out[f"{p}.bias"] = (o,)
    return out


def conv_raw(model, node: Node, x):
    import torch.nn.functional as F
    a, p = node.attrs, node.weights
    w = model.params[f"{p}.weight"]
    b = model.params.get(f"{p}.bias") if a.get("bias") else None
    t, _, l, _ = a["padding"]
    return F.conv_transpose2d(x, w, b, stride=tuple(a["stride"]), padding=(t, l),
                              output_padding=tuple(a["output_padding"]),
                              groups=int(a["groups"]), dilation=tuple(a["dilation"]))


def reference(model, node: Node, env):
    return activation(conv_raw(model, node, model.operand(node.inputs[0], env)),
                      node.attrs.get("activation"), node)


def init_random(node: Node, r) -> dict:
    """He-normal over what each output sums: in / groups channels x the kernel taps that land on
    it (kh * kw / stride^2 on average); calibration rescales it to unit RMS."""
    import math

    import torch
    p, a, g = node.weights, node.attrs, r.g
    i, o_g, kh, kw = r.expected[f"{p}.weight"]
    fan = (i // int(a["groups"])) * max(1.0, kh * kw / (a["stride"][0] * a["stride"][1]))
    sd = {f"{p}.weight": torch.randn(i, o_g, kh, kw, generator=g) * math.sqrt(2.0 / fan)}
    if a.get("bias"):
        sd[f"{p}.bias"] = (torch.rand(o_g * int(a["groups"]), generator=g) - 0.5) * 0.02
    return sd


def calibrate(model, node: Node, env):
    y = _rescale_to_unit_rms(model, node, conv_raw(model, node, model.operand(node.inputs[0], env)))
    return activation(y, node.attrs.get("activation"), node)


def prepared_shapes(node: Node, expected: dict) -> dict:
    d = {"weight": expected[f"{node.weights}.weight"]}
    if node.attrs.get("bias"):
        d["bias"] = (int(node.attrs.out_channels),)
    return d


@dataclass(frozen=True)
class ConvTranspose2dPlan(Conv2dPlan):
    """conv2d's plan (the same Conv2dConfig decisions) plus the transposed geometry."""
    kernel: tuple[int, int] | None = None
    padding: tuple[int, int, int, int] | None = None
    dilation: tuple[int, int] | None = None

    def as_attrs(self):
        d = super().as_attrs()
        geometry = {k: d.pop(k) for k in ("kernel", "padding", "dilation")}
        return {**d, **geometry}          # conv2d's config, then the transposed geometry

    @classmethod
    def of(cls, conv: Conv2dPlan, **geometry) -> "ConvTranspose2dPlan":
        return cls(**{f.name: getattr(conv, f.name) for f in fields(conv)}, **geometry)


register(OpDef(
    "conv_transpose2d", "conv_transpose",
    fields=(Field("out", "int"), Field("kernel", "pair"), Field("stride", "pair"),
            Field("padding", "pair"), Field("output_padding", "pair"), Field("dilation", "pair"),
            Field("groups", "int"), Field("bias", "bool"), Field("act", "act"),
            Field("weights", "name"), Field("in_channels", "int")),
    attrs=ConvTranspose2dAttrs, arity=1, parse=parse, reference=reference, rules=_c_conv_transpose, output=_out_conv,
    sim_ops=("conv_transpose2d", "prepare_conv_transpose2d_weights",
             "prepare_conv_transpose2d_bias"),
    params=params, prepare=prepare_weight_bias, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate, config=ConvTranspose2dPlan,
    doc="transposed convolution (torch.nn.ConvTranspose2d), activation fused",
    attrs_doc="in_channels, out_channels, kernel, stride, padding (top, bottom, left, right; "
              "symmetric), output_padding (oh, ow), dilation, groups, bias, activation",
))
