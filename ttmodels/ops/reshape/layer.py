"""flatten / reshape / permute (and channel_shuffle): the ``ttnn.reshape`` / ``ttnn.permute``
calls their op package lists (its ``steps``); the last call gets the plan's memory config."""
from __future__ import annotations

import importlib

from ...runtime.layers.base import Layer


class Reshape(Layer):
    op = "reshape"

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        # the ttnn calls are the op's own (``steps`` of its package: this family's ops and
        # channel_shuffle)
        from ..base import get
        own = importlib.import_module(get(self.node.op).package)
        self.steps = own.steps(self.node, self.input_shape(0))

    def __call__(self, inputs):
        tt = self.tt
        x = inputs[0]
        mc = self.output_memory_config()
        # intermediates are dropped with their Python objects (a reshape may be a view of the
        # input, which the executor still owns: never deallocated here)
        for kind, arg in self.steps:
            if kind == "permute":
                x = tt.permute(x, list(arg), memory_config=mc)
            else:
                x = tt.reshape(x, list(arg))
        return x


LAYERS = {op: Reshape for op in ("flatten", "reshape", "permute")}
