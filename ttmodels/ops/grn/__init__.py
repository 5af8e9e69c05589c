"""grn: ConvNeXt-V2's Global Response Normalization (timm's ``GlobalResponseNorm``), per sample:
``Gx = ||x||_2`` over H, W for each channel, ``Nx = Gx / (mean_C(Gx) + eps)``,
``y = x + bias + weight * (x * Nx)``. ttnn has no such op: the layer composes it from ttnn's
reductions and binary ops on ``[N, 1, H*W, C]`` (``layer.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_grn
from ..conv2d import need_prefix

GRN_EPS = 1e-6     # timm's default


@op_attrs
class GrnAttrs(Attrs):
    """grn's attrs (``parse``)."""
    eps: float


def parse(x) -> Parsed:
    return Parsed(dict(eps=x.f.number("eps", GRN_EPS, positive=True)), x.shape(0),
                  weights=x.key("weights"))


def params(node: Node) -> dict[str, tuple[int, ...]]:
    p, c = need_prefix(node), int(node.shape.c)
    return {f"{p}.weight": (c,), f"{p}.bias": (c,)}


def grn_torch(x, weight, bias, eps: float):
    """The float32 reference on NCHW (timm's formula)."""
    gx = x.norm(p=2, dim=(2, 3), keepdim=True)
    nx = gx / (gx.mean(dim=1, keepdim=True) + eps)
    return x + bias.view(1, -1, 1, 1) + weight.view(1, -1, 1, 1) * (x * nx)


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    p = node.weights
    return grn_torch(x, model.params[f"{p}.weight"], model.params[f"{p}.bias"],
                     float(node.attrs.eps))


def init_random(node: Node, r) -> dict:
    """Small weights and biases: timm initialises both at zero (the block starts as identity)."""
    import torch
    c, p, g = node.shape.c, node.weights, r.g
    return {f"{p}.weight": 0.2 * torch.randn(c, generator=g),
            f"{p}.bias": 0.05 * torch.randn(c, generator=g)}


def calibrate(model, node: Node, env):
    return reference(model, node, env)


def prepare(node: Node, take, f32, state_dict=None) -> dict:
    p = node.weights
    return {"weight": f32(take(f"{p}.weight")).reshape(-1), "bias": f32(take(f"{p}.bias")).reshape(-1)}


def prepared_shapes(node: Node, expected: dict) -> dict:
    c = (int(node.shape.c),)
    return {"weight": c, "bias": c}


@dataclass(frozen=True)
class GrnPlan(PlanConfig):
    """A planned grn: the output memory (the input's, asked of each step), the weight/bias
    constants' memory and dtype ([1, 1, 1, C] TILE)."""
    memory_config: MemSpec | None = None
    constant_memory: MemSpec | None = None
    constant_dtype: str = "bfloat16"


register(OpDef(
    "grn", "grn",
    fields=(Field("eps", "number"), Field("weights", "name")),
    attrs=GrnAttrs, arity=1, parse=parse, reference=reference, rules=_c_grn,
    output=_out_same_memory, output_shape="same", tile_input=True,
    sim_ops=("multiply", "add", "sum", "sqrt", "mean", "divide", "reshape"),
    params=params, prepare=prepare, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate, config=GrnPlan,
    follows_input="grn runs on an interleaved TILE input and keeps its memory config",
    doc="ConvNeXt-V2's Global Response Normalization (ttnn reductions and binary ops)",
    attrs_doc="eps (float); weight/bias at Node.weights",
))
