"""add, multiply (tensor x tensor, or tensor x constant broadcast over rows), relu."""
from __future__ import annotations

from ..backends import common
from ..errors import LayoutError
from .base import Layer


class _Binary(Layer):
    n_inputs = 2

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        # The planner puts a constant operand second (binary_ng broadcasts b over a's rows and
        # the output takes a's memory config); both ops are commutative.
        self.swap = bool(self.config.get("swap_operands", False))
        act = self.attrs.get("activation")
        if act not in (None, "none", "relu"):
            raise LayoutError(f"{self.op} activation {act!r} is not supported (only relu)",
                              layer=self.name)
        self.relu = act == "relu"
        # Over-budget adds write into operand a (TT's ResNet does ttnn.add_ in its bottleneck);
        # the executor turns it off when it must keep every layer's output (compare).
        self.inplace = bool(self.config.get("inplace", False))

    def __call__(self, inputs):
        tt = self.tt
        a, b = inputs
        if self.swap:
            a, b = b, a
        kwargs = dict(dtype=self.dtype())
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        if self.relu:
            kwargs["activations"] = [common.unary_relu(tt)]
        if self.inplace:
            kwargs["output_tensor"] = a
        return getattr(tt, self.op)(a, b, **kwargs)

    def inplace_operand(self) -> int | None:
        """Index (in the node's input order) of the operand whose buffer holds the output."""
        if not self.inplace:
            return None
        return 1 if self.swap else 0


class Add(_Binary):
    op = "add"


class Multiply(_Binary):
    op = "multiply"


class Relu(Layer):
    op = "relu"

    def __call__(self, inputs):
        mc = self.requested_memory_config()
        if mc is None:
            return self.tt.relu(inputs[0])
        return self.tt.relu(inputs[0], memory_config=mc)
