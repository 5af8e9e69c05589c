"""concat: channel concatenation of [1, 1, rows, C_i] tensors (dim 3)."""
from __future__ import annotations

from ...runtime.layers.base import Layer


class Concat(Layer):
    op = "concat"
    n_inputs = None

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        if len(self.node.inputs) < 2:
            from ...errors import LayoutError
            raise LayoutError("concat needs at least 2 inputs", layer=self.name)

    def __call__(self, inputs):
        # Always pass the output memory config: for sharded inputs ttnn would otherwise reuse
        # the first input's shard spec, whose width is that input's channels only.
        return self.tt.concat(list(inputs), dim=3, memory_config=self.output_memory_config())


LAYERS = {"concat": Concat}
