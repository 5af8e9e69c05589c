"""The one table of TTNN 0.81 per-op layout rules, and the layout math they rest on.

Used by the planner (to decide where adapters go) and by the sim backend (to reject at run time
what a card would reject). Every rule cites the tt-metal function that enforces it. Two kinds:

* ``error`` rules: the card raises (TT_FATAL / TT_THROW). ``check()`` returns only these.
* ``perf`` rules: the card runs, but on a slower path (e.g. binary_ng falls back from its native
  L1-sharded kernels to the TensorAccessor "interleaved" kernels). ``advise()`` returns these; the
  planner uses them to decide whether an adapter pays for itself. The sim never rejects them.

Conventions: activations are ``[1, 1, rows, C]`` (rows = N*H*W); ``shapes`` passed to ``check`` are
those flattened logical shapes. Strings for layouts/buffers/dtypes are the ones of ``layout.py``.
Facts were read from tt-metal sources and cross-checked against the TT_FATAL message strings
compiled into the ttnn 0.81.1 wheel (``ttnn/build/lib/_ttnncpp.so``).
"""
from __future__ import annotations
from .formats import BLOCK_FLOAT_DTYPES

from dataclasses import dataclass, replace
from typing import Iterable

from .errors import LayoutError
from .graph import TILE, round_up
from .arch import DEFAULT_GRID
from .layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                     TensorLayout, closest_common_divisor, core_extent)
from . import ops
from .ops import BINARY, OPS, POOLS, UNARY

Shape4 = tuple[int, int, int, int]


@dataclass(frozen=True)
class Rule:
    id: str
    op: str
    text: str
    source: str
    kind: str = "error"    # "error": the card rejects it; "perf": accepted on a slower path


@dataclass
class Violation:
    rule: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


_CONV = "ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp"
_CONV_OP = "ttnn/cpp/ttnn/operations/conv/conv2d/device/conv2d_device_operation.cpp"
_CONV2D = "ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp"
_SLICING = "ttnn/cpp/ttnn/operations/sliding_window/op_slicing/op_slicing.cpp"
_BNG = "ttnn/cpp/ttnn/operations/eltwise/binary_ng/device/binary_ng_device_operation.cpp"
_BNG_U = "ttnn/cpp/ttnn/operations/eltwise/binary_ng/device/binary_ng_utils.cpp"
_POOL = "ttnn/cpp/ttnn/operations/pool/generic/device/pool_op.cpp"
_POOL_API = "ttnn/cpp/ttnn/operations/pool/generic/generic_pools.cpp"
_UP = "ttnn/cpp/ttnn/operations/pool/upsample/device/upsample_device_operation.cpp"
_UP_API = "ttnn/cpp/ttnn/operations/pool/upsample/upsample.cpp"
_GS = "ttnn/cpp/ttnn/operations/pool/grid_sample/device/grid_sample_device_operation.cpp"
_CAT = "ttnn/cpp/ttnn/operations/data_movement/concat/device/concat_device_operation.cpp"
_MM = "ttnn/cpp/ttnn/operations/matmul/device/matmul_device_operation.cpp"
_I2S = ("ttnn/cpp/ttnn/operations/data_movement/sharded/interleaved_to_sharded/device/"
        "interleaved_to_sharded_device_operation.cpp")
_S2I = ("ttnn/cpp/ttnn/operations/data_movement/sharded/sharded_to_interleaved/device/"
        "sharded_to_interleaved_device_operation.cpp")
_RESHARD = "ttnn/cpp/ttnn/operations/data_movement/sharded/reshard/device/reshard_device_operation.cpp"
_TC = "ttnn/cpp/ttnn/operations/copy/typecast/device/typecast_device_op.cpp"
_TENSOR = "ttnn/api/ttnn/tensor/tensor_spec.cpp"
_LAYOUT = "ttnn/api/ttnn/tensor/layout/tensor_layout.cpp"
_TENSOR_CPP = "ttnn/cpp/ttnn/tensor/tensor.cpp"
_PC = "ttnn/cpp/ttnn/operations/matmul/device/config/matmul_program_config.cpp"

_UNARY_H = "ttnn/cpp/ttnn/operations/eltwise/unary/unary.hpp"
_UNARY_OP = "ttnn/cpp/ttnn/operations/eltwise/unary/device/unary_device_operation.cpp"
_RESHAPE = "ttnn/cpp/ttnn/operations/data_movement/reshape_view/reshape.cpp"
_SLICE = "ttnn/cpp/ttnn/operations/data_movement/slice/device/slice_device_operation.cpp"
_CONVT = "ttnn/cpp/ttnn/operations/conv/conv_transpose2d/conv_transpose2d.cpp"
_SW = "ttnn/cpp/ttnn/operations/sliding_window/sliding_window.cpp"
_BN = "ttnn/cpp/ttnn/operations/normalization/batch_norm/device/batch_norm_device_operation.cpp"
_LN = "ttnn/cpp/ttnn/operations/normalization/layernorm/device/layernorm_device_operation.cpp"
_SOFTMAX = "ttnn/cpp/ttnn/operations/normalization/softmax/softmax.cpp"
_PERMUTE = "ttnn/cpp/ttnn/operations/data_movement/permute/permute.cpp"
_BIN_OPS = "|".join(BINARY)
_UN_OPS = "|".join(UNARY)

_RULE_LIST = [
    # --- any tensor -------------------------------------------------------------------------
    Rule("tensor.bfp_tile", "*",
         "bfloat8_b / bfloat4_b tensors exist only in TILE layout (block-float shares an exponent "
         "per 16 values of a tile face)",
         f"{_TENSOR}: TensorLayout validation ('Only tile layout supports dtype conversion'; "
         "BFLOAT8_B/BFLOAT4_B require Layout::TILE)"),
    Rule("tensor.shard_spec", "*",
         "a sharded tensor's shards tile its physical shape (TILE: [round_up(rows, 32), "
         "round_up(C, 32)]; row-major: [rows, C], or round_up(C, 16) for a pool2d output): "
         "height: shard_w == physical width, ceil(height / shard_h) <= cores; width: shard_h == "
         "physical height exactly, ceil(width / shard_w) <= cores; block: ceil(height / shard_h) "
         "<= grid rows and ceil(width / shard_w) <= grid columns (row-major orientation)",
         "tt_metal/impl/tensor/spec/tensor_spec.cpp: validate_shard_spec_with_tensor_shape "
         "('Shard width {} must match physical width {} for height sharded', 'Number of shards "
         "along height {} must not exceed number of cores {}', 'Shard height {} must match "
         "physical height {} for width sharded', 'Number of shards along height {} must not "
         "exceed number of rows {} for row major orientation!'; 0.81.1 wheel: line 173)"),
    Rule("tensor.shard_tile", "*",
         "the shard shape of a sharded TILE tensor is a whole number of 32x32 tiles",
         "tt_metal/impl/tensor/spec/layout/tensor_layout.cpp: TensorLayout validation "
         "('Physical shard shape ({}, {}) must be tile {32, 32} sized!', 0.81.1 wheel: line 171)"),
    Rule("tensor.shard_grid", "*",
         "the shard grid lies inside the device's compute-with-storage worker grid (8x8 on a "
         "Wormhole n150/n300)",
         "ttnn/cpp/ttnn/tensor/tensor_impl.cpp: allocate_device_buffer -> tt_metal Buffer / "
         "allocator (each shard lives in the L1 bank of a worker core of the device's "
         "compute_with_storage_grid_size; no single TT_FATAL string verified in 0.81.1)"),
    Rule("tensor.on_device", "*",
         "device ops take device tensors: a host tensor must be moved with to_device first",
         f"{_TENSOR_CPP}: device storage checks in each op's validate (0.81.1: 'Operands to "
         "matmul need to be on device!', 'ttnn.concat: expected a tensor with device storage')"),
    Rule("tensor.shard_l1", "conv2d|conv_transpose2d|max_pool2d|avg_pool2d|global_avg_pool|"
         "adaptive_avg_pool2d",
         "conv2d and pool inputs that are sharded live in L1 (ttnn 0.81.1 accepts DRAM "
         "height-sharded tensors for eltwise ops and adapters; the planner never makes them)",
         f"{_CONV}: create_sharded_memory_config_from_parallel_config (BufferType::L1); "
         f"{_POOL}: Pool2D::validate_on_program_cache_miss"),
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
    Rule("conv2d.reshard", "conv2d",
         "a sharded input whose scheme differs from conv_config.shard_layout is resharded inside "
         "conv2d (an extra move the plan should make explicit)",
         f"{_CONV}: get_conv_padded_input_shape_and_mem_config (needs_shard_or_reshard)",
         kind="perf"),
    # --- conv_transpose2d (a conv2d micro-op over the halo's zero-inserted input) -------------
    Rule("conv_transpose2d.real_padding", "conv_transpose2d",
         "padding <= dilation * (kernel - 1) on each axis: the halo pads the zero-inserted input "
         "by dilation * (kernel - 1) - padding (unsigned) before the stride-1 conv2d micro-op",
         f"{_SW}: SlidingWindowConfig::get_transposed_real_padding (uint32 input_pad_top = "
         "base_pad_height - padding[0]; 0.81.1 wheel: 'full_input_shape[1] - strided_input_height "
         "== input_pad_top + input_pad_bottom + output_pad_hw.first'); "
         f"{_CONVT}: conv_transpose2d_L1"),
    Rule("conv_transpose2d.l1_path", "conv_transpose2d",
         "the plan runs conv_transpose2d on its L1 path: its input is in L1 (sharded or "
         "interleaved); an input in DRAM without a slice config takes the DRAM path, whose "
         "output is DRAM interleaved (the sim models the L1 path only)",
         f"{_CONVT}: determine_conv_transpose2d_execution_path (conv2d's rule: "
         f"{_CONV} determine_conv2d_execution_path)"),
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
    # --- binary_ng (add, multiply, subtract) ------------------------------------------------
    Rule("binary.layout", _BIN_OPS,
         "operands must be TILE or ROW_MAJOR; row-major operands may be sharded or mixed with "
         "sharded ones, but ttnn tilizes a row-major operand with its own memory config, so if "
         "sharded its shards must be whole tiles (measured on 0.81.1)",
         f"{_BNG}: BinaryNgDeviceOperation::validate_on_program_cache_miss ('First/Second operand "
         "to eltwise binary must have TILE or ROW_MAJOR layout'; 'Row-major binary_ng path does "
         "not support sharded tensors yet')"),
    Rule("binary.memory", _BIN_OPS,
         "each operand is either sharded or interleaved; sharded and interleaved operands may be "
         "mixed (0.81 has no shard-spec equality check: mismatches run on the TensorAccessor path)",
         f"{_BNG}: BinaryNgDeviceOperation::validate_on_program_cache_miss ('LHS/RHS operand must "
         "be either sharded or interleaved')"),
    Rule("binary.broadcast", _BIN_OPS,
         "shapes broadcast numpy-style (each dim equal or 1); a [1,1,1,C] operand broadcasts over "
         "the rows of a sharded a (0.81 dropped the old 'Cannot broadcast sharded tensors on dims "
         "other than W' check)",
         f"{_BNG}: BinaryNgDeviceOperation::validate_on_program_cache_hit ('Broadcasting rule "
         "violation at dimension index {} ...')"),
    Rule("binary.dtype_out", _BIN_OPS,
         "the output dtype is the dtype argument (default: input a's dtype); binary ops convert on "
         "their own, no typecast needed",
         f"{_BNG}: operation_attributes_t::get_dtype (dtype.value_or(input_dtype))"),
    Rule("binary.output_tensor", _BIN_OPS,
         "an in-place binary op (output_tensor=a, as ttnn.add_) writes into a, whose spec becomes "
         "the output spec: a must have the broadcast output shape (b broadcasts, never a), the "
         "dtype argument (if any) must be a's dtype, and a requested memory_config must be a's",
         f"{_BNG}: BinaryNgDeviceOperation::compute_output_specs ('Shape of Output tensor {{}} "
         "provided does not match the broadcasted output shape {}'; returns the output tensor's "
         "spec), validate_on_program_cache_miss ('If both output dtype and output tensor provided "
         "dtype should match'); BinaryNgDeviceOperation::invoke (memory_config.value_or(output "
         "tensor's))"),
    Rule("binary.native_sharding", _BIN_OPS,
         "the native L1-sharded kernels run only when a and b have the same shape and the same "
         "memory config (same shard spec), evenly sharded, all L1, and the output is sharded on "
         "the same grid; otherwise binary_ng reads shards through TensorAccessor (slower)",
         f"{_BNG_U}: is_native_L1_sharding", kind="perf"),
    # --- unary ------------------------------------------------------------------------------
    Rule("relu.dtype", _UN_OPS,
         "ttnn's eltwise unary ops (relu, relu6, sigmoid, silu, ..., identity) have no dtype "
         "argument: the output dtype is the input dtype, the memory config the input's unless given",
         f"{_UNARY_H}: relu/sigmoid/silu/... signatures (input_tensor, memory_config, output_tensor, "
         f"sub_core_grids; nanobind signatures of 0.81.1); {_UNARY_OP}: compute_output_specs"),
    Rule("binary.reshape_broadcast", _BIN_OPS,
         "a per-image operand [N,1,1,C] against [N,H,W,C] with N > 1 needs both as 4-D tensors "
         "([N,1,H*W,C] and [N,1,1,C]): the flat [1,1,N*H*W,C] convention does not broadcast per "
         "image. ttnn.reshape of a TILE tensor whose tile padding changes copies the data and does "
         "not take sharded tensors, so both operands are interleaved when N > 1",
         f"{_RESHAPE}: reshape (reshape_tiled / PerformView only when the padded shape is "
         f"unchanged); {_BNG}: validate_on_program_cache_hit (broadcast per dimension)"),
    # --- batch_norm, slice --------------------------------------------------------------------
    Rule("batch_norm.as_binary", "batch_norm",
         "a standalone eval BatchNorm runs on the NHWC activation as x * scale + shift with "
         "per-channel [1,1,1,C] TILE constants (ttnn.batch_norm wants NCHW [N,C,H,W]; NHWC data "
         "would need two permutes), so it follows the binary_ng rules; after a conv it is folded "
         "into the conv's weights instead",
         f"{_BNG}: validate_on_program_cache_miss / broadcast rules (as binary.*); "
         f"{_BN}: BatchNormOperation (NCHW [N,C,H,W] input, not used)"),
    Rule("slice.memory", "slice|split",
         "ttnn.slice with starts/ends/steps works on interleaved tensors (row-major: any start; TILE: "
         "tile-aligned or padded path); sharded inputs are moved to interleaved first",
         f"{_SLICE}: SliceDeviceOperation::validate (sharded slice only for specific row-major "
         "height-sharded cases)"),
    # --- layer_norm, layer_scale, softmax, reshape/permute (issue 23) ---------------------------
    Rule("layer_norm.interleaved", "layer_norm",
         "ttnn.layer_norm without a LayerNormShardedMultiCoreProgramConfig (none is planned) "
         "refuses a HEIGHT_SHARDED input, and a WIDTH/BLOCK-sharded input with an interleaved "
         "output memory config (seen on the 0.81.1 mock device); interleaved inputs in L1 or "
         "DRAM, TILE or ROW_MAJOR, bfloat16 or bfloat8_b are taken, the output keeping the "
         "input's memory config, layout and dtype; weight and bias as [1, 1, 1, C] TILE. The "
         "planner gives it an interleaved input",
         f"{_LN}: validate ('a.memory_config().memory_layout() != "
         "TensorMemoryLayout::HEIGHT_SHARDED', 0.81.1 wheel: line 227; 'output_mem_config."
         "is_sharded() && ... != HEIGHT_SHARDED', line 231; gamma TILE with the input's padded "
         "width, or ROW_MAJOR [C/32, 32])"),
    Rule("layer_scale.as_binary", "layer_scale",
         "a layer scale runs as x * gamma with a per-channel [1,1,1,C] TILE constant, so it "
         "follows the binary_ng rules (as batch_norm.as_binary)",
         f"{_BNG}: validate_on_program_cache_miss / broadcast rules (as binary.*)"),
    Rule("softmax.tile", "softmax",
         "ttnn.softmax(x, -1) takes interleaved or sharded inputs without a program config and "
         "returns TILE (a ROW_MAJOR input is tilized), the input's dtype, the argument's or the "
         "input's memory config (seen on the 0.81.1 mock device); the planner gives it TILE",
         f"{_SOFTMAX}: softmax (dim -1 on a 4-D input: SoftmaxDeviceOperation)"),
    Rule("reshape.interleaved", "flatten|reshape|permute|channel_shuffle",
         "flatten/reshape/permute/channel_shuffle run as ttnn.reshape and ttnn.permute on an "
         "interleaved bfloat16 TILE input (the sharded and block-float paths are not planned: a "
         "permute re-tiles the data, which changes a bfloat8_b tensor's shared exponents); "
         "ttnn.reshape of a TILE tensor whose padding changes copies, ttnn.permute takes the "
         "memory config of its output",
         f"{_RESHAPE}: reshape; {_PERMUTE}: permute", kind="perf"),
    # --- pools ------------------------------------------------------------------------------
    Rule("pool.memory", "max_pool2d|avg_pool2d|global_avg_pool",
         "the input is HEIGHT/WIDTH/BLOCK sharded in L1, or interleaved (pool2d then shards it "
         "with applied_shard_scheme, default chosen like conv)",
         f"{_POOL}: Pool2D::validate_on_program_cache_miss ('Pool2D input shard spec should not be "
         f"empty'); {_POOL_API}: pool2d (shards an interleaved input)"),
    Rule("pool.dtype_layout", "max_pool2d|avg_pool2d|global_avg_pool",
         "output dtype and layout are arguments (dtype=bfloat16, output_layout=ROW_MAJOR by "
         "default); a bfloat8_b output needs output_layout=TILE",
         f"{_POOL_API}: max_pool2d/avg_pool2d signatures (dtype, output_layout)"),
    Rule("pool2d.slice_input", "max_pool2d|avg_pool2d",
         "a DRAM-sliced pool (dram_slice_config) reads its input from DRAM interleaved and "
         "writes a DRAM-interleaved output (seen on the 0.81.1 mock device: a [N*H*W, C] DRAM "
         "input gives a DRAM-interleaved output in the requested output_layout)",
         f"{_POOL_API}: pool2d with dram_slice_config (sliced through "
         "ttnn/cpp/ttnn/operations/sliding_window/op_slicing/op_slicing.cpp, like conv2d_DRAM); "
         "enforced by the sim (backends/sim/ops.py), not by rules.check"),
    # --- matmul / linear --------------------------------------------------------------------
    Rule("linear.tile", "linear",
         "matmul operands must be TILE layout",
         f"{_MM}: Matmul::validate ('Inputs to matmul must be tilized')"),
    Rule("linear.program_config", "linear",
         "a 1x1 conv lowered to linear needs a 1D (in1 mcast, height-sharded in0) or 2D (block "
         "mcast, block-sharded in0) program config whose blocks divide the problem and fit L1; "
         "the matmul solver raises this when none exists",
         f"{_PC}: get_matmul_program_config / {_MM}: Matmul::validate (per_core_M/N, in0_block_w "
         "and subblock constraints; see docs/lowering.md); a sharded in0 must be the config's "
         "('MatmulMultiCoreReuseMultiCast1DProgramConfig: input A must be HEIGHT_SHARDED', "
         "0.81.1 wheel: line 2358; 2D: 'K ({}) must equal in0_block_w ({})', line 1767), an "
         "interleaved one is accepted"),
    Rule("linear.sharded_needs_program_config", "linear",
         "a BLOCK-sharded input a needs an explicit 2D program config (the automatic one must "
         "match its grid); height/width-sharded inputs get an automatic 1D config",
         f"{_PC}: get_matmul_program_config ('Num cores along y ({{}}) must match provided grid "
         "size ({}) or divided up size ({})', 0.81.1 wheel: matmul_program_config.cpp:784)"),
    # --- upsample ---------------------------------------------------------------------------
    Rule("upsample.memory", "upsample",
         "bilinear upsample takes an interleaved or HEIGHT-sharded input (nearest also takes "
         "WIDTH and BLOCK shards: 0.81.1 accepts them)",
         f"{_UP}: UpsampleDeviceOperation::validate_on_program_cache_miss / select_upsample_path "
         "('Unsupported upsample configuration:', 0.81.1 wheel: line 83)"),
    Rule("upsample.layout", "upsample",
         "a TILE input must be tile aligned in the layer's [N, H, W, C] view (W and C multiples "
         "of 32: no padding); then nearest takes it interleaved only (its output is ROW_MAJOR, "
         "so a block-float input comes out bfloat16) and bilinear sharded only; a sharded "
         "nearest input must be ROW_MAJOR; bilinear needs bfloat16 (measured on 0.81.1)",
         f"{_UP}: UpsampleDeviceOperation::validate_on_program_cache_miss ('Tiled input must be "
         "tile-aligned (no padding difference)', 0.81.1 wheel: line 73; 'Unsupported upsample "
         "configuration:' line 83; 'Bilinear upsample requires BFLOAT16 input'); "
         f"{_UP_API}: compute_bilinear_autoshard_memory_config (the planner's bilinear shards)"),
    # --- grid_sample (bilinear upsample with align_corners=True, docs/spec.md) ---------------
    Rule("grid_sample.input", "grid_sample",
         "the input is a 4D NHWC tensor, bfloat16 or float32, ROW_MAJOR, INTERLEAVED or "
         "HEIGHT_SHARDED, with channels a multiple of 32",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Input tensor must be "
         "BFLOAT16 or FLOAT32', 'Input tensor must be ROW_MAJOR layout', 'Input tensor must have "
         "INTERLEAVED or HEIGHT_SHARDED memory layout', 'Input tensor last dimension must be "
         "divisible by TILE_WIDTH')"),
    Rule("grid_sample.grid", "grid_sample",
         "the grid is ROW_MAJOR, INTERLEAVED or HEIGHT_SHARDED, has the input's batch and 6*K "
         "values per point when precomputed (then bfloat16 only), 2*K otherwise (bfloat16 or "
         "float32); nearest mode needs a precomputed grid",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Grid tensor must be "
         "ROW_MAJOR layout', 'Precomputed grid tensor must be BFLOAT16', 'Batch size mismatch', "
         "'Grid tensor must have INTERLEAVED or HEIGHT_SHARDED memory layout', "
         "'use_precomputed_grid = false is not supported with mode = 'nearest'')"),
    Rule("grid_sample.output", "grid_sample",
         "the output is ROW_MAJOR in the input's dtype, INTERLEAVED or HEIGHT_SHARDED; its memory "
         "config is memory_config, else the grid's; bilinear with an interleaved grid and an "
         "interleaved memory config writes interleaved",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Output tensor must have "
         "INTERLEAVED or HEIGHT_SHARDED memory layout'), compute_output_specs, invoke "
         "(memory_config.value_or(grid.memory_config()))"),
    # --- concat -----------------------------------------------------------------------------
    Rule("concat.sharded", "concat",
         "sharded inputs: all inputs sharded with the same memory layout; only width or height "
         "concat; width (channel) concat needs HEIGHT or BLOCK sharded inputs with equal shard "
         "heights",
         f"{_CAT}: ConcatDeviceOperation::validate ('Only width or height concat on sharded "
         "tensors', 'Only support width concat on height-sharded or block-sharded tensors.')"),
    Rule("concat.same_format", "concat",
         "all inputs share one dtype (0.81.1 accepts a TILE input next to a ROW_MAJOR one when "
         "they are interleaved: concat.same_layout)",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All Tensors should have "
         "same dtypes.', 0.81.1 wheel: line 157)"),
    Rule("concat.same_layout", "concat",
         "sharded inputs share one layout (TILE or ROW_MAJOR); interleaved ones may mix (the "
         "wrapper converts them)",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All Tensors should have "
         "same layouts.', 0.81.1 wheel: line 156; measured on the mock device)"),
    Rule("concat.shard_align", "concat",
         "a channel concat of HEIGHT-sharded inputs needs every input's channel count a multiple "
         "of 16 (TILE or ROW_MAJOR alike); of BLOCK-sharded inputs, every input's first channel "
         "at a 16-byte offset; interleaved inputs take any channel counts",
         f"{_CAT}: ConcatDeviceOperation::validate ('Width concat: input 1 starts at column 92 "
         "(184 bytes), not L1-aligned (16 bytes)', 0.81.1 wheel: line 265); the height-sharded "
         "s2s program's 'DFB s2s_rm_input_0 ... is larger than the per-bank allocation' "
         "(metal2 dfb.cpp:82) and 'Shard width 128 must match physical width 256' "
         "(tensor_spec.cpp:173), measured on the 0.81.1 mock device"),
    Rule("concat.mixed", "concat",
         "inputs must be all sharded or all interleaved",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All tensors must be "
         "sharded or all must be interleaved', 0.81.1 wheel: line 170)"),
    # --- pad --------------------------------------------------------------------------------
    Rule("pad.memory", "pad",
         "the Pad layer pads in ROW_MAJOR (a TILE input via to_layout); its output keeps the "
         "input's memory config unless memory_config is given, and that memory config must be a "
         "valid shard spec for the padded (row-major) shape, e.g. width shards never are (their "
         "height must equal the tensor's); a bare ttnn.pad of a sharded TILE tensor is refused "
         "(no front padding of tiles on device)",
         "ttnn/cpp/ttnn/operations/data_movement/pad/pad.cpp ('ttnn.pad: on device tile padding "
         "does not support front padding', 0.81.1 wheel: line 454); output spec: "
         "tt_metal/impl/tensor/spec/tensor_spec.cpp validate_shard_spec_with_tensor_shape"),
    # --- adapters ---------------------------------------------------------------------------
    Rule("i2s.input", "interleaved_to_sharded",
         "input must be interleaved, output sharded; TILE inputs use standard 32x32 tiles",
         f"{_I2S}: InterleavedToShardedDeviceOperation::validate ('interleaved_to_sharded requires "
         "standard 32x32 tiles')"),
    Rule("s2i.input", "sharded_to_interleaved",
         "output interleaved (an interleaved input is accepted too: 0.81.1 copies it to the "
         "output memory config, ignoring output_dtype)",
         f"{_S2I}: ShardedToInterleavedDeviceOperation::validate ('sharded_to_interleaved does not "
         "support ND sharding')"),
    Rule("reshard.input", "reshard",
         "input and output both sharded; layout and dtype unchanged",
         f"{_RESHARD}: ReshardDeviceOperation::validate"),
    Rule("to_layout.dtype", "to_layout",
         "to_layout changes TILE <-> ROW_MAJOR; a bfloat8_b/bfloat4_b result must stay TILE",
         "ttnn/cpp/ttnn/operations/core/to_layout/to_layout_op.cpp: to_layout"),
    Rule("typecast.layout", "typecast",
         "typecast keeps the memory layout and needs TILE for block-float dtypes",
         f"{_TC}: TypecastDeviceOperation::validate ('Typecast operation requires Input and Output "
         "memory layout to match')"),
    Rule("to_memory_config.any", "to_memory_config",
         "to_memory_config moves between any two memory configs (dispatching to i2s/s2i/reshard/"
         "copy) and may change dtype only in TILE layout, and only while it moves: to the same "
         "memory config it returns the tensor unchanged, dtype argument ignored (measured on "
         "0.81.1)",
         "ttnn/cpp/ttnn/operations/core/to_memory_config/to_memory_config_op.hpp: to_memory_config"),
]

RULES: dict[str, Rule] = {r.id: r for r in _RULE_LIST}

GRAPH_OPS = OPS
# ttnn ops a graph op may be lowered to (upsample with align_corners=True -> grid_sample)
LOWERED_OPS = ("grid_sample",)
ADAPTER_OPS = ("to_memory_config", "sharded_to_interleaved", "interleaved_to_sharded", "reshard",
               "to_layout", "typecast")


# ============================================================================================
# Layout math (pure)
# ============================================================================================

def matmul_conv_problem(kernel, stride, padding, dilation=(1, 1), groups: int = 1) -> str | None:
    """Why a conv is not a matmul, or None when it is: conv2d_utils.cpp
    ``use_matmul_for_1x1_conv``: a 1x1, stride-1, unpadded, undilated, ungrouped conv runs as a
    matmul (ttnn::linear) inside conv2d. The one definition the planner, the L1 model, the
    matmul solver (``lowering: linear``) and the sim use. ``padding``: 2 or 4 values."""
    pad = tuple(int(p) for p in padding)
    checks = (("kernel", tuple(int(k) for k in kernel), (1, 1)),
              ("stride", tuple(int(v) for v in stride), (1, 1)),
              ("padding", pad, (0,) * (len(pad) or 4)),
              ("dilation", tuple(int(d) for d in dilation), (1, 1)),
              ("groups", int(groups), 1))
    for name, got, want in checks:
        if got != want:
            return f"has {name} {got}, a matmul needs {want}"
    return None


def is_matmul_conv(kernel, stride, padding, dilation=(1, 1), groups: int = 1) -> bool:
    """``matmul_conv_problem`` is None: the conv runs as a matmul inside conv2d."""
    return matmul_conv_problem(kernel, stride, padding, dilation, groups) is None


def cores_to_grid(num_cores: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Extent (x, y) of ``num_cores`` cores laid out row-wise on ``grid`` starting at (0, 0), as
    tt-metal's ``num_cores_to_corerangeset(n, grid, row_wise=true)`` builds it
    (``layout.core_ranges``)."""
    return core_extent(num_cores, grid)


def closest_divisor_with_padding(num: int, start: int) -> int:
    """tt-metal ``find_closest_largest_divisor_with_num_padding``: the largest d <= start such
    that padding ``num`` up to a multiple of d wastes less than one whole share."""
    d = max(1, start)
    while d > 1:
        padded = round_up(num, d)
        if padded - num < padded // d:
            return d
        d -= 1
    return 1


def closest_divisor_with_padding2(num1: int, num2: int, start: int) -> int:
    """Two-number variant (block sharding: output and input channel tiles)."""
    d = max(1, start)
    while d > 1:
        p1, p2 = round_up(num1, d), round_up(num2, d)
        if p1 - num1 < p1 // d and p2 - num2 < p2 // d:
            return d
        d -= 1
    return 1


def height_shard_shape(rows: int, c: int, num_cores: int) -> tuple[int, int]:
    """[rows, C] over ``num_cores``: shard height = round_up(rows, num_cores*32) / num_cores (the
    same as ceil(rows / cores) rounded up to 32), shard width = C padded to a tile."""
    return (round_up(rows, num_cores * TILE) // num_cores, round_up(c, TILE))


def width_shard_shape(rows: int, c: int, num_cores: int) -> tuple[int, int]:
    return (round_up(rows, TILE), round_up(c, num_cores * TILE) // num_cores)


def block_shard_shape(rows: int, c: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Row-major orientation: grid y splits rows, grid x splits channels."""
    gx, gy = grid
    return (round_up(rows, gy * TILE) // gy, round_up(c, gx * TILE) // gx)


def sharded_memspec(kind: str, rows: int, c: int, *, num_cores: int | None = None,
                    grid: tuple[int, int] | None = None,
                    device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """An L1 MemSpec for ``kind`` sharding of a [rows, C] tensor. Height/width take ``num_cores``
    (laid out row-wise on ``device_grid``); block takes ``grid`` (x = channel cores, y = row cores)."""
    if kind == HEIGHT:
        n = num_cores or device_grid[0] * device_grid[1]
        return MemSpec(HEIGHT, "l1", cores_to_grid(n, device_grid), n,
                       height_shard_shape(rows, c, n))
    if kind == WIDTH:
        n = num_cores or device_grid[0] * device_grid[1]
        return MemSpec(WIDTH, "l1", cores_to_grid(n, device_grid), n,
                       width_shard_shape(rows, c, n))
    if kind == BLOCK:
        g = grid or device_grid
        return MemSpec(BLOCK, "l1", g, g[0] * g[1], block_shard_shape(rows, c, g))
    raise ValueError(f"not a sharded layout: {kind}")


@dataclass(frozen=True)
class ParallelConfig:
    """What tt-metal's ``determine_parallel_config`` returns, in our terms."""
    kind: str
    num_cores: int
    grid: tuple[int, int]         # extent (x, y)
    cores_nhw: int
    cores_c: int


def closest_divisor_with_padding_mult(num: int, start: int, mult: int) -> int:
    """conv2d_utils.cpp ``find_closest_largest_divisor_with_num_padding_and_mult``: as
    ``closest_divisor_with_padding`` with ``num`` padded to multiples of d * mult (each core's
    rows a whole number of act blocks)."""
    d = max(1, start)
    while d > 1:
        padded = round_up(num, d * mult)
        if padded - num < padded // d:
            return d
        d -= 1
    return 1


def determine_parallel_config(kind: str, rows_out: int, c_in: int, c_out: int,
                              device_grid: tuple[int, int] = DEFAULT_GRID, *,
                              channels_padding: bool = True,
                              act_block_h: int | None = None) -> ParallelConfig:
    """Mirror of conv2d_utils.cpp ``determine_parallel_config`` (ROW_MAJOR orientation, tiled
    output): how many cores each sharding of a conv uses. ``act_block_h`` (the override, rows)
    makes every core's rows a multiple of it (ResNet50's stem at batch 16 with a 128-row act
    block: 63 cores of 3200 rows, not 64 of 3136)."""
    gx, gy = device_grid
    nhw_tiles = round_up(rows_out, TILE) // TILE
    cin_tiles = -(-c_in // TILE)
    cout_tiles = -(-c_out // TILE)
    mult = max(1, (act_block_h or 0) // TILE)
    if kind == HEIGHT:
        n = closest_divisor_with_padding_mult(nhw_tiles, gx * gy, mult)
        return ParallelConfig(HEIGHT, n, cores_to_grid(n, device_grid), n, 1)
    if kind == BLOCK:
        nhw = closest_divisor_with_padding_mult(nhw_tiles, gy, mult)
        if channels_padding:
            cc = closest_divisor_with_padding2(cout_tiles, cin_tiles, gx)
        else:
            cc = gx
            while cc > 1 and (cout_tiles % cc or cin_tiles % cc):
                cc -= 1
        return ParallelConfig(BLOCK, nhw * cc, (cc, nhw), nhw, cc)
    if kind == WIDTH:
        n = closest_divisor_with_padding(cin_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    raise ValueError(f"Conv2d supports Height, Block or Width Sharded Layouts but got {kind}")


def select_conv_shard_layout(rows_out: int, c_in: int, c_out: int, *, is_mm_conv: bool = False,
                             is_conv1d: bool = False,
                             device_grid: tuple[int, int] = DEFAULT_GRID) -> str:
    """Mirror of conv2d_utils.cpp ``select_shard_spec`` (ttnn's auto shard_layout): count the
    cores each scheme would use and prefer block sharding unless height sharding gets clearly
    more cores (and block fewer than 3/4 of the grid) or ties on at most one row of cores; width
    wins when it gets at least as many cores, or with >1280 input channels and >= 40 cores."""
    cc_h = determine_parallel_config(HEIGHT, rows_out, c_in, c_out, device_grid,
                                     channels_padding=not is_mm_conv).num_cores
    cc_w = 0 if (is_mm_conv or is_conv1d) else determine_parallel_config(
        WIDTH, rows_out, c_in, c_out, device_grid, channels_padding=True).num_cores
    cc_b = 0 if is_conv1d else determine_parallel_config(
        BLOCK, rows_out, c_in, c_out, device_grid, channels_padding=not is_mm_conv).num_cores
    kind, best = BLOCK, cc_b
    three_quarters = int(0.75 * device_grid[0] * device_grid[1])
    if (cc_h > best and best < three_quarters) or (cc_h == best and cc_h <= device_grid[0]):
        kind, best = HEIGHT, cc_h
    if cc_w >= best:
        kind, best = WIDTH, cc_w
    if kind == BLOCK and cc_w >= 40 and c_in > 1280:
        kind = WIDTH
    return kind


def conv_memspec(kind: str, rows: int, c: int, pc: ParallelConfig) -> MemSpec:
    """Sharded memory config of a [rows, c] conv tensor under parallel config ``pc`` (conv2d_utils
    ``create_sharded_memory_config_from_parallel_config``)."""
    if kind == HEIGHT:
        return MemSpec(HEIGHT, "l1", pc.grid, pc.num_cores, height_shard_shape(rows, c, pc.num_cores))
    if kind == WIDTH:
        return MemSpec(WIDTH, "l1", pc.grid, pc.num_cores, width_shard_shape(rows, c, pc.num_cores))
    return MemSpec(BLOCK, "l1", pc.grid, pc.num_cores, block_shard_shape(rows, c, pc.grid))


def parallel_config_of(mem: MemSpec) -> ParallelConfig:
    """The parallel config of an already sharded conv input (conv2d_utils.cpp
    get_conv_padded_input_shape_and_mem_config: with reshard_if_not_optimal=False a sharded input's
    shard grid *is* the conv's parallel config; get_num_cores_nhw / get_num_cores_channels)."""
    gx, gy = mem.grid
    if mem.memory_layout == BLOCK:
        return ParallelConfig(BLOCK, gx * gy, mem.grid, gy, gx)
    n = mem.num_cores or gx * gy
    if mem.memory_layout == WIDTH:
        return ParallelConfig(WIDTH, n, mem.grid, 1, n)
    return ParallelConfig(HEIGHT, n, mem.grid, n, 1)


def conv_reshards_input(mem: MemSpec, c_in: int, *, is_mm: bool) -> bool:
    """Whether conv2d reshards an already sharded input itself (reshard_if_not_optimal=False).
    conv2d_utils.cpp get_conv_padded_input_shape_and_mem_config: a matmul (1x1) conv with a
    BLOCK sharded input sets needs_shard_or_reshard when ``in_channels != num_cores_c *
    shard width`` (num_cores_c = the grid's x extent, row-major), i.e. when the channel cores do
    not split the input's channels exactly (64 channels in 32-wide shards on 6 channel cores:
    192 != 64). Measured on the mock n150: such an input gets a ReshardDeviceOperation inside
    ttnn.conv2d; 192 or 256 channels on 6 / 8 channel cores of 32 are kept."""
    if not (is_mm and mem.memory_layout == BLOCK and mem.shard_shape is not None):
        return False
    return int(c_in) != mem.grid[0] * mem.shard_shape[1]


def conv_input_parallel_config(mem: MemSpec, rows_out: int, c_in: int, c_out: int, *,
                               is_mm: bool, device_grid: tuple[int, int] = DEFAULT_GRID,
                               act_block_h: int | None = None) -> ParallelConfig:
    """The parallel config conv2d runs on when given an input sharded as ``mem``: the input's own
    grid (``parallel_config_of``), unless conv2d reshards it (``conv_reshards_input``); then
    get_conv_padded_input_shape_and_mem_config takes ``determine_parallel_config`` of the conv
    (the matmul conv's: no channel padding, so channel cores divide both channel tile counts),
    e.g. 64 -> 384 channels on 196 rows: 2x7 cores whatever grid the input came on."""
    if conv_reshards_input(mem, c_in, is_mm=is_mm):
        return determine_parallel_config(mem.memory_layout, rows_out, c_in, c_out, device_grid,
                                         channels_padding=not is_mm, act_block_h=act_block_h)
    return parallel_config_of(mem)


def conv_output_parallel_config(pc: ParallelConfig, c_out: int, *, is_mm: bool,
                                device_grid: tuple[int, int] = DEFAULT_GRID) -> ParallelConfig:
    """conv2d_utils.cpp ``determine_output_parallel_config``: a matmul (1x1) conv keeps the input's
    parallel config; otherwise width sharding re-spreads the *output* channel tiles over
    closest_divisor_with_padding(cout_tiles, grid cores) cores and block sharding keeps the
    input's row cores with closest_divisor_with_padding(cout_tiles, grid x) channel cores; height
    sharding keeps the input's cores."""
    if is_mm:
        return pc
    cout_tiles = -(-c_out // TILE)
    gx, gy = device_grid
    if pc.kind == WIDTH:
        n = closest_divisor_with_padding(cout_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    if pc.kind == BLOCK:
        cc = closest_divisor_with_padding(cout_tiles, gx)
        return ParallelConfig(BLOCK, cc * pc.cores_nhw, (cc, pc.cores_nhw), pc.cores_nhw, cc)
    return pc


def conv_output_memspec(pc: ParallelConfig, rows_out: int, c_out: int, *, is_mm: bool,
                        device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """The memory config ttnn 0.81.1 gives a conv2d output, ``pc`` being the conv's (input)
    parallel config.

    conv2d.cpp conv2d_L1: ``conv_out_memory_config = create_sharded_memory_config_from_parallel_config(
    [1, 1, rows, round_up(c_out, cores_c * 32)], output_parallel_config, 32)`` (shard height
    round_up(rows, cores_nhw * 32) / cores_nhw) on the output parallel config
    (``conv_output_parallel_config``). A non-matmul conv's output is exactly that, every core of
    the grid included even when trailing shards are empty (49 cores for 784 rows of 32-row shards).
    A matmul conv runs ttnn::matmul with per_core_M/N = that shard shape in tiles, and
    matmul_device_operation.cpp compute_output_specs keeps only the cores that hold blocks:
    1D (height): num_cores_to_corerangeset(ceil(M / per_core_M)) row-wise; 2D (block): a
    ceil(N / per_core_N) x ceil(M / per_core_M) range, M being the tile-padded rows and N the
    prepared weights' (channel-core padded) width. E.g. 3136 rows on 56 cores: shards of 64
    rows, output on 49 cores."""
    opc = conv_output_parallel_config(pc, c_out, is_mm=is_mm, device_grid=device_grid)
    mem = conv_memspec(opc.kind, rows_out, c_out, opc)
    if not is_mm:
        return mem
    sh, _ = mem.shard_shape
    m_blocks = -(-(-(-rows_out // TILE)) // (sh // TILE))
    # N is the prepared weights' width, out channels padded to cores_c tiles: every channel core
    # keeps a block (a 128-channel output on 8 channel cores stays 8 wide)
    n_blocks = opc.cores_c if opc.kind == BLOCK else 1
    if opc.kind == BLOCK:
        return replace(mem, grid=(n_blocks, m_blocks), num_cores=n_blocks * m_blocks)
    n = m_blocks * n_blocks
    return replace(mem, grid=cores_to_grid(n, device_grid), num_cores=n)


def reshape_memspec(mem: MemSpec, rows: int, c: int, layout: str = TILE_LAYOUT) -> MemSpec:
    """Same scheme and grid, shard shape recomputed for a tensor of [rows, c] (what ops that keep
    their input's sharding, like upsample and binary_ng's adjust_to_shape, produce, and what a
    pad must be given for its padded rows). A ROW_MAJOR height shard is as wide as the tensor
    (no tile padding of the channels)."""
    if not mem.sharded:
        return mem
    if mem.memory_layout == HEIGHT:
        n = mem.num_cores or (mem.grid[0] * mem.grid[1])
        sh, sw = height_shard_shape(rows, c, n)
        return replace(mem, shard_shape=(sh, sw if layout == TILE_LAYOUT else c))
    if mem.memory_layout == WIDTH:
        n = mem.num_cores or (mem.grid[0] * mem.grid[1])
        return replace(mem, shard_shape=width_shard_shape(rows, c, n))
    return replace(mem, shard_shape=block_shard_shape(rows, c, mem.grid))


# --- pool2d's own sharding (generic_pools.cpp) -----------------------------------------------

L1_ALIGNMENT = 16          # bytes (Wormhole hal::get_l1_alignment)


def _closest_divisor(num: int, start: int) -> int:
    """conv2d_utils.cpp ``find_closest_largest_divisor``: largest d <= start dividing num."""
    d = max(1, start)
    while num % d:
        d -= 1
    return d


def pool_parallel_config(kind: str, out_rows: int, c: int, *, in_tiled: bool, out_tiled: bool,
                         device_grid: tuple[int, int] = DEFAULT_GRID) -> ParallelConfig:
    """The cores pool2d shards an interleaved input over when given ``applied_shard_scheme``.

    generic_pools.cpp ``get_pool_input_memory_config`` calls conv2d_utils.cpp
    ``determine_parallel_config(scheme, N, C, OH, OW, C, input_channels_alignment, grid,
    ROW_MAJOR, enable_channels_padding=false, is_shard_height_tile_multiple=out_tiled,
    is_shard_width_tile_multiple=in_tiled or out_tiled, act_block_h_override=0)``: "tiles" are
    32 rows only for a TILE output (else single rows) and 32 channels for a TILE input or output
    (else 16); height = the closest divisor-with-padding of those rows up to the grid, laid out
    row-wise; width = the largest *exact* divisor of the channel tiles up to the grid (no channel
    padding for pools); block = divisor-with-padding of the rows over grid y x the largest common
    divisor of the channel tiles and the input's channel blocks (alignment 32 for TILE inputs,
    L1 alignment / 2 = 8 for row-major) over grid x."""
    gx, gy = device_grid
    eff_h = TILE if out_tiled else 1
    eff_w = TILE if (in_tiled or out_tiled) else TILE // 2
    align = TILE if (in_tiled or c == 1) else L1_ALIGNMENT // 2   # c == 1: depthwise branch
    nhw_tiles = -(-out_rows // eff_h)
    c_tiles = -(-c // eff_w)
    if kind == HEIGHT:
        n = closest_divisor_with_padding(nhw_tiles, gx * gy)
        return ParallelConfig(HEIGHT, n, cores_to_grid(n, device_grid), n, 1)
    if kind == WIDTH:
        n = _closest_divisor(c_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    if kind == BLOCK:
        nhw = closest_divisor_with_padding(nhw_tiles, gy)
        cc = closest_common_divisor(c_tiles, -(-c // align), gx)
        return ParallelConfig(BLOCK, nhw * cc, (cc, nhw), nhw, cc)
    raise ValueError(f"Only height, width, or block sharding strategies are supported, got {kind}")


def pool_parallel_config_of(mem: MemSpec) -> ParallelConfig:
    """pool2d on an already sharded input: the parallel config is the input's shard grid
    (``get_num_cores_nhw`` / ``get_num_cores_channels`` of it)."""
    gx, gy = mem.grid
    n = mem.num_cores or gx * gy
    if mem.memory_layout == HEIGHT:
        return ParallelConfig(HEIGHT, n, mem.grid, n, 1)
    if mem.memory_layout == WIDTH:
        return ParallelConfig(WIDTH, n, mem.grid, 1, n)
    return ParallelConfig(BLOCK, gx * gy, mem.grid, gy, gx)


def pool_input_memspec(pc: ParallelConfig, in_rows: int, c: int, *, in_tiled: bool) -> MemSpec:
    """The memory config pool2d moves an interleaved input to (``to_memory_config``):
    ``create_sharded_memory_config_from_parallel_config`` of [1, 1, rows, C snapped to
    cores_c * channel alignment] (rows = the input's padded rows), rows rounded up to
    cores_nhw * (32 for a TILE input, else 1) except for width sharding."""
    align = TILE if (in_tiled or c == 1) else L1_ALIGNMENT // 2
    width = round_up(c, pc.cores_c * align)
    rows = round_up(in_rows, TILE) if in_tiled else in_rows
    if pc.kind != WIDTH:
        rows = round_up(rows, pc.cores_nhw * (TILE if in_tiled else 1))
    return MemSpec(pc.kind, "l1", pc.grid, pc.num_cores,
                   (rows // pc.cores_nhw, width // pc.cores_c))


def pool_output_memspec(pc: ParallelConfig, out_rows: int, c: int, *, out_tiled: bool) -> MemSpec:
    """pool2d's output shard spec (generic_pools.cpp, "update the shard spec to match the output
    shape"): the input's grid; shard height round_up(out_rows, cores_nhw * (32 if TILE output
    else 1)) / cores_nhw; shard width round_up(C, cores_c * (32 if TILE output else 16)) /
    cores_c. A ROW_MAJOR output's shard height is *not* tile rounded."""
    sh = round_up(out_rows, pc.cores_nhw * (TILE if out_tiled else 1)) // pc.cores_nhw
    sw = round_up(c, pc.cores_c * (TILE if out_tiled else TILE // 2)) // pc.cores_c
    return MemSpec(pc.kind, "l1", pc.grid, pc.num_cores, (sh, sw))


def pool_output_padded_shape(mem: MemSpec, out_rows: int, c: int, *, out_tiled: bool) -> tuple[int, int, int, int]:
    """pool2d's output padded (physical) shape; the logical shape stays [1, 1, out_rows, C]
    (pool_op.cpp Pool2D::compute_output_specs, TensorLayout::fromPaddedShape): rows rounded to
    cores_nhw (x32 for a TILE output); C rounded to 16, to cores_c * 16 when width/block
    sharded, to cores_c * 32 for a TILE output -- so the shard width of
    ``pool_output_memspec`` is exactly the padded C over cores_c."""
    pc = pool_parallel_config_of(mem) if mem.sharded else ParallelConfig(mem.memory_layout, 1, (1, 1), 1, 1)
    rows = round_up(out_rows, pc.cores_nhw * (TILE if out_tiled else 1))
    if out_tiled:
        cp = round_up(c, TILE * pc.cores_c)
    elif mem.sharded and mem.memory_layout in (WIDTH, BLOCK):
        cp = round_up(c, pc.cores_c * (TILE // 2))
    else:
        cp = round_up(c, TILE // 2)
    return (1, 1, rows, cp)


def tensor_bytes(layout: TensorLayout, rows: int, c: int) -> int:
    """Bytes of the whole tensor as stored (tile padding included)."""
    from .layout import bytes_per_element
    bpe = bytes_per_element(layout.dtype) if layout.layout == TILE_LAYOUT else \
        {"bfloat16": 2, "float32": 4}.get(layout.dtype, 2)
    return int(round_up(rows, TILE) * round_up(c, TILE) * bpe)


# ============================================================================================
# check / output_layout
# ============================================================================================

def _rows_c(shape: Shape4 | None) -> tuple[int, int] | None:
    if shape is None:
        return None
    return (shape[0] * shape[1] * shape[2], shape[3])


def _v(rule: str, msg: str) -> Violation:
    return Violation(rule, msg)


def tensor_checks(t: TensorLayout, shape: Shape4 | None, what: str = "tensor") -> list[Violation]:
    """The TensorSpec checks of one tensor (see ``_tensor_checks``)."""
    return _tensor_checks(t, shape, what)


def _tensor_checks(t: TensorLayout, shape: Shape4 | None, what: str, *,
                   l1_shards: bool = True) -> list[Violation]:
    """tt-metal's TensorSpec validation (tensor_spec.cpp validate_shard_spec_with_tensor_shape,
    tensor_layout.cpp): shard shapes against the *physical* shape, which for a TILE tensor is
    [round_up(rows, 32), round_up(C, 32)] and for a row-major one [rows, C] (or round_up(C, 16)
    for a pool2d output, see pool_output_padded_shape)."""
    out = []
    if t.dtype in BLOCK_FLOAT_DTYPES and t.layout != TILE_LAYOUT:
        out.append(_v("tensor.bfp_tile", f"{what} is {t.dtype} in {t.layout} layout"))
    m = t.memory
    if m.sharded:
        if m.buffer != "l1" and l1_shards:
            out.append(_v("tensor.shard_l1", f"{what} is {m.memory_layout} in {m.buffer}"))
        if m.grid is None or m.shard_shape is None:
            out.append(_v("tensor.shard_spec", f"{what} is {m.memory_layout} without a shard spec"))
            return out
        sh, sw = m.shard_shape
        if t.layout == TILE_LAYOUT and (sh % TILE or sw % TILE):
            out.append(_v("tensor.shard_tile", f"{what}: shard {m.shard_shape} of a TILE tensor "
                          "is not a whole number of 32x32 tiles"))
            return out
        if shape is not None:
            rows, c = _rows_c(shape)
            tiled = t.layout == TILE_LAYOUT
            ph = round_up(rows, TILE) if tiled else rows
            widths = (round_up(c, TILE),) if tiled else (c, round_up(c, TILE // 2))
            n = m.num_cores or m.grid[0] * m.grid[1]
            if m.memory_layout == HEIGHT:
                ok = sw in widths and -(-ph // sh) <= n
            elif m.memory_layout == WIDTH:
                ok = sh == ph and -(-widths[0] // sw) <= n
            else:
                gx, gy = m.grid if m.orientation == "row_major" else m.grid[::-1]
                ok = -(-ph // sh) <= gy and -(-widths[0] // sw) <= gx
            if not ok:
                out.append(_v("tensor.shard_spec",
                              f"{what}: {m.memory_layout} shard {m.shard_shape} on {n} cores "
                              f"({m.grid[0]}x{m.grid[1]}) does not tile its physical shape "
                              f"[{ph}, {widths[0]}]"))
    return out


_L1_SHARD_OPS = tuple(RULES["tensor.shard_l1"].op.split("|"))


def check(op: str, inputs: list[TensorLayout | None], attrs: dict, output: MemSpec | None = None,
          *, shapes: list[Shape4] | None = None) -> list[Violation]:
    """Every ``error`` rule ``op`` breaks with these operand layouts. Empty list = the card runs it.

    attrs keys used: conv2d ``shard_layout`` (str|None), ``output_layout``, ``dtype`` (output
    dtype), ``is_mm_conv``, ``act_block_h_override``, ``lowering`` ("linear": ttnn.linear's
    rules); upsample ``in_w`` (the input's W: TILE alignment of the [N,H,W,C] view); pad
    ``padding``/``out_shape``/``memory_config`` (the Pad layer; without ``padding`` a bare
    ttnn.pad call); relu ``dtype`` (requested output dtype); pools ``output_layout``,
    ``dtype``; upsample ``mode``; concat ``dim`` (default -1 = channels); adapters: ``dtype``,
    ``layout`` (target) — the target memory config of an adapter is ``output``."""
    shapes = list(shapes) if shapes is not None else [None] * len(inputs)
    shapes += [None] * (len(inputs) - len(shapes))
    vs: list[Violation] = []
    l1_shards = op in _L1_SHARD_OPS
    for i, (t, s) in enumerate(zip(inputs, shapes)):
        if t is not None:
            vs += _tensor_checks(t, s, f"{op} input {i}", l1_shards=l1_shards)
    if output is not None and op in ADAPTER_OPS and inputs and inputs[0] is not None:
        # the adapter's result is a tensor too: its shard spec must tile its physical shape
        out_t = TensorLayout(output, attrs.get("layout") or inputs[0].layout,
                             attrs.get("dtype") or inputs[0].dtype)
        vs += _tensor_checks(out_t, shapes[0], f"{op} output", l1_shards=False)
    elif output is not None and output.sharded and output.buffer != "l1":
        vs.append(_v("tensor.shard_l1", f"{op} output is {output.memory_layout} in {output.buffer}"))
    fn = check_function(op)
    if fn is None:
        raise ValueError(f"rules.check: unknown op {op!r}")
    vs += fn(inputs, attrs, output, shapes)
    return vs


def advise(op: str, inputs: list[TensorLayout | None], attrs: dict, output: MemSpec | None = None,
           *, shapes: list[Shape4] | None = None) -> list[Violation]:
    """``perf`` rules: accepted by the card, but on a slower path. Never raised by the sim."""
    shapes = list(shapes) if shapes is not None else [None] * len(inputs)
    shapes += [None] * (len(inputs) - len(shapes))
    vs = []
    if op in BINARY and len(inputs) == 2 and all(t is not None for t in inputs):
        a, b = inputs
        out = output or a.memory
        if (a.memory.sharded or b.memory.sharded) and not is_native_binary_sharding(
                a, b, out, shapes[0], shapes[1]):
            vs.append(_v("binary.native_sharding",
                         f"{op}: a {a.memory.short()} / b {b.memory.short()} / out {out.short()} "
                         "is not binary_ng's native L1 sharding: operands read through "
                         "TensorAccessor"))
    if op == "conv2d" and inputs and inputs[0] is not None:
        m = inputs[0].memory
        want = attrs.get("shard_layout")
        if not m.sharded and not want and not attrs.get("slice"):
            vs.append(_v("conv2d.sharded_or_shard_layout",
                         f"conv2d input is {m.short()} and no shard_layout is set: ttnn picks one"))
        if m.sharded and want and want != m.memory_layout and attrs.get("override_sharding_config"):
            vs.append(_v("conv2d.reshard", f"conv2d input {m.memory_layout} but shard_layout {want}"))
        if m.sharded and m.memory_layout != BLOCK and m.orientation != "row_major":
            vs.append(_v("conv2d.height_block_row_major_orientation",
                         f"conv2d input {m.memory_layout} with {m.orientation} orientation"))
    return vs


def is_native_binary_sharding(a: TensorLayout, b: TensorLayout, out: MemSpec,
                              shape_a: Shape4 | None, shape_b: Shape4 | None) -> bool:
    """binary_ng_utils.cpp ``is_native_L1_sharding``: same shape and memory config for a and b,
    even shards, all in L1, output sharded on the same grid."""
    if not out.sharded or shape_a != shape_b or a.memory != b.memory:
        return False
    if not a.memory.sharded:
        return False
    if a.memory.buffer != "l1" or out.buffer != "l1":
        return False
    if out.grid is not None and a.memory.grid != out.grid:
        return False
    if shape_a is not None and a.memory.shard_shape:
        rows, c = _rows_c(shape_a)
        sh, sw = a.memory.shard_shape
        if round_up(rows, TILE) % sh or round_up(c, TILE) % sw:
            return False
    return True


def conv_slice_dim(slice_type: str, out_h: int, out_w: int, output_layout: str = TILE_LAYOUT
                   ) -> tuple[int, int]:
    """(sliced output dimension, rounding of a slice) as op_slicing.cpp
    compute_slice_rounding_value: width slices of a TILE output are whole tiles (32 columns)."""
    if slice_type == "height":
        return out_h, 1
    if slice_type == "width":
        return out_w, (TILE if output_layout == TILE_LAYOUT else 1)
    raise ValueError(f"slice type {slice_type!r} must be 'height' or 'width'")


def conv_slice_type_guess(in_h: int, in_w: int, output_layout: str = TILE_LAYOUT) -> str:
    """op_slicing.cpp best_guess_slice_type: width slicing (smaller halo) unless the image is
    tall, or (TILE output) narrower than 200 columns."""
    if output_layout == ROW_MAJOR:
        return "height" if in_h > in_w * 3 else "width"
    if in_w < 200 or in_h > in_w:
        return "height"
    return "width"


def _c_conv_slice(x, attrs) -> list[Violation]:
    sl = attrs["slice"]
    vs = []
    if x.memory.buffer != "dram" or x.memory.memory_layout != INTERLEAVED:
        vs.append(_v("conv2d.slice_dram_input", f"DRAM-sliced conv2d input is {x.memory.short()}"))
    if attrs.get("is_mm_conv"):
        vs.append(_v("conv2d.slice_mm", "slice_config on a 1x1 stride-1 (matmul) conv"))
    if not attrs.get("shard_layout") or attrs.get("override_sharding_config"):
        vs.append(_v("conv2d.slice_shard_layout",
                     f"shard_layout {attrs.get('shard_layout')}, override_sharding_config "
                     f"{attrs.get('override_sharding_config')}"))
    k = sl.get("num_slices")
    hw = attrs.get("output_hw")
    try:
        top = None
        if hw is not None:
            dim, rnd = conv_slice_dim(sl.get("type"), hw[0], hw[1],
                                      attrs.get("output_layout", TILE_LAYOUT))
            top = -(-dim // rnd)
        if not isinstance(k, int) or k < 2 or (top is not None and k > top):
            vs.append(_v("conv2d.slice_count", f"{k} {sl.get('type')} slices (max {top})"))
    except ValueError as e:
        vs.append(_v("conv2d.slice_count", str(e)))
    return vs


def _c_conv(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    want = attrs.get("shard_layout")
    if x is None:
        return [_v("conv2d.sharded_or_shard_layout", "conv2d input is missing")]
    if attrs.get("lowering") == "linear":
        # lowered to ttnn.linear (layers/conv2d.py): matmul's rules apply
        vs += _mm_activation((attrs.get("matmul") or {}).get("fused_activation"))
        if x.layout != TILE_LAYOUT:
            vs.append(_v("linear.tile", f"conv2d lowered to linear: input is {x.layout}"))
        want_in0 = (attrs.get("matmul") or {}).get("in0_memory")
        if x.memory.sharded and want_in0 and x.memory.short() != want_in0:
            # matmul_device_operation.cpp: 1D mcast needs a HEIGHT-sharded in0, 2D mcast
            # 'K ({}) must equal in0_block_w ({})' of the shard it gets (measured on 0.81.1);
            # an interleaved in0 is read as is
            vs.append(_v("linear.program_config", f"in0 {x.memory.short()} is not the program "
                         f"config's sharded in0 {want_in0}"))
        return vs
    if attrs.get("slice"):
        vs += _c_conv_slice(x, attrs)
    if want is not None and want not in (HEIGHT, WIDTH, BLOCK):
        vs.append(_v("conv2d.shard_scheme", f"shard_layout {want}"))
    abh = int(attrs.get("act_block_h_override") or 0)
    if abh % TILE:
        vs.append(_v("conv2d.act_block_h", f"act_block_h_override {abh} is not a multiple of 32"))
    if attrs.get("output_layout", TILE_LAYOUT) == ROW_MAJOR and \
            attrs.get("dtype") in BLOCK_FLOAT_DTYPES and not attrs.get("is_mm_conv"):
        vs.append(_v("conv2d.rm_bfp_output", "conv output_layout ROW_MAJOR with dtype bfloat8_b"))
    if attrs.get("is_mm_conv"):
        m = x.memory
        if m.memory_layout == WIDTH and want not in (None, WIDTH):
            vs.append(_v("conv2d.mm_width_shard_layout", f"1x1 (matmul) conv input is "
                         f"{m.short()} but shard_layout is {want}"))
        if m.memory_layout == BLOCK and x.layout == ROW_MAJOR and m.shard_shape and \
                m.shard_shape[0] % TILE:
            vs.append(_v("conv2d.mm_block_row_major", f"1x1 (matmul) conv input is ROW_MAJOR "
                         f"{m.short()}: shard height {m.shard_shape[0]} is not whole tiles"))
        vs += _mm_activation(attrs.get("activation"))
    return vs


def _mm_activation(act) -> list[Violation]:
    """conv2d.mm_activation: ``act`` (canonical name or None) fused into a matmul kernel."""
    from . import activations
    if act is None or activations.get(act).fuses_matmul:
        return []
    return [_v("conv2d.mm_activation", f"{act} fused into a matmul (conv run as matmul / linear)")]


def _c_binary(inputs, attrs, output, shapes):
    vs = []
    a = inputs[0]
    b = inputs[1] if len(inputs) > 1 else None
    if a is None:
        return [_v("binary.layout", "first operand of a binary op must be a tensor")]
    tensors = [t for t in (a, b) if t is not None]
    for t in tensors:
        if t.layout not in (TILE_LAYOUT, ROW_MAJOR):
            vs.append(_v("binary.layout", f"operand layout {t.layout}"))
    # ttnn.add/multiply tilize row-major operands keeping their memory config: a sharded one
    # must then have whole-tile shards (tensor_layout.cpp; measured on 0.81.1)
    for t in tensors:
        m = t.memory
        if t.layout == ROW_MAJOR and m.sharded and m.shard_shape and \
                (m.shard_shape[0] % TILE or m.shard_shape[1] % TILE):
            vs.append(_v("binary.layout", f"row-major operand sharded {m.shard_shape}: ttnn "
                         "tilizes it with that shard spec, which is not a whole number of tiles"))
    if attrs.get("broadcast") == "per_image":
        # the layer reshapes both operands to 4-D first (binary.reshape_broadcast)
        for t in tensors:
            if t.memory.sharded:
                vs.append(_v("binary.reshape_broadcast",
                             f"per-image broadcast operand {t.memory.short()}: the reshape to 4-D "
                             "takes no sharded tensor"))
    elif b is not None and shapes[0] is not None and len(shapes) > 1 and shapes[1] is not None:
        for da, db in zip(shapes[0], shapes[1]):
            if not (da == db or da == 1 or db == 1):
                vs.append(_v("binary.broadcast", f"shapes {shapes[0]} and {shapes[1]} do not broadcast"))
                break
    if attrs.get("inplace"):
        vs += _c_binary_inplace(inputs, attrs, output, shapes)
    return vs


def _c_binary_inplace(inputs, attrs, output, shapes):
    """attrs ``inplace``: the output is written into operand a (``swap_operands``: the second
    input is a). The preallocated tensor's spec is the output spec."""
    ia = 1 if attrs.get("swap_operands") and len(inputs) > 1 else 0
    a, sa = inputs[ia], shapes[ia] if ia < len(shapes) else None
    sb = shapes[1 - ia] if len(shapes) > 1 else None
    vs = []
    out_shape = tuple(attrs["out_shape"]) if attrs.get("out_shape") is not None else (
        tuple(max(x, y) for x, y in zip(sa, sb)) if sa is not None and sb is not None else None)
    if sa is not None and out_shape is not None and tuple(sa) != out_shape:
        vs.append(_v("binary.output_tensor", f"output_tensor a has shape {tuple(sa)}, the "
                     f"broadcast output is {out_shape}"))
    if attrs.get("dtype") is not None and attrs["dtype"] != a.dtype:
        vs.append(_v("binary.output_tensor", f"dtype {attrs['dtype']} but output_tensor a is "
                     f"{a.dtype}"))
    mc = attrs.get("memory_config") or output
    if mc is not None and mc != a.memory:
        vs.append(_v("binary.output_tensor", f"memory_config {mc.short()} but output_tensor a is "
                     f"{a.memory.short()}"))
    return vs


def _c_relu(inputs, attrs, output, shapes):
    x = inputs[0]
    want = attrs.get("dtype")
    if x is not None and want is not None and want != x.dtype:
        return [_v("relu.dtype", f"relu cannot convert {x.dtype} to {want} (no dtype argument)")]
    return []


def _c_pool(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is None:
        return [_v("pool.memory", "pool input is missing")]
    if x.memory.memory_layout not in (INTERLEAVED, HEIGHT, WIDTH, BLOCK):
        vs.append(_v("pool.memory", f"pool input {x.memory.memory_layout}"))
    if attrs.get("dtype") in BLOCK_FLOAT_DTYPES and attrs.get("output_layout", ROW_MAJOR) != TILE_LAYOUT:
        vs.append(_v("pool.dtype_layout", f"pool output {attrs.get('dtype')} needs output_layout=TILE"))
    return vs


def _c_linear(inputs, attrs, output, shapes):
    vs = []
    for i, t in enumerate(inputs):
        if t is not None and t.layout != TILE_LAYOUT:
            vs.append(_v("linear.tile", f"linear input {i} is {t.layout}"))
    x = inputs[0]
    if x is not None and x.memory.memory_layout == BLOCK and not attrs.get("program_config"):
        vs.append(_v("linear.sharded_needs_program_config",
                     f"linear input is {x.memory.short()} without a sharded program config"))
    vs += _mm_activation(attrs.get("activation"))
    return vs


def _c_upsample(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is None:
        return [_v("upsample.memory", "upsample input is missing")]
    mode = attrs.get("mode", "nearest")
    if mode == "bilinear" and x.memory.memory_layout in (WIDTH, BLOCK):
        vs.append(_v("upsample.memory", f"bilinear upsample of a {x.memory.memory_layout} input"))
    if x.layout == TILE_LAYOUT:
        w = attrs.get("in_w")
        c = shapes[0][3] if shapes and shapes[0] is not None else None
        if (c is not None and c % TILE) or (w is not None and w % TILE):
            # the layer views the input as [N, H, W, C]: tile padding of W or C is refused
            vs.append(_v("upsample.layout", f"TILE upsample input whose [N,H,W,C] view "
                         f"(W={w}, C={c}) is not tile aligned"))
        elif mode == "nearest" and x.memory.sharded:
            vs.append(_v("upsample.layout", "sharded nearest upsample needs ROW_MAJOR, got TILE"))
        elif mode == "bilinear" and not x.memory.sharded:
            vs.append(_v("upsample.layout", "bilinear upsample of an interleaved TILE input"))
        elif mode == "nearest" and x.dtype in BLOCK_FLOAT_DTYPES:
            vs.append(_v("upsample.layout", f"nearest upsample of an interleaved TILE input "
                         f"returns ROW_MAJOR bfloat16, not {x.dtype}"))
    if mode == "bilinear" and x.dtype != "bfloat16":
        vs.append(_v("upsample.layout", f"bilinear upsample needs a bfloat16 input, got {x.dtype}"))
    return vs


def tile_aligned_shard(m: MemSpec) -> bool:
    """A shard of whole 32x32 tiles (what a TILE tensor's shard spec must be)."""
    return m.shard_shape is not None and m.shard_shape[0] % TILE == 0 and \
        m.shard_shape[1] % TILE == 0


def split_work_to_cores(units: int, device_grid: tuple[int, int] = DEFAULT_GRID) -> tuple[int, int]:
    """tt-metal ``split_work_to_cores(grid, units)``: (cores used, units of the first group) =
    (min(cores, units), ceil(units / cores))."""
    n = max(1, min(device_grid[0] * device_grid[1], units))
    return n, -(-units // n)


def bilinear_upsample_memspec(rows: int, c: int, device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """The height sharding ttnn.upsample gives an interleaved input of bilinear mode
    (upsample.cpp ``compute_bilinear_autoshard_memory_config``): min(cores, rows) shards laid out
    row-wise, shard height round_up(rows, shards) / shards, the whole (row-major) channel width.
    Its halo step is built for exactly these shards, so the planner's adapter produces them."""
    n = min(device_grid[0] * device_grid[1], rows)
    return MemSpec(HEIGHT, "l1", cores_to_grid(n, device_grid), n, (round_up(rows, n) // n, c))


def grid_sample_points(grid_c: int, precomputed: bool, mode: str = "bilinear") -> int:
    """Values per grid point: 6 (precomputed bilinear: h0, w0 and four weights), 2 (precomputed
    nearest: h, w; or normalized x, y)."""
    return 6 if precomputed and mode == "bilinear" else 2


def _c_grid_sample(inputs, attrs, output, shapes):
    """Input 0: the NHWC input; input 1 (or attrs ``grid`` = TensorLayout and ``grid_shape``):
    the grid. attrs: ``mode``, ``use_precomputed_grid``, ``padding_mode``."""
    vs = []
    x = inputs[0]
    g = inputs[1] if len(inputs) > 1 else attrs.get("grid")
    xs = shapes[0] if shapes else None
    gs = shapes[1] if shapes and len(shapes) > 1 and shapes[1] is not None else attrs.get("grid_shape")
    if x is None:
        return [_v("grid_sample.input", "grid_sample input is missing")]
    if x.dtype not in ("bfloat16", "float32"):
        vs.append(_v("grid_sample.input", f"grid_sample input must be bfloat16 or float32, got {x.dtype}"))
    if x.layout != ROW_MAJOR:
        vs.append(_v("grid_sample.input", f"grid_sample input must be ROW_MAJOR, got {x.layout}"))
    if x.memory.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.input", "grid_sample input must be interleaved or height sharded, "
                     f"got {x.memory.short()}"))
    if xs is not None and xs[3] % TILE:
        vs.append(_v("grid_sample.input", f"grid_sample input channels {xs[3]} are not a multiple of 32"))
    mode = attrs.get("mode", "bilinear")
    pre = bool(attrs.get("use_precomputed_grid", False))
    if attrs.get("padding_mode", "zeros") != "zeros":
        vs.append(_v("grid_sample.grid", "grid_sample supports padding_mode 'zeros' only"))
    if mode == "nearest" and not pre:
        vs.append(_v("grid_sample.grid", "nearest grid_sample needs a precomputed grid"))
    if g is None:
        vs.append(_v("grid_sample.grid", "grid_sample grid is missing"))
        return vs
    if g.layout != ROW_MAJOR:
        vs.append(_v("grid_sample.grid", f"grid must be ROW_MAJOR, got {g.layout}"))
    if pre and g.dtype != "bfloat16":
        vs.append(_v("grid_sample.grid", f"a precomputed grid must be bfloat16, got {g.dtype}"))
    elif g.dtype not in ("bfloat16", "float32"):
        vs.append(_v("grid_sample.grid", f"grid must be bfloat16 or float32, got {g.dtype}"))
    if g.memory.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.grid", f"grid must be interleaved or height sharded, got {g.memory.short()}"))
    if gs is not None:
        per = grid_sample_points(gs[3], pre, mode)
        if gs[3] % per or gs[3] < per:
            vs.append(_v("grid_sample.grid", f"grid has {gs[3]} values per point, expected a multiple of {per}"))
        xn = attrs.get("batch")
        gn = attrs.get("grid_batch")
        if xn is not None and gn is not None and xn != gn:
            vs.append(_v("grid_sample.grid", f"batch size mismatch: input {xn}, grid {gn}"))
    if output is not None and output.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.output", f"grid_sample output must be interleaved or height sharded, "
                     f"got {output.short()}"))
    return vs


def _c_concat(inputs, attrs, output, shapes):
    vs = []
    ts = [t for t in inputs if t is not None]
    sharded = [t.memory.sharded for t in ts]
    if len({t.dtype for t in ts}) > 1:
        vs.append(_v("concat.same_format", f"concat inputs have dtypes {[t.dtype for t in ts]}"))
    if any(sharded) and len({t.layout for t in ts}) > 1:
        vs.append(_v("concat.same_layout", f"sharded concat inputs have layouts "
                     f"{[t.layout for t in ts]}"))
    if all(sharded) and ts and attrs.get("dim", -1) in (-1, 3):
        channels = [s[3] for s in shapes if s is not None]
        if len(channels) == len(ts):
            vs += _concat_shard_align(ts, channels)
    if any(sharded) and not all(sharded):
        vs.append(_v("concat.mixed", "concat inputs mix sharded and interleaved tensors"))
    if all(sharded) and ts:
        kinds = {t.memory.memory_layout for t in ts}
        if len(kinds) > 1:
            vs.append(_v("concat.sharded", f"concat inputs have different shard layouts {sorted(kinds)}"))
        dim = attrs.get("dim", -1)
        if dim in (-1, 3):
            if kinds & {WIDTH}:
                vs.append(_v("concat.sharded", "width (channel) concat of width-sharded inputs"))
            heights = {t.memory.shard_shape[0] for t in ts if t.memory.shard_shape}
            grids = {t.memory.grid for t in ts}
            if len(heights) > 1 or len(grids) > 1:
                vs.append(_v("concat.sharded", "channel concat inputs differ in shard height or grid"))
    return vs


def concat_shard_misalignment(kind: str, channels: list[int], dtype: str) -> str | None:
    """Why a channel concat of ``kind``-sharded inputs of these channel counts is refused
    (rule concat.shard_align), or None."""
    if kind == HEIGHT and any(c % 16 for c in channels):
        return f"height-sharded channel concat of {channels} channels (each must be a multiple of 16)"
    if kind == BLOCK:
        elem = 4 if dtype == "float32" else 2
        bad = [c for c in (sum(channels[:i]) for i in range(1, len(channels))) if c * elem % 16]
        if bad:
            return (f"block-sharded channel concat: an input starts at channel {bad[0]} "
                    f"({bad[0] * elem} bytes), not 16-byte aligned")
    return None


def _concat_shard_align(ts: list[TensorLayout], channels: list[int]) -> list[Violation]:
    kinds = {t.memory.memory_layout for t in ts}
    why = concat_shard_misalignment(kinds.pop(), channels, ts[0].dtype) if len(kinds) == 1 else None
    return [_v("concat.shard_align", why)] if why else []


def _c_pad(inputs, attrs, output, shapes):
    x = inputs[0]
    if x is None:
        return []
    if "padding" not in attrs:
        # a bare ttnn.pad call (the sim): on-device TILE padding cannot pad at the front
        # (pad.cpp 'on device tile padding does not support front padding'), so a spatial pad of
        # a sharded TILE tensor is refused; the Pad layer pads in ROW_MAJOR instead.
        if x.memory.sharded and x.layout != ROW_MAJOR:
            return [_v("pad.memory", f"pad of a {x.memory.short()} {x.layout} tensor")]
        return []
    # The Pad layer: ROW_MAJOR ttnn.pad (a TILE input goes through to_layout, which keeps its
    # memory config); the output is memory_config or the input's, on the padded shape, and must
    # be a valid tensor there (tensor_spec.cpp).
    mem = attrs.get("memory_config") or x.memory
    if mem.sharded and attrs.get("out_shape") is not None:
        rm_dtype = "bfloat16" if x.dtype in BLOCK_FLOAT_DTYPES else x.dtype    # what the layer pads
        vs = _tensor_checks(TensorLayout(mem, ROW_MAJOR, rm_dtype), tuple(attrs["out_shape"]),
                            "pad output", l1_shards=False)
        return [_v("pad.memory", f"{v.message} (the padded tensor keeps "
                   f"{'memory_config' if attrs.get('memory_config') else 'the input memory config'})")
                for v in vs]
    return []


def _c_i2s(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and x.memory.sharded:
        vs.append(_v("i2s.input", f"interleaved_to_sharded input is already {x.memory.memory_layout}"))
    if output is None or not output.sharded:
        vs.append(_v("i2s.input", "interleaved_to_sharded needs a sharded output memory config"))
    return vs


def _c_s2i(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and not x.memory.sharded and attrs.get("dtype") not in (None, x.dtype):
        vs.append(_v("s2i.input", "sharded_to_interleaved of an interleaved tensor copies it: "
                     f"output_dtype is ignored, it stays {x.dtype}"))
    if output is not None and output.sharded:
        vs.append(_v("s2i.input", "sharded_to_interleaved output must be interleaved"))
    return vs


def _c_reshard(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and not x.memory.sharded:
        vs.append(_v("reshard.input", "reshard input is interleaved"))
    if output is None or not output.sharded:
        vs.append(_v("reshard.input", "reshard output must be sharded"))
    if attrs.get("dtype") and x is not None and attrs["dtype"] != x.dtype:
        vs.append(_v("reshard.input", "reshard cannot change dtype"))
    return vs


def _c_to_layout(inputs, attrs, output, shapes):
    x = inputs[0]
    tgt = attrs.get("layout", TILE_LAYOUT)
    dt = attrs.get("dtype") or (x.dtype if x is not None else None)
    if tgt == ROW_MAJOR and dt in BLOCK_FLOAT_DTYPES:
        return [_v("to_layout.dtype", f"to_layout ROW_MAJOR with dtype {dt}")]
    return []


def _c_typecast(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and output is not None and output.memory_layout != x.memory.memory_layout:
        vs.append(_v("typecast.layout",
                     f"typecast {x.memory.memory_layout} -> {output.memory_layout}"))
    if x is not None and attrs.get("dtype") in BLOCK_FLOAT_DTYPES and x.layout != TILE_LAYOUT:
        vs.append(_v("typecast.layout", f"typecast to {attrs['dtype']} of a {x.layout} tensor"))
    return vs


def _c_tmc(inputs, attrs, output, shapes):
    x = inputs[0]
    if x is not None and attrs.get("dtype") and attrs["dtype"] != x.dtype:
        if x.layout != TILE_LAYOUT:
            return [_v("to_memory_config.any", "to_memory_config dtype change needs TILE layout")]
        if output is not None and output == x.memory:
            return [_v("to_memory_config.any", "to_memory_config to the same memory config "
                       f"returns the tensor as it is: the dtype stays {x.dtype}")]
    return []


def _c_slice(inputs, attrs, output, shapes):
    x = inputs[0]
    if x is not None and x.memory.sharded:
        return [_v("slice.memory", f"slice input {x.memory.short()}: slice takes interleaved tensors")]
    return []


def _c_split(inputs, attrs, output, shapes):
    """A split is one ttnn.slice per named output: slice's rules."""
    return _c_slice(inputs, attrs, output, shapes)


def _c_conv_transpose(inputs, attrs, output, shapes):
    """conv_transpose2d: conv2d's input/config rules, plus its own geometry and L1-path rules."""
    x = inputs[0]
    if x is None:
        return [_v("conv2d.shard_scheme", "conv_transpose2d input is missing")]
    vs = _c_conv(inputs, {k: v for k, v in attrs.items() if k not in ("slice", "lowering")},
                 output, shapes)
    k, p, d = attrs.get("kernel"), attrs.get("padding"), attrs.get("dilation", (1, 1))
    if k is not None and p is not None:
        t, b, l, r = p
        if max(t, b) > d[0] * (k[0] - 1) or max(l, r) > d[1] * (k[1] - 1):
            vs.append(_v("conv_transpose2d.real_padding",
                         f"padding {list(p)} exceeds dilation * (kernel - 1) = "
                         f"[{d[0] * (k[0] - 1)}, {d[1] * (k[1] - 1)}]"))
    if x.memory.buffer == "dram":
        vs.append(_v("conv_transpose2d.l1_path", f"conv_transpose2d input {x.memory.short()}: "
                     "a DRAM input without a slice config takes the DRAM-sliced path"))
    return vs


def _c_batch_norm(inputs, attrs, output, shapes):
    return _c_binary(inputs, attrs, output, shapes)


def _c_layer_norm(inputs, attrs, output, shapes):
    x = inputs[0]
    if x is None or not x.memory.sharded or attrs.get("program_config") is not None:
        return []
    if x.memory.memory_layout == HEIGHT:
        return [_v("layer_norm.interleaved", "layer_norm of a HEIGHT_SHARDED input needs a "
                   "sharded program config")]
    if output is not None and not output.sharded:
        return [_v("layer_norm.interleaved", f"layer_norm of a {x.memory.memory_layout} input "
                   f"with an interleaved output memory config ({output.short()})")]
    return []


def _c_layer_scale(inputs, attrs, output, shapes):
    return _c_binary(inputs, attrs, output, shapes)


def _c_softmax(inputs, attrs, output, shapes):
    return []


def _c_reshape(inputs, attrs, output, shapes):
    return []


# The checks of ttnn ops that are not spec ops (a spec op's check is named by its registry entry,
# ``ttmodels/ops/<op>.py``: ``OpDef.rules``).
_CHECKS = {
    "grid_sample": _c_grid_sample,
    "interleaved_to_sharded": _c_i2s, "sharded_to_interleaved": _c_s2i, "reshard": _c_reshard,
    "to_layout": _c_to_layout, "typecast": _c_typecast, "to_memory_config": _c_tmc,
}


_SPEC_OP_CHECKS: dict = {}     # resolved registry entries (the sim checks on every op call)


def check_function(op: str):
    """The rules check of ttnn op / spec op ``op`` (None when there is none)."""
    fn = _CHECKS.get(op) or _SPEC_OP_CHECKS.get(op)
    if fn is None and op in ops.REGISTRY:
        fn = _SPEC_OP_CHECKS[op] = ops.REGISTRY[op].rules.resolve()
    return fn


def _out_shape(op: str, attrs: dict, shapes: list[Shape4 | None]) -> tuple[int, int] | None:
    """Output [rows, C] when attrs carry it (``out_shape``: flat 4-tuple) or it follows from the
    inputs (the op's entry says how: ``OpDef.output_shape``; adapters keep their input's)."""
    if attrs.get("out_shape") is not None:
        return _rows_c(tuple(attrs["out_shape"]))
    if shapes and shapes[0] is not None:
        d = ops.REGISTRY.get(op)
        rule = d.output_shape if d is not None else ("same" if op in ADAPTER_OPS else None)
        if rule == "broadcast" and len(shapes) > 1 and shapes[1] is not None:
            return _rows_c(tuple(max(a, b) for a, b in zip(shapes[0], shapes[1])))
        if rule == "concat":
            s = [x for x in shapes if x is not None]
            return (s[0][0] * s[0][1] * s[0][2], sum(x[3] for x in s))
        if rule == "same":
            return _rows_c(shapes[0])
    return None


def core_count(mem: MemSpec) -> int:
    """Cores a sharded tensor occupies (0 for interleaved)."""
    if not mem.sharded:
        return 0
    return mem.num_cores or mem.grid[0] * mem.grid[1]


def binary_output_source(a: TensorLayout, b: TensorLayout | None) -> TensorLayout:
    """The operand whose memory config a binary_ng output takes when no memory_config is given:
    a's, except that when both are sharded the one on more cores wins (ties: a), and a sharded b
    wins over a DRAM-interleaved a. Measured on ttnn 0.81.1 (mock device): h25 + h49 -> h49,
    h49 + block56 -> block56, L1-interleaved + h49 -> a's interleaved L1, DRAM + h49 -> h49,
    DRAM + L1-interleaved -> DRAM; binary_ng_device_operation.cpp BinaryNgDeviceOperation::invoke /
    compute_output_specs (tt-metal #28085/#28087: "max of A & B grid" for mismatched shard specs)."""
    if b is not None and b.memory.sharded and (
            (a.memory.sharded and core_count(b.memory) > core_count(a.memory)) or
            (not a.memory.sharded and a.memory.buffer == "dram")):
        return b
    return a


def upsample_output_memspec(mem: MemSpec, factor: int) -> MemSpec:
    """upsample_device_operation.cpp compute_output_specs: a sharded output keeps the input's grid
    and shard width; its shard height is the input's times scale_h * scale_w (each input shard
    becomes its own upscaled rows, not a re-split of the output: 160-row shards -> 640 at 2x).
    ``factor`` = scale_h * scale_w = output rows / input rows."""
    h, w = mem.shard_shape
    return replace(mem, shard_shape=(h * factor, w))


@dataclass(frozen=True)
class OutputQuery:
    """One ``output_layout`` question: op, operand layouts and flat shapes, attrs, the requested
    memory config, and what every op's answer starts from."""
    op: str
    inputs: list
    attrs: dict
    requested: MemSpec | None
    shapes: list
    x: TensorLayout | None          # input 0
    dtype_in: str                   # input 0's dtype
    out_rc: tuple[int, int] | None  # output [rows, C] when known
    dtype: str                      # attrs' dtype, else input 0's

    def fit(self, mem: MemSpec, layout: str = TILE_LAYOUT) -> MemSpec:
        return reshape_memspec(mem, *self.out_rc, layout) if self.out_rc is not None else mem


def output_layout(op: str, inputs: list[TensorLayout | None], attrs: dict,
                  requested: MemSpec | None, shapes: list[Shape4 | None] | None) -> TensorLayout:
    """What ``op`` produces, as ttnn 0.81 does (``requested`` = the memory_config argument): the
    op's own function (a spec op's entry names it, ``OpDef.output``; see each ``_out_*``).

    conv2d: sharded like its input if that is sharded, else by ``shard_layout`` (attrs
    ``parallel`` = a ParallelConfig, or computed), in L1, ``output_layout`` (TILE) and ``dtype``.
    Pools: the input's sharding scheme and grid, shard recomputed for the output rows; layout
    ``output_layout`` (ROW_MAJOR default), ``dtype`` (bfloat16 default). Binary: ``requested`` or
    input a's memory config (shard spec adjusted to the output shape), dtype = ``dtype`` or a's.
    relu/upsample/pad: input's memory config (upsample scales shard height), input dtype/layout.
    concat: ``requested`` or the first input's memory (shards widened to the output channels).
    linear: ``requested`` or interleaved L1/DRAM like input a. Adapters: ``requested`` memory,
    ``layout``/``dtype`` from attrs."""
    fn = output_function(op)
    if fn is None:
        raise ValueError(f"rules.output_layout: unknown op {op!r}")
    shapes = list(shapes) if shapes is not None else [None] * len(inputs)
    x = inputs[0] if inputs else None
    dtype_in = x.dtype if x is not None else "bfloat16"
    return fn(OutputQuery(op, inputs, attrs, requested, shapes, x, dtype_in,
                          _out_shape(op, attrs, shapes), attrs.get("dtype") or dtype_in))


def _out_conv(q: OutputQuery) -> TensorLayout:
    attrs, x, out_rc, requested, dtype = q.attrs, q.x, q.out_rc, q.requested, q.dtype
    grid = tuple(attrs.get("device_grid", DEFAULT_GRID))
    if attrs.get("slice"):
        # conv2d_DRAM writes every slice into a DRAM interleaved output (memory_config ignored)
        return TensorLayout(MemSpec(INTERLEAVED, "dram"),
                            attrs.get("output_layout", TILE_LAYOUT), dtype)
    is_mm = bool(attrs.get("is_mm_conv", False))
    if requested is not None:
        mem = requested
    elif x is not None and x.memory.sharded and out_rc is not None:
        # a sharded input is used as it is (reshard_if_not_optimal=False): its grid is the
        # conv's parallel config, unless conv2d reshards it itself (conv_reshards_input)
        c_in = attrs.get("in_channels") or (q.shapes[0][3] if q.shapes and q.shapes[0] else None)
        pc = parallel_config_of(x.memory) if c_in is None else conv_input_parallel_config(
            x.memory, out_rc[0], c_in, out_rc[1], is_mm=is_mm, device_grid=grid,
            act_block_h=attrs.get("act_block_h_override"))
        mem = conv_output_memspec(pc, *out_rc, is_mm=is_mm, device_grid=grid)
    elif out_rc is not None:
        kind = attrs.get("shard_layout") or HEIGHT
        pc = attrs.get("parallel") or determine_parallel_config(
            kind, out_rc[0], attrs.get("in_channels", out_rc[1]), out_rc[1], grid,
            channels_padding=not is_mm, act_block_h=attrs.get("act_block_h_override"))
        mem = conv_output_memspec(pc, *out_rc, is_mm=is_mm, device_grid=grid)
    else:
        mem = x.memory if x is not None else MemSpec()
    return TensorLayout(mem, attrs.get("output_layout", TILE_LAYOUT), dtype)


def _out_pool(q: OutputQuery) -> TensorLayout:
    attrs, x, out_rc, requested = q.attrs, q.x, q.out_rc, q.requested
    out_layout = attrs.get("output_layout", ROW_MAJOR)
    if attrs.get("slice"):
        # rule pool2d.slice_input: a DRAM-sliced pool writes every slice into a DRAM-interleaved
        # output (generic_pools.cpp pool2d with dram_slice_config, through op_slicing.cpp as
        # conv2d_DRAM; memory_config is not taken), in the requested layout and dtype. Found by
        # the planner's ttnn oracle (bevdet_r50_encoder at batch 6: the table said height shards)
        return TensorLayout(MemSpec(INTERLEAVED, "dram"), out_layout,
                            attrs.get("dtype") or "bfloat16")
    if requested is not None:
        mem = requested
    elif (q.op == "global_avg_pool" or attrs.get("global_pool")) and (
            x is None or x.memory.sharded or not attrs.get("applied_shard_scheme")):
        # ttnn 0.81.1 runs an avg_pool2d whose window is the whole (unpadded) map of a sharded
        # input as a reduction -- sharded_to_interleaved, untilize_with_unpadding, reduce
        # (mean) -- whose output is interleaved in L1 (observed in its graph capture on the
        # mock device; pool/global_avg_pool/global_avg_pool.cpp pool_2d is the same reduce
        # path). An interleaved input is first sharded with applied_shard_scheme, and the output
        # then gets pool2d's own output spec (below: width shards of 32 channels for the usual
        # [N, C] head, measured on the mock device).
        mem = MemSpec(INTERLEAVED, "l1")
    elif x is not None and out_rc is not None:
        pc = pool_parallel_config_of(x.memory) if x.memory.sharded else pool_parallel_config(
            attrs.get("applied_shard_scheme") or HEIGHT, out_rc[0], out_rc[1],
            in_tiled=x.layout == TILE_LAYOUT, out_tiled=out_layout == TILE_LAYOUT,
            device_grid=tuple(attrs.get("device_grid", DEFAULT_GRID)))
        mem = pool_output_memspec(pc, *out_rc, out_tiled=out_layout == TILE_LAYOUT)
    else:
        mem = x.memory if x is not None else MemSpec()
    return TensorLayout(mem, out_layout, attrs.get("dtype") or "bfloat16")


def _out_binary(q: OutputQuery) -> TensorLayout:
    """binary_ng (and batch_norm, run as multiply + add): ``requested`` or the memory config of
    the operand ``binary_output_source`` picks, refitted to the output shape."""
    a = q.x
    b = q.inputs[1] if len(q.inputs) > 1 else None
    mem = q.requested if q.requested is not None else q.fit(binary_output_source(a, b).memory,
                                                            a.layout)
    return TensorLayout(mem, a.layout, q.dtype)


def _out_upsample(q: OutputQuery) -> TensorLayout:
    attrs, x, out_rc, requested, dtype_in = q.attrs, q.x, q.out_rc, q.requested, q.dtype_in
    if attrs.get("mode") == "bilinear" and requested is None and \
            x.memory.memory_layout == HEIGHT and out_rc is not None and x.memory.shard_shape:
        # upsample_common.cpp compute_integer_output_mem_config (bilinear): the haloed input's
        # cores, shard height round_up(out rows, cores) / cores, the input's shard width
        n = x.memory.num_cores or x.memory.grid[0] * x.memory.grid[1]
        return TensorLayout(replace(x.memory, shard_shape=(round_up(out_rc[0], n) // n,
                                                           x.memory.shard_shape[1])), x.layout, dtype_in)
    if requested is None and x.memory.sharded and out_rc is not None and q.shapes[0] is not None:
        factor = out_rc[0] // _rows_c(tuple(q.shapes[0]))[0]
        return TensorLayout(upsample_output_memspec(x.memory, factor), x.layout, dtype_in)
    mem = requested if requested is not None else (q.fit(x.memory, x.layout) if x.memory.sharded
                                                   else x.memory)
    return TensorLayout(mem, x.layout, dtype_in)


def _out_same_memory(q: OutputQuery) -> TensorLayout:
    """Unary eltwise ops and slice: the input's memory config as it is (unary
    compute_output_specs), its layout and dtype. pad.cpp pad_impl too: memory_config.value_or(
    input's), shard spec *not* refitted to the padded rows (only width padding of a
    height-sharded input gets a recomputed config); a sharded pad that adds rows must be given a
    memory_config that covers them."""
    x = q.x
    return TensorLayout(q.requested if q.requested is not None else x.memory, x.layout, q.dtype_in)


def _out_softmax(q: OutputQuery) -> TensorLayout:
    """softmax: the argument's or the input's memory config, TILE, the input's dtype."""
    return TensorLayout(q.requested if q.requested is not None else q.x.memory, TILE_LAYOUT,
                        q.dtype_in)


def _out_grid_sample(q: OutputQuery) -> TensorLayout:
    # invoke: memory_config.value_or(grid's); compute_output_specs: bilinear with an
    # interleaved grid and an interleaved config stays interleaved; a config with a shard spec
    # (grid interleaved) is used as is; otherwise height shards over split_work_to_cores of
    # the grid points. Output ROW_MAJOR in the input's dtype.
    attrs, inputs, x, out_rc, requested = q.attrs, q.inputs, q.x, q.out_rc, q.requested
    g = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("grid")
    mem = requested if requested is not None else (g.memory if g is not None else x.memory)
    grid_sharded = g is not None and g.memory.sharded
    if attrs.get("mode", "bilinear") == "bilinear" and not grid_sharded and not mem.sharded:
        pass
    elif mem.sharded and mem.shard_shape is not None and not grid_sharded:
        pass
    elif grid_sharded:
        n = g.memory.num_cores or g.memory.grid[0] * g.memory.grid[1]
        mem = MemSpec(HEIGHT, "l1", g.memory.grid, n,
                      (g.memory.shard_shape[0], out_rc[1] if out_rc else x.memory.shard_shape[1]))
    elif out_rc is not None:
        cores, per = split_work_to_cores(out_rc[0], tuple(attrs.get("device_grid", DEFAULT_GRID)))
        mem = MemSpec(HEIGHT, "l1", cores_to_grid(cores, tuple(attrs.get("device_grid", DEFAULT_GRID))),
                      cores, (per, out_rc[1]))
    return TensorLayout(mem, ROW_MAJOR, q.dtype_in)


def _out_concat(q: OutputQuery) -> TensorLayout:
    x = q.x
    mem = q.requested if q.requested is not None else q.fit(x.memory, x.layout)
    return TensorLayout(mem, x.layout, q.dtype_in)


def _out_linear(q: OutputQuery) -> TensorLayout:
    x = q.x
    mem = q.requested if q.requested is not None else (x.memory if not x.memory.sharded else
                                                       MemSpec(INTERLEAVED, "l1"))
    return TensorLayout(mem, TILE_LAYOUT, q.dtype)


def _out_adapter(q: OutputQuery) -> TensorLayout:
    x = q.x
    mem = q.requested if q.requested is not None else x.memory
    if q.op == "sharded_to_interleaved" and q.requested is None:
        mem = MemSpec(INTERLEAVED, "l1")
    return TensorLayout(mem, q.attrs.get("layout") or x.layout, q.dtype)


# What ttnn ops that are not spec ops produce (a spec op's entry names its ``_out_*``).
_OUTPUTS = {"grid_sample": _out_grid_sample, **{op: _out_adapter for op in ADAPTER_OPS}}
_SPEC_OP_OUTPUTS: dict = {}


def output_function(op: str):
    fn = _OUTPUTS.get(op) or _SPEC_OP_OUTPUTS.get(op)
    if fn is None and op in ops.REGISTRY:
        fn = _SPEC_OP_OUTPUTS[op] = ops.REGISTRY[op].output.resolve()
    return fn


def raise_if_violations(violations: Iterable[Violation], layer: str) -> None:
    """Raise LayoutError naming ``layer`` and the first violated rule (all messages included)."""
    vs = list(violations)
    if not vs:
        return
    msg = "; ".join(f"{v.message} ({RULES[v.rule].source})" if v.rule in RULES else v.message
                    for v in vs)
    raise LayoutError(msg, layer=layer, rule=vs[0].rule)
