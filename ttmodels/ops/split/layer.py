"""split: channel sections of a [1, 1, rows, C] tensor, one ``ttnn.slice`` each."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class Split(Layer):
    """split: one ``ttnn.slice`` per named output, in order; returns a tuple of tensors (the
    executor binds them to ``Node.outputs``)."""
    op = "split"

    def __call__(self, inputs):
        s = self.input_shape(0)
        kw = {}
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return tuple(self.tt.slice(inputs[0], [0, 0, 0, int(lo)], [1, 1, s.rows, int(hi)],
                                   [1, 1, 1, 1], **kw)
                     for _, lo, hi in self.attrs.sections)


LAYERS = {"split": Split}
