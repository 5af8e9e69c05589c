"""batch_norm: a standalone eval-mode BatchNorm2d (one that follows a conv is that conv's
``bn:``, folded), run as ``x * scale + shift`` with an activation fused."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, activation, register
from ..binary.rules import _out_binary
from .rules import _c_batch_norm
from ..conv2d import BN_EPS, BN_PARAMS, batch_norm, batchnorm_scale_shift, bn_eps, need_prefix


@op_attrs
class BatchNormAttrs(Attrs):
    """batch_norm's attrs (``parse``): the fused activation and the BN's eps."""
    activation: str | None
    eps: float


def parse(x) -> Parsed:
    shape = x.shape(0)
    return Parsed(dict(activation=x.f.act(fused_in="binary"), eps=x.f.number("eps", BN_EPS, positive=True)),
                  shape, weights=x.key("weights"))


def params(node: Node) -> dict[str, tuple[int, ...]]:
    p = need_prefix(node)
    return {f"{p}.{s}": (int(node.shape.c),) for s in BN_PARAMS}


def reference(model, node: Node, env):
    y = batch_norm(model, node.weights, model.operand(node.inputs[0], env), bn_eps(node))
    return activation(y, node.attrs.get("activation"), node)


def init_random(node: Node, r) -> dict:
    import torch
    o, bn, g = node.shape.c, node.weights, r.g
    return {f"{bn}.weight": 0.5 + 0.5 * torch.rand(o, generator=g),
            f"{bn}.bias": 0.1 * torch.randn(o, generator=g),
            f"{bn}.running_mean": torch.zeros(o), f"{bn}.running_var": torch.ones(o)}


def calibrate(model, node: Node, env):
    """Its statistics are its input's on the calibration batch."""
    x = model.operand(node.inputs[0], env)
    model.params[f"{node.weights}.running_mean"] = x.mean(dim=(0, 2, 3))
    model.params[f"{node.weights}.running_var"] = x.var(dim=(0, 2, 3), unbiased=False)
    return reference(model, node, env)


def prepare(node: Node, take, f32, state_dict) -> dict:
    return batchnorm_scale_shift(*(state_dict[f"{node.weights}.{k}"] for k in BN_PARAMS),
                                 eps=bn_eps(node))


def prepared_shapes(node: Node, expected: dict) -> dict:
    return {"scale": (node.shape.c,), "shift": (node.shape.c,)}


@dataclass(frozen=True)
class BatchNormPlan(PlanConfig):
    """A planned standalone batch_norm: output dtype, the memory and dtype of its per-channel
    scale / shift constants, the activation fused into the add."""
    dtype: str | None = None
    constant_memory: MemSpec | None = None
    constant_dtype: str = "bfloat16"
    activation: str | None = None


register(OpDef(
    "batch_norm", "batch_norm", fields=(Field("weights", "name"), Field("act", "act"), Field("eps", "number")),
    attrs=BatchNormAttrs, arity=1,
    parse=parse, reference=reference, rules=_c_batch_norm,
    output=_out_binary, output_shape="broadcast", tile_input=True,
    sim_ops=("multiply", "add"), params=params, prepare=prepare,
    prepared_shapes=prepared_shapes, config=BatchNormPlan, init_random=init_random,
    calibrate=calibrate, batch_norms=lambda n: (n.weights,) if n.weights else (),
    doc="standalone eval BatchNorm2d",
    attrs_doc="activation, eps (float); parameters at Node.weights",
))
