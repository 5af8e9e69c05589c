"""upsample: nearest or bilinear by an integer factor (``scale:``, or ``size_of:`` another
tensor); bilinear with ``align_corners: true`` runs as ``ttnn.grid_sample`` (docs/spec.md)."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, TensorShape, op_attrs
from ...planning.layout import MemSpec, TensorLayout
from ...planning.plan_config import PlanConfig, optional
from ..base import Field, OpDef, Parsed, register
from .rules import _c_upsample, _out_upsample


@op_attrs
class UpsampleAttrs(Attrs):
    """upsample's attrs (``parse``); ``align_corners`` only for bilinear (runs as grid_sample)."""
    scale: tuple[int, int]
    mode: str
    align_corners: bool | None


def parse(x) -> Parsed:
    f, s = x.f, x.shape(0)
    mode = f.choice("mode", ("nearest", "bilinear"), "nearest")
    if f.has("scale") == ("size_of" in f.src):
        raise f.fail("upsample needs exactly one of 'scale' or 'size_of'")
    if f.has("scale"):
        sc = f.pair("scale")
    else:
        ref, tgt = x.tensor("size_of")
        if tgt.h % s.h or tgt.w % s.w or tgt.h < s.h or tgt.w < s.w:
            raise f.fail(f"spatial mismatch: cannot upsample {s.h}x{s.w} by an integer "
                         f"factor to the size {tgt.h}x{tgt.w} of '{ref}'", "size_of")
        sc = (tgt.h // s.h, tgt.w // s.w)
    attrs = dict(scale=sc, mode=mode)
    if f.bool("align_corners", False):
        if mode != "bilinear":
            raise f.fail("align_corners needs mode: bilinear", "align_corners")
        attrs["align_corners"] = True   # runs as ttnn.grid_sample (docs/spec.md)
    return Parsed(attrs, TensorShape(s.n, s.h * sc[0], s.w * sc[1], s.c))


def reference(model, node: Node, env):
    import torch.nn.functional as F
    from ...errors import Error
    x, a = model.operand(node.inputs[0], env), node.attrs
    mode = a.get("mode", "nearest")
    size = (node.shape.h, node.shape.w)
    if mode == "nearest":
        return F.interpolate(x, size=size, mode="nearest")
    if mode == "bilinear":
        return F.interpolate(x, size=size, mode="bilinear",
                             align_corners=bool(a.get("align_corners", False)))
    raise Error(f"layer '{node.name}': upsample mode '{mode}' is not supported")


def rule_op(node: Node) -> str:
    """An align_corners upsample obeys grid_sample's rules (its lowering)."""
    return "grid_sample" if node.attrs.get("align_corners") else "upsample"


@dataclass(frozen=True)
class UpsamplePlan(PlanConfig):
    """A planned ttnn.upsample: mode, the output's flat shape, the input's W (the rules' tile
    check of the [N, H, W, C] view). An align_corners upsample plans a ``GridSamplePlan``."""
    mode: str | None = None
    out_shape: tuple[int, int, int, int] | None = None
    lowering: str = "upsample"
    in_w: int | None = optional()
    pad_c: int | None = optional()           # bilinear of channels % 32: padded to (plan.py)
    memory_config: MemSpec | None = optional()

    @classmethod
    def from_attrs(cls, d, *, layer=None):
        if d.get("lowering") == "grid_sample":
            return GridSamplePlan.from_attrs(d, layer=layer)
        return super().from_attrs(d, layer=layer)


@dataclass(frozen=True)
class GridSamplePlan(PlanConfig):
    """A bilinear align_corners upsample planned as ttnn.grid_sample: the precomputed grid's
    layout, memory and shape (prepared at build), the output memory config."""
    mode: str = "bilinear"
    align_corners: bool = True
    use_precomputed_grid: bool = True
    padding_mode: str = "zeros"
    lowering: str = "grid_sample"
    grid: TensorLayout | None = None
    grid_memory: MemSpec | None = None
    grid_shape: tuple[int, int, int, int] | None = None
    batch: int | None = None
    grid_batch: int | None = None
    out_shape: tuple[int, int, int, int] | None = None
    memory_config: MemSpec | None = None
    pad_c: int | None = optional()           # channels % 32: padded to (plan.plan_grid_sample)


register(OpDef(
    "upsample", "upsample",
    fields=(Field("scale", "pair"), Field("size_of", "tensor"), Field("mode", "choice"),
            Field("align_corners", "bool")),
    attrs=UpsampleAttrs, arity=1, parse=parse, reference=reference, rules=_c_upsample, output=_out_upsample,
    sim_ops=("upsample", "grid_sample", "prepare_grid_sample_grid", "reshape", "pad", "slice",
             "deallocate"),
    rule_op=rule_op, config=UpsamplePlan, follows_input="upsample's output keeps its input's memory config",
    doc="nearest / bilinear upsample by an integer factor",
    attrs_doc="scale (sh, sw) ints, mode ('nearest' | 'bilinear'), align_corners (True; only "
              "present when set, bilinear only: lowered to ttnn.grid_sample)",
))
