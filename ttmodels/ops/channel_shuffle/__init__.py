"""``channel_shuffle``: ShuffleNet's channel shuffle (torch's ``nn.ChannelShuffle``).

The whole op, as a contributor adds one that runs as existing ttnn calls: its spec field
(``groups``), shape inference, float32 torch reference, and the ttnn calls that run it
(``steps``). Like flatten / reshape / permute it is data movement on an interleaved TILE
tensor, so its layout rule, output layout, planning and layer are the reshape family's
(``plan.py`` and ``layer.py`` here name them; the layer runs this package's ``steps``).
On ``[1, 1, N*H*W, C]`` NHWC activations the shuffle is a view as ``[rows, g, C/g]``, a
transpose of the last two dims and a flatten back: three ttnn calls."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ..base import Field, OpDef, Parsed, register
from ..reshape.rules import _c_reshape
from ...planning.rules import _out_same_memory


@op_attrs
class ChannelShuffleAttrs(Attrs):
    """channel_shuffle's attrs: the number of groups."""
    groups: int


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    g = f.int("groups")
    if s.c % g:
        raise f.fail(f"'groups' {g} must divide the {s.c} channels of '{x.ins[0]}'", "groups")
    return Parsed({"groups": g}, s)


def reference(model, node: Node, env):
    x = model.operand(node.inputs[0], env)
    n, c, h, w = x.shape
    g = node.attrs.groups
    return x.reshape(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)


def steps(node: Node, s: TensorShape) -> list[tuple[str, tuple[int, ...]]]:
    """The ttnn calls that run ``node`` on its input of shape ``s`` (``[1, 1, N*H*W, C]``)."""
    o, g = node.shape, node.attrs.groups
    return [("reshape", (1, s.rows, g, s.c // g)), ("permute", (0, 1, 3, 2)),
            ("reshape", (1, 1, o.n * o.h * o.w, o.c))]


register(OpDef(
    "channel_shuffle", "reshape", fields=(Field("groups", "int"),), attrs=ChannelShuffleAttrs, arity=1, parse=parse,
    reference=reference, rules=_c_reshape, output=_out_same_memory,
    sim_ops=("reshape", "permute"), tile_input=True,
    follows_input="reshape/permute run on an interleaved input and keep its memory config",
    doc="ShuffleNet's channel shuffle (torch's nn.ChannelShuffle)", attrs_doc="groups (int)"))
