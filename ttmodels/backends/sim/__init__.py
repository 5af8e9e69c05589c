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
from .ops import (adaptive_avg_pool2d, add, avg_pool2d, concat, conv2d, gelu, global_avg_pool2d,  # noqa: F401,E402
                  grid_sample, hardsigmoid, hardswish, hardtanh, identity, leaky_relu, linear, matmul,
                  max_pool2d, mish,
                  multiply, pad, prepare_conv_bias, prepare_conv_weights, prepare_grid_sample_grid, relu,
                  relu6, sigmoid, silu, slice, subtract, tanh, upsample)
from .ops import layer_norm, softmax  # noqa: F401,E402
from .ops import mark_prequantized  # noqa: F401,E402  (sim only: prequantize.py)
from .conv_transpose import (conv_transpose2d, prepare_conv_transpose2d_bias,  # noqa: F401,E402
                             prepare_conv_transpose2d_weights)

from .mesh import (ConcatMeshToTensor, MeshShape, ReplicateTensorToMesh, ShardTensorToMesh,  # noqa: F401,E402
                   SimMeshDevice, SimMeshTensor, close_mesh_device, concat_mesh_to_tensor_composer,
                   get_device_tensors, open_mesh_device, replicate_tensor_to_mesh_mapper,
                   shard_tensor_to_mesh_mapper)

Tensor = SimTensor
Device = SimDevice
MeshDevice = SimMeshDevice
TILE_SIZE = 32

#: Functions and classes mirrored from ttnn (checked against the real signatures by the tests).
TTNN_FUNCTIONS = ("conv2d", "prepare_conv_weights", "prepare_conv_bias", "conv_transpose2d",
                  "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias", "max_pool2d", "avg_pool2d",
                  "global_avg_pool2d", "adaptive_avg_pool2d", "add", "multiply", "subtract", "relu", "relu6",
                  "leaky_relu", "sigmoid", "hardsigmoid", "hardswish", "silu", "gelu", "tanh", "identity", "slice",
                  "layer_norm", "softmax", "linear", "matmul", "upsample", "grid_sample", "prepare_grid_sample_grid", "concat", "pad",
                  "to_memory_config", "reallocate", "sharded_to_interleaved", "interleaved_to_sharded", "reshard",
                  "to_layout", "typecast", "reshape", "permute",
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
globals().update(_spmd_namespace(globals(), [n for n in TTNN_FUNCTIONS
                                             if n not in ("open_device", "close_device")]))
