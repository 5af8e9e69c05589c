"""upsample: ttnn.upsample works on NHWC [N, H, W, C]; reshape around it."""
from __future__ import annotations

from ..errors import LayoutError
from .base import Layer


class Upsample(Layer):
    op = "upsample"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.scale = [int(v) for v in self.attrs["scale"]]
        self.mode = self.attrs.get("mode", "nearest")
        if self.mode not in ("nearest", "bilinear"):
            raise LayoutError(f"upsample mode {self.mode!r} (expected nearest or bilinear)",
                              layer=self.name)

    def __call__(self, inputs):
        tt = self.tt
        s = self.input_shape(0)
        x = tt.reshape(inputs[0], (s.n, s.h, s.w, s.c))
        kwargs = dict(mode=self.mode)
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        if self.mode == "bilinear":
            kwargs["compute_kernel_config"] = self.get_compute_config()
        y = tt.upsample(x, self.scale, **kwargs)
        o = self.out_shape
        return tt.reshape(y, (1, 1, o.n * o.h * o.w, o.c))
