"""Typed, frozen plan configs: what the planner decided for one layer, per op (as tt-metal's
``models/tt_cnn/tt/builder.py`` has ``Conv2dConfiguration``, ``MaxPool2dConfiguration``, ...).

``PlanConfig`` is the base every op's config extends (each op's module in ``ttmodels/ops/``
defines its own and names it in its registry entry, ``OpDef.config``). The layers read the
fields; ``as_attrs()`` is the config as call keywords (the same keys the sim builds from ttnn's
keywords), which the rules take as their typed arguments (``rules.CallArgs``: each rule
function's class keeps the fields it reads); the plan's JSON is ``as_attrs()`` rendered
(``plan_format``).

Fields marked ``optional()`` are left out of ``as_attrs()`` while they are None (a conv that is not
DRAM-sliced has no ``slice``), so a plan's JSON names only what applies.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from ..errors import LayoutError

_OPTIONAL = {"optional": True}


def optional(default=None):
    """A field that is absent from ``as_attrs()`` while it is None / False."""
    return field(default=default, metadata=_OPTIONAL)


@dataclass(frozen=True)
class SliceConfig:
    """A DRAM-sliced op: ``type`` "height" | "width", ``num_slices`` (ttnn.Op2DSliceConfig)."""
    type: str
    num_slices: int

    def as_attrs(self) -> dict[str, Any]:
        return {"type": self.type, "num_slices": self.num_slices}


@dataclass(frozen=True)
class PlanConfig:
    """The base: the L1 estimate's parts (``l1.py``), and what every config answers."""
    l1_parts: Mapping[str, int] = field(default_factory=dict)

    # Asked of any layer (the planner's liveness, the plan table and plot, the layers' base); the
    # ops they apply to declare them as fields. Plain class attributes, not annotated: a field
    # of a subclass then keeps its own place in that subclass's field order.
    slice = None             # SliceConfig: DRAM-sliced (conv2d, pools)
    inplace = False          # output written into an input (binary)
    inplace_blocked = None   # why it could not be (binary)
    lowering = None          # conv2d: "linear"; upsample: "grid_sample"
    memory_config = None     # an explicit output MemSpec (None: what the op gives)

    def as_attrs(self) -> dict[str, Any]:
        """The config as the rules read it (and the plan JSON shows it): every field by name,
        optional ones only when set; nested configs as mappings."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "l1_parts" or f.metadata.get("optional") and (v is None or v is False):
                continue
            out[f.name] = v.as_attrs() if isinstance(v, SliceConfig) else v
        out["l1_parts"] = self.l1_parts      # the estimate, after the decisions
        return out

    @classmethod
    def from_attrs(cls, d: Mapping[str, Any], *, layer: str | None = None) -> "PlanConfig":
        """A config from a mapping of its fields (tests and tools write plans by hand); an
        unknown key is an error naming the layer and the config's fields."""
        names = {f.name for f in fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise LayoutError(f"{cls.__name__} has no field(s) {bad}; fields: {sorted(names)}",
                              layer=layer)
        kw = dict(d)
        sl = kw.get("slice")
        if isinstance(sl, Mapping):
            kw["slice"] = SliceConfig(str(sl["type"]), int(sl["num_slices"]))
        return cls(**kw)
