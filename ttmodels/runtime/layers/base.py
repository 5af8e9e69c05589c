"""The Layer base class: one planned graph node, its prepared parameters, a backend.

A Layer converts its host parameters once (at construction: weights are prepared then, so the
first call costs what every call costs), then ``layer(inputs)`` calls the ttnn ops on backend
tensors in TTNN's CNN convention (``[1, 1, N*H*W, C]``). The executor drops the host parameters
afterwards (``release_params``) unless asked to keep them. Layers look the
namespace up on every call (``self.tt`` is ``backend.tt``) so ``Backend.record()`` sees them.
"""
from __future__ import annotations

from typing import Any

from ...backends import common
from ...errors import LayoutError, WeightsError
from ...language.graph import Attrs, Node, TensorShape
from ...planning.layout import MemSpec
from ...planning.plan_config import PlanConfig
from ...planning.plans import PlannedLayer


class Layer:
    op: str = ""
    n_inputs: int | None = 1       # None = any number >= 1

    def __init__(self, planned: PlannedLayer, params: dict[str, Any] | None, backend, *,
                 input_shapes: list[TensorShape] | None = None):
        self.planned = planned
        self.input_shapes = list(input_shapes) if input_shapes is not None else None
        self.node: Node = planned.node
        self.backend = backend
        self.params = params or {}
        n = len(self.node.inputs)
        if self.n_inputs is not None and n != self.n_inputs:
            raise LayoutError(f"{self.op} takes {self.n_inputs} input(s), the graph gives {n}",
                              layer=self.name)
        self.compute_config = None  # built lazily: needs backend.tt and the device
        # The plan is static: memory configs and dtypes are built once per layer (the first
        # call, or ``precompute`` at build time) and the same objects are passed on every call.
        self._configs: dict = {}

    # ---- conveniences --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.node.name

    @property
    def tt(self):
        return self.backend.tt

    @property
    def device(self):
        return self.backend.device

    @property
    def config(self) -> PlanConfig:
        """The plan's typed config of this layer (``OpDef.config`` of its op)."""
        return self.planned.config

    @property
    def attrs(self) -> Attrs:
        return self.node.attrs

    @property
    def out_shape(self) -> TensorShape:
        return self.node.shape

    def memory_config(self, memspec: MemSpec | None):
        return None if memspec is None else common.memory_config(self.tt, memspec)

    def _once(self, key, make):
        if key not in self._configs:
            self._configs[key] = make()
        return self._configs[key]

    def requested_memory_config(self):
        """The plan's explicit output memory (``config.memory_config``), or None to let the
        op produce what it produces by default (which the planner modelled as ``output``)."""
        return self._once("requested", lambda: self.memory_config(self.config.memory_config))

    def output_memory_config(self):
        """The plan's resolved output memory config."""
        return self._once("output", lambda: common.memory_config(self.tt, self.planned.output.memory))

    def dtype(self, name: str | None = None):
        name = name or self.planned.output.dtype
        return self._once(("dtype", name), lambda: common.data_type(self.tt, name))

    def precompute(self) -> None:
        """Build the per-call configs now (build time) rather than on the first call."""
        self.requested_memory_config()
        self.output_memory_config()
        self.dtype()
        self.get_compute_config()

    def release_params(self) -> None:
        """Drop the host float32 parameters once the layer has made its backend tensors."""
        self.params = {}

    def get_compute_config(self):
        if self.compute_config is None:
            self.compute_config = common.compute_config(self.tt, self.device, self.node.precision)
        return self.compute_config

    def param(self, key: str, *, required: bool = True, shape: tuple[int, ...] | None = None):
        """A host parameter as float32, checked against ``shape``; errors name layer and key."""
        t = self.params.get(key)
        where = f"{self.node.weights}.{key}" if self.node.weights else key
        if t is None:
            if required:
                raise WeightsError(f"layer '{self.name}': missing parameter '{key}' "
                                   f"(weights key '{where}')", missing=[where])
            return None
        import torch
        t = torch.as_tensor(t)
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise WeightsError(f"layer '{self.name}': parameter '{key}' (weights key '{where}') "
                               f"has shape {tuple(t.shape)}, expected {tuple(shape)}",
                               mismatched=[where])
        return t.detach().to(torch.float32)

    def channel_constants(self, keys: tuple[str, ...]) -> tuple:
        """The per-channel parameters ``keys`` as [1, 1, 1, C] TILE device tensors, in the plan's
        ``constant_memory`` / ``constant_dtype`` (the norms' weight and bias), one copy per chip."""
        c, tt, cfg = self.out_shape.c, self.tt, self.config
        mem = common.memory_config(tt, cfg.constant_memory)
        dt = common.data_type(tt, cfg.constant_dtype)
        rep = common.replicated(self.backend)
        return tuple(tt.from_torch(self.param(k, shape=(c,)).reshape(1, 1, 1, c), dtype=dt,
                                   layout=tt.TILE_LAYOUT, device=self.device, memory_config=mem,
                                   **rep) for k in keys)

    def activation_after(self, y, act: str | None):
        """``act`` run standalone on this layer's output (an activation the op cannot fuse:
        ``activations.op_split``); the output keeps its memory config."""
        if act is None:
            return y
        from ...ops import activations
        fn, args, fixed = activations.standalone(self.tt, act)
        return fn(y, *args, **fixed)

    def input_shape(self, i: int = 0) -> TensorShape:
        """NHWC shape of input ``i`` (``input_shapes`` given at construction, from the graph)."""
        if self.input_shapes is None or i >= len(self.input_shapes):
            raise LayoutError(f"{self.op} needs the shapes of its inputs: pass "
                              "input_shapes=[graph.shape_of(i) for i in node.inputs] to make_layer",
                              layer=self.name)
        return self.input_shapes[i]

    def __call__(self, inputs: list):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
