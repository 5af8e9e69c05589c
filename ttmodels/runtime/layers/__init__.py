"""Layers: one class per op family, written against the ttnn API only (``backend.tt``). Each op's
layer class is in its package (``ttmodels/ops/<op>/layer.py``, ``OpDef.layer``); here are the
base class, the edge adapters and the op-agnostic constructor.

    layer = make_layer(planned_layer, params, backend, input_shapes=[...])
    y = layer([x])              # backend tensors in [1, 1, N*H*W, C]
"""
from __future__ import annotations

from ... import ops
from ...errors import LayoutError
from .adapters import AdapterLayer
from .base import Layer


def layer_class(op: str) -> type[Layer]:
    """The layer class of ``op``, as its registry entry names it (``ttmodels/ops/<op>/layer.py``)."""
    return ops.get(op).layer.resolve()


__all__ = ["Layer", "AdapterLayer", "make_layer", "layer_class", "conv2d_config", "Binary"]


def __getattr__(name: str):
    # op layer modules import this package's base, so their names are looked up on first use
    if name == "conv2d_config":
        from ...ops.conv2d.layer import conv2d_config
        return conv2d_config
    if name == "Binary":
        from ...ops.binary.layer import Binary
        return Binary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_layer(planned, params, backend, *, input_shapes=None) -> Layer:
    """Build the Layer for ``planned`` (a PlannedLayer) with its host parameters (float32 torch
    tensors, see each class) on ``backend``. ``input_shapes``: NHWC TensorShapes of the node's
    inputs (the executor passes ``graph.shape_of`` of each)."""
    try:
        cls = layer_class(planned.node.op)
    except KeyError:
        raise LayoutError(f"no layer implements op '{planned.node.op}'; known: "
                          f"{sorted(ops.OPS)}", layer=planned.node.name) from None
    return cls(planned, params, backend, input_shapes=input_shapes)
