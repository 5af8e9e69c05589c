"""linear: a fully connected layer on the channels, torch's ``[out, in]`` weight, an activation
fused: on a per-image vector ``[N, 1, 1, C]`` (the head after a global pool or a flatten) or on
every pixel of ``[N, H, W, C]`` (ConvNeXt's pwconv1/pwconv2, torch's ``nn.Linear`` on a
channels-last map): both are one ``ttnn.linear`` on ``[1, 1, N*H*W, C]``.

``band: k`` (odd): the weight is a ``[1, 1, k]`` Conv1d kernel run along the features with
``k // 2`` zero padding (ECA attention's conv over the pooled channels), its key the Conv1d's;
the layer is the product by the banded ``[C, C]`` matrix it makes (``band_matrix``)."""
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
    band: int                  # 0: a [out, in] weight; k: a [1, 1, k] Conv1d kernel (ECA)


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    out = f.int("out")
    if "in_features" in f.src and f.int("in_features") != s.c:
        raise f.fail(f"channel mismatch: in_features is {f.int('in_features')} but "
                     f"'{x.ins[0]}' has {s.c} channels", "in_features")
    band = f.int("band", 0, lo=0)
    if band and (band % 2 == 0 or out != s.c or f.bool("bias", True)):
        raise f.fail(f"band: {band} needs an odd kernel, out equal to the {s.c} input features "
                     f"(got {out}) and bias: false", "band")
    attrs = dict(in_features=s.c, out_features=out, bias=f.bool("bias", True),
                 activation=f.act(fused_in="matmul"))
    if band:                       # only when given: every other linear's attrs stay as they were
        attrs["band"] = band
    return Parsed(attrs, TensorShape(s.n, s.h, s.w, out), weights=x.key("weights"))


def band_matrix(kernel, c: int):
    """The ``[c, c]`` matrix of a ``[1, 1, k]`` Conv1d kernel over c features (zero padding
    k // 2): row i holds kernel[j] at column i + j - k // 2."""
    import torch
    w = kernel.reshape(-1)
    k = w.numel()
    m = torch.zeros(c, c, dtype=w.dtype)
    for j in range(k):
        d = j - k // 2
        if abs(d) < c:
            m += w[j] * torch.diag(torch.ones(c - abs(d), dtype=w.dtype), d)
    return m


def _weight(node: Node, w):
    """The ``[out, in]`` matrix of a stored weight (a band's kernel expanded)."""
    band = node.attrs.get("band", 0)
    return band_matrix(w, int(node.attrs["in_features"])) if band else w


def params(node: Node) -> dict[str, tuple[int, ...]]:
    a, p = node.attrs, need_prefix(node)
    if a.get("band", 0):
        return {f"{p}.weight": (1, 1, int(a["band"]))}
    out = {f"{p}.weight": (int(a["out_features"]), int(a["in_features"]))}
    if a.get("bias"):
        out[f"{p}.bias"] = (int(a["out_features"]),)
    return out


def reference(model, node: Node, env):
    import torch.nn.functional as F
    x, p, a = model.operand(node.inputs[0], env), node.weights, node.attrs
    w = _weight(node, model.params[f"{p}.weight"])
    b = model.params.get(f"{p}.bias") if a.get("bias") else None
    y = F.linear(x.permute(0, 2, 3, 1), w, b)           # per pixel (H = W = 1: per image)
    return activation(y, a.get("activation"), node).permute(0, 3, 1, 2)


def init_random(node: Node, r) -> dict:
    """N(0, 1/in) weights, small biases."""
    import math

    import torch
    p, g = node.weights, r.g
    if node.attrs.get("band", 0):          # ECA's kernel: a few taps of about 1 / k
        k = int(node.attrs["band"])
        return {f"{p}.weight": torch.randn(1, 1, k, generator=g) / math.sqrt(k)}
    out_f, in_f = r.expected[f"{p}.weight"]
    sd = {f"{p}.weight": torch.randn(out_f, in_f, generator=g) / math.sqrt(in_f)}
    if node.attrs.get("bias"):
        sd[f"{p}.bias"] = (torch.rand(out_f, generator=g) - 0.5) * 0.02
    return sd


def calibrate(model, node: Node, env):
    """Weights rescaled so that the logits are O(1) on the calibration batch (a head; a
    per-pixel linear keeps its N(0, 1/in) weights)."""
    import math
    if node.shape.h * node.shape.w > 1 or node.attrs.get("band", 0):
        return reference(model, node, env)
    x = model.operand(node.inputs[0], env).flatten(1)
    rms = float(x.pow(2).sum(dim=1).mean().sqrt())
    if rms > 0:
        model.params[f"{node.weights}.weight"] *= math.sqrt(x.shape[1]) / rms
    return reference(model, node, env)


def prepare(node: Node, take, f32, state_dict=None) -> dict:
    """``prepare_weight_bias``, a band's kernel expanded to its ``[C, C]`` matrix."""
    out = prepare_weight_bias(node, take, f32, state_dict)
    if node.attrs.get("band", 0):
        out["weight"] = f32(band_matrix(out["weight"], int(node.attrs["in_features"])))
    return out


def prepared_shapes(node: Node, expected: dict) -> dict:
    a = node.attrs
    d = {"weight": (int(a["out_features"]), int(a["in_features"])) if a.get("band", 0)
         else expected[f"{node.weights}.weight"]}
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
            Field("weights", "name"), Field("in_features", "int"), Field("band", "int")),
    attrs=LinearAttrs, arity=1, parse=parse, reference=reference, rules=_c_linear, output=_out_linear,
    sim_ops=("linear",), tile_input=True, config=LinearPlan, init_random=init_random,
    calibrate=calibrate, params=params, prepare=prepare, prepared_shapes=prepared_shapes,
    follows_input="linear runs interleaved (no sharded program config is planned)",
    doc="fully connected on the channels: [N, 1, 1, C] or every pixel of [N, H, W, C]",
    attrs_doc="in_features, out_features, bias (bool), activation, band (0, or the odd kernel "
              "of a [1, 1, k] Conv1d weight along the features)",
))
