"""The standalone eltwise unary ops: one per row of the activation table
(``ttmodels.ops.activations``: relu, sigmoid, silu, ..., leaky_relu with its slope) plus identity.
ttnn's unary ops take no dtype and keep their input's memory config."""
from __future__ import annotations

from dataclasses import field, make_dataclass

from .. import activations as A
from ...language.graph import UNSET, Attrs, NoAttrs, Node
from ..base import Field, OpDef, Parsed, activation, register
from ...planning.rules import _out_same_memory
from .rules import _c_relu


def unary_activation(op: str, attrs: dict) -> str | None:
    """The canonical activation a standalone unary op applies (None for identity)."""
    if op == "identity":
        return None
    d = A.ACTIVATIONS[op]
    return A.canonical(d, [attrs.get(p.name, p.default) for p in d.params])


def parse(x) -> Parsed:
    f = x.f
    shape = x.shape(0)
    d = A.ACTIVATIONS.get(x.op)
    attrs = {}
    for p in (d.params if d is not None else ()):
        attrs[p.name] = f.number(p.name, p.default)      # finite: NaN, Inf, 10**400 refused
    if d is not None:
        try:
            A.checked(d, [attrs[p.name] for p in d.params])
        except ValueError as e:      # hardtanh's min_val above its max_val, at max_val's line
            bad = next((p.not_below if not f.has(p.name) else p.name for p in d.params
                        if p.not_below is not None), None)
            raise f.fail(str(e).split(": ", 1)[-1], bad) from None
    return Parsed(attrs, shape)


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    return activation(x, unary_activation(node.op, node.attrs), node)


def _def(name: str, fields: tuple[Field, ...], sim_op: str, **kw) -> OpDef:
    return OpDef(name, "unary", fields=fields, arity=1, parse=parse, reference=reference,
                 rules=_c_relu,
                 output=_out_same_memory, output_shape="same", sim_ops=(sim_op,), **kw)


def _attrs_class(a) -> type[Attrs]:
    """A standalone activation's attrs: its parameters (floats, the table's), none for most."""
    if not a.params:
        return NoAttrs
    name = "".join(w.title() for w in a.name.split("_")) + "Attrs"
    cls = make_dataclass(name, [(p.name, float, field(default=UNSET)) for p in a.params], bases=(Attrs,), frozen=True,
                         eq=False, namespace={"__doc__": f"{a.name}'s attrs: its parameters."},
                         module=__name__)
    globals()[name] = cls        # importable by name (pickle, repr)
    return cls


register(*(_def(a.name, tuple(Field(p.name, "number") for p in a.params),
                a.ttnn_function, attrs=_attrs_class(a),
                follows_input="relu's output keeps its input's memory config"
                if a.name == "relu" else None,
                doc=f"standalone {a.name} (ttnn.{a.ttnn_function})",
                attrs_doc=", ".join(f"{p.name} (float)" for p in a.params) or "{}")
           for a in A.ACTIVATIONS.values()),
         _def("identity", (), "identity", doc="ttnn.identity (a copy)",
              attrs_doc="{}"))
