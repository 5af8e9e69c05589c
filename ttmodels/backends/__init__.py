"""Backends: a ttnn-like namespace ``tt`` plus an open device.

    from . import open_backend
    with open_backend("auto") as be:      # ttnn on a card, else the host sim (logged)
        y = be.tt.relu(x)

``be.tt`` is the real ``ttnn`` module (``ttnn_backend.py``) or ``ttmodels.backends.sim``; layer
code is written against the ttnn API only and runs unchanged on either.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .select import card_present, resolve

__all__ = ["Backend", "Call", "open_backend", "card_present", "RecordingNamespace"]


@dataclass
class Call:
    """One recorded ``tt.<name>(*args, **kwargs)`` call."""
    name: str
    args: tuple
    kwargs: dict

    def __repr__(self) -> str:
        return f"tt.{self.name}({len(self.args)} args, kwargs={sorted(self.kwargs)})"


class _RecordedCallable:
    """Forwards attribute access (``tt.TensorMemoryLayout.HEIGHT_SHARDED``) and records calls."""

    def __init__(self, name: str, target: Any, log: list[Call]):
        self._name, self._target, self._log = name, target, log

    def __call__(self, *args, **kwargs):
        self._log.append(Call(self._name, args, kwargs))
        return self._target(*args, **kwargs)

    def __getattr__(self, item):
        return getattr(self._target, item)


class RecordingNamespace:
    """Wraps a ttnn-like namespace so every call made through it (ops, and constructors such
    as ``tt.MemoryConfig(...)``) is appended to ``calls``. Non-callables pass through."""

    def __init__(self, tt: Any, calls: list[Call] | None = None):
        self._tt = tt
        self.calls: list[Call] = [] if calls is None else calls

    def __getattr__(self, name: str):
        obj = getattr(self._tt, name)
        if callable(obj) and not _is_enum_type(obj):
            return _RecordedCallable(name, obj, self.calls)
        return obj


def _is_enum_type(obj) -> bool:
    import enum
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return True
    # nanobind enums (ttnn.TensorMemoryLayout, ...) are types with __members__
    return isinstance(obj, type) and hasattr(obj, "__members__")


@dataclass
class Backend:
    """An open backend. ``name`` is "sim", "ttnn" or "ttnn-mock" (the real ttnn on a mock device,
    ``ttmodels.backends.mock_device``: ops are validated and planned by ttnn, nothing is computed); ``tt``
    the namespace layers call; ``device`` the open device (a ttnn MeshDevice or the sim's
    SimDevice). ``mesh`` is the ``MeshSpec`` a multi-chip backend was opened on (``device`` is
    then the mesh device), else None."""
    name: str
    tt: Any
    device: Any
    options: dict = field(default_factory=dict)
    closed: bool = False
    mesh: Any = None

    @property
    def num_chips(self) -> int:
        return 1 if self.mesh is None else self.mesh.num_chips

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.name == "ttnn":
            from .ttnn_backend import close_device
            close_device(self._base_tt, self.device, mesh=self.mesh is not None)
        elif self.mesh is not None:
            self._base_tt.close_mesh_device(self.device)
        elif self.name == "ttnn-mock":
            self._base_tt.close_device(self.device)
        else:
            self._base_tt.close_device(self.device)

    @property
    def _base_tt(self):
        tt = self.tt
        while isinstance(tt, RecordingNamespace):
            tt = tt._tt
        return tt

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def record(self) -> Iterator[list[Call]]:
        """Record every ``tt.*`` call made through ``backend.tt`` inside the block:

            with backend.record() as calls:
                executor.run(inputs)
            [c.name for c in calls]   # ["to_memory_config", "conv2d", ...]
        """
        saved = self.tt
        rec = RecordingNamespace(saved)
        self.tt = rec
        try:
            yield rec.calls
        finally:
            self.tt = saved

    def layer_scope(self, name: str):
        """Attribute errors raised by ops inside the block to layer ``name`` (sim only)."""
        scope = getattr(self._base_tt, "layer_scope", None)
        return scope(name) if scope is not None else contextlib.nullcontext()

    def synchronize(self) -> None:
        sync = getattr(self._base_tt, "synchronize_device", None)
        if sync is not None:
            sync(self.device)


def open_backend(name: str = "auto", *, device_id: int = 0, l1_small_size: int | None = None,
                 trace_region_size: int = 0, mesh=None, system: str = "n150") -> Backend:
    """Open a backend. ``name``: "auto" (ttnn when a card is present, else sim; logged on the
    "ttmodels" logger), "sim", "ttnn" (DeviceError without a card) or "ttnn-mock" (the installed
    ttnn on a mock Wormhole n150: validation and L1 accounting only, see ``ttmodels.tools.verify``).
    ``l1_small_size`` defaults to 32768 (conv/pool halo configs); ``trace_region_size`` > 0
    reserves DRAM for traces. ``mesh`` (None, "n150", "n300", "t3000" or (rows, cols); see
    ``ttmodels.runtime.mesh``) opens a ttnn MeshDevice over that many chips (on "ttnn-mock", the mock
    system of that name), or as many sim devices (docs/multichip.md). ``system``: the single-chip
    mock system "ttnn-mock" opens without a mesh ("n150", "p150")."""
    from ..runtime.mesh import resolve_mesh
    from .ttnn_backend import DEFAULT_L1_SMALL_SIZE
    kind = resolve(name)
    mesh = resolve_mesh(mesh)
    l1_small = DEFAULT_L1_SMALL_SIZE if l1_small_size is None else int(l1_small_size)
    options = {"device_id": device_id, "l1_small_size": l1_small,
               "trace_region_size": int(trace_region_size)}
    if mesh is not None:
        options["mesh"] = mesh.name
        if kind == "ttnn":
            from .ttnn_backend import open_mesh
            tt, device = open_mesh(mesh, l1_small_size=l1_small,
                                   trace_region_size=trace_region_size)
            return Backend("ttnn", tt, device, options, mesh=mesh)
        if kind == "ttnn-mock":
            from .mock_device import open_mesh_device as open_mock_mesh
            tt, device = open_mock_mesh(mesh, l1_small_size=l1_small,
                                        trace_region_size=trace_region_size)
            return Backend("ttnn-mock", tt, device, options, mesh=mesh)
        from . import sim
        device = sim.open_mesh_device(sim.MeshShape(mesh.rows, mesh.cols), l1_small_size=l1_small,
                                      trace_region_size=trace_region_size)
        return Backend("sim", sim, device, options, mesh=mesh)
    if kind == "ttnn-mock":
        from .mock_device import open_device as open_mock
        tt, device = open_mock(system, l1_small_size=l1_small, trace_region_size=trace_region_size)
        return Backend("ttnn-mock", tt, device, options)
    if kind == "ttnn":
        from .ttnn_backend import open_device
        tt, device = open_device(device_id=device_id, l1_small_size=l1_small,
                                 trace_region_size=trace_region_size)
        return Backend("ttnn", tt, device, options)
    from . import sim
    device = sim.open_device(device_id=device_id, l1_small_size=l1_small,
                             trace_region_size=trace_region_size)
    return Backend("sim", sim, device, options)
