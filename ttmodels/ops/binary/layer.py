"""Binary ops (add, multiply, subtract: tensor (op) tensor, tensor (op) constant, or a tensor
against a per-image vector [N, 1, 1, C] -- the squeeze-and-excitation gate)."""
from __future__ import annotations

from .. import activations as A
from ...runtime.layers.base import Layer


class Binary(Layer):
    n_inputs = 2

    def __init__(self, planned, params, backend, **kw):
        super().__init__(planned, params, backend, **kw)
        self.op = self.node.op
        # The planner puts a constant operand second for add/multiply (binary_ng broadcasts b
        # over a's rows and the output takes a's memory config; both ops commute).
        self.swap = bool(self.config.swap_operands)
        # what binary_ng cannot fuse (it drops hardswish silently) runs after it
        self.activation, self.activation_later = A.op_split(self.attrs.get("activation"),
                                                            "binary")
        # Over-budget adds write into operand a (TT's ResNet does ttnn.add_ in its bottleneck);
        # the executor turns it off when it must keep every layer's output (compare).
        self.inplace = bool(self.config.inplace)
        # A per-image vector against a [N, H, W, C] tensor with N > 1: both go 4-D so binary_ng
        # broadcasts b over each image's rows (rules ``binary.reshape_broadcast``).
        self.per_image = self.config.broadcast == "per_image"

    def __call__(self, inputs):
        tt = self.tt
        a, b = inputs
        if self.swap:
            a, b = b, a
        kwargs = dict(dtype=self.dtype())
        mc = self.requested_memory_config()
        if mc is not None:
            kwargs["memory_config"] = mc
        if self.activation is not None:
            kwargs["activations"] = self._once(
                "activations", lambda: A.binary_activations(tt, self.activation))
        if self.inplace:
            kwargs["output_tensor"] = a
        if not self.per_image:
            return self.activation_after(getattr(tt, self.op)(a, b, **kwargs),
                                         self.activation_later)
        o = self.out_shape
        a4 = tt.reshape(a, (o.n, 1, o.h * o.w, o.c))
        b4 = tt.reshape(b, (o.n, 1, 1, o.c))
        y = getattr(tt, self.op)(a4, b4, **kwargs)
        return self.activation_after(tt.reshape(y, (1, 1, o.n * o.h * o.w, o.c)),
                                     self.activation_later)

    def inplace_operand(self) -> int | None:
        """Index (in the node's input order) of the operand whose buffer holds the output."""
        if not self.inplace:
            return None
        return 1 if self.swap else 0


# Named classes kept for the layer table and users' isinstance checks.
class Add(Binary):
    op = "add"


class Multiply(Binary):
    op = "multiply"


class Subtract(Binary):
    op = "subtract"


LAYERS = {"add": Add, "multiply": Multiply, "subtract": Subtract}
