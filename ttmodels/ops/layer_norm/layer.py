"""layer_norm over the channels: ``ttnn.layer_norm`` with TILE weight and bias."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class LayerNorm(Layer):
    """layer_norm over the channels of [1, 1, rows, C]: ``ttnn.layer_norm`` with weight and bias
    as [1, 1, 1, C] TILE tensors (layernorm_device_operation.cpp takes a TILE gamma/beta whose
    padded last dim is the input's). No dtype argument: the output has the input's dtype."""
    op = "layer_norm"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.weight = self.bias = None
        if self.attrs.get("affine", True):
            self.weight, self.bias = self.channel_constants(("weight", "bias"))

    def __call__(self, inputs):
        kw = dict(epsilon=float(self.attrs.eps), weight=self.weight, bias=self.bias,
                  compute_kernel_config=self.get_compute_config())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.layer_norm(inputs[0], **kw)


LAYERS = {"layer_norm": LayerNorm}
