"""slice: channels [start, stop) of a [1, 1, rows, C] tensor (ttnn.slice with starts/ends/steps)."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class Slice(Layer):
    op = "slice"

    def __call__(self, inputs):
        s = self.input_shape(0)
        a = self.attrs
        kw = {}
        mc = self.requested_memory_config()
        if mc is not None:
            kw["memory_config"] = mc
        return self.tt.slice(inputs[0], [0, 0, 0, int(a["start"])], [1, 1, s.rows, int(a["stop"])],
                             [1, 1, 1, 1], **kw)


LAYERS = {"slice": Slice}
