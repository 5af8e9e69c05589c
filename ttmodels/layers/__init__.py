"""Layers: one class per op family, written against the ttnn API only (``backend.tt``).

    layer = make_layer(planned_layer, params, backend, input_shapes=[...])
    y = layer([x])              # backend tensors in [1, 1, N*H*W, C]
"""
from __future__ import annotations

from ..errors import LayoutError
from .adapters import AdapterLayer
from .base import Layer
from .concat import Concat
from .conv2d import Conv2d, conv2d_config
from ..ops import UNARY
from .eltwise import Add, Binary, Multiply, Relu, Subtract, Unary
from .linear import Linear
from .norm import BatchNorm
from .pad import Pad
from .pool import AdaptiveAvgPool2d, AvgPool2d, GlobalAvgPool, MaxPool2d
from .conv_transpose import ConvTranspose2d
from .slice import Slice, Split
from .upsample import Upsample

LAYERS: dict[str, type[Layer]] = {
    "conv2d": Conv2d, "add": Add, "multiply": Multiply, "subtract": Subtract,
    **{op: Unary for op in UNARY}, "relu": Relu,
    "max_pool2d": MaxPool2d, "avg_pool2d": AvgPool2d, "global_avg_pool": GlobalAvgPool,
    "adaptive_avg_pool2d": AdaptiveAvgPool2d, "batch_norm": BatchNorm, "slice": Slice,
    "split": Split, "conv_transpose2d": ConvTranspose2d,
    "linear": Linear, "upsample": Upsample, "concat": Concat, "pad": Pad,
}

__all__ = ["LAYERS", "Layer", "AdapterLayer", "make_layer", "conv2d_config", "Binary",
           *sorted({c.__name__ for c in LAYERS.values()})]


def make_layer(planned, params, backend, *, input_shapes=None) -> Layer:
    """Build the Layer for ``planned`` (a PlannedLayer) with its host parameters (float32 torch
    tensors, see each class) on ``backend``. ``input_shapes``: NHWC TensorShapes of the node's
    inputs (the executor passes ``graph.shape_of`` of each)."""
    cls = LAYERS.get(planned.node.op)
    if cls is None:
        raise LayoutError(f"no layer implements op '{planned.node.op}'; known: {sorted(LAYERS)}",
                          layer=planned.node.name)
    return cls(planned, params, backend, input_shapes=input_shapes)
