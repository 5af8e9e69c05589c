"""group_norm's layout rules, as the layer calls ``ttnn.group_norm`` (no sharded config, the
core grid from ``determine_expected_group_norm_dram_grid_size``, ``inplace=False``): an
interleaved TILE input in bfloat16 or float32 whose channels are a multiple of 32 and of the
group count. The output keeps the input's memory config (passed explicitly), layout and dtype."""
from __future__ import annotations

from dataclasses import dataclass

from ...planning.layout import TILE_LAYOUT
from ...planning.rules import CallArgs, Rule, _v, reads

_GN = "ttnn/cpp/ttnn/operations/normalization/groupnorm"
_GN_DEV = f"{_GN}/device/groupnorm_device_operation.cpp"
DTYPES = ("bfloat16", "float32")

RULE_LIST = (
    Rule("group_norm.interleaved", "group_norm",
         "ttnn.group_norm given a core grid for an interleaved input (the planned call) refuses a "
         "sharded input: its grid must match the shard grid ('program_config "
         "compute_with_storage_grid_size (8x8) must match shard grid dimensions (8x1)', seen on "
         "the 0.81.1 mock device); sharded group norm (height/block, with ttnn's sharded "
         "helpers) is not planned",
         f"{_GN}/device/groupnorm_sharded_program_factory.cpp:132 (0.81.1 wheel, mock device)"),
    Rule("group_norm.tile", "group_norm",
         "an interleaved input must be TILE (ttnn.group_norm's documentation: 'ROW_MAJOR input is "
         "supported only for sharded inputs'); TILE also requires inplace=False ('In-place "
         "operation not supported: Tile layout requires non-inplace tensors')",
         f"{_GN}/groupnorm.cpp:284 (0.81.1 wheel, mock device; ttnn.group_norm's docstring for "
         "ROW_MAJOR)"),
    Rule("group_norm.dtype", "group_norm",
         "the input must be BFLOAT16 or FLOAT32 ('Input tensor must be BFLOAT16 or FLOAT32, got: "
         "DataType::BFLOAT8_B'); the output has the input's dtype",
         f"{_GN_DEV}:178 (0.81.1 wheel, mock device)"),
    Rule("group_norm.fp32_dest_acc", "group_norm",
         "a FLOAT32 input needs fp32_dest_acc_en in the compute kernel config ('group_norm with "
         "Float32 input requires fp32_dest_acc_en=true in the compute kernel config'); the "
         "planner gives it float32 only under a profile with fp32_accum, bfloat16 otherwise",
         f"{_GN}/device/groupnorm_mcast_program_factory.cpp:252 (0.81.1 wheel, mock device)"),
    Rule("group_norm.channels", "group_norm",
         "C must be a multiple of the tile width (32) and of num_groups (ttnn's "
         "determine_expected_group_norm_dram_grid_size and create_group_norm_input_mask assert "
         "it; the op's documented limitation)",
         "ttnn/operations/normalization.py:391 (0.81.1 wheel: "
         "determine_expected_group_norm_dram_grid_size asserts it)"),
)


@dataclass(frozen=True)
class GroupNormArgs(CallArgs):
    num_groups: int = 1
    fp32_dest_acc_en: bool = False      # the compute kernel config's (the profile's fp32_accum)


@reads(GroupNormArgs)
def _c_group_norm(inputs, args: GroupNormArgs, output, shapes):
    x = inputs[0]
    if x is None:
        return []
    vs = []
    if x.memory.sharded:
        vs.append(_v("group_norm.interleaved", f"group_norm of a {x.memory.memory_layout} input "
                     "(only interleaved inputs are planned)"))
    elif x.layout != TILE_LAYOUT:
        vs.append(_v("group_norm.tile", f"group_norm of an interleaved {x.layout} input"))
    if x.dtype not in DTYPES:
        vs.append(_v("group_norm.dtype", f"group_norm of a {x.dtype} input (bfloat16 or "
                     "float32 only)"))
    elif x.dtype == "float32" and not args.fp32_dest_acc_en:
        vs.append(_v("group_norm.fp32_dest_acc", "group_norm of a float32 input without "
                     "fp32_dest_acc_en"))
    c = shapes[0][-1] if shapes and shapes[0] is not None else None
    if c is not None and (c % 32 or c % max(int(args.num_groups), 1)):
        vs.append(_v("group_norm.channels", f"group_norm of {c} channels in {args.num_groups} "
                     "groups (C must be a multiple of 32 and of the group count)"))
    return vs
