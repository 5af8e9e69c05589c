"""layer_norm over the channels: ``ttnn.layer_norm`` with TILE weight and bias."""
from __future__ import annotations

from ...backends import common
from ...runtime.layers.base import Layer


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
        kw = dict(epsilon=float(self.attrs.eps), weight=self.weight, bias=self.bias,
                  compute_kernel_config=self.get_compute_config())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.layer_norm(inputs[0], **kw)


LAYERS = {"layer_norm": LayerNorm}
