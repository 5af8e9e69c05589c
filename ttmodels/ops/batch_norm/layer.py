"""batch_norm (standalone, eval): x * scale + shift with per-channel [1, 1, 1, C] TILE constants
(rules ``batch_norm.as_binary``); a batch_norm that follows a conv is folded into the conv by the
spec compiler and never reaches here."""
from __future__ import annotations

from .. import activations as A
from ...backends import common
from ...planning.layout import TensorLayout  # noqa: F401  (type of planned.inputs)
from ...runtime.layers.base import Layer


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


LAYERS = {"batch_norm": BatchNorm}
