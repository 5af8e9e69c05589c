"""binary_ng's layout rules (add, multiply, subtract), its check, its perf advice (native
L1 sharding) and its output's layout. batch_norm and layer_scale run as binary ops."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import TILE
from ...planning.layout import ROW_MAJOR, TILE_LAYOUT, TensorLayout
from ...planning.layout import MemSpec
from ...planning.rules import _RESHAPE, CallArgs, OutputQuery, Rule, Violation, _v, reads
from ...planning.sharding import _rows_c
from .sharding import binary_output_source, is_native_binary_sharding

_BNG = "ttnn/cpp/ttnn/operations/eltwise/binary_ng/device/binary_ng_device_operation.cpp"
_BNG_U = "ttnn/cpp/ttnn/operations/eltwise/binary_ng/device/binary_ng_utils.cpp"
# the binary family (__init__.py), and maximum: binary_ng too (the exact float32 max pool's
# fold, ops/pool/rules.py LOWERED)
_BIN_OPS = "add|multiply|subtract|maximum"

RULE_LIST = (
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
    Rule("binary.reshape_broadcast", _BIN_OPS,
         "a per-image operand [N,1,1,C] against [N,H,W,C] with N > 1 needs both as 4-D tensors "
         "([N,1,H*W,C] and [N,1,1,C]): the flat [1,1,N*H*W,C] convention does not broadcast per "
         "image. ttnn.reshape of a TILE tensor whose tile padding changes copies the data and does "
         "not take sharded tensors, so both operands are interleaved when N > 1",
         f"{_RESHAPE}: reshape (reshape_tiled / PerformView only when the padded shape is "
         f"unchanged); {_BNG}: validate_on_program_cache_hit (broadcast per dimension)"),
)


@dataclass(frozen=True)
class BinaryArgs(CallArgs):
    """What the binary rules read of an add / multiply / subtract call."""
    broadcast: str | None = None           # "per_image": the layer reshapes both to 4-D first
    inplace: bool = False                  # output_tensor is an operand (ttnn.add_)
    swap_operands: bool = False            # ... the second input
    memory_config: MemSpec | None = None


@reads(BinaryArgs)
def _c_binary(inputs, args: BinaryArgs, output, shapes):
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
    if args.broadcast == "per_image":
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
    if args.inplace:
        vs += _c_binary_inplace(inputs, args, output, shapes)
    return vs


def _c_binary_inplace(inputs, args: BinaryArgs, output, shapes):
    """``inplace``: the output is written into operand a (``swap_operands``: the second
    input is a). The preallocated tensor's spec is the output spec."""
    ia = 1 if args.swap_operands and len(inputs) > 1 else 0
    a, sa = inputs[ia], shapes[ia] if ia < len(shapes) else None
    sb = shapes[1 - ia] if len(shapes) > 1 else None
    vs = []
    out_shape = tuple(args.out_shape) if args.out_shape is not None else (
        tuple(max(x, y) for x, y in zip(sa, sb)) if sa is not None and sb is not None else None)
    if sa is not None and out_shape is not None and tuple(sa) != out_shape:
        vs.append(_v("binary.output_tensor", f"output_tensor a has shape {tuple(sa)}, the "
                     f"broadcast output is {out_shape}"))
    if args.dtype is not None and args.dtype != a.dtype:
        vs.append(_v("binary.output_tensor", f"dtype {args.dtype} but output_tensor a is "
                     f"{a.dtype}"))
    mc = args.memory_config or output
    if mc is not None and mc != a.memory:
        vs.append(_v("binary.output_tensor", f"memory_config {mc.short()} but output_tensor a is "
                     f"{a.memory.short()}"))
    return vs


def advise(op, inputs, attrs, output, shapes) -> list[Violation]:
    """binary_ng's ``perf`` rule (``rules.advise``): two sharded operands off its native path."""
    vs = []
    if len(inputs) == 2 and all(t is not None for t in inputs):
        a, b = inputs
        out = output or a.memory
        if (a.memory.sharded or b.memory.sharded) and not is_native_binary_sharding(
                a, b, out, shapes[0], shapes[1]):
            vs.append(_v("binary.native_sharding",
                         f"{op}: a {a.memory.short()} / b {b.memory.short()} / out {out.short()} "
                         "is not binary_ng's native L1 sharding: operands read through "
                         "TensorAccessor"))
    return vs


def _out_binary(q: OutputQuery) -> TensorLayout:
    """binary_ng (and batch_norm, run as multiply + add): ``requested`` or the memory config of
    the operand ``binary_output_source`` picks, refitted to the output shape."""
    a = q.x
    b = q.inputs[1] if len(q.inputs) > 1 else None
    # a ROW_MAJOR operand with a TILE one gives TILE, whichever is a (0.81.1 mock device: add of
    # row-major DRAM and tile L1 interleaved [1, 1, 4096, 128], both orders; smp FPN's merge)
    layout = TILE_LAYOUT if b is not None and TILE_LAYOUT in (a.layout, b.layout) else a.layout
    if q.requested is not None:
        return TensorLayout(q.requested, layout, q.dtype)
    src = binary_output_source(a, b)
    # an operand of the output's own shape lends its memory config unchanged, uneven shards
    # included (seen on the mock p150: two block shards of 512 rows on 9 core rows, 4,224 rows
    # in all, give a 512-row output, not the 480 a refit computes); another shape is refitted
    i = 1 if src is b and src is not a else 0
    same = q.out_rc is not None and i < len(q.shapes) and q.shapes[i] is not None and \
        _rows_c(tuple(q.shapes[i])) == q.out_rc
    return TensorLayout(src.memory if same else q.fit(src.memory, layout), layout, q.dtype)
