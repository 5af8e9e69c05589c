"""pad: constant padding of H and W (``padding`` as for convs, ``value``)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, pads, register
from ...planning.rules import _out_same_memory
from .rules import _c_pad


@op_attrs
class PadAttrs(Attrs):
    """pad's attrs (``parse``)."""
    padding: tuple[int, int, int, int]          # top, bottom, left, right
    value: float


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    p = f.pad4("padding")
    v = f.get("value", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise f.fail(f"pad 'value' must be a number, got {v!r}", "value")
    try:
        value = float(v)         # -inf is a pad value (max pooling's); 10**400 fits no float
    except OverflowError:
        raise f.fail(f"pad 'value' is too large for a float (an integer of {v.bit_length()} "
                     "bits)", "value") from None
    return Parsed(dict(padding=p, value=value),
                  TensorShape(s.n, s.h + p[0] + p[1], s.w + p[2] + p[3], s.c))


def reference(model, node: Node, env):
    import torch.nn.functional as F
    t, b, l, r = pads(node.attrs.padding)
    return F.pad(model.operand(node.inputs[0], env), (l, r, t, b),
                 value=float(node.attrs.get("value", 0.0)))


@dataclass(frozen=True)
class PadPlan(PlanConfig):
    """A planned pad: the padding and value, the output memory config (a height-sharded input's
    refitted to the padded rows), the output's flat shape."""
    padding: tuple[int, int, int, int] | None = None
    value: float = 0.0
    memory_config: MemSpec | None = None
    out_shape: tuple[int, int, int, int] | None = None


register(OpDef(
    "pad", "pad", fields=(Field("padding", "pad4"), Field("value", "number")), attrs=PadAttrs, arity=1,
    parse=parse, reference=reference, rules=_c_pad,
    output=_out_same_memory, sim_ops=("pad", "to_layout", "reshape"), config=PadPlan,
    follows_input="pad's output keeps its input's memory config",
    doc="constant padding of H and W",
    attrs_doc="padding (t, b, l, r), value (float)",
))
