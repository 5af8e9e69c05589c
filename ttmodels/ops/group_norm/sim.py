"""ttnn.group_norm on the sim backend, and the helpers that prepare its weight, bias and mask."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...backends.sim import types as T
from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import _check, _on_device, from_torch, memspec
from .columns import virtual_columns
from .rules import GroupNormArgs

__all__ = ["group_norm", "determine_expected_group_norm_dram_grid_size",
           "create_group_norm_weight_bias_rm", "create_group_norm_input_mask"]
TTNN_FUNCTIONS = tuple(__all__)
TILE = 32


def _tiles(n: int) -> int:
    return -(-n // TILE) * TILE


def determine_expected_group_norm_dram_grid_size(*, device, num_channels, num_groups, input_nhw,
                                                 num_batches=1):
    """The device's compute grid: ttnn's choice (a C++ search over its constraints) is not
    modelled; the sim reads only ``x`` of it (the column split, ``columns.virtual_columns``), the
    same function whatever the grid."""
    assert num_channels % num_groups == 0 and num_channels % TILE == 0
    g = device.compute_with_storage_grid_size()
    return T.CoreGrid(x=g.x, y=g.y)


def create_group_norm_weight_bias_rm(input_tensor, num_channels, num_cores_x):
    """ttnn's format: the channels in ``num_cores_x`` chunks, each padded with zeros to whole
    rows of 32, as ``[1, 1, rows, 32]`` (a host torch tensor, as ttnn's helper returns)."""
    chunk = num_channels // num_cores_x
    t = F.pad(torch.as_tensor(input_tensor).reshape(num_cores_x, chunk), (0, _tiles(chunk) - chunk))
    return t.reshape(1, 1, -1, TILE)


def create_group_norm_input_mask(num_channel, num_groups, num_cores_across_channel, data_type):
    """ttnn's mask, a host TILE tensor ``[1, G, 32, 32 * span]``: group j's channels marked in
    the window of tiles that starts at the tile its first channel falls in (within its core's
    chunk), ``span`` the most tiles any group of a chunk crosses."""
    chunk = num_channel // num_cores_across_channel
    size = num_channel // num_groups
    per_chunk = num_groups // num_cores_across_channel
    starts = [j * size for j in range(per_chunk)]
    span = max((s + size - 1) // TILE - s // TILE + 1 for s in starts)
    m = torch.zeros(1, num_groups, TILE, TILE * span)
    for j in range(num_groups):
        off = starts[j % per_chunk] % TILE
        m[0, j, :, off:off + size] = 1.0
    return from_torch(m, data_type, layout=T.TILE_LAYOUT)


def _unpack(t, c: int, cols: int) -> torch.Tensor:
    chunk = c // cols
    return t._data.reshape(cols, -1)[:, :chunk].reshape(c)


def group_norm(input_tensor, *, num_groups, epsilon=1e-12, input_mask=None, weight=None, bias=None,
               memory_config=None, dtype=None, core_grid=None, inplace=True, output_layout=None,
               num_out_blocks=None, compute_kernel_config=None, negative_mask=None,
               use_welford=False):
    """ttnn.group_norm of an interleaved ``[N, 1, H*W, C]`` input: the rules' checks (plus
    inplace=False for TILE, ttnn's own refusal), float32 statistics per sample and group, the
    output rounded once to the input's dtype (the kernel's bfloat16 intermediates are not
    modelled), in the input's layout and the argument's memory config (ttnn's default: DRAM).
    The weight and bias are read back from ttnn's padded format for ``core_grid``'s columns."""
    op = "group_norm"
    x = _on_device(input_tensor, op)
    for t, k in ((weight, "weight"), (bias, "bias"), (input_mask, "input_mask")):
        if t is not None:
            _on_device(t, op, k)
    fp32 = bool(getattr(compute_kernel_config, "fp32_dest_acc_en", False))
    _check(op, [x], GroupNormArgs(num_groups=int(num_groups), fp32_dest_acc_en=fp32),
           memspec(memory_config) if memory_config is not None else None)
    if inplace and x.layout == T.TILE_LAYOUT:
        raise RuntimeError("In-place operation not supported: Tile layout requires non-inplace "
                           "tensors. (inplace=true)")
    if dtype is not None and dtype != x.dtype:
        raise RuntimeError(f"group_norm: dtype {dtype} must equal the input's {x.dtype}")
    n, _, hw, c = x._data.shape
    if core_grid is None:
        core_grid = determine_expected_group_norm_dram_grid_size(
            device=x._device, num_channels=c, num_groups=num_groups, input_nhw=n * hw,
            num_batches=n)
    cols = virtual_columns(core_grid.x, c, int(num_groups))
    xv = x._data.to(torch.float32).permute(0, 3, 1, 2)         # [N, C, 1, HW]
    w = _unpack(weight, c, cols) if weight is not None else None
    b = _unpack(bias, c, cols) if bias is not None else None
    y = F.group_norm(xv, int(num_groups), w, b, float(epsilon)).permute(0, 2, 3, 1)
    mc = memory_config if memory_config is not None else T.DRAM_MEMORY_CONFIG
    lay = _out_layout(op, [x], {}, mc, [x._flat4()])
    return _emit(y.contiguous(), x.dtype, x.layout, lay.memory, x._device, op, owned=True)
