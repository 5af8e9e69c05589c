"""Translations from ttmodels' string vocabulary (``layout.py``, ``graph.Precision``) to ttnn objects.

Every function takes the backend namespace ``tt`` (the real ``ttnn`` module or
``ttmodels.backends.sim``) first, so the same code builds real ttnn configs on a card and sim
configs on the host; ``tests/test_contracts.py`` runs them against the real ttnn classes.
"""
from __future__ import annotations

from typing import Any

from ..arch import DEFAULT_GRID
from ..errors import LayoutError
from ..language.graph import Precision
from ..planning.layout import BLOCK, ROW_MAJOR, TILE_LAYOUT, MemSpec
from ..planning.layout import TTNN_MEMORY_LAYOUTS
from ..planning.layout import core_ranges as layout_core_ranges

_DTYPE_ATTRS = {"bfloat16": "bfloat16", "bfloat8_b": "bfloat8_b", "bfloat4_b": "bfloat4_b",
                "float32": "float32"}
_MEMORY_LAYOUTS = TTNN_MEMORY_LAYOUTS
_BUFFERS = {"dram": "DRAM", "l1": "L1"}
_ORIENTATIONS = {"row_major": "ROW_MAJOR", "col_major": "COL_MAJOR"}
_FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")


def _lookup(table: dict[str, str], name: str, what: str) -> str:
    try:
        return table[name]
    except KeyError:
        raise LayoutError(f"unknown {what} {name!r}; expected one of {sorted(table)}") from None


def data_type(tt, name: str):
    """``"bfloat8_b"`` -> ``tt.bfloat8_b``."""
    return getattr(tt, _lookup(_DTYPE_ATTRS, name, "dtype"))


def layout(tt, name: str):
    """``"tile"`` -> ``tt.TILE_LAYOUT``, ``"row_major"`` -> ``tt.ROW_MAJOR_LAYOUT``."""
    if name == TILE_LAYOUT:
        return tt.TILE_LAYOUT
    if name == ROW_MAJOR:
        return tt.ROW_MAJOR_LAYOUT
    raise LayoutError(f"unknown tensor layout {name!r}; expected 'tile' or 'row_major'")


def tensor_memory_layout(tt, name: str):
    """``"height_sharded"`` -> ``tt.TensorMemoryLayout.HEIGHT_SHARDED``."""
    return getattr(tt.TensorMemoryLayout, _lookup(_MEMORY_LAYOUTS, name, "memory layout"))


def buffer_type(tt, name: str):
    return getattr(tt.BufferType, _lookup(_BUFFERS, name, "buffer"))


def shard_orientation(tt, name: str):
    return getattr(tt.ShardOrientation, _lookup(_ORIENTATIONS, name, "shard orientation"))


def math_fidelity(tt, name: str):
    if name not in _FIDELITIES:
        raise LayoutError(f"unknown math fidelity {name!r}; expected one of {list(_FIDELITIES)}")
    return getattr(tt.MathFidelity, name)


def core_ranges(grid: tuple[int, int], num_cores: int | None = None
                ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Inclusive (start, end) core coordinates of ``num_cores`` cores laid out row-wise on a grid
    of extent ``grid`` = (x, y) from core (0, 0): the full rows, then a partial last row. This is
    what tt-metal's ``num_cores_to_corerangeset(n, grid, row_wise=True)`` returns and what conv2d
    and pools use for height/width sharding over fewer cores than the grid holds."""
    gx, gy = grid
    n = gx * gy if num_cores is None else num_cores
    try:
        return layout_core_ranges(n, grid)
    except ValueError:
        raise LayoutError(f"{n} cores do not fit a {gx}x{gy} core grid") from None


def core_range_set(tt, grid: tuple[int, int], num_cores: int | None = None):
    return tt.CoreRangeSet([tt.CoreRange(tt.CoreCoord(sx, sy), tt.CoreCoord(ex, ey))
                            for (sx, sy), (ex, ey) in core_ranges(grid, num_cores)])


def memory_config(tt, memspec: MemSpec):
    """A ``tt.MemoryConfig`` for ``memspec``: interleaved in DRAM/L1, or sharded with a ShardSpec
    over the CoreRangeSet of ``memspec.grid`` / ``memspec.num_cores``."""
    mem_layout = tensor_memory_layout(tt, memspec.memory_layout)
    buf = buffer_type(tt, memspec.buffer)
    if not memspec.sharded:
        return tt.MemoryConfig(mem_layout, buf)
    if memspec.grid is None or memspec.shard_shape is None:
        raise LayoutError(f"{memspec.memory_layout} memory needs a grid and a shard shape "
                          f"(got grid={memspec.grid}, shard_shape={memspec.shard_shape})",
                          rule="tensor.shard_spec")
    num_cores = memspec.num_cores
    if memspec.memory_layout == BLOCK:
        num_cores = None  # block sharding always covers its whole rectangle
    grid = core_range_set(tt, tuple(memspec.grid), num_cores)
    spec = tt.ShardSpec(grid, [int(memspec.shard_shape[0]), int(memspec.shard_shape[1])],
                        shard_orientation(tt, memspec.orientation))
    return tt.MemoryConfig(mem_layout, buf, spec)


def unary_relu(tt):
    """ReLU's fused form (``activations.unary_with_param(tt, "relu")``; kept for callers that
    name it, e.g. the 1x1 probe)."""
    from ..ops import activations
    return activations.unary_with_param(tt, "relu")


def compute_config(tt, device, precision: Precision, *, packer_l1_acc: bool = True,
                   math_approx_mode: bool = True):
    """Compute kernel config for ``precision`` (math fidelity, fp32 accumulation in dest).

    Built with ``tt.init_device_compute_kernel_config(device.arch(), ...)`` as TT's models do, so
    the arch-specific config class is the device's; without a device (``None``) the Wormhole
    class is constructed directly. ``packer_l1_acc`` accumulates partials in L1 (TT's ResNet50
    enables it for every conv)."""
    kwargs = dict(math_fidelity=math_fidelity(tt, precision.math_fidelity),
                  math_approx_mode=math_approx_mode, fp32_dest_acc_en=bool(precision.fp32_accum),
                  packer_l1_acc=packer_l1_acc)
    if device is None:
        return tt.WormholeComputeKernelConfig(**kwargs)
    return tt.init_device_compute_kernel_config(device.arch(), **kwargs)


def matmul_program_config(tt, spec: dict[str, Any] | None):
    """A matmul program config from a plan's ``program_config`` entry, None for ttnn's default.

    ``spec["kind"]`` is ``"1d"`` (MatmulMultiCoreReuseMultiCast1DProgramConfig, e.g. a
    width-sharded classifier head) or ``"2d"`` (MatmulMultiCoreReuseMultiCastProgramConfig, block
    sharded); ``grid`` is (x, y); the other keys are the config's own keyword arguments
    (in0_block_w, out_subblock_h, out_subblock_w, per_core_M, per_core_N, ...)."""
    if spec is None:
        return None
    spec = dict(spec)
    kind = spec.pop("kind", "1d")
    gx, gy = spec.pop("grid", DEFAULT_GRID)
    common_kw = dict(compute_with_storage_grid_size=tt.CoreCoord(gx, gy),
                     in0_block_w=int(spec.pop("in0_block_w")),
                     out_subblock_h=int(spec.pop("out_subblock_h", 1)),
                     out_subblock_w=int(spec.pop("out_subblock_w", 1)),
                     per_core_M=int(spec.pop("per_core_M")),
                     per_core_N=int(spec.pop("per_core_N")))
    act = spec.pop("fused_activation", None)
    if act is not None:
        from ..ops import activations
        common_kw["fused_activation"] = activations.matmul_activation(tt, act)
    if kind == "1d":
        return tt.MatmulMultiCoreReuseMultiCast1DProgramConfig(
            **common_kw, fuse_batch=bool(spec.pop("fuse_batch", True)),
            mcast_in0=bool(spec.pop("mcast_in0", True)), **spec)
    if kind == "2d":
        return tt.MatmulMultiCoreReuseMultiCastProgramConfig(
            **common_kw, transpose_mcast=bool(spec.pop("transpose_mcast", False)), **spec)
    raise LayoutError(f"unknown matmul program config kind {kind!r}; expected '1d' or '2d'")


# ---- data parallel over a mesh (docs/multichip.md) -----------------------------------------
# These take the Backend (they need its open device and mesh), not ``tt`` alone. On one chip
# they add nothing, so single-chip calls are exactly what they were. The mappers are TT's own
# data-parallel trio (tt-metal models' get_mesh_mappers: ShardTensorToMesh(dim=0),
# ReplicateTensorToMesh, ConcatMeshToTensor(dim=0)).

def replicated(backend) -> dict[str, Any]:
    """``from_torch`` keywords that give every chip of a mesh its own copy (weights, constants)."""
    if getattr(backend, "mesh", None) is None:
        return {}
    return {"mesh_mapper": backend.tt.ReplicateTensorToMesh(backend.device)}


def batch_sharded(backend) -> dict[str, Any]:
    """``from_torch`` keywords that split a tensor's dim 0 over the chips of a mesh."""
    if getattr(backend, "mesh", None) is None:
        return {}
    return {"mesh_mapper": backend.tt.ShardTensorToMesh(backend.device, dim=0)}


def batch_gathered(backend) -> dict[str, Any]:
    """``to_torch`` keywords that concatenate the chips' parts of a tensor on dim 0."""
    if getattr(backend, "mesh", None) is None:
        return {}
    return {"mesh_composer": backend.tt.ConcatMeshToTensor(backend.device, dim=0)}


def mark_prequantized(tt, weight, params, weights_dtype: str) -> None:
    """Tell the sim that host conv ``weight`` already holds its rounded values, when ``params``
    (the node's parameters) say so for this ``weights_dtype`` (``sim/prequantize.py``: the
    weight cache stores them rounded). Other backends round them again: same values."""
    if getattr(params, "weights_dtype", None) != weights_dtype:
        return
    mark = getattr(tt, "mark_prequantized", None)
    if mark is not None:
        mark(weight, data_type(tt, weights_dtype))


def shares_buffer(a, b) -> bool:
    """Whether device tensors ``a`` and ``b`` (both alive) are one buffer: a ttnn.reshape that
    changes no shape returns its input's tensor, and one that keeps the tile rows a view of its
    buffer, as new Python objects. ``tt.deallocate`` of either frees the buffer under both (at
    [1, 1, 32, C] ttnn then refuses the other, "device != nullptr"; at 16 rows it lets a later
    op's output land on it). The sim has no buffer addresses (its reshape copies): never."""
    try:
        return (a.is_allocated() and b.is_allocated()
                and a.buffer_address() == b.buffer_address())
    except (AttributeError, RuntimeError, TypeError):
        return False
