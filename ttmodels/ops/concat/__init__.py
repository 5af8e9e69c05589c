"""concat: channel concatenation of two or more tensors with equal N, H and W."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Node, TensorShape
from ...planning.plan_config import PlanConfig
from ..base import OpDef, Parsed, register
from .rules import _c_concat, _out_concat


def parse(x) -> Parsed:
    f, ins = x.f, x.ins
    shapes = [x.shape(i) for i in range(len(ins))]
    s0 = shapes[0]
    for t, s in zip(ins[1:], shapes[1:]):
        if (s.n, s.h, s.w) != (s0.n, s0.h, s0.w):
            raise f.fail(f"spatial mismatch: concat of '{ins[0]}' {s0} and '{t}' {s} "
                         "(NHWC; N, H and W must be equal)", "in")
    return Parsed({}, TensorShape(s0.n, s0.h, s0.w, sum(s.c for s in shapes)))


def reference(model, node: Node, env):
    import torch
    return torch.cat([model.operand(n, env) for n in node.inputs], dim=1)


@dataclass(frozen=True)
class ConcatPlan(PlanConfig):
    dim: int = -1          # the channels, of the [1, 1, N*H*W, C] tensors


register(OpDef(
    "concat", "concat", fields=(), arity="2+", parse=parse, reference=reference,
    rules=_c_concat,
    output=_out_concat, output_shape="concat", tile_input=True, sim_ops=("concat",), config=ConcatPlan,
    follows_input="concat's output keeps its first input's memory config",
    doc="channel concat",
    attrs_doc="{}; >= 2 inputs with equal N, H, W",
))
