"""upsample: nearest or bilinear by an integer factor (``scale:``, or ``size_of:`` another
tensor); bilinear with ``align_corners: true`` runs as ``ttnn.grid_sample`` (docs/spec.md)."""
from __future__ import annotations

from ..graph import Node, TensorShape
from .base import Field, OpDef, Parsed, Ref, register


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
    from ..errors import Error
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


register(OpDef(
    "upsample", "upsample",
    fields=(Field("scale", "pair"), Field("size_of", "tensor"), Field("mode", "choice"),
            Field("align_corners", "bool")),
    arity=1, parse=parse, reference=reference, plan="plan_upsample",
    rules=Ref("ttmodels.rules:_c_upsample"), output=Ref("ttmodels.rules:_out_upsample"),
    layer=Ref("ttmodels.layers.upsample:Upsample"),
    sim_ops=("upsample", "grid_sample", "prepare_grid_sample_grid", "reshape"),
    rule_op=rule_op, follows_input="upsample's output keeps its input's memory config",
    doc="nearest / bilinear upsample by an integer factor",
    attrs_doc="scale (sh, sw) ints, mode ('nearest' | 'bilinear'), align_corners (True; only "
              "present when set, bilinear only: lowered to ttnn.grid_sample)",
))
