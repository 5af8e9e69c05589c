"""The pools on the sim backend: ttnn.max_pool2d, avg_pool2d, global_avg_pool2d,
adaptive_avg_pool2d."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .sharding import pool_output_padded_shape
from ...backends.sim import types as T
from ...backends.sim.numerics import DEVICE_GRID, _emit, _layout_name, _out_layout, _pair
from ...backends.sim.tensor import _MEM_NAMES  # noqa: E402  (enum -> name: layout.TTNN_MEMORY_LAYOUTS)
from ...backends.sim.tensor import (SimTensor, _check, _on_device, _violation, current_layer, dtype_name,
                                    memspec)
from ...errors import Error
from .rules import PoolArgs
from ..base import pads, window_out

__all__ = ["max_pool2d", "avg_pool2d", "global_avg_pool2d", "adaptive_avg_pool2d"]
TTNN_FUNCTIONS = tuple(__all__)


def _shard_scheme_name(s):
    return None if s is None else _MEM_NAMES[s]


def _pool_input(x: SimTensor, op, n, h, w, c) -> torch.Tensor:
    if x.logical_volume() != n * h * w * c or x.shape[-1] != c:
        raise Error(f"{current_layer(op)}: input {list(x.shape)} is not [1, 1, {n}*{h}*{w}, {c}]")
    return x._data.reshape(n, h, w, c).permute(0, 3, 1, 2)


def _pool_out_hw(h, w, k, s, p, d, ceil_mode):
    # PyTorch's window arithmetic, the spec's own (ops.window_out)
    return (window_out(h, k[0], s[0], p[0], p[1], d[0], ceil_mode),
            window_out(w, k[1], s[1], p[2], p[3], d[1], ceil_mode))


def _pool_finish(op, x, y_nchw, n, oh, ow, c, dtype, output_layout, memory_config, applied_shard_scheme,
                 global_pool=False):
    rows = n * oh * ow
    y = y_nchw.permute(0, 2, 3, 1).reshape(1, 1, rows, c)
    attrs = PoolArgs(output_layout=_layout_name(output_layout), dtype=dtype_name(dtype),
                     out_shape=(1, 1, rows, c),
                     applied_shard_scheme=_shard_scheme_name(applied_shard_scheme),
                     device_grid=DEVICE_GRID, global_pool=global_pool)
    lay = _out_layout(op if op != "global_avg_pool" else op, [x], attrs, memory_config, [x._flat4()])
    owned = y.untyped_storage().data_ptr() != x._data.untyped_storage().data_ptr()
    padded = pool_output_padded_shape(lay.memory, rows, c, out_tiled=output_layout == T.Layout.TILE)
    return _emit(y, dtype, output_layout, lay.memory, x._device, op, owned=owned, padded_shape=padded)


def max_pool2d(input_tensor, batch_size, input_h, input_w, channels, kernel_size, stride, padding, dilation,
               ceil_mode=False, *, memory_config=None, dram_slice_config=None, applied_shard_scheme=None,
               deallocate_input=False, reallocate_halo_output=True, return_indices=False,
               dtype=T.DataType.BFLOAT16, output_layout=T.Layout.ROW_MAJOR, config_tensor_in_dram=False):
    op = "max_pool2d"
    x = _on_device(input_tensor, op)
    if return_indices:
        raise Error("max_pool2d: return_indices is not modelled by the sim backend")
    k, s, d = _pair(kernel_size), _pair(stride), _pair(dilation)
    p = pads(padding)
    _check(op, [x], PoolArgs(output_layout=_layout_name(output_layout), dtype=dtype_name(dtype)))
    xin = _pool_input(x, op, batch_size, input_h, input_w, channels)
    oh, ow = _pool_out_hw(input_h, input_w, k, s, p, d, ceil_mode)
    if (p[0], p[2]) != (p[1], p[3]) or p[0] > k[0] // 2 or p[2] > k[1] // 2:
        xin = F.pad(xin, (p[2], p[3], p[0], p[1]), value=float("-inf"))
        y = F.max_pool2d(xin, k, s, 0, d, ceil_mode=ceil_mode)
    else:
        y = F.max_pool2d(xin, k, s, (p[0], p[2]), d, ceil_mode=ceil_mode)
    y = y[:, :, :oh, :ow]
    memory_config = _sliced_pool_memory(op, x, dram_slice_config, memory_config)
    out = _pool_finish(op, x, y, batch_size, oh, ow, channels, dtype, output_layout, memory_config,
                       applied_shard_scheme)
    if deallocate_input:
        x._allocated, x._data = False, None
    return out


def _sliced_pool_memory(op, x, dram_slice_config, memory_config):
    """pool2d with ``dram_slice_config`` (ttnn 0.81.1 generic_pools.cpp, the DRAM-sliced path):
    the input is read from DRAM slice by slice and the output is written to DRAM interleaved
    (seen on the mock device: a [N*H*W, C] DRAM input gives a DRAM-interleaved output in the
    requested output_layout). The slices change only where the work happens, not the values.
    ttnn returns that output as [N, OH, OW, C]; the sim keeps [1, 1, N*OH*OW, C], which the
    pool layers reshape ttnn's result to."""
    if dram_slice_config is None:
        return memory_config
    m = memspec(x.memory_config())
    if m.buffer != "dram" or m.sharded:
        raise _violation("pool2d.slice_input", f"{op}: a DRAM-sliced pool reads its input from "
                         f"DRAM interleaved, got {m.short()}", op)
    return T.MemoryConfig(T.TensorMemoryLayout.INTERLEAVED, T.BufferType.DRAM)


def avg_pool2d(input_tensor, batch_size, input_h, input_w, channels, kernel_size, stride, padding,
               ceil_mode=False, count_include_pad=True, divisor_override=None, *, memory_config=None,
               dram_slice_config=None, applied_shard_scheme=None, compute_kernel_config=None,
               deallocate_input=False, reallocate_halo_output=True, dtype=T.DataType.BFLOAT16,
               output_layout=T.Layout.ROW_MAJOR, config_tensor_in_dram=False):
    op = "avg_pool2d"
    x = _on_device(input_tensor, op)
    k, s = _pair(kernel_size), _pair(stride)
    p = pads(padding)
    _check(op, [x], PoolArgs(output_layout=_layout_name(output_layout), dtype=dtype_name(dtype)))
    xin = _pool_input(x, op, batch_size, input_h, input_w, channels)
    oh, ow = _pool_out_hw(input_h, input_w, k, s, p, (1, 1), ceil_mode)
    global_pool = (k[0], k[1]) == (input_h, input_w) and p == (0, 0, 0, 0) and (oh, ow) == (1, 1)
    if global_pool:
        y = xin.mean(dim=(2, 3), keepdim=True) if divisor_override is None else \
            xin.sum(dim=(2, 3), keepdim=True) / divisor_override
    else:
        xp = F.pad(xin, (p[2], p[3], p[0], p[1]))
        ssum = F.avg_pool2d(xp, k, s, 0, ceil_mode=ceil_mode, count_include_pad=True, divisor_override=1)
        ssum = ssum[:, :, :oh, :ow]
        if divisor_override is not None:
            y = ssum / divisor_override
        elif count_include_pad:
            y = ssum / (k[0] * k[1])
        else:
            ones = F.pad(torch.ones(1, 1, input_h, input_w), (p[2], p[3], p[0], p[1]))
            cnt = F.avg_pool2d(ones, k, s, 0, ceil_mode=ceil_mode, count_include_pad=True, divisor_override=1)
            y = ssum / cnt[:, :, :oh, :ow]
    memory_config = _sliced_pool_memory(op, x, dram_slice_config, memory_config)
    out = _pool_finish(op, x, y, batch_size, oh, ow, channels, dtype, output_layout, memory_config,
                       applied_shard_scheme, global_pool=global_pool)
    if deallocate_input:
        x._allocated, x._data = False, None
    return out


def global_avg_pool2d(input_tensor, *, memory_config=None, dtype=None):
    """Mirrors ttnn 0.81's python wrapper: NHWC (rank 2-4) input, sharded inputs are first moved
    to interleaved (same buffer), avg_pool2d over the whole plane, TILE output reshaped to
    [N, 1, 1, C]."""
    from ...backends.sim.tensor import reshape, to_memory_config
    x = _on_device(input_tensor, "global_avg_pool2d")
    shape = list(x.shape)
    if len(shape) == 4:
        n, h, w, c = shape
    elif len(shape) == 3:
        (h, w, c), n = shape, 1
    elif len(shape) == 2:
        (h, w), n, c = shape, 1, 1
    else:
        raise Error(f"global_avg_pool2d expects rank 2, 3, or 4 input, got rank {len(shape)}")
    if x.memory_config().is_sharded():
        x = to_memory_config(x, T.MemoryConfig(T.TensorMemoryLayout.INTERLEAVED, x.memory_config().buffer_type))
    out = avg_pool2d(x, n, h, w, c, (h, w), (1, 1), (0, 0), memory_config=memory_config,
                     dtype=dtype if dtype is not None else T.DataType.BFLOAT16, output_layout=T.Layout.TILE)
    return reshape(out, (n, 1, 1, c))


def adaptive_avg_pool2d(input_tensor, batch_size, input_h, input_w, channels, output_size, *, memory_config=None,
                        dram_slice_config=None, applied_shard_scheme=None, compute_kernel_config=None,
                        deallocate_input=False, reallocate_output=True):
    op = "avg_pool2d"
    x = _on_device(input_tensor, "adaptive_avg_pool2d")
    _check(op, [x], PoolArgs(output_layout="row_major", dtype="bfloat16"))
    xin = _pool_input(x, "adaptive_avg_pool2d", batch_size, input_h, input_w, channels)
    oh, ow = _pair(output_size)
    y = F.adaptive_avg_pool2d(xin, (oh, ow))
    return _pool_finish(op, x, y, batch_size, oh, ow, channels, T.DataType.BFLOAT16, T.Layout.ROW_MAJOR,
                        memory_config, applied_shard_scheme)
