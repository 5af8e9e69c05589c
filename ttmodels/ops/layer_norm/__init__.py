"""layer_norm: LayerNorm over the channels of every pixel (ConvNeXt's ``LayerNorm2d`` and its
channels-last ``LayerNorm``), with a per-channel weight and bias. Our activations are
``[1, 1, N*H*W, C]``, so it is one ``ttnn.layer_norm`` over the last dim: no permutes."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_layer_norm
from ..conv2d import need_prefix

LN_EPS = 1e-5     # torch.nn.LayerNorm's default; torchvision's ConvNeXt uses 1e-6


@op_attrs
class LayerNormAttrs(Attrs):
    """layer_norm's attrs (``parse``)."""
    eps: float
    affine: bool


def parse(x) -> Parsed:
    f = x.f
    attrs = dict(eps=f.number("eps", LN_EPS, positive=True), affine=f.bool("affine", True))
    return Parsed(attrs, x.shape(0), weights=x.key("weights") if attrs["affine"] else None)


def params(node: Node) -> dict[str, tuple[int, ...]]:
    if not node.attrs.get("affine", True):
        return {}
    p = need_prefix(node)
    return {f"{p}.weight": (int(node.shape.c),), f"{p}.bias": (int(node.shape.c),)}


def affine(model, node: Node):
    """The reference's (weight, bias), or (None, None) without ``affine`` (also group_norm's)."""
    if not node.attrs.get("affine", True):
        return None, None
    return model.params[f"{node.weights}.weight"], model.params[f"{node.weights}.bias"]


def reference(model, node: Node, env):
    import torch.nn.functional as F
    x = model.operand(node.inputs[0], env)
    w, b = affine(model, node)
    y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b, float(node.attrs.eps))
    return y.permute(0, 3, 1, 2)


def init_random(node: Node, r) -> dict:
    """Weights around 1 and small biases, like a trained LayerNorm's."""
    import torch
    if not node.attrs.get("affine", True):
        return {}
    c, p, g = node.shape.c, node.weights, r.g
    return {f"{p}.weight": 1.0 + 0.1 * torch.randn(c, generator=g),
            f"{p}.bias": 0.05 * torch.randn(c, generator=g)}


def calibrate(model, node: Node, env):
    return reference(model, node, env)


def prepare(node: Node, take, f32, state_dict=None) -> dict:
    if not node.attrs.get("affine", True):
        return {}
    p = node.weights
    return {"weight": f32(take(f"{p}.weight")), "bias": f32(take(f"{p}.bias"))}


def prepared_shapes(node: Node, expected: dict) -> dict:
    c = (int(node.shape.c),)
    return {"weight": c, "bias": c} if node.attrs.get("affine", True) else {}


@dataclass(frozen=True)
class LayerNormPlan(PlanConfig):
    """A planned layer_norm: the output memory (interleaved), the weight/bias constants' memory
    and dtype ([1, 1, 1, C] TILE)."""
    memory_config: MemSpec | None = None
    constant_memory: MemSpec | None = None
    constant_dtype: str = "bfloat16"


register(OpDef(
    "layer_norm", "layer_norm",
    fields=(Field("eps", "number"), Field("affine", "bool"), Field("weights", "name")),
    attrs=LayerNormAttrs, arity=1, parse=parse, reference=reference, rules=_c_layer_norm, output=_out_same_memory,
    output_shape="same", tile_input=True,
    sim_ops=("layer_norm",),
    params=params, prepare=prepare, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate, config=LayerNormPlan,
    follows_input="layer_norm runs on an interleaved input (no sharded program config is "
                  "planned) and keeps its memory config",
    doc="LayerNorm over the channels of each pixel (ttnn.layer_norm)",
    attrs_doc="eps (float), affine (bool); weight/bias at Node.weights",
))
