"""softmax over channels."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class Softmax(Layer):
    """softmax over channels: ``ttnn.softmax(x, -1)`` (numerically stable; no dtype argument)."""
    op = "softmax"

    def __call__(self, inputs):
        kw = dict(compute_kernel_config=self.get_compute_config())
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.softmax(inputs[0], -1, **kw)


LAYERS = {"softmax": Softmax}
