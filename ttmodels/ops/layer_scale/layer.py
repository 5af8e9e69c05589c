"""layer_scale: x * gamma, gamma a per-channel TILE constant."""
from __future__ import annotations

from ...backends import common
from ...runtime.layers.base import Layer


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


LAYERS = {"layer_scale": LayerScale}
