"""ttnn.concat on the sim backend."""
from __future__ import annotations

import torch

from ...backends.sim.numerics import _emit, _out_layout
from ...backends.sim.tensor import _check, _on_device, current_layer, memspec
from ...errors import Error
from .rules import ConcatArgs

__all__ = ["concat"]
TTNN_FUNCTIONS = tuple(__all__)


def concat(tensors, dim=0, *, memory_config=None, output_tensor=None, groups=1, sub_core_grids=None):
    op = "concat"
    ts = [_on_device(t, op, f"tensors[{i}]") for i, t in enumerate(tensors)]
    if not ts:
        raise Error("concat needs at least one tensor")
    rank = len(ts[0].shape)
    d = dim + rank if dim < 0 else dim
    # the rule table's concat.same_format (one dtype) and concat.same_layout (sharded inputs
    # share one layout; interleaved ones may mix TILE and ROW_MAJOR, ttnn 0.81.1's wrapper
    # converts them, and the output has the first input's layout, as the planner plans it)
    attrs = ConcatArgs(dim=-1 if d == rank - 1 else d)
    _check(op, ts, attrs, memspec(memory_config) if memory_config is not None else None)
    try:
        y = torch.cat([t._data for t in ts], dim=d)
    except RuntimeError as e:
        raise Error(f"{current_layer(op)}: {e}")
    lay = _out_layout(op, ts, attrs, memory_config, [t._flat4() for t in ts])
    return _emit(y, ts[0].dtype, ts[0].layout, lay.memory, ts[0]._device, op)
