"""slice: the channels ``[start, stop)`` of a tensor (ttnn.slice on the last dim)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_slice


@op_attrs
class SliceAttrs(Attrs):
    """slice's attrs: the channel range [start, stop)."""
    start: int
    stop: int


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    ch = f.get("channels")
    if not (isinstance(ch, list) and len(ch) == 2 and all(_is_int(v) for v in ch)):
        raise f.fail(f"'channels' must be [start, stop] (integers), got {ch!r}", "channels")
    lo, hi = ch
    if not 0 <= lo < hi <= s.c:
        raise f.fail(f"channels [{lo}, {hi}] must satisfy 0 <= start < stop <= {s.c} "
                     f"(the channels of '{x.ins[0]}')", "channels")
    return Parsed(dict(start=int(lo), stop=int(hi)), TensorShape(s.n, s.h, s.w, hi - lo))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def reference(model, node: Node, env):
    return model.operand(node.inputs[0], env)[:, node.attrs.start:node.attrs.stop]


register(OpDef(
    "slice", "slice", fields=(Field("channels", "range"),), attrs=SliceAttrs, arity=1, parse=parse,
    reference=reference, rules=_c_slice,
    output=_out_same_memory, sim_ops=("slice",),
    doc="channel slice [start, stop)",
    attrs_doc="start, stop: channels [start, stop)",
))
