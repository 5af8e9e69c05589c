"""group_norm: GroupNorm over the channels of each sample (torch's ``nn.GroupNorm``: smp's FPN
head, detection necks), with a per-channel weight and bias. Our activations are
``[1, 1, N*H*W, C]`` and ``ttnn.group_norm`` wants ``[N, 1, H*W, C]``, grouping the last dim: the
layer reshapes to it (a view at batch 1) and back."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import Attrs, Node, op_attrs
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ..base import Field, OpDef, Parsed, register
from ...planning.rules import _out_same_memory
from .rules import _c_group_norm
# the affine weight and bias are LayerNorm's: the same keys, shapes and trained-like init
from ..layer_norm import (affine, init_random, params, prepare,  # noqa: F401 (OpDef hooks)
                          prepared_shapes)

GN_EPS = 1e-5     # torch.nn.GroupNorm's default


@op_attrs
class GroupNormAttrs(Attrs):
    """group_norm's attrs (``parse``)."""
    groups: int
    eps: float
    affine: bool


def parse(x) -> Parsed:
    f = x.f
    shape = x.shape(0)
    groups = f.int("groups", 32)
    if shape.c % groups:
        raise f.fail(f"'groups' ({groups}) must divide the input's {shape.c} channels", "groups")
    attrs = dict(groups=groups, eps=f.number("eps", GN_EPS, positive=True),
                 affine=f.bool("affine", True))
    return Parsed(attrs, shape, weights=x.key("weights") if attrs["affine"] else None)


def reference(model, node: Node, env):
    import torch.nn.functional as F
    x = model.operand(node.inputs[0], env)
    w, b = affine(model, node)
    return F.group_norm(x, int(node.attrs.groups), w, b, float(node.attrs.eps))


def calibrate(model, node: Node, env):
    return reference(model, node, env)


@dataclass(frozen=True)
class GroupNormPlan(PlanConfig):
    """A planned group_norm: the group count and whether the compute config accumulates in
    float32 (the profile's fp32_accum; the rules read both), the output memory (the
    input's, passed explicitly: ttnn's default is DRAM), the weight/bias/mask constants' memory
    and dtype (ROW_MAJOR weight and bias, TILE mask, as ttnn's helpers prepare them)."""
    num_groups: int = 1
    fp32_dest_acc_en: bool = False
    memory_config: MemSpec | None = None
    constant_memory: MemSpec | None = None
    constant_dtype: str = "bfloat16"


register(OpDef(
    "group_norm", "group_norm",
    fields=(Field("groups", "int"), Field("eps", "number"), Field("affine", "bool"),
            Field("weights", "name")),
    attrs=GroupNormAttrs, arity=1, parse=parse, reference=reference, rules=_c_group_norm,
    output=_out_same_memory, output_shape="same", tile_input=True,
    sim_ops=("group_norm", "determine_expected_group_norm_dram_grid_size",
             "create_group_norm_weight_bias_rm", "create_group_norm_input_mask"),
    params=params, prepare=prepare, prepared_shapes=prepared_shapes, init_random=init_random,
    calibrate=calibrate, config=GroupNormPlan,
    follows_input="group_norm runs on an interleaved bfloat16 TILE input (no sharded config is "
                  "planned) and keeps its memory config",
    doc="GroupNorm over the channels of each sample (ttnn.group_norm)",
    attrs_doc="groups (int), eps (float), affine (bool); weight/bias at Node.weights",
))
