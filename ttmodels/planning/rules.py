"""TTNN 0.81's per-op layout rules: the op-agnostic core. Each op's rules (``Rule`` entries citing
the tt-metal sources), its check and its output layout live in ``ops/<op>/rules.py`` and are
named by its registry entry (``OpDef.rules`` / ``OpDef.output``, real functions); its layout math
in ``ops/<op>/sharding.py``; the shared layout math in ``sharding.py`` (re-exported here). This
module holds ``Rule`` / ``Violation``, the rules of any tensor and of the adapters, the tensor
checks, and ``check`` / ``advise`` / ``output_layout`` / ``raise_if_violations``, which dispatch
through the registry. ``RULES`` is the whole table (every op's, collected on first use).

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

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..errors import LayoutError
from ..formats import BLOCK_FLOAT_DTYPES
from ..language.graph import TILE, round_up
from .layout import (HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                     TensorLayout)
from .sharding import (ParallelConfig, Shape4, _rows_c, block_shard_shape,  # noqa: F401
                       closest_divisor_with_padding, core_count, cores_to_grid,
                       height_shard_shape, reshape_memspec, sharded_memspec, split_work_to_cores,
                       tensor_bytes, tile_aligned_shard, width_shard_shape)


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


@dataclass(frozen=True)
class CallArgs:
    """What a rule reads of one call's arguments, typed: a check, advice or output function in
    an op's ``rules.py`` declares the subclass it reads with ``@reads(...)`` and reads fields,
    with the defaults in one place. The sim's ops and the ops' plans build the op's class
    themselves (a misspelt argument is a TypeError there); the planner, ``plan_checks`` and the
    oracle pass a plan config's keywords (``as_attrs()``, fields no rule reads among them), and
    so may any caller: ``args_for`` builds the function's class from a mapping at the boundary
    (a key the class does not declare is one that function does not read, an absent one is the
    class default, a present one, None included, is taken as given)."""
    dtype: str | None = None          # the output dtype asked for
    layout: str | None = None         # an adapter's target layout
    out_shape: tuple[int, int, int, int] | None = None    # the output's flat shape, when given

    @classmethod
    def of(cls, attrs: Mapping[str, Any] | "CallArgs") -> "CallArgs":
        if type(attrs) is cls:
            return attrs
        if isinstance(attrs, CallArgs):         # another book's (conv_transpose2d -> conv2d)
            attrs = {k: getattr(attrs, k) for k in attrs.__dataclass_fields__}
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in attrs.items() if k in names})


def reads(cls: type[CallArgs]):
    """Mark a rules function as reading ``cls`` (its ``attrs`` / ``q.attrs``)."""
    def mark(fn):
        fn.reads = cls
        return fn
    return mark


def args_for(fn, attrs):
    """``attrs`` as the typed arguments ``fn`` reads (``@reads``); the mapping as it is for a
    function that declares none."""
    cls = getattr(fn, "reads", None)
    return cls.of(attrs) if cls is not None else attrs


# tt-metal sources cited by the rules here, or by more than one op's rules
_CONV = "ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp"
_POOL = "ttnn/cpp/ttnn/operations/pool/generic/device/pool_op.cpp"
_I2S = ("ttnn/cpp/ttnn/operations/data_movement/sharded/interleaved_to_sharded/device/"
        "interleaved_to_sharded_device_operation.cpp")
_S2I = ("ttnn/cpp/ttnn/operations/data_movement/sharded/sharded_to_interleaved/device/"
        "sharded_to_interleaved_device_operation.cpp")
_RESHARD = "ttnn/cpp/ttnn/operations/data_movement/sharded/reshard/device/reshard_device_operation.cpp"
_TC = "ttnn/cpp/ttnn/operations/copy/typecast/device/typecast_device_op.cpp"
_TENSOR = "ttnn/api/ttnn/tensor/tensor_spec.cpp"
_TENSOR_CPP = "ttnn/cpp/ttnn/tensor/tensor.cpp"
_RESHAPE = "ttnn/cpp/ttnn/operations/data_movement/reshape_view/reshape.cpp"

#: the rules of any tensor (every op checks its operands against them: ``tensor_checks``)
TENSOR_RULES = (
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
)

#: the adapters' rules (the planner's moves between layouts; not graph ops)
ADAPTER_RULES = (
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
)

# ttnn ops a graph op may be lowered to (upsample with align_corners=True -> grid_sample, a
# float32 max pool's fold -> maximum); their
# rules live in that op's rules module (``LOWERED``)
LOWERED_OPS = ("grid_sample", "maximum")
ADAPTER_OPS = ("to_memory_config", "sharded_to_interleaved", "interleaved_to_sharded", "reshard",
               "to_layout", "typecast")


def _rule_modules() -> list:
    """The rules modules of the registered ops, in registry order: the modules of each entry's
    ``rules`` and ``output`` functions."""
    import sys
    from ..ops.base import REGISTRY
    mods: dict = {}
    for d in REGISTRY.values():
        for fn in (d.rules, d.output):
            mods.setdefault(fn.__module__, sys.modules[fn.__module__])
    return list(mods.values())


_TABLE: dict[str, Rule] = {}


def rules_table() -> dict[str, Rule]:
    """Every rule by id: any tensor's, each op's (its rules module's ``RULE_LIST``), the
    adapters'. (``RULES`` is this table.)"""
    if not _TABLE:
        table = list(TENSOR_RULES)
        for mod in _rule_modules():
            table += getattr(mod, "RULE_LIST", ())
        table += ADAPTER_RULES
        _TABLE.update((r.id, r) for r in table)
    return _TABLE


_LOWERED: dict = {}


def _lowered() -> dict:
    """ttnn op -> (check, output layout) of the ops graph ops are lowered to (each rules
    module's ``LOWERED``)."""
    if not _LOWERED:
        for mod in _rule_modules():
            _LOWERED.update(getattr(mod, "LOWERED", {}))
    return _LOWERED


# ============================================================================================
# check / output_layout
# ============================================================================================

def _v(rule: str, msg: str) -> Violation:
    return Violation(rule, msg)


def tensor_checks(t: TensorLayout, shape: Shape4 | None, what: str = "tensor") -> list[Violation]:
    """The TensorSpec checks of one tensor (see ``_tensor_checks``)."""
    return _tensor_checks(t, shape, what)


def _tensor_checks(t: TensorLayout, shape: Shape4 | None, what: str, *,
                   l1_shards: bool = True) -> list[Violation]:
    """tt-metal's TensorSpec validation (tensor_spec.cpp validate_shard_spec_with_tensor_shape,
    tensor_layout.cpp): shard shapes against the *physical* shape, which for a TILE tensor is
    [round_up(rows, 32), round_up(C, 32)] and for a row-major one [rows, C] (or a pool2d
    output's padded C, see pool_output_padded_shape: round_up(C, 16), or whole tiles)."""
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
            # row-major: a pool2d output's channels are padded (ops/pool/sharding.py)
            from ..ops.pool.sharding import row_major_shard_width
            widths = (round_up(c, TILE),) if tiled else (c, round_up(c, TILE // 2),
                                                        row_major_shard_width(c, 1))
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


_L1_SHARD_OPS = tuple(TENSOR_RULES[-1].op.split("|"))      # tensor.shard_l1


def check(op: str, inputs: list[TensorLayout | None], attrs: dict, output: MemSpec | None = None,
          *, shapes: list[Shape4] | None = None) -> list[Violation]:
    """Every ``error`` rule ``op`` breaks with these operand layouts. Empty list = the card runs it.

    ``attrs``: the call's arguments, as the op's ``CallArgs`` subclass or a mapping of them
    (each rules function's ``@reads`` class names what it reads: ``ConvArgs``, ``PoolArgs``,
    ...; an adapter's are ``dtype`` and ``layout``, its target memory config is ``output``)."""
    shapes = list(shapes) if shapes is not None else [None] * len(inputs)
    shapes += [None] * (len(inputs) - len(shapes))
    vs: list[Violation] = []
    l1_shards = op in _L1_SHARD_OPS
    for i, (t, s) in enumerate(zip(inputs, shapes)):
        if t is not None:
            vs += _tensor_checks(t, s, f"{op} input {i}", l1_shards=l1_shards)
    if output is not None and op in ADAPTER_OPS and inputs and inputs[0] is not None:
        # the adapter's result is a tensor too: its shard spec must tile its physical shape
        base = CallArgs.of(attrs)
        out_t = TensorLayout(output, base.layout or inputs[0].layout,
                             base.dtype or inputs[0].dtype)
        vs += _tensor_checks(out_t, shapes[0], f"{op} output", l1_shards=False)
    elif output is not None and output.sharded and output.buffer != "l1":
        vs.append(_v("tensor.shard_l1", f"{op} output is {output.memory_layout} in {output.buffer}"))
    fn = check_function(op)
    if fn is None:
        raise ValueError(f"rules.check: unknown op {op!r}")
    vs += fn(inputs, args_for(fn, attrs), output, shapes)
    return vs


def advise(op: str, inputs: list[TensorLayout | None], attrs: dict, output: MemSpec | None = None,
           *, shapes: list[Shape4] | None = None) -> list[Violation]:
    """``perf`` rules: accepted by the card, but on a slower path. Never raised by the sim. An
    op's own are its rules module's ``advise`` (binary_ng's native sharding, conv2d's)."""
    shapes = list(shapes) if shapes is not None else [None] * len(inputs)
    shapes += [None] * (len(inputs) - len(shapes))
    fn = advise_function(op)
    return fn(op, inputs, args_for(fn, attrs), output, shapes) if fn is not None else []


def advise_function(op: str):
    """The ``advise`` of spec op ``op``'s rules module (None when it has none)."""
    import sys
    from ..ops.base import REGISTRY
    d = REGISTRY.get(op)
    return getattr(sys.modules[d.rules.__module__], "advise", None) if d is not None else None


def _c_i2s(inputs, attrs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and x.memory.sharded:
        vs.append(_v("i2s.input", f"interleaved_to_sharded input is already {x.memory.memory_layout}"))
    if output is None or not output.sharded:
        vs.append(_v("i2s.input", "interleaved_to_sharded needs a sharded output memory config"))
    return vs


@reads(CallArgs)
def _c_s2i(inputs, args: CallArgs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and not x.memory.sharded and args.dtype not in (None, x.dtype):
        vs.append(_v("s2i.input", "sharded_to_interleaved of an interleaved tensor copies it: "
                     f"output_dtype is ignored, it stays {x.dtype}"))
    if output is not None and output.sharded:
        vs.append(_v("s2i.input", "sharded_to_interleaved output must be interleaved"))
    return vs


@reads(CallArgs)
def _c_reshard(inputs, args: CallArgs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and not x.memory.sharded:
        vs.append(_v("reshard.input", "reshard input is interleaved"))
    if output is None or not output.sharded:
        vs.append(_v("reshard.input", "reshard output must be sharded"))
    if args.dtype and x is not None and args.dtype != x.dtype:
        vs.append(_v("reshard.input", "reshard cannot change dtype"))
    return vs


@reads(CallArgs)
def _c_to_layout(inputs, args: CallArgs, output, shapes):
    x = inputs[0]
    tgt = args.layout if args.layout is not None else TILE_LAYOUT
    dt = args.dtype or (x.dtype if x is not None else None)
    if tgt == ROW_MAJOR and dt in BLOCK_FLOAT_DTYPES:
        return [_v("to_layout.dtype", f"to_layout ROW_MAJOR with dtype {dt}")]
    return []


@reads(CallArgs)
def _c_typecast(inputs, args: CallArgs, output, shapes):
    vs = []
    x = inputs[0]
    if x is not None and output is not None and output.memory_layout != x.memory.memory_layout:
        vs.append(_v("typecast.layout",
                     f"typecast {x.memory.memory_layout} -> {output.memory_layout}"))
    if x is not None and args.dtype in BLOCK_FLOAT_DTYPES and x.layout != TILE_LAYOUT:
        vs.append(_v("typecast.layout", f"typecast to {args.dtype} of a {x.layout} tensor"))
    return vs


@reads(CallArgs)
def _c_tmc(inputs, args: CallArgs, output, shapes):
    x = inputs[0]
    if x is not None and args.dtype and args.dtype != x.dtype:
        if x.layout != TILE_LAYOUT:
            return [_v("to_memory_config.any", "to_memory_config dtype change needs TILE layout")]
        if output is not None and output == x.memory:
            return [_v("to_memory_config.any", "to_memory_config to the same memory config "
                       f"returns the tensor as it is: the dtype stays {x.dtype}")]
    return []


# The checks of the adapters (a spec op's check is named by its registry entry,
# ``ttmodels/ops/<op>/rules.py``: ``OpDef.rules``; a lowered op's by that module's ``LOWERED``).
_CHECKS = {
    "interleaved_to_sharded": _c_i2s, "sharded_to_interleaved": _c_s2i, "reshard": _c_reshard,
    "to_layout": _c_to_layout, "typecast": _c_typecast, "to_memory_config": _c_tmc,
}


def check_function(op: str):
    """The rules check of ttnn op / spec op ``op`` (None when there is none)."""
    from ..ops.base import REGISTRY
    if op in _CHECKS:
        return _CHECKS[op]
    if op in REGISTRY:
        return REGISTRY[op].rules
    return _lowered().get(op, (None, None))[0]


def _out_shape(op: str, out_shape, shapes: list[Shape4 | None]) -> tuple[int, int] | None:
    """Output [rows, C] when attrs carry it (``out_shape``: flat 4-tuple) or it follows from the
    inputs (the op's entry says how: ``OpDef.output_shape``; adapters keep their input's)."""
    from ..ops.base import REGISTRY
    if out_shape is not None:
        return _rows_c(tuple(out_shape))
    if shapes and shapes[0] is not None:
        d = REGISTRY.get(op)
        rule = d.output_shape if d is not None else ("same" if op in ADAPTER_OPS else None)
        if rule == "broadcast" and len(shapes) > 1 and shapes[1] is not None:
            return _rows_c(tuple(max(a, b) for a, b in zip(shapes[0], shapes[1])))
        if rule == "concat":
            s = [x for x in shapes if x is not None]
            return (s[0][0] * s[0][1] * s[0][2], sum(x[3] for x in s))
        if rule == "same":
            return _rows_c(shapes[0])
    return None


@dataclass(frozen=True)
class OutputQuery:
    """One ``output_layout`` question: op, operand layouts and flat shapes, attrs, the requested
    memory config, and what every op's answer starts from."""
    op: str
    inputs: list
    attrs: Any                      # the output function's book's ARGS (CallArgs), else a mapping
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

    conv2d: sharded like its input if that is sharded, else by ``shard_layout`` (ttnn's
    ``determine_parallel_config``), in L1, ``output_layout`` (TILE) and ``dtype``.
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
    args = args_for(fn, attrs)
    base = args if isinstance(args, CallArgs) else CallArgs.of(attrs)   # what the core reads
    return fn(OutputQuery(op, inputs, args, requested, shapes, x, dtype_in,
                          _out_shape(op, base.out_shape, shapes), base.dtype or dtype_in))


def _out_same_memory(q: OutputQuery) -> TensorLayout:
    """Unary eltwise ops and slice: the input's memory config as it is (unary
    compute_output_specs), its layout and dtype. pad.cpp pad_impl too: memory_config.value_or(
    input's), shard spec *not* refitted to the padded rows (only width padding of a
    height-sharded input gets a recomputed config); a sharded pad that adds rows must be given a
    memory_config that covers them."""
    x = q.x
    return TensorLayout(q.requested if q.requested is not None else x.memory, x.layout, q.dtype_in)


@reads(CallArgs)
def _out_adapter(q: OutputQuery) -> TensorLayout:
    x = q.x
    mem = q.requested if q.requested is not None else x.memory
    if q.op == "sharded_to_interleaved" and q.requested is None:
        mem = MemSpec(INTERLEAVED, "l1")
    return TensorLayout(mem, q.attrs.layout or x.layout, q.dtype)


# What the adapters produce (a spec op's entry names its output function, ``OpDef.output``; a
# lowered op's is in that op's rules module, ``LOWERED``).
_OUTPUTS = {op: _out_adapter for op in ADAPTER_OPS}


def output_function(op: str):
    from ..ops.base import REGISTRY
    if op in _OUTPUTS:
        return _OUTPUTS[op]
    if op in REGISTRY:
        return REGISTRY[op].output
    return _lowered().get(op, (None, None))[1]


def raise_if_violations(violations: Iterable[Violation], layer: str) -> None:
    """Raise LayoutError naming ``layer`` and the first violated rule (all messages included)."""
    vs = list(violations)
    if not vs:
        return
    table = rules_table()
    msg = "; ".join(f"{v.message} ({table[v.rule].source})" if v.rule in table else v.message
                    for v in vs)
    raise LayoutError(msg, layer=layer, rule=vs[0].rule)


def __getattr__(name: str):
    """The names that need the registry, computed on first use: ``RULES`` (the whole table),
    ``GRAPH_OPS`` (every spec op), ``BINARY`` / ``UNARY`` (the families)."""
    if name == "RULES":
        return rules_table()
    if name in ("GRAPH_OPS", "BINARY", "UNARY"):
        from ..ops.base import REGISTRY
        if name == "GRAPH_OPS":
            return tuple(REGISTRY)
        return tuple(op for op, d in REGISTRY.items() if d.family == name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
