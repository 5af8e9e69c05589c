"""softmax's layout rule (TILE out), check and output layout."""
from __future__ import annotations

from ...planning.layout import TILE_LAYOUT, TensorLayout
from ...planning.rules import OutputQuery, Rule

_SOFTMAX = "ttnn/cpp/ttnn/operations/normalization/softmax/softmax.cpp"

RULE_LIST = (
    Rule("softmax.tile", "softmax",
         "ttnn.softmax(x, -1) takes interleaved or sharded inputs without a program config and "
         "returns TILE (a ROW_MAJOR input is tilized), the input's dtype, the argument's or the "
         "input's memory config (seen on the 0.81.1 mock device); the planner gives it TILE",
         f"{_SOFTMAX}: softmax (dim -1 on a 4-D input: SoftmaxDeviceOperation)"),
)


def _c_softmax(inputs, attrs, output, shapes):
    return []


def _out_softmax(q: OutputQuery) -> TensorLayout:
    """softmax: the argument's or the input's memory config, TILE, the input's dtype."""
    return TensorLayout(q.requested if q.requested is not None else q.x.memory, TILE_LAYOUT,
                        q.dtype_in)
