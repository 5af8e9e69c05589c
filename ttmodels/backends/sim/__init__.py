"""The sim backend: a functional host model of TTNN 0.81 (see docs/sim.md).

Layer code does ``tt = backend.tt`` and calls ``tt.conv2d(...)``, ``tt.add(...)`` etc.; with the sim
backend ``tt`` is this module, which exposes ttnn's names, signatures and return conventions.
"""
from __future__ import annotations

from .types import *  # noqa: F401,F403
from .types import (Arch, BufferType, Conv2dConfig, CoreCoord, CoreGrid, CoreRange, CoreRangeSet,  # noqa: F401
                    DataType, DeviceComputeKernelConfig, DRAM_MEMORY_CONFIG, L1_MEMORY_CONFIG, Layout,
                    MathFidelity, MatmulMultiCoreReuseMultiCast1DProgramConfig,
                    MatmulMultiCoreReuseMultiCastProgramConfig, MemoryConfig, PaddingMode,
                    Conv2dDRAMSliceHeight, Conv2dDRAMSliceWidth, Conv2dL1FullSliceConfig, Conv2dSliceConfig,
                    Op2DDRAMSliceHeight, Op2DDRAMSliceWidth, Op2DL1FullSliceConfig, Op2DSliceConfig,
                    ROW_MAJOR_LAYOUT, Shape, ShardOrientation, ShardSpec, ShardStrategy, StorageType,
                    TILE_LAYOUT, TensorMemoryLayout, ThrottleLevel, UnaryOpType, UnaryWithParam,
                    WormholeComputeKernelConfig, bfloat4_b, bfloat8_b, bfloat16, float32, int32,
                    uint8, uint16, uint32, create_sharded_memory_config, init_device_compute_kernel_config,
                    num_cores_to_corerangeset)
from .device import SimDevice, close_device, open_device, synchronize_device  # noqa: F401
from .tensor import (SimTensor, deallocate, from_device, from_torch, interleaved_to_sharded,  # noqa: F401
                     layer_scope, memory_config_of, memspec, permute, reshape, reshard,
                     sharded_to_interleaved, to_device, to_layout, to_memory_config, to_torch, typecast,
                     reallocate)
from .mesh import spmd_namespace as _spmd_namespace  # noqa: E402

from .mesh import (ConcatMeshToTensor, MeshShape, ReplicateTensorToMesh, ShardTensorToMesh,  # noqa: F401,E402
                   SimMeshDevice, SimMeshTensor, close_mesh_device, concat_mesh_to_tensor_composer,
                   get_device_tensors, open_mesh_device, replicate_tensor_to_mesh_mapper,
                   shard_tensor_to_mesh_mapper)

Tensor = SimTensor
Device = SimDevice
MeshDevice = SimMeshDevice
TILE_SIZE = 32

#: Functions and classes mirrored from ttnn (checked against the real signatures by the tests): the
#: backend's own here (data movement, tensors, devices); each op's are its sim module's
#: ``TTNN_FUNCTIONS`` (``ttmodels/ops/<op>/sim.py``), added by ``_assemble`` below.
OWN_FUNCTIONS = ("to_memory_config", "reallocate", "sharded_to_interleaved", "interleaved_to_sharded",
                 "reshard", "to_layout", "typecast", "reshape", "permute",
                 "from_torch", "to_torch", "to_device", "from_device", "deallocate", "open_device",
                 "close_device", "synchronize_device", "create_sharded_memory_config",
                 "num_cores_to_corerangeset", "init_device_compute_kernel_config")
TTNN_CLASSES = ("MemoryConfig", "ShardSpec", "CoreCoord", "CoreRange", "CoreRangeSet", "CoreGrid",
                "Conv2dConfig", "WormholeComputeKernelConfig", "UnaryWithParam",
                "MatmulMultiCoreReuseMultiCast1DProgramConfig", "MatmulMultiCoreReuseMultiCastProgramConfig",
                "Shape", "Op2DSliceConfig")
#: The multi-device API (a mesh of sim devices, see mesh.py), checked the same way.
TTNN_MESH_FUNCTIONS = ("open_mesh_device", "close_mesh_device", "ReplicateTensorToMesh",
                       "ShardTensorToMesh", "ConcatMeshToTensor", "replicate_tensor_to_mesh_mapper",
                       "shard_tensor_to_mesh_mapper", "concat_mesh_to_tensor_composer",
                       "get_device_tensors")
TTNN_MESH_CLASSES = ("MeshShape",)

# Every function runs once per chip when given multi-device tensors or a mesh (mesh.spmd);
# from_torch/to_torch take ttnn's mesh_mapper/mesh_composer.
_NOT_SPMD = ("open_device", "close_device")
globals().update(_spmd_namespace(globals(), [n for n in OWN_FUNCTIONS if n not in _NOT_SPMD]))


def _op_sims() -> list | None:
    """Each op's sim module (``<op package>.sim``, ``OpDef.package``) in registry order; None while
    one of them is being imported (it imports this package first, and others may import it):
    ``__getattr__`` collects them on the first name looked up after it."""
    import importlib
    import importlib.util
    import sys

    from ... import ops
    names = [f"{pkg}.sim" for pkg in dict.fromkeys(d.package for d in ops.REGISTRY.values())]
    if any(getattr(getattr(sys.modules.get(n), "__spec__", None), "_initializing", False)
           for n in names):
        return None
    return [importlib.import_module(n) for n in names
            if n in sys.modules or importlib.util.find_spec(n) is not None]


def _assemble() -> bool:
    """This namespace's op functions: every name of each op's sim module ``__all__``, its
    ``TTNN_FUNCTIONS`` mesh-aware (mesh.spmd) and listed in ``TTNN_FUNCTIONS``."""
    mods = _op_sims()
    if mods is None:
        return False
    g = globals()
    fns: list[str] = []
    for m in mods:
        for n in m.__all__:
            g[n] = getattr(m, n)
        fns += [n for n in m.TTNN_FUNCTIONS if n not in fns]
    g.update(_spmd_namespace({n: getattr(m, n) for m in mods for n in m.TTNN_FUNCTIONS}, fns))
    g["TTNN_FUNCTIONS"] = tuple(fns) + OWN_FUNCTIONS
    return True


_complete = _assemble()


def __getattr__(name: str):
    # an op's sim module imported before this package (it imports this package first) joins the
    # namespace on the first name looked up here after it
    global _complete
    if not _complete and not name.startswith("__"):
        _complete = _assemble()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
