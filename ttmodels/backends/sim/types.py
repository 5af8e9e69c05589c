"""Host-side TTNN types: enums, core grids, memory configs, op configs.

Names, enum values, constructor signatures (positional-only vs keyword-only) and defaults follow
ttnn 0.81.1 (checked against the real classes' ``__nb_signature__`` by tests/test_sim.py). Only the
subset ttmodels uses is modelled; every class is plain Python and never imports ttnn.
"""
from __future__ import annotations

import enum
import math
from dataclasses import fields
from typing import Any, Optional, Sequence


class DataType(enum.Enum):
    BFLOAT16 = 0
    FLOAT32 = 1
    UINT32 = 2
    BFLOAT8_B = 3
    BFLOAT4_B = 4
    UINT8 = 5
    UINT16 = 6
    INT32 = 7
    INVALID = 10


bfloat16 = DataType.BFLOAT16
float32 = DataType.FLOAT32
uint32 = DataType.UINT32
bfloat8_b = DataType.BFLOAT8_B
bfloat4_b = DataType.BFLOAT4_B
uint8 = DataType.UINT8
uint16 = DataType.UINT16
int32 = DataType.INT32


class Layout(enum.Enum):
    ROW_MAJOR = 0
    TILE = 1
    INVALID = 2


ROW_MAJOR_LAYOUT = Layout.ROW_MAJOR
TILE_LAYOUT = Layout.TILE


class TensorMemoryLayout(enum.Enum):
    INTERLEAVED = 0
    HEIGHT_SHARDED = 2
    WIDTH_SHARDED = 3
    BLOCK_SHARDED = 4


class BufferType(enum.Enum):
    DRAM = 0
    L1 = 1
    L1_SMALL = 3
    TRACE = 4


class ShardOrientation(enum.Enum):
    ROW_MAJOR = 0
    COL_MAJOR = 1


class ShardStrategy(enum.Enum):
    HEIGHT = 1
    WIDTH = 2
    BLOCK = 3


class MathFidelity(enum.Enum):
    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4
    Invalid = 255


class Arch(enum.Enum):
    WORMHOLE_B0 = 2
    BLACKHOLE = 3


class ThrottleLevel(enum.Enum):
    NO_THROTTLE = 0


class PaddingMode(enum.Enum):
    Zeros = 0


class StorageType(enum.Enum):
    HOST = 0
    DEVICE = 1


class UnaryOpType(enum.Enum):
    # ttnn 0.81.1's enum, every member with its value (tests/test_sim.py checks them against the
    # real one), so a new row of the activation table needs no change here; the sim applies the
    # ones the table (and _apply_unary) models and refuses the rest by name.
    EXP = 0
    RECIP = 1
    GELU = 2
    GELU_TANH = 3
    RELU = 4
    SQRT = 5
    SIGMOID = 6
    LOG = 7
    LOG1P = 8
    TANH = 9
    LOG2 = 10
    LOG10 = 11
    SIN = 12
    COS = 13
    COSH = 14
    SINH = 15
    ABS = 16
    ABS_INT32 = 17
    SIGN = 18
    SQUARE = 19
    EQZ = 20
    NEZ = 21
    GTZ = 22
    LTZ = 23
    GEZ = 24
    LEZ = 25
    RELU_MAX = 26
    RELU_MIN = 27
    POWER = 28
    POWER_ITERATIVE = 29
    LEAKY_RELU = 30
    ELU = 31
    EXP2 = 32
    HEAVISIDE = 33
    EXPM1 = 34
    SIGNBIT = 35
    ASIN = 36
    ACOS = 37
    ACOSH = 38
    RSQRT = 39
    RELU6 = 40
    ATAN = 41
    ASINH = 42
    ATANH = 43
    ERF = 44
    ERFC = 45
    ISINF = 46
    ISPOSINF = 47
    ISNEGINF = 48
    ISNAN = 49
    LOGICAL_NOT_UNARY = 50
    ISFINITE = 51
    ERFINV = 52
    I0 = 53
    I1 = 54
    TAN = 55
    RSUB = 56
    RDIV = 57
    SILU = 58
    SOFTPLUS = 59
    IDENTITY = 60
    NEG = 61
    ADD_UNARY_SFPU = 62
    SUB_UNARY_SFPU = 63
    MUL_UNARY_SFPU = 64
    DIV_UNARY_SFPU = 65
    UNARY_NE = 66
    UNARY_EQ = 67
    UNARY_GT = 68
    UNARY_LT = 69
    UNARY_GE = 70
    UNARY_LE = 71
    TILED_PROD = 72
    TYPECAST = 73
    BITCAST = 74
    BITWISE_XOR = 75
    BITWISE_NOT = 76
    BITWISE_AND = 77
    BITWISE_OR = 78
    RIGHT_SHIFT = 79
    FLOOR = 80
    CEIL = 81
    TRUNC = 82
    FRAC = 83
    ROUND = 84
    LEFT_SHIFT = 85
    REMAINDER = 86
    FMOD = 87
    DROPOUT = 88
    FILL = 89
    PRELU_SFPU = 90
    ZERO_POINT = 91
    ALT_COMPLEX_ROTATE90 = 92
    MISH = 93
    HARDMISH = 94
    MAXIMUM = 95
    MINIMUM = 96
    TANHSHRINK = 97
    THRESHOLD = 98
    SOFTSHRINK = 99
    HARDSHRINK = 100
    HARDTANH = 101
    HARDSIGMOID = 102
    HARDSWISH = 103
    WHERE_TSS = 104
    MAC_TSS = 105
    SOFTSIGN = 106
    CELU = 107
    CLAMP_TSS = 108
    SELU = 109
    RPOW = 110
    CBRT = 111
    LOGSIGMOID = 112
    LOGIT = 113
    XIELU = 114
    LGAMMA = 115
    DIGAMMA = 116
    POLYGAMMA = 117
    SOFTCAP = 118


class SigmoidMode(enum.Enum):
    Accurate = 0
    AccurateWithFastExp = 1
    FastApproximate = 2


class UnaryWithParam:
    """``UnaryWithParam(op_type[, p0[, p1]])`` or ``UnaryWithParam((op_type, p0))`` (positional only)."""

    def __init__(self, arg0, /, *params):
        if isinstance(arg0, tuple):
            arg0, params = arg0[0], tuple(arg0[1:])
        if not isinstance(arg0, UnaryOpType):
            raise TypeError(f"UnaryWithParam: expected a UnaryOpType, got {arg0!r}")
        self.op_type = arg0
        self.params = [float(p) for p in params]

    def __eq__(self, other):
        return isinstance(other, UnaryWithParam) and (self.op_type, self.params) == (other.op_type, other.params)

    def __repr__(self):
        return f"UnaryWithParam(op_type=UnaryOpType::{self.op_type.name})"


# ---------------------------------------------------------------------------------------------
# Cores
# ---------------------------------------------------------------------------------------------

class CoreCoord:
    """``CoreCoord(x, y)`` or ``CoreCoord((x, y))`` (positional only)."""
    __slots__ = ("x", "y")

    def __init__(self, *args):
        if len(args) == 1:
            args = tuple(args[0])
        if len(args) != 2:
            raise TypeError("CoreCoord(x, y)")
        self.x, self.y = int(args[0]), int(args[1])

    def __eq__(self, other):
        return isinstance(other, CoreCoord) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))

    def __repr__(self):
        return f"{self.x}-{self.y}"


class CoreRange:
    def __init__(self, start: CoreCoord, end: CoreCoord):
        if end.x < start.x or end.y < start.y:
            raise ValueError(f"CoreRange: end {end} precedes start {start}")
        self.start, self.end = start, end

    def grid_size(self) -> CoreCoord:
        return CoreCoord(self.end.x - self.start.x + 1, self.end.y - self.start.y + 1)

    def contains(self, other) -> bool:
        if isinstance(other, CoreCoord):
            return self.start.x <= other.x <= self.end.x and self.start.y <= other.y <= self.end.y
        return self.contains(other.start) and self.contains(other.end)

    def _num_cores(self) -> int:
        g = self.grid_size()
        return g.x * g.y

    def __eq__(self, other):
        return isinstance(other, CoreRange) and (self.start, self.end) == (other.start, other.end)

    def __hash__(self):
        return hash((self.start, self.end))

    def __repr__(self):
        return f"[{self.start!r} - {self.end!r}]"


class CoreRangeSet:
    def __init__(self, core_ranges):
        rs = list(core_ranges)
        rs.sort(key=lambda r: (r.start.y, r.start.x))
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if not (a.end.x < b.start.x or b.end.x < a.start.x or a.end.y < b.start.y
                        or b.end.y < a.start.y):
                    raise ValueError(f"CoreRangeSet: ranges {a} and {b} overlap")
        self._ranges = tuple(rs)

    def ranges(self) -> list[CoreRange]:
        return list(self._ranges)

    def num_cores(self) -> int:
        return sum(r._num_cores() for r in self._ranges)

    def size(self) -> int:
        return len(self._ranges)

    def empty(self) -> bool:
        return not self._ranges

    def bounding_box(self) -> CoreRange:
        if not self._ranges:
            raise ValueError("bounding_box of an empty CoreRangeSet")
        return CoreRange(CoreCoord(min(r.start.x for r in self._ranges), min(r.start.y for r in self._ranges)),
                         CoreCoord(max(r.end.x for r in self._ranges), max(r.end.y for r in self._ranges)))

    def contains(self, other) -> bool:
        if isinstance(other, CoreCoord):
            return any(r.contains(other) for r in self._ranges)
        return any(r.contains(other) for r in self._ranges)

    def merge(self, other: "CoreRangeSet") -> "CoreRangeSet":
        return CoreRangeSet(list(self._ranges) + [r for r in other._ranges if r not in self._ranges])

    def __eq__(self, other):
        return isinstance(other, CoreRangeSet) and set(self._ranges) == set(other._ranges)

    def __hash__(self):
        return hash(frozenset(self._ranges))

    def __repr__(self):
        return "{" + ", ".join(repr(r) for r in self._ranges) + "}"


class CoreGrid:
    """``CoreGrid(x=..., y=...)`` (keyword only, as in ttnn)."""

    def __init__(self, *, x: int, y: int):
        self.x, self.y = int(x), int(y)

    @property
    def num_cores(self) -> int:
        return self.x * self.y

    def __eq__(self, other):
        return isinstance(other, CoreGrid) and (self.x, self.y) == (other.x, other.y)

    def __repr__(self):
        return f"ttnn.CoreGrid(x={self.x}, y={self.y})"


def num_cores_to_corerangeset(target_num_cores: int, grid_size: CoreCoord, row_wise: bool = False):
    """``target_num_cores`` cores starting at (0, 0): whole rows (row_wise) or whole columns, then
    a partial last row/column -- tt-metal work_split.cpp ``num_cores_to_corerangeset``."""
    from ...planning.layout import core_ranges        # the one definition of the core layout
    gx, gy = grid_size.x, grid_size.y
    try:
        boxes = core_ranges(target_num_cores, (gx, gy), row_wise)
    except ValueError:
        raise ValueError(f"num_cores_to_corerangeset: {target_num_cores} cores do not fit a "
                         f"{gx}x{gy} grid") from None
    return CoreRangeSet([CoreRange(CoreCoord(*s), CoreCoord(*e)) for s, e in boxes])


# ---------------------------------------------------------------------------------------------
# Memory configs
# ---------------------------------------------------------------------------------------------

class ShardSpec:
    def __init__(self, grid: CoreRangeSet, shard_shape: Sequence[int], shard_orientation: ShardOrientation):
        if not isinstance(grid, CoreRangeSet):
            raise TypeError(f"ShardSpec: grid must be a CoreRangeSet, got {type(grid).__name__}")
        shard_shape = [int(s) for s in shard_shape]
        if len(shard_shape) != 2:
            raise ValueError(f"ShardSpec: shard_shape must be [height, width], got {shard_shape}")
        self.grid = grid
        self.shape = shard_shape
        self.orientation = shard_orientation

    def num_cores(self) -> int:
        return self.grid.num_cores()

    def __eq__(self, other):
        return isinstance(other, ShardSpec) and (self.grid, self.shape, self.orientation) == \
            (other.grid, other.shape, other.orientation)

    def __hash__(self):
        return hash((self.grid, tuple(self.shape), self.orientation))

    def __repr__(self):
        return f"ShardSpec(grid={self.grid!r}, shape={self.shape}, orientation={self.orientation.name})"


class MemoryConfig:
    def __init__(self, memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED,
                 buffer_type: BufferType = BufferType.DRAM, shard_spec: Optional[ShardSpec] = None):
        self.memory_layout = memory_layout
        self.buffer_type = buffer_type
        self.shard_spec = shard_spec

    def is_sharded(self) -> bool:
        return self.memory_layout != TensorMemoryLayout.INTERLEAVED

    @property
    def interleaved(self) -> bool:
        return not self.is_sharded()

    def __eq__(self, other):
        return isinstance(other, MemoryConfig) and (self.memory_layout, self.buffer_type, self.shard_spec) == \
            (other.memory_layout, other.buffer_type, other.shard_spec)

    def __hash__(self):
        return hash((self.memory_layout, self.buffer_type, self.shard_spec))

    def __repr__(self):
        return (f"MemoryConfig(memory_layout=TensorMemoryLayout::{self.memory_layout.name},"
                f"buffer_type=BufferType::{self.buffer_type.name},shard_spec={self.shard_spec!r})")


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)


def create_sharded_memory_config(shape, core_grid, strategy: ShardStrategy,
                                 orientation: Optional[ShardOrientation] = None,
                                 use_height_and_width_as_shard_shape: bool = False) -> MemoryConfig:
    """Same contract as ttnn's python helper: shape is the tensor's (folded to [prod(dims[:-1]), W]),
    or the shard shape itself with ``use_height_and_width_as_shard_shape``; L1 always."""
    if not isinstance(shape, (list, tuple, Shape)):
        raise RuntimeError("Invalid input shape")
    kinds = {ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
             ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
             ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED}
    if strategy not in kinds:
        raise RuntimeError("Invalid sharding strategy")
    orient = orientation or ShardOrientation.ROW_MAJOR
    if isinstance(core_grid, CoreGrid):
        grid = CoreRangeSet([CoreRange(CoreCoord(0, 0), CoreCoord(core_grid.x - 1, core_grid.y - 1))])
    elif isinstance(core_grid, CoreRangeSet):
        grid = core_grid
        if not use_height_and_width_as_shard_shape:
            raise RuntimeError("height and width must be shard shape with CoreRangeSet")
    else:
        raise RuntimeError("Invalid core_grid type")
    dims = list(shape)
    height, width = math.prod(dims[:-1]), dims[-1]
    if use_height_and_width_as_shard_shape:
        shard = (dims[-2], dims[-1]) if orient == ShardOrientation.ROW_MAJOR else (dims[-1], dims[-2])
    elif strategy == ShardStrategy.BLOCK:
        rows_split, cols_split = (core_grid.y, core_grid.x) if orient == ShardOrientation.ROW_MAJOR \
            else (core_grid.x, core_grid.y)
        if height % rows_split or width % cols_split:
            raise RuntimeError("Invalid sharding core_grid")
        shard = (height // rows_split, width // cols_split)
    else:
        n = core_grid.x * core_grid.y
        split = height if strategy == ShardStrategy.HEIGHT else width
        if split % n:
            raise RuntimeError("Invalid sharding core_grid")
        shard = (height // n, width) if strategy == ShardStrategy.HEIGHT else (height, width // n)
    return MemoryConfig(kinds[strategy], BufferType.L1, ShardSpec(grid, list(shard), orient))


# ---------------------------------------------------------------------------------------------
# Op configs (keyword-only constructors with ttnn's defaults)
# ---------------------------------------------------------------------------------------------

class _KwConfig:
    """Keyword-only config: fields and defaults come from ``_FIELDS``; required ones have no default."""
    _FIELDS: dict[str, Any] = {}
    _REQUIRED: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self._FIELDS) - set(self._REQUIRED)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(unknown)}")
        missing = [k for k in self._REQUIRED if k not in kwargs]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing keyword argument(s) {missing}")
        for k, v in self._FIELDS.items():
            setattr(self, k, kwargs.get(k, v))
        for k in self._REQUIRED:
            setattr(self, k, kwargs[k])

    def _items(self):
        return {k: getattr(self, k) for k in (*self._REQUIRED, *self._FIELDS)}

    def __eq__(self, other):
        return type(self) is type(other) and self._items() == other._items()

    def __repr__(self):
        return f"{type(self).__name__}(" + ",".join(f"{k}={v}" for k, v in self._items().items()) + ")"


class Conv2dConfig(_KwConfig):
    _FIELDS = dict(weights_dtype=None, activation=None, deallocate_activation=False,
                   reallocate_halo_output=True, config_tensors_in_dram=False, act_block_h_override=0,
                   act_block_w_div=1, reshard_if_not_optimal=False, override_sharding_config=False,
                   shard_layout=None, core_grid=None, transpose_shards=False,
                   output_layout=Layout.TILE, enable_act_double_buffer=False,
                   enable_weights_double_buffer=False, full_inner_dim=False,
                   enable_kernel_stride_folding=None, enable_activation_reuse=False,
                   force_split_reader=None, override_output_sharding_config=False,
                   padding_mode=PaddingMode.Zeros)


class WormholeComputeKernelConfig(_KwConfig):
    _FIELDS = dict(math_fidelity=MathFidelity.Invalid, math_approx_mode=True, fp32_dest_acc_en=False,
                   packer_l1_acc=False, dst_full_sync_en=False, throttle_level=ThrottleLevel.NO_THROTTLE)


DeviceComputeKernelConfig = WormholeComputeKernelConfig


def init_device_compute_kernel_config(arch, device_kernel_config=None, *,
                                      math_fidelity=MathFidelity.LoFi, math_approx_mode=True,
                                      fp32_dest_acc_en=False, packer_l1_acc=False,
                                      dst_full_sync_en=False, throttle_level=ThrottleLevel.NO_THROTTLE):
    if device_kernel_config is not None:
        return device_kernel_config
    return WormholeComputeKernelConfig(math_fidelity=math_fidelity, math_approx_mode=math_approx_mode,
                                       fp32_dest_acc_en=fp32_dest_acc_en, packer_l1_acc=packer_l1_acc,
                                       dst_full_sync_en=dst_full_sync_en, throttle_level=throttle_level)


class MatmulMultiCoreReuseMultiCast1DProgramConfig(_KwConfig):
    _REQUIRED = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w",
                 "per_core_M", "per_core_N", "fuse_batch", "mcast_in0")
    _FIELDS = dict(out_block_h=None, out_block_w=None, fused_activation=None, gather_in0=False,
                   hop_cores=None, num_global_cb_receivers=1, untilize_out=False,
                   allowed_worker_cores=None, stream_in1=False)


class MatmulMultiCoreReuseMultiCastProgramConfig(_KwConfig):
    _REQUIRED = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w",
                 "per_core_M", "per_core_N", "transpose_mcast")
    _FIELDS = dict(out_block_h=None, out_block_w=None, fused_activation=None, fuse_batch=True,
                   allowed_worker_cores=None)


class SliceTypeEnum(enum.Enum):
    """``ttnn.Op2DSliceConfig.SliceTypeEnum`` (values as in ttnn 0.81.1)."""
    DRAMSliceHeight = 0
    DRAMSliceWidth = 1
    L1Full = 2


_SLICE_TYPE_REPR = {SliceTypeEnum.DRAMSliceHeight: "DRAM_HEIGHT", SliceTypeEnum.DRAMSliceWidth: "DRAM_WIDTH",
                    SliceTypeEnum.L1Full: "L1_FULL"}


class Op2DSliceConfig:
    """``Op2DSliceConfig(*, slice_type, num_slices=0)``: keyword only, two overloads in ttnn 0.81.1
    (with and without ``num_slices``, which then stays 0). ``num_slices`` is a uint32 there, so a
    negative count is a TypeError. Fields are plain attributes (read/write), equality is identity,
    as for the nanobind class."""
    SliceTypeEnum = SliceTypeEnum

    def __init__(self, *, slice_type: SliceTypeEnum, num_slices: int = 0):
        if isinstance(slice_type, int) and not isinstance(slice_type, bool):
            slice_type = SliceTypeEnum(slice_type)      # nanobind enums take their int values
        if not isinstance(slice_type, SliceTypeEnum):
            raise TypeError(f"Op2DSliceConfig: slice_type must be an Op2DSliceConfig.SliceTypeEnum, "
                            f"got {slice_type!r}")
        if isinstance(num_slices, bool) or not isinstance(num_slices, int) or num_slices < 0:
            raise TypeError(f"Op2DSliceConfig: num_slices must be a non-negative int, got {num_slices!r}")
        self.slice_type = slice_type
        self.num_slices = num_slices

    def __repr__(self):
        return f"Op2DSliceConfig(slice_type=SliceType::{_SLICE_TYPE_REPR[self.slice_type]},num_slices={self.num_slices})"


Op2DDRAMSliceHeight = SliceTypeEnum.DRAMSliceHeight
Op2DDRAMSliceWidth = SliceTypeEnum.DRAMSliceWidth
Op2DL1FullSliceConfig = Op2DSliceConfig(slice_type=SliceTypeEnum.L1Full)
# ttnn 0.81.1 keeps the pre-rename conv2d names as aliases
Conv2dSliceConfig = Op2DSliceConfig
Conv2dDRAMSliceHeight = Op2DDRAMSliceHeight
Conv2dDRAMSliceWidth = Op2DDRAMSliceWidth
Conv2dL1FullSliceConfig = Op2DSliceConfig(slice_type=SliceTypeEnum.L1Full)


# ---------------------------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------------------------

class Shape(tuple):
    """ttnn.Shape: a sequence of ints comparing equal to lists/tuples of the same values."""

    def __new__(cls, shape: Sequence[int]):
        return super().__new__(cls, (int(s) for s in shape))

    @property
    def rank(self) -> int:
        return len(self)

    def to_rank(self, rank: int) -> "Shape":
        if rank >= len(self):
            return Shape((1,) * (rank - len(self)) + tuple(self))
        if any(d != 1 for d in self[:len(self) - rank]):
            raise ValueError(f"Shape.to_rank: cannot drop non-unit dims of {self}")
        return Shape(tuple(self)[len(self) - rank:])

    def __eq__(self, other):
        try:
            return tuple(self) == tuple(other)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = tuple.__hash__

    def __repr__(self):
        return f"Shape({list(self)})"
