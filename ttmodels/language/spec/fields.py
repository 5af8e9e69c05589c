"""Field access for one layer (``_Fields``: values from the layer mapping or its ``first:``
overrides, each checked) and the ``ops.OpInput`` the ops' ``parse`` reads it through (``_OpInput``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ops import activations as A
from .._yaml import YMap
from ...errors import SpecError
from ... import ops
from ..graph import LayoutPolicy, TensorShape
from .documents import _BlockDef
from .schema import (MAX_DIM, _MISSING, _NAME_RE, _as_name, _check_keys, _err, _is_int, _suggest,
                     _typename)


@dataclass
class _Ctx:
    """One list of layers being expanded: the top level or the body of one block instance."""
    prefix: str
    params: dict
    layout: LayoutPolicy
    precision: dict
    top: bool
    chain: tuple[str, ...] = ()
    stack: tuple[str, ...] = ()
    instance: str | None = None
    blocks: dict[str, _BlockDef] | None = None   # a library block's own table (see _BlockDef)
    local: dict[str, str] = field(default_factory=dict)
    local_where: dict[str, tuple] = field(default_factory=dict)
    block_inputs: tuple[str, ...] = ()    # the block's input names (``x`` when it declares none)
    implicit_inputs: bool = False         # the block has no ``inputs:`` (it reads one, ``x``)
    later: set = field(default_factory=set)
    skipped: set = field(default_factory=set)
    current: str | None = None

# ---------------------------------------------------------------------------------------------
# field access for one layer (values from the layer mapping or its ``first:`` overrides)
# ---------------------------------------------------------------------------------------------

class _Fields:
    def __init__(self, comp: "_Compiler", ctx: _Ctx, m: YMap, first: YMap | None, layer: str,
                 skip=()):
        self.comp, self.ctx, self.m, self.layer = comp, ctx, m, layer
        self.src: dict[str, YMap] = {k: m for k in m if k not in skip}
        if first is not None:
            for k in first:
                self.src[k] = first

    def has(self, k) -> bool:
        return k in self.src and self.src[k].get(k) is not None

    def fail(self, msg: str, k=None) -> SpecError:
        m = self.src.get(k, self.m) if k is not None else self.m
        return _err(msg, m, k if k in m else None, self.layer, self.ctx.chain)

    def raw(self, k, default=_MISSING):
        if k not in self.src:
            if default is _MISSING:
                raise self.fail(f"missing required field '{k}'")
            return default
        return self.comp.ev(self.ctx, self.src[k][k], self.src[k], k, self.layer)

    def get(self, k, default=_MISSING):
        v = self.raw(k, default)
        if v is None and default is _MISSING:
            raise self.fail(f"field '{k}' must not be null", k)
        return v

    def int(self, k, default=_MISSING, lo: int | None = 1) -> int:
        v = self.get(k, default)
        if not _is_int(v):
            raise self.fail(f"'{k}' must be an integer, got {_typename(v)} {v!r}", k)
        if lo is not None and v < lo:
            raise self.fail(f"'{k}' must be >= {lo}, got {v}", k)
        if v > MAX_DIM:
            raise self.fail(f"'{k}' = {v} is out of range", k)
        return v

    def pair(self, k, default=_MISSING, lo: int = 1) -> tuple[int, int]:
        v = self.get(k, default)
        vals = [v, v] if _is_int(v) else v
        if not isinstance(vals, list) or len(vals) != 2 or not all(_is_int(x) for x in vals):
            raise self.fail(f"'{k}' must be an integer or a list [h, w] of integers, got {v!r}", k)
        if any(x < lo for x in vals):
            raise self.fail(f"'{k}' must be >= {lo}, got {v!r}", k)
        if any(x > MAX_DIM for x in vals):
            raise self.fail(f"'{k}' = {v!r} is out of range", k)
        return int(vals[0]), int(vals[1])

    def pad4(self, k, default=_MISSING) -> tuple[int, int, int, int]:
        v = self.get(k, default)
        if _is_int(v):
            vals = [v] * 4
        elif isinstance(v, list) and len(v) == 2:
            vals = [v[0], v[0], v[1], v[1]]
        elif isinstance(v, list) and len(v) == 4:
            vals = list(v)
        else:
            raise self.fail(f"'{k}' must be an integer, [h, w] or [top, bottom, left, right], "
                            f"got {v!r}", k)
        if not all(_is_int(x) for x in vals):
            raise self.fail(f"'{k}' values must be integers, got {v!r}", k)
        if any(x < 0 for x in vals) or any(x > MAX_DIM for x in vals):
            raise self.fail(f"'{k}' must be non-negative, got {v!r}", k)
        return tuple(int(x) for x in vals)  # type: ignore[return-value]

    def bool(self, k, default) -> bool:
        v = self.get(k, default)
        if not isinstance(v, bool):
            raise self.fail(f"'{k}' must be true or false, got {v!r}", k)
        return v

    def choice(self, k, choices, default):
        v = self.raw(k, default)
        if v not in choices:
            shown = ", ".join("null" if c is None else str(c) for c in choices)
            raise self.fail(f"invalid {k} {v!r}{_suggest(v, choices)}; expected one of {shown}", k)
        return v

    def act(self, k="act", fused_in: str | None = None):
        """An activation (``ttmodels.ops.activations``): a name, ``"leaky_relu(0.2)"`` or a mapping;
        ``fused_in`` ("conv", "matmul", "binary"): the kind of op it is fused into; what ttnn 0.81.1
        cannot fuse there the layer runs standalone right after the op (``activations.op_split``),
        so every activation is accepted on every op."""
        v = self.raw(k, None)
        if isinstance(v, YMap):
            v = dict(v)
        try:
            act = A.parse(v)
        except ValueError as e:
            # a close name only for an unknown one (not for hardtanh's bounds); the value cut
            # short, as it may be a 400-digit number
            word = v if isinstance(v, str) and str(e).startswith("unknown") else None
            raise self.fail(f"invalid {k} {v!r:.80}: {e}"
                            f"{_suggest(word, A.NAMES) if word else ''}", k) from None
        return act

    def number(self, k, default=_MISSING, *, positive: bool = False) -> float:
        v = self.get(k, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or \
                v in (float("inf"), float("-inf")):
            raise self.fail(f"'{k}' must be a finite number, got {_typename(v)} {v!r}", k)
        if positive and v <= 0:
            raise self.fail(f"'{k}' must be > 0, got {v!r}", k)
        try:
            return float(v)
        except OverflowError:            # an int of 400 digits: no float holds it
            raise self.fail(f"'{k}' must be a finite number, got an integer of {v.bit_length()} "
                            "bits (too large for a float)", k) from None

    def name(self, k, default=_MISSING):
        v = _as_name(self.raw(k, default))
        if v is None:
            return None
        if not isinstance(v, str) or not _NAME_RE.match(v):
            raise self.fail(f"'{k}' must be a name like 'bn1' or 'layer1.0.bn1', got {v!r}", k)
        return v


class _OpInput(ops.OpInput):
    """One layer as its op's ``parse`` sees it (``ttmodels.ops.base.OpInput``)."""

    def __init__(self, comp: "_Compiler", ctx: _Ctx, f: _Fields, name: str, op: str,
                 ins: list[str]):
        self.comp, self.ctx, self.f, self.name, self.op, self.ins = comp, ctx, f, name, op, ins

    def shape(self, i: int = 0) -> TensorShape:
        return self.comp.tensor_shape(self.f, self.ins[i], self.op)

    def shape_of(self, t: str) -> TensorShape:
        return self.comp.shapes[t]

    def is_constant(self, t: str) -> bool:
        return t in self.comp.constants

    def check_broadcast(self, t: str, x: TensorShape) -> None:
        self.comp.check_broadcast(self.f, self.comp.constants[t], x, self.op)

    def tensor(self, k: str) -> tuple[str, TensorShape]:
        """The tensor a field names (upsample's ``size_of``): (the reference, its shape)."""
        f = self.f
        ref = f.raw(k)
        t = self.comp.resolve(self.ctx, ref, f.src[k], k, f.layer)
        return ref, self.comp.tensor_shape(f, t, k)

    def bn(self, k: str = "bn") -> tuple[str | None, float]:
        """A folded BatchNorm: ``bn: <prefix>`` or ``bn: {name: <prefix>, eps: <eps>}`` ->
        (scoped key prefix or None, eps; ``ops.conv2d.BN_EPS`` unless given). ``name: null``
        is no BatchNorm, so that a block can switch it off by a parameter (conv_bn_act)."""
        from ...ops.conv2d import BN_EPS
        v = self.f.raw(k, None)
        if not isinstance(v, YMap):
            return self.key(k, None), BN_EPS
        _check_keys(v, ("name", "eps"), f"'{k}'", self.f.layer, self.ctx.chain)
        sub = _Fields(self.comp, self.ctx, v, None, self.f.layer)
        if "name" in v and v["name"] is None:
            return None, BN_EPS
        if not sub.has("name"):
            raise self.f.fail(f"'{k}' needs a 'name' (the BatchNorm's key prefix), e.g. "
                              f"{{name: bn1, eps: 0.001}}", k)
        return self.ctx.prefix + sub.name("name"), sub.number("eps", BN_EPS, positive=True)

    def key(self, k: str = "weights", default=_MISSING) -> str | None:
        """A state-dict key prefix field (``weights:`` defaults to the layer's name), scoped by
        the enclosing block instances; None when the field is absent and ``default`` is None."""
        v = self.f.name(k, self.name if default is _MISSING else default)
        return self.ctx.prefix + v if v else None
