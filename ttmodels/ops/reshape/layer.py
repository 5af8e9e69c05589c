"""flatten / reshape / permute (and channel_shuffle): the ``ttnn.reshape`` / ``ttnn.permute``
calls their op package lists (its ``steps``); the last call gets the plan's memory config."""
from __future__ import annotations

import importlib

from ...backends import common
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
        if common.shares_buffer(x, inputs[0]):
            # no permute copied it (the flatten of a 1x1 map is one reshape to the same
            # [1, 1, N, C]): the output would be the input's buffer, which the executor frees
            # after this step as the plan says (its figures give the output a buffer of its
            # own). A copy, as planned, not an alias.
            x = tt.clone(x, memory_config=mc)
        return x


LAYERS = {op: Reshape for op in ("flatten", "reshape", "permute")}
