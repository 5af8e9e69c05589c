"""The standalone eltwise unary ops: one per row of the activation table
(``ttmodels.activations``: relu, sigmoid, silu, ..., leaky_relu with its slope) plus identity.
ttnn's unary ops take no dtype and keep their input's memory config."""
from __future__ import annotations

from .. import activations as A
from ..graph import Node
from .base import Field, OpDef, Parsed, Ref, activation, register


def unary_activation(op: str, attrs: dict) -> str | None:
    """The canonical activation a standalone unary op applies (None for identity)."""
    if op == "identity":
        return None
    d = A.ACTIVATIONS[op]
    if d.param is None:
        return d.name
    return f"{d.name}({float(attrs.get(d.param, d.default))!r})"


def parse(x) -> Parsed:
    f = x.f
    shape = x.shape(0)
    d = A.ACTIVATIONS.get(x.op)
    attrs = {}
    if d is not None and d.param is not None:
        v = f.get(d.param, d.default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise f.fail(f"'{d.param}' must be a number, got {v!r}", d.param)
        attrs[d.param] = float(v)
    return Parsed(attrs, shape)


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    return activation(x, unary_activation(node.op, node.attrs), node)


def _def(name: str, fields: tuple[Field, ...], layer: str, sim_op: str, **kw) -> OpDef:
    return OpDef(name, "unary", fields=fields, arity=1, parse=parse, reference=reference,
                 plan="plan_unary", rules=Ref("ttmodels.rules:_c_relu"),
                 output=Ref("ttmodels.rules:_out_same_memory"), output_shape="same",
                 layer=Ref(f"ttmodels.layers.eltwise:{layer}"), sim_ops=(sim_op,), **kw)


register(*(_def(a.name, (Field(a.param, "number"),) if a.param else (),
                "Relu" if a.name == "relu" else "Unary", a.ttnn_function,
                follows_input="relu's output keeps its input's memory config"
                if a.name == "relu" else None,
                doc=f"standalone {a.name} (ttnn.{a.ttnn_function})",
                attrs_doc=f"{a.param} (float)" if a.param else "{}")
           for a in A.ACTIVATIONS.values()),
         _def("identity", (), "Unary", "identity", doc="ttnn.identity (a copy)",
              attrs_doc="{}"))
