"""grn composed of ttnn ops: ConvNeXt-V2's Global Response Normalization per sample."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class Grn(Layer):
    """grn of [1, 1, N*H*W, C], reshaped to [N, 1, H*W, C] (a view at batch 1):
    ``g = sqrt(sum_HW(x*x))`` ([N, 1, 1, C]), ``nx = g / (mean_C(g) + eps)``,
    ``y = x * (1 + weight * nx) + bias`` (timm's ``x + bias + weight * (x * nx)`` regrouped: one
    full-size multiply and add instead of two multiplies and two adds). The full-size steps
    keep the input's memory config; the [N, 1, 1, C] vectors go where ttnn puts them."""
    op = "grn"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.weight, self.bias = self.channel_constants(("weight", "bias"))

    def __call__(self, inputs):
        s, tt = self.out_shape, self.tt
        mc = self.requested_memory_config()
        x = inputs[0]
        if s.n > 1:
            x = tt.reshape(x, (s.n, 1, s.h * s.w, s.c))
        sq = tt.multiply(x, x, memory_config=mc)
        g = tt.sqrt(tt.sum(sq, dim=2, keepdim=True))
        tt.deallocate(sq)
        mu = tt.add(tt.mean(g, dim=3, keepdim=True), float(self.attrs.eps))
        nx = tt.divide(g, mu)
        scale = tt.add(tt.multiply(nx, self.weight), 1.0)
        xs = tt.multiply(x, scale, memory_config=mc)
        y = tt.add(xs, self.bias, memory_config=mc)
        tt.deallocate(xs)
        return tt.reshape(y, (1, 1, s.n * s.h * s.w, s.c)) if s.n > 1 else y


LAYERS = {"grn": Grn}
