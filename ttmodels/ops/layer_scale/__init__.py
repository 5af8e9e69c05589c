"""layer_scale: x times a per-channel scale read from the weights (ConvNeXt's ``layer_scale``
/ timm's ``gamma``), run as ``ttnn.multiply`` with a [1, 1, 1, C] TILE constant. The state-dict
key is the layer's own name (``weights`` overrides it); ``param_shape: chw`` expects torchvision's
``[C, 1, 1]``, ``vector`` (default) timm's ``[C]``."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, register
from ..binary.rules import _out_binary
from .rules import _c_layer_scale
from ..conv2d import need_prefix

PARAM_SHAPES = ("vector", "chw")


@op_attrs
class LayerScaleAttrs(Attrs):
    """layer_scale's attrs: the parameter's shape (``PARAM_SHAPES``)."""
    param_shape: str


def parse(x) -> Parsed:
    attrs = dict(param_shape=x.f.choice("param_shape", PARAM_SHAPES, "vector"))
    return Parsed(attrs, x.shape(0), weights=x.key("weights"))


def params(node: Node) -> dict[str, tuple[int, ...]]:
    c = int(node.shape.c)
    return {need_prefix(node): (c, 1, 1) if node.attrs.get("param_shape") == "chw" else (c,)}


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    return x * model.params[node.weights].reshape(1, -1, 1, 1)


def init_random(node: Node, r) -> dict:
    """Scales of 0.1 to 0.5: a trained ConvNeXt's layer scales (initialised at 1e-6) end up
    well below 1, keeping each block's residual branch small against the stream."""
    import torch
    shape = r.expected[node.weights]
    return {node.weights: 0.1 + 0.4 * torch.rand(shape, generator=r.g)}


def calibrate(model, node: Node, env):
    return reference(model, node, env)


def prepare(node: Node, take, f32, state_dict=None) -> dict:
    return {"scale": f32(take(node.weights)).reshape(-1)}


def prepared_shapes(node: Node, expected: dict) -> dict:
    return {"scale": (int(node.shape.c),)}


@dataclass(frozen=True)
class LayerScalePlan(PlanConfig):
    """A planned layer_scale: output dtype, the scale constant's memory and dtype."""
    dtype: str | None = None
    constant_memory: MemSpec | None = None
    constant_dtype: str = "bfloat16"


register(OpDef(
    "layer_scale", "layer_scale",
    fields=(Field("weights", "name"), Field("param_shape", "choice")),
    attrs=LayerScaleAttrs, arity=1, parse=parse, reference=reference, rules=_c_layer_scale, output=_out_binary,
    output_shape="broadcast", tile_input=True,
    sim_ops=("multiply",),
    params=params, prepare=prepare, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate, config=LayerScalePlan,
    doc="x times a per-channel scale from the weights (layer scale)",
    attrs_doc="param_shape ('vector': [C] | 'chw': [C, 1, 1]); the scale is the key Node.weights",
))
