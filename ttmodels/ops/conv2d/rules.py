"""conv2d's layout rules (ttnn 0.81.1, with their tt-metal sources), its check, its perf
advice and the layout of its output. Also conv_transpose2d's output (a conv2d micro-op)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...formats import BLOCK_FLOAT_DTYPES
from ...language.graph import TILE
from ...arch import DEFAULT_GRID
from ...planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                       TensorLayout)
from ...planning.rules import _CONV, CallArgs, OutputQuery, Rule, Violation, _v, reads
from .sharding import (conv_input_parallel_config, folded_output_parallel_config, conv_output_memspec, conv_slice_dim,
                       determine_parallel_config, parallel_config_of)

_CONV_OP = "ttnn/cpp/ttnn/operations/conv/conv2d/device/conv2d_device_operation.cpp"
_CONV2D = "ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp"
_SLICING = "ttnn/cpp/ttnn/operations/sliding_window/op_slicing/op_slicing.cpp"
_LAYOUT = "ttnn/api/ttnn/tensor/layout/tensor_layout.cpp"

RULE_LIST = (
    # --- conv2d -----------------------------------------------------------------------------
    Rule("conv2d.sharded_or_shard_layout", "conv2d",
         "an interleaved input with no conv_config.shard_layout is accepted: ttnn 0.81 picks the "
         "sharding itself (L1-driven auto shard), so the plan sets shard_layout to know it",
         f"{_CONV}: determine_conv_config_for_auto_shard (0.81.1 accepts the call; the old "
         "'Tensor must be sharded or shard_layout must be set.' is not raised)", kind="perf"),
    Rule("conv2d.act_block_h", "conv2d|conv_transpose2d",
         "act_block_h_override is 0 (ttnn decides) or a multiple of 32",
         f"{_CONV}: get_conv_configs ('Config Error: act_block_h_override ({{}}) must be a "
         "multiple of 32 (tile height).', 0.81.1 wheel: conv2d_utils.cpp:280)"),
    Rule("conv2d.shard_scheme", "conv2d|conv_transpose2d",
         "conv2d supports HEIGHT, BLOCK or WIDTH sharded layouts only",
         f"{_CONV}: determine_parallel_config ('Conv2d supports Height, Block or Width Sharded "
         "Layouts but got {}')"),
    Rule("conv2d.height_block_row_major_orientation", "conv2d",
         "height/width-sharded conv inputs must use ROW_MAJOR shard orientation (else conv reshards)",
         f"{_CONV}: get_conv_padded_input_shape_and_mem_config (needs_shard_or_reshard when "
         "orientation != ROW_MAJOR for non-block layouts)", kind="perf"),
    Rule("conv2d.rm_bfp_output", "conv2d|conv_transpose2d",
         "conv output cannot be ROW_MAJOR when the output dtype is bfloat8_b (1x1 stride-1 "
         "matmul convs excepted: 0.81.1 accepts them)",
         f"{_CONV_OP}: Conv2dDeviceOperation::validate ('Conv output can't be in Row Major if "
         "output dtype is BFloat8_B.')"),
    Rule("conv2d.mm_block_row_major", "conv2d",
         "a 1x1 stride-1 (matmul) conv takes a BLOCK-sharded ROW_MAJOR input only in shards of "
         "whole tile rows (height a multiple of 32): it tilizes the input on its own shard spec "
         "(a pool's 7-row block shards are refused; height shards of any height are resharded)",
         f"{_LAYOUT}: TensorLayout validation ('Physical shard shape (7, 128) must be tile {{32, "
         "32}} sized!', 0.81.1 wheel: tensor_layout.cpp:171, raised inside conv2d's matmul path; "
         "measured on the mock device)"),
    Rule("conv2d.mm_activation", "conv2d|linear",
         "a conv run as a matmul (1x1 stride 1, or lowered to linear) and linear fuse only the "
         "activations the matmul kernels know (not hardswish, leaky_relu: activations.py "
         "fuses_matmul); the layers run those standalone after the op",
         "ttnn/cpp/ttnn/operations/matmul/device/utilities/matmul_utilities.hpp ('Unsupported "
         "UnaryOpType for fused activation: UnaryOpType::HARDSWISH', 0.81.1 wheel: line 354)"),
    Rule("conv2d.mm_width_shard_layout", "conv2d",
         "a 1x1 stride-1 (matmul) conv takes a WIDTH-sharded input only with "
         "conv_config.shard_layout WIDTH: with HEIGHT or BLOCK the matmul gets that scheme's "
         "program config for a width-sharded in0 and refuses it (a 3x3 conv uses any sharded "
         "input as it is, whatever shard_layout says; found by the planner's ttnn oracle on "
         "mobilenet_v2, resnext50 and wide_resnet50 planned without adapters)",
         f"{_CONV}: determine_matmul_op_config_from_conv_op_config (the program config follows "
         "conv_config.shard_layout); ttnn/cpp/ttnn/operations/matmul/device/"
         "matmul_device_operation.cpp ('MatmulMultiCoreReuseMultiCastProgramConfig: Unsupported "
         "memory layout', 0.81.1 wheel: line 1737; on a grid of partial rows "
         "tt_metal/impl/buffers/buffer.cpp:272 'Invalid shard grid')"),
    Rule("conv2d.mm_interleaved", "conv2d",
         "a 1x1 stride-1 (matmul) conv given a DRAM interleaved input and no shard_layout "
         "shards nothing: it runs ttnn.linear on the interleaved input with matmul's automatic "
         "program config and writes a DRAM interleaved output (with or without a slice_config; "
         "with shard_layout HEIGHT it shards the whole input and output into L1 instead)",
         f"{_CONV2D}: shard_or_reshard_tensor_if_required (auto_shard && is_mm_conv: 'Skip "
         "sharding of the input tensor and run the matmul out of interleaved tensor'), conv2d_L1 "
         "(ttnn::linear with no program config for an interleaved input); measured on the mock "
         "n150 (0.81.1): 32x112x112x16 -> 96 runs with 407,936 B of CBs per core, output DRAM "
         "interleaved", kind="perf"),
    Rule("conv2d.reshard", "conv2d",
         "a sharded input whose scheme differs from conv_config.shard_layout is resharded inside "
         "conv2d (an extra move the plan should make explicit)",
         f"{_CONV}: get_conv_padded_input_shape_and_mem_config (needs_shard_or_reshard)",
         kind="perf"),
    # --- conv2d DRAM slicing (slice_config=Op2DSliceConfig(DRAMSliceHeight|Width, k)) ---------
    Rule("conv2d.slice_dram_input", "conv2d",
         "a DRAM-sliced conv2d reads its input from DRAM interleaved; its output is always DRAM "
         "interleaved (a memory_config argument is ignored)",
         f"{_CONV2D}: conv2d_DRAM ('Conv DRAM expects the input tensor to be in DRAM.', 'Input "
         "Tensor to Conv DRAM should be in Interleaved Memory Layout', 'Conv2D DRAM doesn't "
         "support specifying memory config, as the output will always be DRAM Interleaved'); "
         f"{_CONV}: determine_conv2d_execution_path (no slice_config + DRAM input = DRAM path)"),
    Rule("conv2d.slice_mm", "conv2d",
         "a 1x1 stride-1 conv (matmul conv) never slices: conv2d_DRAM hands it to conv2d_L1, so a "
         "slice_config is ignored and the plan's L1 estimate would be wrong",
         f"{_CONV2D}: conv2d_DRAM (mm_conv -> conv2d_L1; 'Conv2D DRAM with matmul should never "
         "use the slicing code path.')"),
    Rule("conv2d.slice_count", "conv2d",
         "2 <= num_slices <= the sliced output dimension (height: OH; width: ceil(OW/32) when the "
         "output is TILE, since width slices are whole tiles)",
         f"{_SLICING}: compute_slice_rounding_value / compute_max_num_slices ('Number of slices "
         "({}) exceeds the maximum allowed ({}) for the given output dimension and alignment.')"),
    Rule("conv2d.slice_shard_layout", "conv2d",
         "a DRAM-sliced conv2d needs conv_config.shard_layout (each slice is sharded with it) and "
         "no override_sharding_config",
         f"{_CONV2D}: Conv2dSliceAttr::get_input_memory_config (' Conv2D DRAM Slicing must have a "
         "shard layout set.'); conv2d_DRAM ('Conv2D DRAM slicing doesn't support "
         "override_output_sharding_config.')"),
)


@dataclass(frozen=True)
class ConvArgs(CallArgs):
    """What conv2d's rules read of a conv2d call (the planner's ``Conv2dPlan``, the sim's
    ``ttnn.conv2d`` keywords and ``conv_config``)."""
    shard_layout: str | None = None             # conv_config.shard_layout
    override_sharding_config: bool | None = None
    act_block_h_override: int | None = None
    output_layout: str | None = TILE_LAYOUT     # conv_config.output_layout
    is_mm_conv: bool = False                    # 1x1 stride 1: run as a matmul
    activation: str | None = None               # fused (the sim's conv_config.activation)
    lowering: str | None = None                 # "linear": ttnn.linear's rules
    matmul: Mapping[str, Any] | None = None     # the linear lowering's program config
    slice: Mapping[str, Any] | None = None      # DRAM slicing: {"type", "num_slices"}
    output_hw: tuple[int, int] | None = None    # the output's (H, W), for the slice count
    in_channels: int | None = None              # the sim knows it; the planner's shapes say it
    fold: int = 1                               # sharding.kernel_stride_fold: C * fold channels
    device_grid: tuple[int, int] = DEFAULT_GRID


def _c_conv_slice(x, a: ConvArgs) -> list[Violation]:
    sl = a.slice
    vs = []
    if x.memory.buffer != "dram" or x.memory.memory_layout != INTERLEAVED:
        vs.append(_v("conv2d.slice_dram_input", f"DRAM-sliced conv2d input is {x.memory.short()}"))
    if a.is_mm_conv:
        vs.append(_v("conv2d.slice_mm", "slice_config on a 1x1 stride-1 (matmul) conv"))
    if not a.shard_layout or a.override_sharding_config:
        vs.append(_v("conv2d.slice_shard_layout",
                     f"shard_layout {a.shard_layout}, override_sharding_config "
                     f"{a.override_sharding_config}"))
    k = sl.get("num_slices")
    hw = a.output_hw
    try:
        top = None
        if hw is not None:
            dim, rnd = conv_slice_dim(sl.get("type"), hw[0], hw[1], a.output_layout)
            top = -(-dim // rnd)
        if not isinstance(k, int) or k < 2 or (top is not None and k > top):
            vs.append(_v("conv2d.slice_count", f"{k} {sl.get('type')} slices (max {top})"))
    except ValueError as e:
        vs.append(_v("conv2d.slice_count", str(e)))
    return vs


@reads(ConvArgs)
def _c_conv(inputs, a: ConvArgs, output, shapes):
    vs = []
    x = inputs[0]
    want = a.shard_layout
    if x is None:
        return [_v("conv2d.sharded_or_shard_layout", "conv2d input is missing")]
    if a.lowering == "linear":
        # lowered to ttnn.linear (ops/conv2d/layer.py): matmul's rules apply
        vs += _mm_activation((a.matmul or {}).get("fused_activation"))
        if x.layout != TILE_LAYOUT:
            vs.append(_v("linear.tile", f"conv2d lowered to linear: input is {x.layout}"))
        want_in0 = (a.matmul or {}).get("in0_memory")
        if x.memory.sharded and want_in0 and x.memory.short() != want_in0:
            # matmul_device_operation.cpp: 1D mcast needs a HEIGHT-sharded in0, 2D mcast
            # 'K ({}) must equal in0_block_w ({})' of the shard it gets (measured on 0.81.1);
            # an interleaved in0 is read as is
            vs.append(_v("linear.program_config", f"in0 {x.memory.short()} is not the program "
                         f"config's sharded in0 {want_in0}"))
        return vs
    if a.slice:
        vs += _c_conv_slice(x, a)
    if want is not None and want not in (HEIGHT, WIDTH, BLOCK):
        vs.append(_v("conv2d.shard_scheme", f"shard_layout {want}"))
    abh = int(a.act_block_h_override or 0)
    if abh % TILE:
        vs.append(_v("conv2d.act_block_h", f"act_block_h_override {abh} is not a multiple of 32"))
    if a.output_layout == ROW_MAJOR and a.dtype in BLOCK_FLOAT_DTYPES and not a.is_mm_conv:
        vs.append(_v("conv2d.rm_bfp_output", "conv output_layout ROW_MAJOR with dtype bfloat8_b"))
    if a.is_mm_conv:
        m = x.memory
        if m.memory_layout == WIDTH and want not in (None, WIDTH):
            vs.append(_v("conv2d.mm_width_shard_layout", f"1x1 (matmul) conv input is "
                         f"{m.short()} but shard_layout is {want}"))
        if m.memory_layout == BLOCK and x.layout == ROW_MAJOR and m.shard_shape and \
                m.shard_shape[0] % TILE:
            vs.append(_v("conv2d.mm_block_row_major", f"1x1 (matmul) conv input is ROW_MAJOR "
                         f"{m.short()}: shard height {m.shard_shape[0]} is not whole tiles"))
        vs += _mm_activation(a.activation)
    return vs


def _mm_activation(act) -> list[Violation]:
    """conv2d.mm_activation: ``act`` (canonical name or None) fused into a matmul kernel."""
    from .. import activations
    if act is None or activations.get(act).fuses_matmul:
        return []
    return [_v("conv2d.mm_activation", f"{act} fused into a matmul (conv run as matmul / linear)")]


@reads(ConvArgs)
def advise(op, inputs, a: ConvArgs, output, shapes) -> list[Violation]:
    """conv2d's ``perf`` rules (``rules.advise``)."""
    vs = []
    if inputs and inputs[0] is not None:
        m = inputs[0].memory
        want = a.shard_layout
        if not m.sharded and not want and not a.slice and not (
                a.is_mm_conv and m.buffer == "dram"):
            # (a matmul conv out of DRAM is not sharded at all: rule conv2d.mm_interleaved)
            vs.append(_v("conv2d.sharded_or_shard_layout",
                         f"conv2d input is {m.short()} and no shard_layout is set: ttnn picks one"))
        if m.sharded and want and want != m.memory_layout and a.override_sharding_config:
            vs.append(_v("conv2d.reshard", f"conv2d input {m.memory_layout} but shard_layout {want}"))
        if m.sharded and m.memory_layout != BLOCK and m.orientation != "row_major":
            vs.append(_v("conv2d.height_block_row_major_orientation",
                         f"conv2d input {m.memory_layout} with {m.orientation} orientation"))
    return vs


@reads(ConvArgs)
def _out_conv(q: OutputQuery) -> TensorLayout:
    a: ConvArgs = q.attrs
    x, out_rc, requested, dtype = q.x, q.out_rc, q.requested, q.dtype
    grid = tuple(a.device_grid)
    if a.slice:
        # conv2d_DRAM writes every slice into a DRAM interleaved output (memory_config ignored)
        return TensorLayout(MemSpec(INTERLEAVED, "dram"), a.output_layout, dtype)
    is_mm = bool(a.is_mm_conv)
    if is_mm and not a.shard_layout and x is not None and x.memory.buffer == "dram" and \
            not x.memory.sharded:
        # rule conv2d.mm_interleaved: ttnn.linear out of DRAM, into DRAM
        return TensorLayout(MemSpec(INTERLEAVED, "dram"), a.output_layout, dtype)
    if requested is not None:
        mem = requested
    elif x is not None and x.memory.sharded and out_rc is not None:
        # a sharded input is used as it is (reshard_if_not_optimal=False): its grid is the
        # conv's parallel config, unless conv2d reshards it itself (conv_reshards_input)
        c_in = a.in_channels or (q.shapes[0][3] if q.shapes and q.shapes[0] else None)
        pc = parallel_config_of(x.memory) if c_in is None else conv_input_parallel_config(
            x.memory, out_rc[0], c_in, out_rc[1], is_mm=is_mm, device_grid=grid,
            act_block_h=a.act_block_h_override)
        mem = conv_output_memspec(pc, *out_rc, is_mm=is_mm, device_grid=grid)
    elif out_rc is not None:
        kind = a.shard_layout or HEIGHT
        pc = determine_parallel_config(
            kind, out_rc[0], a.in_channels if a.in_channels is not None else out_rc[1],
            out_rc[1], grid, channels_padding=not is_mm, act_block_h=a.act_block_h_override)
        if a.fold > 1 and kind == BLOCK and a.in_channels is not None:
            # conv2d folds it into a matmul conv on C * sh * sw channels
            pc = folded_output_parallel_config(pc, a.in_channels * a.fold, out_rc[1],
                                               device_grid=grid)
            is_mm = True
        mem = conv_output_memspec(pc, *out_rc, is_mm=is_mm, device_grid=grid)
    else:
        mem = x.memory if x is not None else MemSpec()
    return TensorLayout(mem, a.output_layout, dtype)
