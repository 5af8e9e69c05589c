"""batch_norm (standalone, eval): x * scale + shift with per-channel [1, 1, 1, C] TILE constants
(rules ``batch_norm.as_binary``); a batch_norm that follows a conv is folded into the conv by the
spec compiler and never reaches here."""
from __future__ import annotations

from .. import activations as A
from ..backends import common
from ..layout import TensorLayout  # noqa: F401  (type of planned.inputs)
from .base import Layer


class BatchNorm(Layer):
    op = "batch_norm"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        c = self.out_shape.c
        tt = self.tt
        mem = common.memory_config(tt, planned.config.constant_memory)
        dt = common.data_type(tt, planned.config.constant_dtype)
        self.scale = tt.from_torch(self.param("scale", shape=(c,)).reshape(1, 1, 1, c), dtype=dt,
                                   layout=tt.TILE_LAYOUT, device=self.device, memory_config=mem)
        self.shift = tt.from_torch(self.param("shift", shape=(c,)).reshape(1, 1, 1, c), dtype=dt,
                                   layout=tt.TILE_LAYOUT, device=self.device, memory_config=mem)
        # what the add cannot fuse (hardswish) runs after it
        self.activation, self.activation_later = A.op_split(self.attrs.get("activation"),
                                                            "binary")

    def __call__(self, inputs):
        tt = self.tt
        kw = dict(dtype=self.dtype())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        y = tt.multiply(inputs[0], self.scale, **kw)
        if self.activation is not None:
            kw["activations"] = A.binary_activations(tt, self.activation)
        out = tt.add(y, self.shift, **kw)
        tt.deallocate(y)
        return self.activation_after(out, self.activation_later)


class LayerNorm(Layer):
    """layer_norm over the channels of [1, 1, rows, C]: ``ttnn.layer_norm`` with weight and bias
    as [1, 1, 1, C] TILE tensors (layernorm_device_operation.cpp takes a TILE gamma/beta whose
    padded last dim is the input's). No dtype argument: the output has the input's dtype."""
    op = "layer_norm"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        c = self.out_shape.c
        tt = self.tt
        self.weight = self.bias = None
        if self.attrs.get("affine", True):
            mem = common.memory_config(tt, planned.config.constant_memory)
            dt = common.data_type(tt, planned.config.constant_dtype)
            rep = common.replicated(self.backend)
            self.weight, self.bias = (
                tt.from_torch(self.param(k, shape=(c,)).reshape(1, 1, 1, c), dtype=dt,
                              layout=tt.TILE_LAYOUT, device=self.device, memory_config=mem, **rep)
                for k in ("weight", "bias"))

    def __call__(self, inputs):
        kw = dict(epsilon=float(self.attrs["eps"]), weight=self.weight, bias=self.bias,
                  compute_kernel_config=self.get_compute_config())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.layer_norm(inputs[0], **kw)


class LayerScale(Layer):
    """layer_scale: x * gamma with gamma a per-channel [1, 1, 1, C] TILE constant (binary_ng
    broadcasts it over the rows, as batch_norm's scale)."""
    op = "layer_scale"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        c = self.out_shape.c
        tt = self.tt
        self.scale = tt.from_torch(
            self.param("scale", shape=(c,)).reshape(1, 1, 1, c),
            dtype=common.data_type(tt, planned.config.constant_dtype), layout=tt.TILE_LAYOUT,
            device=self.device, memory_config=common.memory_config(tt, planned.config.constant_memory),
            **common.replicated(self.backend))

    def __call__(self, inputs):
        kw = dict(dtype=self.dtype())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.multiply(inputs[0], self.scale, **kw)
