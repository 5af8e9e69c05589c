"""split: the channels of a tensor into named outputs (``channels: {a: 32, b: 32}``), each the
tensor ``<layer>.<name>``, for CSP-style blocks; one ``ttnn.slice`` per output."""
from __future__ import annotations

from dataclasses import dataclass

import re

from ...language.graph import Attrs, Node, op_attrs
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_split
from ..slice import _is_int


@op_attrs
class SplitAttrs(Attrs):
    """split's attrs: each named output's channel range."""
    sections: tuple


def parse(x) -> Parsed:
    """``channels: {a: 32, b: 32}`` -> sections ((name, start, stop), ...), in order, covering all
    of the input's channels; the node's shape is its input's, each output its section's."""
    f, s, src = x.f, x.shape(0), x.ins[0]
    ch = f.get("channels")
    if not isinstance(ch, dict) or len(ch) < 2:
        raise f.fail("'channels' of a split must map each output name to its channel count, "
                     f"at least two of them (e.g. {{a: 32, b: 32}}), got {ch!r}", "channels")
    sections, lo = [], 0
    for k, v in ch.items():
        if not isinstance(k, str) or not re.match(r"^[A-Za-z0-9_\-]+$", k):
            raise f.fail(f"invalid split output name {k!r}: use letters, digits, '_', '-'",
                         "channels")
        if not _is_int(v) or v < 1:
            raise f.fail(f"split output '{k}' must have a positive integer channel count, "
                         f"got {v!r}", "channels")
        sections.append((k, lo, lo + int(v)))
        lo += int(v)
    if lo != s.c:
        raise f.fail(f"split channels {', '.join(f'{k}: {v}' for k, v in ch.items())} sum to "
                     f"{lo}, but the input '{src}' has {s.c} channels", "channels")
    from ...language.graph import TensorShape
    outs = tuple((k, TensorShape(s.n, s.h, s.w, hi - lo_)) for k, lo_, hi in sections)
    return Parsed({"sections": tuple(sections)}, s, outputs=outs, outputs_field="channels")


def reference(model, node: Node, env):
    """One tensor per named output (``ReferenceModel.bind`` stores each)."""
    x = model.operand(node.inputs[0], env)
    return tuple(x[:, lo:hi] for _, lo, hi in node.attrs.sections)


register(OpDef(
    "split", "split", fields=(Field("channels", "range"),), attrs=SplitAttrs, arity=1, parse=parse,
    reference=reference, rules=_c_split,
    output=_out_same_memory,
    sim_ops=("slice",), doc="channel split into named outputs",
    attrs_doc="sections ((name, start, stop), ...); the named outputs are Node.outputs "
              "(<node>.<name>), the node's shape is its input's",
))
