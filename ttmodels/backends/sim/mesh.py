"""A mesh of sim devices: ttnn's MeshDevice, mesh mappers and multi-device tensors, on the host.

ttnn runs data parallel by opening one ``MeshDevice`` over N chips and calling every op on it
once: each chip runs the same program on its own shard of every tensor (SPMD). The sim does the
same with N ``SimDevice``\\ s:

* ``open_mesh_device(MeshShape(r, c), ...)`` -> ``SimMeshDevice`` holding r*c ``SimDevice``\\ s.
* ``from_torch(t, ..., mesh_mapper=ReplicateTensorToMesh(mesh))`` -> one replica per chip (the
  replicas share their host storage; an in-place write copies first, as for any shared
  SimTensor); ``ShardTensorToMesh(mesh, dim)`` splits ``t`` into equal parts on ``dim``;
  ``to_torch(t, mesh_composer=ConcatMeshToTensor(mesh, dim))`` concatenates them back. Without a
  mapper, ``from_torch(..., device=mesh)`` replicates, as ttnn 0.81.1 does.
* Every other sim function is wrapped by ``spmd``: when an argument is a multi-device tensor or
  the mesh, the function runs once per chip, **sequentially**, chip 0 first, with each chip's
  shard and device substituted, and the per-chip results are gathered into multi-device
  tensors. Chips share nothing, so each chip's result is bit-identical to a single-chip run on
  its shard. Sequential on purpose: torch already spreads each op over the host's cores, and a
  fixed order keeps results independent of thread scheduling.

Source for the API mirrored here: ttnn 0.81.1 ``ttnn/distributed/distributed.py``
(``open_mesh_device``, ``ReplicateTensorToMesh``, ``ShardTensorToMesh``, ``ConcatMeshToTensor``)
and the nanobind ``ttnn.MeshShape`` / ``ttnn.get_device_tensors``; their signatures are checked
by tests/test_mesh_contracts.py.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from ...errors import Error
from . import tensor as _tensor
from . import types as T
from .device import SimDevice
from .tensor import SimTensor


class MeshShape:
    """``ttnn.MeshShape(s0, s1)``, ``(s0, s1, s2)`` or ``(sequence)``."""

    def __init__(self, *dims):
        if len(dims) == 1 and not isinstance(dims[0], int):
            dims = tuple(dims[0])
        if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
            raise Error(f"MeshShape needs positive integer dimensions, got {dims!r}")
        self._dims = tuple(int(d) for d in dims)

    def dims(self) -> int:
        return len(self._dims)

    def mesh_size(self) -> int:
        n = 1
        for d in self._dims:
            n *= d
        return n

    def __getitem__(self, i: int) -> int:
        return self._dims[i]

    def __iter__(self):
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    def __eq__(self, other) -> bool:
        return isinstance(other, MeshShape) and other._dims == self._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return f"MeshShape({list(self._dims)})"


# Set once a mesh or a multi-device tensor exists in this process (``spmd`` skips its operand
# scan until then).
_MESHES: list[bool] = []


class SimMeshDevice:
    """A ``ttnn.MeshDevice`` over ``shape.mesh_size()`` sim chips (row-major order)."""

    def __init__(self, shape: MeshShape, devices: list[SimDevice]):
        _MESHES[:] = [True]
        self._shape = shape
        self._devices = list(devices)
        self.is_open = True

    @property
    def shape(self) -> MeshShape:
        return self._shape

    def get_num_devices(self) -> int:
        return len(self._devices)

    def get_device_ids(self) -> list[int]:
        return [d.id() for d in self._devices]

    def get_devices(self) -> list[SimDevice]:
        return list(self._devices)

    # What layer code asks a device: every chip of a Wormhole mesh has the same worker grid.
    def arch(self) -> T.Arch:
        return self._devices[0].arch()

    def compute_with_storage_grid_size(self) -> T.CoreCoord:
        return self._devices[0].compute_with_storage_grid_size()

    def core_grid(self):
        return self._devices[0].core_grid()

    @property
    def l1_small_size(self) -> int:
        return self._devices[0].l1_small_size

    @property
    def trace_region_size(self) -> int:
        return self._devices[0].trace_region_size

    def __repr__(self) -> str:
        rc = "x".join(map(str, self._shape))
        return f"SimMeshDevice({rc} grid, {len(self._devices)} devices{'' if self.is_open else ', closed'})"


class SimMeshTensor:
    """A multi-device tensor: one ``SimTensor`` per chip, all with the same spec. Like a ttnn
    multi-device tensor it reports the per-chip shape, dtype, layout and memory config."""

    __slots__ = ("shards", "mesh")

    def __init__(self, shards: list[SimTensor], mesh: SimMeshDevice | None):
        _MESHES[:] = [True]
        self.shards = list(shards)
        self.mesh = mesh

    @property
    def shape(self):
        return self.shards[0].shape

    @property
    def padded_shape(self):
        return self.shards[0].padded_shape

    @property
    def dtype(self):
        return self.shards[0].dtype

    @property
    def layout(self):
        return self.shards[0].layout

    def memory_config(self):
        return self.shards[0].memory_config()

    def is_sharded(self) -> bool:
        return self.shards[0].is_sharded()

    def storage_type(self):
        return self.shards[0].storage_type()

    def device(self):
        return self.mesh if self.shards[0].device() is not None else None

    def get_dtype(self):
        return self.dtype

    def get_layout(self):
        return self.layout

    def is_allocated(self) -> bool:
        return all(s.is_allocated() for s in self.shards)

    def deallocate(self, force: bool = True) -> None:
        for s in self.shards:
            s.deallocate(force)

    def logical_volume(self) -> int:
        return self.shards[0].logical_volume()

    def volume(self) -> int:
        return self.shards[0].volume()

    def cpu(self, blocking: bool = True) -> "SimMeshTensor":
        return SimMeshTensor([s.cpu(blocking) for s in self.shards], self.mesh)

    def __repr__(self) -> str:
        return f"SimMeshTensor({len(self.shards)} x {self.shards[0]!r})"


# ---------------------------------------------------------------------------------------------
# Mappers and composers
# ---------------------------------------------------------------------------------------------

class _Mapper:
    """What ``ttnn.ReplicateTensorToMesh`` / ``ShardTensorToMesh`` return: how a host tensor is
    distributed over the chips of ``mesh``."""

    def __init__(self, mesh: SimMeshDevice, dim: int | None):
        if not isinstance(mesh, SimMeshDevice):
            raise Error(f"a mesh mapper needs a mesh device, got {type(mesh).__name__}")
        self.mesh, self.dim = mesh, dim

    def split(self, t: torch.Tensor) -> list[torch.Tensor] | None:
        """Per-chip parts, or None for replication."""
        if self.dim is None:
            return None
        n = self.mesh.get_num_devices()
        dim = self.dim % t.dim()
        if t.shape[dim] % n:
            raise Error(f"ShardTensorToMesh: dimension {self.dim} of a tensor of shape "
                        f"{tuple(t.shape)} does not split into {n} equal parts")
        return list(torch.chunk(t, n, dim=dim))

    def __repr__(self) -> str:
        what = "replicate" if self.dim is None else f"shard dim {self.dim}"
        return f"<mesh mapper: {what} over {self.mesh!r}>"


class _Composer:
    def __init__(self, mesh: SimMeshDevice, dim: int):
        if not isinstance(mesh, SimMeshDevice):
            raise Error(f"a mesh composer needs a mesh device, got {type(mesh).__name__}")
        self.mesh, self.dim = mesh, dim


def ReplicateTensorToMesh(mesh_device):  # noqa: N802 - ttnn's name
    return _Mapper(mesh_device, None)


def ShardTensorToMesh(mesh_device, dim):  # noqa: N802 - ttnn's name
    return _Mapper(mesh_device, int(dim))


def ConcatMeshToTensor(mesh_device, dim):  # noqa: N802 - ttnn's name
    return _Composer(mesh_device, int(dim))


def replicate_tensor_to_mesh_mapper(mesh_device):
    return ReplicateTensorToMesh(mesh_device)


def shard_tensor_to_mesh_mapper(mesh_device, dim):
    return ShardTensorToMesh(mesh_device, dim)


def concat_mesh_to_tensor_composer(mesh_device, dim):
    return ConcatMeshToTensor(mesh_device, dim)


def get_device_tensors(tensor) -> list[SimTensor]:
    if isinstance(tensor, SimMeshTensor):
        return list(tensor.shards)
    return [tensor]


# ---------------------------------------------------------------------------------------------
# Opening a mesh; host <-> mesh
# ---------------------------------------------------------------------------------------------

def open_mesh_device(mesh_shape=None, l1_small_size: int = 0, trace_region_size: int = 0,
                     num_command_queues: int = 1, dispatch_core_config=None, offset=None,
                     physical_device_ids=(), worker_l1_size: int = 0) -> SimMeshDevice:
    shape = mesh_shape if isinstance(mesh_shape, MeshShape) else MeshShape(1, 1) \
        if mesh_shape is None else MeshShape(mesh_shape)
    n = shape.mesh_size()
    ids = list(physical_device_ids) or list(range(n))
    if len(ids) != n:
        raise Error(f"open_mesh_device: {len(ids)} physical_device_ids for a mesh of {n} devices")
    devices = [SimDevice(i, l1_small_size, trace_region_size, num_command_queues,
                         worker_l1_size or None) for i in ids]
    return SimMeshDevice(shape, devices)


def close_mesh_device(mesh_device: SimMeshDevice) -> None:
    for d in mesh_device.get_devices():
        d.is_open = False
    mesh_device.is_open = False


def from_torch(tensor, dtype=None, *, spec=None, tile=None, pad_value=None, layout=None, device=None,
               memory_config=None, mesh_mapper=None, cq_id=None, preserve_nan_values=False,
               col_tilize=False, enable_bfloat_opt=False):
    """``ttnn.from_torch``; onto a mesh (or into a multi-device host tensor) through
    ``mesh_mapper``, replicating when ``device`` is a mesh and no mapper is given."""
    kw = dict(dtype=dtype, spec=spec, tile=tile, pad_value=pad_value, layout=layout,
              memory_config=memory_config, cq_id=cq_id, preserve_nan_values=preserve_nan_values,
              col_tilize=col_tilize, enable_bfloat_opt=enable_bfloat_opt)
    if mesh_mapper is None and not isinstance(device, SimMeshDevice):
        return _tensor.from_torch(tensor, device=device, **kw)
    if tensor is None:
        return None
    if mesh_mapper is None:
        mesh_mapper = ReplicateTensorToMesh(device)
    if not isinstance(mesh_mapper, _Mapper):
        raise Error(f"from_torch: mesh_mapper must come from ReplicateTensorToMesh or "
                    f"ShardTensorToMesh, got {type(mesh_mapper).__name__}")
    mesh = mesh_mapper.mesh
    if device is not None and device is not mesh:
        raise Error("from_torch: mesh_mapper was made for another device than device=")
    chips = mesh.get_devices()
    on = (lambda i: chips[i]) if device is not None else (lambda i: None)
    parts = mesh_mapper.split(tensor)
    if parts is None:
        first = _tensor.from_torch(tensor, device=on(0), **kw)
        shards = [first] + [_replica(first, on(i)) for i in range(1, len(chips))]
    else:
        shards = [_tensor.from_torch(p, device=on(i), **kw) for i, p in enumerate(parts)]
    return SimMeshTensor(shards, mesh)


def _replica(t: SimTensor, device) -> SimTensor:
    """Another chip's copy of ``t``: same values; the host storage is shared (copy on write)."""
    r = SimTensor(t._data, t.dtype, t.layout, t.memory_config(), device)
    return _tensor._alias(t, r)


def to_torch(tensor, dtype=None, *, torch_rank=None, mesh_composer=None, device=None, cq_id=None):
    """``ttnn.to_torch``; a multi-device tensor needs ``mesh_composer`` (the parts are
    concatenated on its ``dim``)."""
    kw = dict(dtype=dtype, torch_rank=torch_rank, device=device, cq_id=cq_id)
    if not isinstance(tensor, SimMeshTensor):
        return _tensor.to_torch(tensor, **kw)
    if not isinstance(mesh_composer, _Composer):
        raise Error(f"to_torch: a tensor on {len(tensor.shards)} devices needs "
                    f"mesh_composer=ConcatMeshToTensor(mesh, dim)")
    return torch.cat([_tensor.to_torch(s, **kw) for s in tensor.shards], dim=mesh_composer.dim)


# ---------------------------------------------------------------------------------------------
# SPMD: one call per chip
# ---------------------------------------------------------------------------------------------

def _mesh_of(values) -> SimMeshDevice | None:
    mesh = None
    for v in values:
        if isinstance(v, (list, tuple)):
            m = _mesh_of(v)
        elif isinstance(v, SimMeshTensor):
            m = v.mesh
            if m is None:
                raise Error("a multi-device tensor without its mesh")
        elif isinstance(v, SimMeshDevice):
            m = v
        else:
            continue
        if m is None:
            continue
        if mesh is not None and m.get_num_devices() != mesh.get_num_devices():
            raise Error(f"operands live on meshes of {mesh.get_num_devices()} and "
                        f"{m.get_num_devices()} devices")
        mesh = mesh or m
    return mesh


def _pick(v, i: int):
    if isinstance(v, SimMeshTensor):
        return v.shards[i]
    if isinstance(v, SimMeshDevice):
        return v.get_devices()[i]
    if isinstance(v, list):
        return [_pick(x, i) for x in v]
    if isinstance(v, tuple):
        return tuple(_pick(x, i) for x in v)
    return v


def _gather(results: list, mesh: SimMeshDevice, operands: list[SimMeshTensor], what: str):
    first = results[0]
    if isinstance(first, SimTensor):
        # An op that hands back its operand (in place, or a no-op move) hands back the same
        # multi-device tensor: callers compare tensors by identity to decide what to free.
        for op in operands:
            if all(r is s for r, s in zip(results, op.shards)):
                return op
        return SimMeshTensor(results, mesh)
    if isinstance(first, (list, tuple)) and not _all_plain(first):
        parts = [_gather([r[j] for r in results], mesh, operands, what) for j in range(len(first))]
        return type(first)(parts) if isinstance(first, list) else tuple(parts)
    if any(r != first for r in results[1:]):
        raise Error(f"{what}: chips disagree on a result ({results!r})")
    return first


def _all_plain(seq) -> bool:
    return all(isinstance(x, (int, float, str, bool)) or x is None for x in seq)


def _operands(values, out: list) -> list[SimMeshTensor]:
    for v in values:
        if isinstance(v, SimMeshTensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            _operands(v, out)
    return out


def spmd(fn: Callable) -> Callable:
    """``fn`` once per chip when any argument is a multi-device tensor or a mesh, else as is."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not _MESHES:                 # no mesh ever opened: no multi-device operand can exist
            return fn(*args, **kwargs)
        values = list(args) + list(kwargs.values())
        mesh = _mesh_of(values)
        if mesh is None:
            return fn(*args, **kwargs)
        results = []
        for i in range(mesh.get_num_devices()):
            results.append(fn(*_pick(args, i), **{k: _pick(v, i) for k, v in kwargs.items()}))
        return _gather(results, mesh, _operands(values, []), fn.__name__)

    call.__wrapped_spmd__ = True
    return call


def spmd_namespace(namespace: dict[str, Any], names) -> dict[str, Callable]:
    """Mesh-aware versions of the functions ``names`` of a sim namespace."""
    own = {"from_torch": from_torch, "to_torch": to_torch}
    return {n: own.get(n) or spmd(namespace[n]) for n in names}
