"""The data-movement ops that change a tensor's shape or channel order: ``flatten`` (torch's
``x.flatten(1)``, VGG's before its classifier), ``reshape`` (``x.reshape(N, C, H, W)``),
``permute`` (``x.permute(dims)``); ``channel_shuffle`` (its own package) runs the same way. Fields and semantics
are torch's NCHW ones; our activations are ``[1, 1, N*H*W, C]`` NHWC, so each runs as a few
``ttnn.reshape`` / ``ttnn.permute`` calls (``steps``) on an interleaved TILE tensor, e.g.
flatten: ``[N, H, W, C] -> permute (0, 3, 1, 2) -> [1, 1, N, C*H*W]`` (torch's C, H, W order, so
the classifier's weights load as they are)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_reshape

_NHWC_TO_NCHW = (0, 3, 1, 2)
_NCHW_TO_NHWC = (0, 2, 3, 1)


@op_attrs
class ReshapeAttrs(Attrs):
    """reshape's attrs: the output's torch shape (C, H, W)."""
    shape: tuple[int, int, int]


@op_attrs
class PermuteAttrs(Attrs):
    """permute's attrs: torch's NCHW dims."""
    dims: tuple[int, int, int, int]


def _ints(f, k: str, n: int) -> list[int]:
    v = f.get(k)
    if not (isinstance(v, list) and len(v) == n and
            all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        raise f.fail(f"'{k}' must be a list of {n} integers, got {v!r}", k)
    return [int(x) for x in v]


def parse(x) -> Parsed:
    f, s, op = x.f, x.shape(0), x.op
    src = x.ins[0]
    if op == "flatten":
        return Parsed({}, TensorShape(s.n, 1, 1, s.c * s.h * s.w))
    if op == "reshape":
        c, h, w = _ints(f, "shape", 3)
        if min(c, h, w) < 1 or c * h * w != s.c * s.h * s.w:
            raise f.fail(f"'shape' [{c}, {h}, {w}] must be positive and hold the "
                         f"{s.c * s.h * s.w} values per image of '{src}' ({s})", "shape")
        return Parsed({"shape": (c, h, w)}, TensorShape(s.n, h, w, c))
    # permute
    d = _ints(f, "dims", 4)
    if sorted(d) != [0, 1, 2, 3] or d[0] != 0:
        raise f.fail(f"'dims' {d} must be a permutation of [0, 1, 2, 3] (torch's NCHW "
                     "dims) that keeps the batch first", "dims")
    nchw = (s.n, s.c, s.h, s.w)
    _, c, h, w = (nchw[i] for i in d)
    return Parsed({"dims": tuple(d)}, TensorShape(s.n, h, w, c))


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    a = node.attrs
    if node.op == "flatten":
        return x.flatten(1)[:, :, None, None]
    if node.op == "reshape":
        return x.reshape(x.shape[0], *a["shape"])
    return x.permute(*a["dims"])


def steps(node: Node, s: TensorShape) -> list[tuple[str, tuple[int, ...]]]:
    """The ttnn calls that run ``node`` on its input of shape ``s`` (``[1, 1, N*H*W, C]``), in
    order: ``("reshape", shape)`` or ``("permute", dims)``; the last one gives
    ``[1, 1, rows, C]`` of the output."""
    o, a = node.shape, node.attrs
    flat = ("reshape", (1, 1, o.n * o.h * o.w, o.c))
    nhwc = ("reshape", (s.n, s.h, s.w, s.c))
    if node.op == "flatten":
        if s.h == s.w == 1:
            return [flat]
        return [nhwc, ("permute", _NHWC_TO_NCHW), flat]
    if node.op == "reshape":
        return [nhwc, ("permute", _NHWC_TO_NCHW), ("reshape", (o.n, o.c, o.h, o.w)),
                ("permute", _NCHW_TO_NHWC), flat]
    # permute: y_nhwc = x_nhwc.permute(NHWC->NCHW).permute(dims).permute(NCHW->NHWC)
    p = list(_NHWC_TO_NCHW)
    for q in (a["dims"], _NCHW_TO_NHWC):
        p = [p[i] for i in q]
    return [nhwc, ("permute", tuple(p)), flat]


def _def(name: str, fields, doc: str, attrs_doc: str, **kw) -> OpDef:
    return OpDef(name, "reshape", fields=fields, arity=1, parse=parse, reference=reference,
                 rules=_c_reshape,
                 output=_out_same_memory, sim_ops=("reshape", "permute"),
                 tile_input=True,
                 follows_input="reshape/permute run on an interleaved input and keep its memory "
                               "config",
                 doc=doc, attrs_doc=attrs_doc, **kw)


register(
    _def("flatten", (), "torch's x.flatten(1): [N, C, H, W] -> [N, C*H*W] (as [N, 1, 1, C*H*W])",
         "{}"),
    _def("reshape", (Field("shape", "ints"),),
         "torch's x.reshape(N, C, H, W): shape [C, H, W], torch's element order", "shape (c, h, w)",
         attrs=ReshapeAttrs),
    _def("permute", (Field("dims", "ints"),),
         "torch's x.permute(dims) on NCHW dims (the batch stays first)", "dims (4 ints, NCHW)",
         attrs=PermuteAttrs),
)
