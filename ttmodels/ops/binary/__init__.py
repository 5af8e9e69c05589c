"""add / multiply / subtract: tensor (op) tensor or constant, numpy broadcasting of the second
operand (binary_ng): equal shapes, a constant, or a per-image vector ``[N, 1, 1, C]`` against a
``[N, H, W, C]`` tensor (the squeeze-and-excitation gate); an activation fused."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig, optional
from ..base import Field, OpDef, Parsed, activation, register
from .rules import _c_binary, _out_binary


@op_attrs
class BinaryAttrs(Attrs):
    """add / multiply / subtract: the fused activation."""
    activation: str | None


def parse(x) -> Parsed:
    f, op, ins = x.f, x.op, x.ins
    a_c, b_c = (x.is_constant(t) for t in ins)
    if a_c and b_c:
        raise f.fail(f"{op} of two constants", "in")
    if a_c or b_c:
        t, c = (ins[1], ins[0]) if a_c else (ins[0], ins[1])
        shape = x.shape_of(t)
        x.check_broadcast(c, shape)
    else:
        sa, sb = x.shape_of(ins[0]), x.shape_of(ins[1])
        if sa.c != sb.c:
            raise f.fail(f"channel mismatch: {op} of '{ins[0]}' ({sa.c} channels) and "
                         f"'{ins[1]}' ({sb.c} channels)", "in")
        if sa != sb:
            # numpy broadcasting of one per-image vector [N, 1, 1, C] (the SE gate)
            big, small = (sa, sb) if sb.h == sb.w == 1 else (sb, sa)
            if not (small.h == small.w == 1 and small.n == big.n):
                raise f.fail(f"shape mismatch: {op} of '{ins[0]}' {sa} and '{ins[1]}' {sb} "
                             "(NHWC): shapes must be equal, or one [N, 1, 1, C] (per-image "
                             "vector, e.g. a global pool) with the other's N and C", "in")
            if op == "subtract" and big is sb:
                raise f.fail(f"subtract broadcasts its second operand only: '{ins[0]}' "
                             f"{sa} is smaller than '{ins[1]}' {sb}", "in")
            shape = big
        else:
            shape = sa
    return Parsed(dict(activation=f.act(fused_in="binary")), shape)


_MATH = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b,
         "subtract": lambda a, b: a - b}


def reference(model, node: Node, env):
    from ...errors import Error
    if len(node.inputs) != 2:
        raise Error(f"layer '{node.name}': {node.op} takes 2 inputs, got {len(node.inputs)}")
    n0, n1 = node.inputs
    act = n0 if n0 in env else n1
    if act not in env:
        raise Error(f"layer '{node.name}': both operands are constants")
    x0 = model.operand(n0, env, like=env[act])
    x1 = model.operand(n1, env, like=env[act])
    return activation(_MATH[node.op](x0, x1), node.attrs.get("activation"), node)


@dataclass(frozen=True)
class BinaryPlan(PlanConfig):
    """A planned binary_ng op: operands swapped (a constant goes second), output dtype and memory
    config, whether the sharding is binary_ng's native one, the broadcast ("row_b": b over a's
    rows; "per_image": both 4-D), the fused activation; in place (``output_tensor=a``) or why
    not."""
    swap_operands: bool = False
    dtype: str | None = None
    memory_config: MemSpec | None = None
    native_l1_sharding: bool = False
    broadcast: str | None = None
    activation: str | None = None
    inplace: bool = optional(False)
    out_shape: tuple[int, int, int, int] | None = optional()
    inplace_blocked: str | None = optional()


register(*(OpDef(
    op, "binary", fields=(Field("act", "act"),), attrs=BinaryAttrs, arity=2, parse=parse, reference=reference,
    rules=_c_binary,
    output=_out_binary, output_shape="broadcast", tile_input=True, sim_ops=(op, "reshape"), config=BinaryPlan,
    doc=f"tensor {op} tensor / constant / per-image vector, activation fused",
    attrs_doc="activation (None | act); 2 inputs, either may be a constant",
) for op in ("add", "multiply", "subtract")))
