"""A built model: a Plan, its prepared layers on a backend, callable on NCHW torch tensors."""
from __future__ import annotations

from typing import Any


class MockOutput:
    """What a mock-device run gives instead of a tensor: ttnn's output spec, no values."""

    def __init__(self, shape: tuple[int, ...], dtype: str, layout: str, memory_config: str):
        self.shape, self.dtype, self.layout, self.memory_config = shape, dtype, layout, memory_config

    @classmethod
    def of(cls, t) -> "MockOutput":
        return cls(tuple(int(v) for v in t.shape), str(t.dtype), str(t.layout),
                   str(t.memory_config()))

    def __repr__(self) -> str:
        return (f"MockOutput(shape={self.shape}, dtype={self.dtype}, layout={self.layout}; "
                "no values: the mock device computes nothing)")

    def __array__(self, *a, **k):
        from ..errors import DeviceError
        raise DeviceError("a mock-device output has no values (ttmodels.backends.mock_device runs ttnn's "
                          "validation only); use backend='sim' for numbers")


class Model:
    """Returned by ``ttmodels.build``.

    ``model(x)`` takes a float NCHW torch tensor (or a dict of them by input name, or backend
    tensors already in TTNN's ``[1, 1, N*H*W, C]`` convention) and returns the first output as a
    float torch tensor: ``[N, classes]`` for a classifier head, NCHW for feature maps.
    ``model.run(x)`` returns every named output. Built with ``mesh=``, ``x`` is the whole batch
    (``model.batch_size``) and so is the result: chip i computes samples i*n .. i*n+n-1.
    """

    def __init__(self, plan, executor, backend, *, weights_info: str = "", build_seconds: float = 0.0,
                 params=None):
        self.plan = plan
        self.params = params
        self.executor = executor
        self.backend = backend
        self.weights_info = weights_info
        self.build_seconds = build_seconds

    @property
    def graph(self):
        return self.plan.graph

    @property
    def backend_name(self) -> str:
        return self.backend.name

    @property
    def outputs(self) -> list[str]:
        return list(self.graph.outputs)

    def _inputs(self, x) -> dict[str, Any]:
        names = list(self.graph.inputs)
        if isinstance(x, dict):
            unknown = sorted(set(x) - set(names))
            if unknown:
                from ..errors import Error
                raise Error(f"unknown model input(s) {unknown}; the spec's inputs are {names}")
            return dict(x)
        if len(names) != 1:
            from ..errors import Error
            raise Error(f"this model has inputs {names}: pass a dict")
        return {names[0]: x}

    def _check_input(self, name: str, x) -> None:
        import torch

        if not isinstance(x, torch.Tensor):
            tensor_type = getattr(self.backend._base_tt, "Tensor", None)
            if isinstance(tensor_type, type) and isinstance(x, tensor_type):
                return  # a backend tensor: the executor checks it
            from ..errors import Error
            raise Error(f"input '{name}' is a {type(x).__name__}; the model takes a float NCHW "
                        f"torch tensor (e.g. torch.from_numpy(a).float()) or a {self.backend_name} "
                        "backend tensor in the plan's [1, 1, N*H*W, C] input layout")
        problem = _tensor_problem(x)
        if problem:
            from ..errors import Error
            raise Error(f"input '{name}' {problem}")
        from .executor import check_input_shape
        check_input_shape(self.plan, name, x)

    def run(self, x) -> dict[str, Any]:
        """All named outputs as float torch tensors."""
        from .executor import to_torch_nchw

        inputs = self._inputs(x)
        for name, t in inputs.items():
            self._check_input(name, t)
        if self.backend.name == "ttnn-mock":
            return self._run_mock(inputs)
        raw = self.executor.run(inputs)
        out = {}
        for name in self.graph.outputs:
            shape = self.graph.shape_of(name)
            t = to_torch_nchw(self.backend, raw[name], shape)
            if name in self.graph.inputs or self.graph.producer(name).op == "linear":
                t = t.reshape(t.shape[0], shape.c) if shape.h == shape.w == 1 else t
            out[name] = t
        return out

    def _run_mock(self, inputs) -> dict[str, Any]:
        """On the mock device: every layer runs through ttnn for real (its allocator places every
        buffer, as on a card; ``ttmodels verify``) but no kernel executes, so each output is a
        ``MockOutput`` (shape, dtype, layout, memory config): there are no values. The device
        is left as it was found: the run's tensors and weights go with the executor."""
        from .executor import Executor
        ex = Executor(self.plan, self.params, self.backend)
        raw = ex.run(inputs)
        out = {name: MockOutput.of(t) for name, t in raw.items()}
        for t in raw.values():
            self.backend.tt.deallocate(t)
        return out

    def __call__(self, x):
        return self.run(x)[self.graph.outputs[0]]

    @property
    def mesh(self):
        """The ``MeshSpec`` the model runs data parallel on, or None (one chip)."""
        return self.plan.mesh

    @property
    def batch_size(self) -> int:
        """The whole batch ``model(x)`` takes (the per-chip batch times the chips)."""
        return self.plan.batch_size

    def summary(self) -> str:
        lines = [f"model {self.graph.name}: backend {self.backend_name}, weights {self.weights_info},"
                 f" built in {self.build_seconds:.2f} s", str(self.plan)]
        return "\n".join(lines)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _tensor_problem(x) -> str | None:
    """Why a torch tensor cannot be an input although its type is right, None when it can: a
    meta tensor has no values (the run would return a meta tensor, or torch would fail inside
    a layer), and a complex one would be made real without a word by the float conversion."""
    if x.is_meta:
        return ("is a meta tensor: it has a shape but no values (make it on the CPU, e.g. "
                "without device='meta')")
    if x.is_complex():
        return (f"is complex ({x.dtype}); the model takes real values: pass x.real, x.abs() "
                "or torch.view_as_real(x) as you mean it")
    return None
