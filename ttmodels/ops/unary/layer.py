"""The standalone eltwise unary ops of the activation table (relu, sigmoid, silu, ...) plus
identity."""
from __future__ import annotations

from .. import activations as A
from ...runtime.layers.base import Layer
from . import unary_activation


class Unary(Layer):
    """``ttnn.<function>(x[, param], memory_config=...)`` of the activation table; identity is
    ``ttnn.identity``."""

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.op = self.node.op
        self.activation = unary_activation(self.op, self.attrs)

    def __call__(self, inputs):
        tt = self.tt
        kwargs = {}
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        if self.activation is None:
            return tt.identity(inputs[0], **kwargs)
        fn, args, fixed = A.standalone(tt, self.activation)
        return fn(inputs[0], *args, **fixed, **kwargs)


class Relu(Unary):
    op = "relu"


LAYERS = {**{a.name: Relu if a.name == "relu" else Unary for a in A.ACTIVATIONS.values()},
          "identity": Unary}
