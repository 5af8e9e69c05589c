"""softmax over the channels of every pixel (``torch.softmax(x, dim=1)`` on NCHW): one
``ttnn.softmax(x, -1)`` on ``[1, 1, N*H*W, C]``."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Node
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import OpDef, Parsed, register
from .rules import _c_softmax, _out_softmax


def parse(x) -> Parsed:
    return Parsed({}, x.shape(0))


def reference(model, node: Node, env):
    return model.operand(node.inputs[0], env).softmax(dim=1)


@dataclass(frozen=True)
class SoftmaxPlan(PlanConfig):
    """A planned softmax: its output memory (None: the input's)."""
    memory_config: MemSpec | None = None


register(OpDef(
    "softmax", "softmax", fields=(), arity=1, parse=parse, reference=reference,
    rules=_c_softmax,
    output=_out_softmax, output_shape="same", tile_input=True, sim_ops=("softmax",), config=SoftmaxPlan,
    follows_input="softmax keeps its input's memory config",
    doc="softmax over the channels of each pixel (ttnn.softmax, dim -1)", attrs_doc="{}",
))
