"""linear: a fully connected layer on the channels, torch's ``[out, in]`` weight, an activation
fused: on a per-image vector ``[N, 1, 1, C]`` (the head after a global pool or a flatten) or on
every pixel of ``[N, H, W, C]`` (ConvNeXt's pwconv1/pwconv2, torch's ``nn.Linear`` on a
channels-last map): both are one ``ttnn.linear`` on ``[1, 1, N*H*W, C]``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, activation, prepare_weight_bias, register
from .rules import _c_linear, _out_linear
from ..conv2d import need_prefix


@op_attrs
class LinearAttrs(Attrs):
    """linear's attrs (``parse``)."""
    in_features: int
    out_features: int
    bias: bool
    activation: str | None


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    out = f.int("out")
    if "in_features" in f.src and f.int("in_features") != s.c:
        raise f.fail(f"channel mismatch: in_features is {f.int('in_features')} but "
                     f"'{x.ins[0]}' has {s.c} channels", "in_features")
    attrs = dict(in_features=s.c, out_features=out, bias=f.bool("bias", True),
                 activation=f.act(fused_in="matmul"))
    return Parsed(attrs, TensorShape(s.n, s.h, s.w, out), weights=x.key("weights"))


def params(node: Node) -> dict[str, tuple[int, ...]]:
    a, p = node.attrs, need_prefix(node)
    out = {f"{p}.weight": (int(a["out_features"]), int(a["in_features"]))}
    if a.get("bias"):
        out[f"{p}.bias"] = (int(a["out_features"]),)
    return out


def reference(model, node: Node, env):
    import torch.nn.functional as F
    x, p, a = model.operand(node.inputs[0], env), node.weights, node.attrs
    w = model.params[f"{p}.weight"]
    b = model.params.get(f"{p}.bias") if a.get("bias") else None
    y = F.linear(x.permute(0, 2, 3, 1), w, b)           # per pixel (H = W = 1: per image)
    return activation(y, a.get("activation"), node).permute(0, 3, 1, 2)


def init_random(node: Node, r) -> dict:
    """N(0, 1/in) weights, small biases."""
    import math

    import torch
    p, g = node.weights, r.g
    out_f, in_f = r.expected[f"{p}.weight"]
    sd = {f"{p}.weight": torch.randn(out_f, in_f, generator=g) / math.sqrt(in_f)}
    if node.attrs.get("bias"):
        sd[f"{p}.bias"] = (torch.rand(out_f, generator=g) - 0.5) * 0.02
    return sd


def calibrate(model, node: Node, env):
    """Weights rescaled so that the logits are O(1) on the calibration batch (a head; a
    per-pixel linear keeps its N(0, 1/in) weights)."""
    import math
    if node.shape.h * node.shape.w > 1:
        return reference(model, node, env)
    x = model.operand(node.inputs[0], env).flatten(1)
    rms = float(x.pow(2).sum(dim=1).mean().sqrt())
    if rms > 0:
        model.params[f"{node.weights}.weight"] *= math.sqrt(x.shape[1]) / rms
    return reference(model, node, env)


def prepared_shapes(node: Node, expected: dict) -> dict:
    d = {"weight": expected[f"{node.weights}.weight"]}
    if node.attrs.get("bias"):
        d["bias"] = (d["weight"][0],)
    return d


@dataclass(frozen=True)
class LinearPlan(PlanConfig):
    """A planned linear (the head): output dtype and memory, program config (None: ttnn's auto),
    the fused activation."""
    dtype: str | None = None
    memory_config: MemSpec | None = None
    program_config: Any = None
    activation: str | None = None


register(OpDef(
    "linear", "linear",
    fields=(Field("out", "int"), Field("bias", "bool"), Field("act", "act"),
            Field("weights", "name"), Field("in_features", "int")),
    attrs=LinearAttrs, arity=1, parse=parse, reference=reference, rules=_c_linear, output=_out_linear,
    sim_ops=("linear",), tile_input=True, config=LinearPlan, init_random=init_random,
    calibrate=calibrate, params=params, prepare=prepare_weight_bias, prepared_shapes=prepared_shapes,
    follows_input="linear runs interleaved (no sharded program config is planned)",
    doc="fully connected on the channels: [N, 1, 1, C] or every pixel of [N, H, W, C]",
    attrs_doc="in_features, out_features, bias (bool), activation",
))
