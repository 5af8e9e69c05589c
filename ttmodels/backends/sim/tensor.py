"""SimTensor and the tensor-level API (from_torch, to_torch, to_device, layouts, memory moves).

A SimTensor holds float32 values already rounded to its declared dtype (``formats.quantize`` in
the tensor's own [.., rows, cols] layout, the way ttnn's host tile conversion sees it), its
logical shape, layout, dtype, memory config and whether it lives on a (simulated) device.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import math

import torch

from ... import formats

from ...planning import rules
from ...arch import DEFAULT_GRID
from ...errors import Error, LayoutError
from ...planning.layout import TTNN_MEMORY_LAYOUTS, MemSpec, TensorLayout
from . import types as T
from .device import SimDevice

TILE = 32

_DTYPE_NAMES = {T.DataType.BFLOAT16: "bfloat16", T.DataType.BFLOAT8_B: "bfloat8_b",
                T.DataType.BFLOAT4_B: "bfloat4_b", T.DataType.FLOAT32: "float32"}
_INT_DTYPES = {T.DataType.UINT32: torch.int64, T.DataType.INT32: torch.int32,
               T.DataType.UINT16: torch.int32, T.DataType.UINT8: torch.int32}
_MEM_NAMES = {getattr(T.TensorMemoryLayout, enum): name    # layout.py holds the one map
              for name, enum in TTNN_MEMORY_LAYOUTS.items()}
_MEM_KINDS = {v: k for k, v in _MEM_NAMES.items()}
_BUF_NAMES = {T.BufferType.DRAM: "dram", T.BufferType.L1: "l1", T.BufferType.L1_SMALL: "l1"}

# Ints that name interned values in memo keys (layouts, memory specs); never reused.
_TOKENS = itertools.count()

_layer: contextvars.ContextVar[str | None] = contextvars.ContextVar("sim_layer", default=None)


@contextlib.contextmanager
def layer_scope(name: str):
    """Name the layer that LayoutErrors raised by sim ops inside this block are attributed to."""
    tok = _layer.set(name)
    try:
        yield
    finally:
        _layer.reset(tok)


def current_layer(op: str) -> str:
    return _layer.get() or f"ttnn.{op}"


def dtype_name(dtype: T.DataType) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        return dtype.name.lower()


def quantize(data: torch.Tensor, dtype: T.DataType) -> torch.Tensor:
    """``data`` rounded to ``dtype`` as ttnn stores it (float32 result; ints stay integer)."""
    if dtype in _INT_DTYPES:
        return data.round().to(_INT_DTYPES[dtype]) if data.is_floating_point() else data.to(_INT_DTYPES[dtype])
    if dtype == T.DataType.FLOAT32:
        return data if data.dtype == torch.float32 else data.float()
    if dtype == T.DataType.BFLOAT16:
        return data.to(torch.bfloat16).float()
    return formats.quantize(data, _DTYPE_NAMES[dtype])


def quantize_(data: torch.Tensor, dtype: T.DataType) -> torch.Tensor:
    """``quantize`` for a fresh float32 result the caller owns: rounds it in place when it can
    (bfloat16: same values, NaN bits included, as ``data.to(torch.bfloat16).float()``, without
    allocating a second float32 tensor); otherwise returns ``quantize(data, dtype)``."""
    if data.dtype == torch.float32 and data.is_contiguous():
        if dtype == T.DataType.BFLOAT16:
            return data.copy_(data.to(torch.bfloat16))
        if dtype == T.DataType.FLOAT32:
            return data
        if dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B):
            return formats.quantize_owned_(data, _DTYPE_NAMES[dtype])
    return quantize(data, dtype)


def padded_shape_of(shape: tuple[int, ...], layout: T.Layout) -> tuple[int, ...]:
    if layout != T.Layout.TILE:
        return tuple(shape)
    if len(shape) == 0:
        return (TILE, TILE)
    if len(shape) == 1:
        return (TILE, -(-shape[0] // TILE) * TILE)
    return tuple(shape[:-2]) + tuple(-(-d // TILE) * TILE for d in shape[-2:])


def _violation(rule: str, msg: str, op: str):
    return LayoutError(msg, layer=current_layer(op), rule=rule)


# ---------------------------------------------------------------------------------------------
# MemoryConfig <-> MemSpec (the planner's vocabulary)
# ---------------------------------------------------------------------------------------------

def memspec(mc: T.MemoryConfig) -> MemSpec:
    """``mc`` in the planner's vocabulary; remembered on ``mc`` (a layer passes the same config
    object on every call), recomputed if one of its fields was reassigned."""
    return _memspec_entry(mc)[1]


def memspec_token(mc: T.MemoryConfig) -> int:
    """An int naming ``memspec(mc)``'s value for memo keys (cheaper to hash than a MemSpec);
    never reused, so a config whose fields change gets a new one."""
    return _memspec_entry(mc)[2]


def _memspec_entry(mc: T.MemoryConfig) -> tuple:
    key = (mc.memory_layout, mc.buffer_type, id(mc.shard_spec))
    hit = getattr(mc, "_memspec", None)
    if hit is not None and hit[0] == key:
        return hit
    hit = mc._memspec = (key, _memspec(mc), next(_TOKENS))
    return hit


def _memspec(mc: T.MemoryConfig) -> MemSpec:
    kind = _MEM_NAMES[mc.memory_layout]
    buf = _BUF_NAMES[mc.buffer_type]
    ss = mc.shard_spec
    if ss is None:
        return MemSpec(kind, buf)
    bb = ss.grid.bounding_box()
    return MemSpec(kind, buf, (bb.end.x + 1, bb.end.y + 1), ss.num_cores(), tuple(ss.shape),
                   "row_major" if ss.orientation == T.ShardOrientation.ROW_MAJOR else "col_major")


# MemoryConfig per MemSpec for op outputs (``memory_config_for``): a plan produces the same few
# specs on every run, and a shared config object keeps its memspec (and the consumers' memo keys)
# cached instead of rebuilding grids and shard specs per output.
_MC_FOR: dict[MemSpec, T.MemoryConfig] = {}
_MC_BY_ID: dict[int, tuple] = {}


def memory_config_for(ms: MemSpec) -> T.MemoryConfig:
    """``memory_config_of(ms)``, one object per spec (remade if someone changed its fields)."""
    # By identity first: ops hand over the memoized output layouts' MemSpec objects, the same
    # object every run (the entry holds it, so its id is not reused while the entry lives).
    hit = _MC_BY_ID.get(id(ms))
    if hit is not None and hit[0] is ms and memspec(hit[1]) is hit[2]:
        return hit[1]
    mc = _MC_FOR.get(ms)
    if mc is None or memspec(mc) != ms:
        mc = memory_config_of(ms)
        if len(_MC_FOR) >= _MEMO_MAX:
            _MC_FOR.clear()
        _MC_FOR[ms] = mc
    if len(_MC_BY_ID) >= _MEMO_MAX:
        _MC_BY_ID.clear()
    _MC_BY_ID[id(ms)] = (ms, mc, memspec(mc))
    return mc


def memory_config_of(ms: MemSpec) -> T.MemoryConfig:
    kind = _MEM_KINDS[ms.memory_layout]
    buf = T.BufferType.L1 if ms.buffer == "l1" else T.BufferType.DRAM
    if not ms.sharded:
        return T.MemoryConfig(kind, buf)
    gx, gy = ms.grid
    n = ms.num_cores or gx * gy
    if n == gx * gy:
        crs = T.CoreRangeSet([T.CoreRange(T.CoreCoord(0, 0), T.CoreCoord(gx - 1, gy - 1))])
    else:
        crs = T.num_cores_to_corerangeset(n, T.CoreCoord(gx, gy), True)
    orient = T.ShardOrientation.ROW_MAJOR if ms.orientation == "row_major" else T.ShardOrientation.COL_MAJOR
    return T.MemoryConfig(kind, buf, T.ShardSpec(crs, list(ms.shard_shape), orient))


# ---------------------------------------------------------------------------------------------
# SimTensor
# ---------------------------------------------------------------------------------------------

class SimTensor:
    """A ttnn.Tensor stand-in. ``_data`` holds the logical values (float32, already quantized)."""

    __slots__ = ("_store", "_lazy", "_shape", "_padded", "dtype", "layout", "_memory_config",
                 "_device", "_allocated", "_prep", "_cache", "_shared", "_lay", "_f4", "__weakref__")

    def __init__(self, data: torch.Tensor, dtype: T.DataType, layout: T.Layout,
                 memory_config: T.MemoryConfig | None = None, device: SimDevice | None = None,
                 shape: tuple[int, ...] | None = None, padded_shape: tuple[int, ...] | None = None):
        self._store = data
        # A prepared weight keeps only its compute form (``_cache``): its stored matrix is
        # rebuilt from that on demand (``_lazy()``), so the sim holds one copy of each weight.
        self._lazy = None
        self._shape = T.Shape(shape if shape is not None else data.shape)
        # An op's own padded (physical) shape when it is not the layout's default, e.g. pool2d's
        # row-major output whose channels are padded to 16 (pool_op.cpp compute_output_specs).
        # Only the storage is padded: ``_data`` keeps the logical values.
        self._padded = tuple(int(v) for v in padded_shape) if padded_shape is not None else None
        self.dtype = dtype
        self.layout = layout
        self._memory_config = memory_config or T.DRAM_MEMORY_CONFIG
        self._device = device
        self._allocated = True
        self._prep = None        # metadata of a prepared conv weight / bias (see ops.py)
        self._cache = None       # per-tensor cache of derived forms (prepared weights)
        # ``_data`` may be storage another SimTensor also holds although on a card the two are
        # separate buffers (the sim shares unchanged values instead of copying them): an op that
        # writes in place (output_tensor=) copies it first (``_own``).
        self._shared = False
        self._lay = None         # (memspec, layout, dtype, TensorLayout, token), see _layout
        self._f4 = None          # _flat4(), computed once: the shape never changes

    # --- ttnn.Tensor API -----------------------------------------------------------------
    @property
    def shape(self) -> T.Shape:
        return self._shape

    @property
    def padded_shape(self) -> T.Shape:
        if self._padded is not None:
            return T.Shape(self._padded)
        return T.Shape(padded_shape_of(tuple(self._shape), self.layout))

    def memory_config(self) -> T.MemoryConfig:
        return self._memory_config

    def is_sharded(self) -> bool:
        return self._device is not None and self._memory_config.is_sharded()

    def device(self):
        return self._device

    def storage_type(self) -> T.StorageType:
        return T.StorageType.DEVICE if self._device is not None else T.StorageType.HOST

    def get_dtype(self) -> T.DataType:
        return self.dtype

    def get_layout(self) -> T.Layout:
        return self.layout

    def is_allocated(self) -> bool:
        return self._allocated

    def deallocate(self, force: bool = True) -> None:
        deallocate(self, force)

    def logical_volume(self) -> int:
        return math.prod(self._shape)

    def volume(self) -> int:
        return math.prod(self.padded_shape)

    def cpu(self, blocking: bool = True) -> "SimTensor":
        return from_device(self)

    def to_torch(self) -> torch.Tensor:
        return to_torch(self)

    def __repr__(self):
        where = "device" if self._device is not None else "host"
        return (f"SimTensor(shape={list(self._shape)}, dtype={self.dtype.name}, layout={self.layout.name}, "
                f"{where}, {memspec(self._memory_config).short() if self._device else ''})")

    # --- sim internals --------------------------------------------------------------------
    @property
    def _data(self):
        d = self._store
        if d is None and self._lazy is not None:
            return self._lazy()
        return d

    @_data.setter
    def _data(self, value) -> None:
        self._store = value
        if value is None:
            self._lazy = None

    def _twin(self, mc: T.MemoryConfig, device) -> "SimTensor":
        """The same values (same storage, or the same lazily rebuilt matrix) in ``mc`` on
        ``device``: what to_device / from_device return."""
        out = _alias(self, SimTensor(self._store, self.dtype, self.layout, mc, device,
                                     tuple(self._shape), self._padded))
        out._lazy, out._prep, out._cache = self._lazy, self._prep, self._cache
        return out

    def _live(self, op: str) -> "SimTensor":
        if not self._allocated:
            raise Error(f"{current_layer(op)}: tensor {list(self._shape)} was deallocated")
        return self

    def _own(self) -> None:
        """Make ``_data`` storage this tensor alone holds before writing into it."""
        if self._shared:
            self._data = self._data.clone()
            self._shared = False

    def _layout_entry(self) -> tuple:
        ms = memspec(self._memory_config)
        hit = self._lay
        if hit is None or hit[0] is not ms or hit[1] is not self.layout or hit[2] is not self.dtype:
            hit = self._lay = (ms, self.layout, self.dtype) + _interned_layout(ms, self.layout, self.dtype)
        return hit

    def _layout(self) -> TensorLayout:
        return self._layout_entry()[3]

    def _layout_token(self) -> int:
        """An int naming ``_layout()``'s value (``_interned_layout``): cheap to hash in memo keys."""
        return self._layout_entry()[4]

    def _flat4(self) -> tuple[int, int, int, int]:
        f = self._f4
        if f is None:
            s = tuple(int(v) for v in self._shape)
            if len(s) < 4:
                f = (1,) * (4 - len(s)) + s
            elif len(s) > 4:
                f = (math.prod(s[:-3]),) + s[-3:]
            else:
                f = s
            self._f4 = f
        return f


_LAYOUTS: dict = {}


def tensor_layout(ms: MemSpec, layout: T.Layout, dtype: T.DataType) -> TensorLayout:
    """The planner-vocabulary layout of a tensor (one object per combination)."""
    return _interned_layout(ms, layout, dtype)[0]


def _interned_layout(ms: MemSpec, layout: T.Layout, dtype: T.DataType) -> tuple[TensorLayout, int]:
    """(layout, token): one object per combination, and an int that names it in memo keys (a
    memo key hashes ints faster than nested dataclasses). Tokens are never reused, so clearing
    the table only costs memo misses, never a wrong hit."""
    key = (ms, layout, dtype)
    hit = _LAYOUTS.get(key)
    if hit is None:
        if len(_LAYOUTS) >= _MEMO_MAX:
            _LAYOUTS.clear()
        hit = _LAYOUTS[key] = (TensorLayout(ms, "tile" if layout == T.Layout.TILE else "row_major",
                                            dtype_name(dtype)), next(_TOKENS))
    return hit


def _on_device(t, op: str, what: str = "input") -> SimTensor:
    if not isinstance(t, SimTensor):
        raise Error(f"{current_layer(op)}: {what} must be a ttnn tensor, got {type(t).__name__}")
    t._live(op)
    if t._device is None:
        raise _violation("tensor.on_device", f"{op} {what} {list(t.shape)} is on host; move it with to_device", op)
    return t


# Memory configs already validated, per (shape, layout, dtype, memory, grid, padded shape): the
# checks are pure functions of these, and a plan repeats the same few on every run.
_VALID: set = set()


def validate_memory(shape, layout: T.Layout, dtype: T.DataType, mc: T.MemoryConfig, op: str,
                    device: SimDevice | None = None, padded_shape=None) -> None:
    """Tensor-level facts a card enforces when a tensor is given a memory config; the shards
    tile the physical shape (``padded_shape`` when the op pads beyond the layout's default)."""
    if not mc.is_sharded() and not (dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B)
                                    and layout != T.Layout.TILE):
        return
    grid = device.compute_with_storage_grid_size() if device is not None else None
    key = (tuple(shape), layout, dtype, memspec_token(mc), (grid.x, grid.y) if grid is not None else None,
           tuple(padded_shape) if padded_shape is not None else None)
    if key in _VALID:
        return
    _validate_memory(shape, layout, dtype, mc, op, device, padded_shape)
    if len(_VALID) >= _MEMO_MAX:
        _VALID.clear()
    _VALID.add(key)


def _validate_memory(shape, layout: T.Layout, dtype: T.DataType, mc: T.MemoryConfig, op: str,
                     device: SimDevice | None = None, padded_shape=None) -> None:
    if dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B) and layout != T.Layout.TILE:
        raise _violation("tensor.bfp_tile", f"{dtype_name(dtype)} needs TILE layout, got {layout.name}", op)
    if not mc.is_sharded():
        return
    if mc.shard_spec is None:
        raise _violation("tensor.shard_spec", f"{mc.memory_layout.name} memory config without a shard spec", op)
    if mc.buffer_type not in (T.BufferType.L1, T.BufferType.L1_SMALL):
        raise _violation("tensor.shard_l1", f"{mc.memory_layout.name} tensor in {mc.buffer_type.name}", op)
    ss = mc.shard_spec
    grid = device.compute_with_storage_grid_size() if device is not None else T.CoreCoord(*DEFAULT_GRID)
    bb = ss.grid.bounding_box()
    if bb.end.x >= grid.x or bb.end.y >= grid.y:
        raise _violation("tensor.shard_grid", f"shard grid {ss.grid!r} exceeds the {grid.x}x{grid.y} "
                         "worker grid", op)
    sh, sw = ss.shape
    if sh <= 0 or sw <= 0:
        raise _violation("tensor.shard_spec", f"shard shape {ss.shape} must be positive", op)
    if layout == T.Layout.TILE and (sh % TILE or sw % TILE):
        raise _violation("tensor.shard_tile", f"shard shape {ss.shape} of a TILE tensor must be a multiple "
                         "of the 32x32 tile", op)
    padded = tuple(padded_shape) if padded_shape is not None else padded_shape_of(tuple(shape), layout)
    height = math.prod(padded[:-1]) if len(padded) > 1 else 1
    width = padded[-1] if padded else 1
    n = ss.num_cores()
    col = ss.orientation == T.ShardOrientation.COL_MAJOR
    kind = mc.memory_layout
    if kind == T.TensorMemoryLayout.HEIGHT_SHARDED:
        ok = sw == width and -(-height // sh) <= n
    elif kind == T.TensorMemoryLayout.WIDTH_SHARDED:
        ok = sh == height and -(-width // sw) <= n
    else:
        gx, gy = bb.end.x - bb.start.x + 1, bb.end.y - bb.start.y + 1
        rows_cores, cols_cores = (gx, gy) if col else (gy, gx)
        ok = -(-height // sh) <= rows_cores and -(-width // sw) <= cols_cores
    if not ok:
        raise _violation("tensor.shard_spec",
                         f"{kind.name} shard {ss.shape} on {n} cores does not tile a tensor of "
                         f"physical shape [{height}, {width}]", op)


# ---------------------------------------------------------------------------------------------
# host <-> device
# ---------------------------------------------------------------------------------------------

_TORCH_TO_TT = {torch.float32: T.DataType.FLOAT32, torch.bfloat16: T.DataType.BFLOAT16,
                torch.int32: T.DataType.INT32, torch.int64: T.DataType.UINT32,
                torch.float16: T.DataType.BFLOAT16, torch.float64: T.DataType.FLOAT32}


def from_torch(tensor, dtype=None, *, spec=None, tile=None, pad_value=None, layout=None, device=None,
               memory_config=None, mesh_mapper=None, cq_id=None, preserve_nan_values=False,
               col_tilize=False, enable_bfloat_opt=False):
    if tensor is None:
        return None
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"from_torch expects a torch.Tensor, got {type(tensor).__name__}")
    if spec is not None or tile is not None or mesh_mapper is not None or col_tilize:
        raise Error("from_torch: spec, tile, mesh_mapper and col_tilize are not modelled by the sim backend")
    if dtype is None:
        dtype = _TORCH_TO_TT.get(tensor.dtype)
        if dtype is None:
            raise Error(f"from_torch: unsupported torch dtype {tensor.dtype}")
    if layout is None:
        # ttnn tiles block-float tensors on its own (they only exist in TILE layout).
        layout = T.Layout.TILE if dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B) else T.Layout.ROW_MAJOR
    if memory_config is not None and memory_config.is_sharded() and memory_config.shard_spec is None:
        raise _violation("tensor.shard_spec", "from_torch: Shard spec must not be None for sharded tensors",
                         "from_torch")
    src = tensor.detach()
    data = quantize(src if src.dtype == torch.float32 or dtype in _INT_DTYPES else src.float(), dtype)
    if data is src:
        data = src.clone()          # nothing the user gave is aliased (or modified later)
    mc = memory_config or T.DRAM_MEMORY_CONFIG
    validate_memory(tuple(data.shape), layout, dtype, mc if device is not None else T.DRAM_MEMORY_CONFIG,
                    "from_torch", device)
    return SimTensor(data, dtype, layout, mc if device is not None else T.DRAM_MEMORY_CONFIG, device)


def to_torch(tensor, dtype=None, *, torch_rank=None, mesh_composer=None, device=None, cq_id=None):
    t = tensor._live("to_torch")
    data = t._data
    if dtype is not None:
        out = data.to(dtype)
        if out is data:
            out = data.clone()               # never hand out the sim's storage
    elif t.dtype == T.DataType.BFLOAT16:
        out = data.to(torch.bfloat16)        # ttnn hands bfloat16 tensors back as torch.bfloat16
    else:
        out = data.clone()
    if torch_rank is not None:
        while out.dim() > torch_rank and out.shape[0] == 1:
            out = out.squeeze(0)
    return out


def to_device(tensor, device, memory_config=None, *, queue_id=None):
    t = tensor._live("to_device")
    mc = memory_config or T.DRAM_MEMORY_CONFIG
    validate_memory(tuple(t.shape), t.layout, t.dtype, mc, "to_device", device)
    return t._twin(mc, device)


def from_device(tensor, blocking=True, *, queue_id=None):
    t = tensor._live("from_device")
    return t._twin(T.DRAM_MEMORY_CONFIG, None)


def deallocate(tensor, force: bool = True) -> None:
    if isinstance(tensor, SimTensor):
        tensor._allocated = False
        tensor._data = None
        tensor._cache = None


# ---------------------------------------------------------------------------------------------
# layout / dtype / memory moves
# ---------------------------------------------------------------------------------------------

_PLAIN = (str, int, float, bool, type(None))


_PLAIN_TYPES = frozenset(_PLAIN)


def _freeze(v):
    """A hashable stand-in for an attrs value (dicts and lists by content, in their order: each
    op builds its attrs in a fixed order; objects by identity: layers hand the same config
    objects over on every call)."""
    if type(v) in _PLAIN_TYPES or isinstance(v, _PLAIN):
        return v
    if isinstance(v, dict):
        items = tuple(v.items())
        try:
            hash(items)      # plain or hashable values (the common case): as they are
            return items
        except TypeError:
            plain = _PLAIN_TYPES
            return tuple((k, x if type(x) in plain else _freeze(x)) for k, x in items)
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, rules.CallArgs):       # typed call arguments: by class and content
        try:
            hash(v)                         # frozen, plain fields (the common case): itself
            return v
        except TypeError:                   # a mapping field (a conv's slice, matmul)
            return (type(v), tuple(_freeze(getattr(v, k)) for k in v.__dataclass_fields__))
    try:
        hash(v)              # tuples of plain values, enums, hashable config objects
        return v
    except TypeError:
        if isinstance(v, tuple):
            return tuple(_freeze(x) for x in v)
        return ("id", id(v))


def memo_key(op: str, inputs, attrs: dict, extra=None) -> tuple:
    return (op, tuple(t._layout_token() if t is not None else None for t in inputs),
            tuple(t._flat4() if t is not None else None for t in inputs), _freeze(attrs), extra)


# Rule results per (op, operand layouts and shapes, attrs, output): the rules are pure functions
# of these and a plan calls each op with the same few combinations on every run, so the table
# is consulted once per combination (bounded: a pathological caller only loses the memo).
_RULE_MEMO: dict = {}
_MEMO_MAX = 20000


def memoized(key, fn):
    hit = _RULE_MEMO.get(key)
    if hit is None:
        hit = fn()
        if len(_RULE_MEMO) >= _MEMO_MAX:
            _RULE_MEMO.clear()
        _RULE_MEMO[key] = hit
    return hit


def _check(op: str, inputs: list[SimTensor | None], attrs, output: MemSpec | None = None):
    """Reject what the card would: ``attrs`` is the op's typed call arguments (``rules.CallArgs``)
    or a mapping of them."""
    key = memo_key("check:" + op, inputs, attrs, output)
    vs = memoized(key, lambda: tuple(rules.check(
        op, [t._layout() if t is not None else None for t in inputs], attrs, output,
        shapes=[t._flat4() if t is not None else None for t in inputs])))
    rules.raise_if_violations(vs, current_layer(op))


def _new(like: SimTensor, data: torch.Tensor, dtype=None, layout=None, mc=None, op: str = "",
         shape=None) -> SimTensor:
    dtype = dtype or like.dtype
    layout = layout or like.layout
    mc = mc or like._memory_config
    shape = tuple(shape if shape is not None else data.shape)
    if like._device is not None:
        validate_memory(shape, layout, dtype, mc, op, like._device)
    return _alias(like, SimTensor(data, dtype, layout, mc, like._device, shape))


def _alias(src: SimTensor, out: SimTensor) -> SimTensor:
    """Mark ``src`` and ``out`` as sharing storage when they do (see ``SimTensor._shared``)."""
    if src._store is not None and out._store is not None and out._store.untyped_storage().data_ptr() == \
            src._store.untyped_storage().data_ptr():
        src._shared = out._shared = True
    return out


def to_layout(tensor, layout, dtype=None, memory_config=None, sub_core_grids=None, pad_value=0.0):
    t = tensor._live("to_layout")
    if t._device is not None:
        _check("to_layout", [t],
               rules.CallArgs(layout="tile" if layout == T.Layout.TILE else "row_major",
                              dtype=dtype_name(dtype) if dtype else None),
               memspec(memory_config) if memory_config else None)
    tgt_dtype = dtype or t.dtype
    if tgt_dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B) and layout != T.Layout.TILE:
        raise _violation("to_layout.dtype", f"to_layout ROW_MAJOR with dtype {dtype_name(tgt_dtype)}", "to_layout")
    data = quantize(t._data, tgt_dtype) if tgt_dtype != t.dtype else t._data
    return _new(t, data, tgt_dtype, layout, memory_config if t._device is not None else None, "to_layout")


def typecast(input_tensor, dtype=None, output_dtype=None, *, input_dtype=None, memory_config=None,
             output_tensor=None, sub_core_grids=None):
    # overload 2: typecast(input_tensor, input_dtype, output_dtype) -- the 2nd positional is then
    # the input dtype
    if output_dtype is not None:
        dtype = output_dtype
    if dtype is None:
        raise TypeError("typecast: dtype (or output_dtype) is required")
    t = _on_device(input_tensor, "typecast")
    _check("typecast", [t], rules.CallArgs(dtype=dtype_name(dtype)),
           memspec(memory_config) if memory_config else None)
    return _new(t, quantize(t._data, dtype), dtype, None, memory_config, "typecast")


def _move(op: str, t: SimTensor, mc: T.MemoryConfig, dtype=None) -> SimTensor:
    dtype = dtype or t.dtype
    _check(op, [t], rules.CallArgs(dtype=dtype_name(dtype)), memspec(mc))
    data = quantize(t._data, dtype) if dtype != t.dtype else t._data
    return _new(t, data, dtype, None, mc, op)


def to_memory_config(tensor, memory_config, dtype=None, output_tensor=None):
    return _move("to_memory_config", _on_device(tensor, "to_memory_config"), memory_config, dtype)


def reallocate(tensor, memory_config=None):
    """ttnn.reallocate (ttnn::move): the same tensor in a fresh buffer; the input is freed."""
    t = _on_device(tensor, "reallocate")
    if memory_config is not None:
        return to_memory_config(t, memory_config)
    out = _new(t, t._data.clone(), op="reallocate")
    deallocate(t)
    return out


def sharded_to_interleaved(input_tensor, memory_config=None, output_dtype=None):
    return _move("sharded_to_interleaved", _on_device(input_tensor, "sharded_to_interleaved"),
                 memory_config or T.L1_MEMORY_CONFIG, output_dtype)


def interleaved_to_sharded(input_tensor, *args, **kwargs):
    """Overloads: (input_tensor, sharded_memory_config, output_dtype=None) and
    (input_tensor, grid, shard_shape, shard_scheme, shard_orientation, output_dtype=None)."""
    t = _on_device(input_tensor, "interleaved_to_sharded")
    kwargs.pop("keep_l1_aligned", None)
    kwargs.pop("preallocated_output", None)
    if "sharded_memory_config" in kwargs or (args and isinstance(args[0], T.MemoryConfig)):
        mc = kwargs.pop("sharded_memory_config", None) or args[0]
        rest = list(args[1:])
        out_dtype = kwargs.pop("output_dtype", rest[0] if rest else None)
    else:
        names = ["grid", "shard_shape", "shard_scheme", "shard_orientation", "output_dtype"]
        vals = dict(zip(names, args))
        for k in list(kwargs):
            if k in names:
                vals[k] = kwargs.pop(k)
        grid = vals["grid"]
        if isinstance(grid, T.CoreCoord):
            grid = T.CoreRangeSet([T.CoreRange(T.CoreCoord(0, 0), T.CoreCoord(grid.x - 1, grid.y - 1))])
        mc = T.MemoryConfig(vals["shard_scheme"], T.BufferType.L1,
                            T.ShardSpec(grid, list(vals["shard_shape"]), vals["shard_orientation"]))
        out_dtype = vals.get("output_dtype")
    if kwargs:
        raise TypeError(f"interleaved_to_sharded: unexpected keyword argument(s) {sorted(kwargs)}")
    return _move("interleaved_to_sharded", t, mc, out_dtype)


def reshard(input_tensor, output_memory_config, output_tensor=None):
    return _move("reshard", _on_device(input_tensor, "reshard"), output_memory_config)


def reshape(input_tensor, shape=None, padded_shape=None, *, logical_shape=None, memory_config=None,
            pad_value=None, reshape_tile_mode=None, sub_core_grids=None, skip_padding_fill=False):
    t = input_tensor._live("reshape")
    shape = shape if shape is not None else logical_shape
    if shape is None:
        raise TypeError("reshape: shape is required")
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = t.logical_volume() // max(known, 1)
    if math.prod(shape) != t.logical_volume():
        raise Error(f"{current_layer('reshape')}: cannot reshape {list(t.shape)} to {shape}")
    data = t._data.reshape(shape)
    if memory_config is not None and t._device is not None:
        return _new(t, data, None, None, memory_config, "reshape")
    # Same values, same memory: ttnn keeps the input's memory config (a view when it can; the
    # sim treats it as a separate buffer for in-place writes, the safe side).
    return _alias(t, SimTensor(data, t.dtype, t.layout, t._memory_config, t._device))


def permute(input_tensor, dims, *, memory_config=None, pad_value=0.0):
    t = input_tensor._live("permute")
    data = t._data.permute(*dims).contiguous()
    data = quantize(data, t.dtype) if t.dtype in (T.DataType.BFLOAT8_B, T.DataType.BFLOAT4_B) else data
    return _new(t, data, None, None, memory_config if t._device is not None else None, "permute")
