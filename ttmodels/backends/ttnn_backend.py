"""The real backend: ttnn on an open Tenstorrent device. The only module that imports ttnn.

Device options CNNs need (see docs/backends.md):

* ``l1_small_size``: conv2d and the sliding-window pools allocate their halo/reader-index config
  tensors from the L1_SMALL region; ttnn's default is 0, which makes them fail or fall back. TT's
  ResNet50 opens its device with 24576 (Wormhole) / 32768; we default to 32768.
* ``trace_region_size``: DRAM reserved for captured traces; 0 unless tracing.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ..arch import DEFAULT_GRID
from ..errors import DeviceError

log = logging.getLogger("ttmodels")

DEFAULT_L1_SMALL_SIZE = 32768


def import_ttnn():
    """``import ttnn`` with a clear error when the wheel is missing."""
    try:
        import ttnn  # noqa: WPS433 (lazy on purpose: ~8 s)
    except ImportError as e:  # pragma: no cover - ttnn is a dependency
        raise DeviceError(f"backend='ttnn' needs the ttnn package: {e}") from e
    return ttnn


def open_device(*, device_id: int = 0, l1_small_size: int = DEFAULT_L1_SMALL_SIZE,
                trace_region_size: int = 0) -> tuple[Any, Any]:
    """Open device ``device_id``; returns ``(ttnn, device)``. Failures become DeviceError."""
    ttnn = import_ttnn()
    try:
        device = ttnn.open_device(device_id=device_id, l1_small_size=int(l1_small_size),
                                  trace_region_size=int(trace_region_size))
    except Exception as e:  # ttnn raises RuntimeError (TT_THROW) for a missing/busy card
        raise DeviceError(f"could not open Tenstorrent device {device_id}: {e}") from e
    log.debug("opened ttnn device %s (l1_small_size=%d, trace_region_size=%d)", device_id,
              l1_small_size, trace_region_size)
    return ttnn, device


def open_mesh(mesh, *, l1_small_size: int = DEFAULT_L1_SMALL_SIZE,
              trace_region_size: int = 0, system=None) -> tuple[Any, Any]:
    """Open a ttnn MeshDevice of ``mesh.rows x mesh.cols`` chips (a ``MeshSpec``); returns
    ``(ttnn, mesh_device)``. Every op called on it runs on every chip, each chip on its own shard
    of the inputs (data parallel, docs/multichip.md). ``system``: its ``mesh.DEVICES`` entry
    (None: the one of that name, else Wormhole chips dispatched over ethernet).

    Multi-chip Wormhole meshes dispatch from ethernet cores, as TT's n300/T3000 models do
    (their tests require the full 8x8 worker grid per chip: tt-metal
    models/experimental/functional_unet/tests/common.py ``is_n300_with_eth_dispatch_cores``);
    with worker-core dispatch a chip with two harvested rows keeps only 8x7 workers, which the
    plan's 8x8 grid does not fit. A system whose entry says "worker" (p150x4) keeps ttnn's
    default. The grid is checked against the system's arch after opening."""
    from ..arch import get as arch_get
    from ..runtime.mesh import DEVICES, resolve_target
    if system is None:
        system = DEVICES.get(mesh.name) or resolve_target(mesh=mesh).system
    ttnn = import_ttnn()
    kw = {}
    if mesh.num_chips > 1 and system.dispatch == "eth":
        kw["dispatch_core_config"] = ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.ETH)
    try:
        device = ttnn.open_mesh_device(ttnn.MeshShape(mesh.rows, mesh.cols),
                                       l1_small_size=int(l1_small_size),
                                       trace_region_size=int(trace_region_size), **kw)
    except Exception as e:  # TT_THROW/TT_FATAL: fewer chips than asked, busy cards
        raise DeviceError(f"could not open a {mesh.describe()} ttnn mesh device: {e}") from e
    grid = device.compute_with_storage_grid_size()
    gx, gy = arch_get(system.arch).grid
    if grid.x < gx or grid.y < gy:      # each axis: a 9x1 grid holds no 8x8 plan either
        ttnn.close_mesh_device(device)
        raise DeviceError(f"the {mesh.describe()} mesh offers a {grid.x}x{grid.y} worker grid per "
                          f"chip; the plans are made for {gx}x{gy}")
    log.debug("opened ttnn mesh %s (l1_small_size=%d, trace_region_size=%d)", mesh.describe(),
              l1_small_size, trace_region_size)
    return ttnn, device


def close_device(ttnn, device, *, mesh: bool = False) -> None:
    ttnn.synchronize_device(device)
    if mesh:
        ttnn.close_mesh_device(device)
    else:
        ttnn.close_device(device)


class Trace:
    """Capture a static-shape run once and replay it (ttnn metal trace).

    ``fn(device_inputs) -> dict of device outputs`` must allocate and free the same buffers on
    every call (true for an Executor run on fixed shapes). ``device_inputs`` are persistent device
    tensors; ``replay(host_inputs)`` copies new host tensors (same shape, dtype, layout) into them
    with ``copy_host_to_device_tensor`` and executes the trace; the returned output tensors are
    the ones captured, overwritten by each replay.

    On a namespace without trace support (the sim), capture just remembers ``fn`` and replay runs
    it again, so the same code path runs on the host.
    """

    def __init__(self, tt, device, fn: Callable[[dict], dict], device_inputs: dict, *,
                 cq_id: int = 0, warmup: bool = True):
        self.tt, self.device, self.fn, self.inputs, self.cq_id = tt, device, fn, device_inputs, cq_id
        self.native = all(hasattr(tt, n) for n in ("begin_trace_capture", "end_trace_capture",
                                                   "execute_trace", "release_trace"))
        self.trace_id = None
        self.outputs: dict | None = None
        if warmup:
            # First run compiles every program; capture must not include compilation.
            out = fn(device_inputs)
            keep = {id(v) for v in device_inputs.values()}
            for t in out.values():
                if id(t) not in keep:
                    tt.deallocate(t)
        if self.native:
            self.trace_id = tt.begin_trace_capture(device, cq_id=cq_id)
            try:
                self.outputs = fn(device_inputs)
            finally:
                tt.end_trace_capture(device, self.trace_id, cq_id=cq_id)
        else:
            self.outputs = None

    def replay(self, host_inputs: dict | None = None) -> dict:
        for name, host in (host_inputs or {}).items():
            if self.native or hasattr(self.tt, "copy_host_to_device_tensor"):
                self.tt.copy_host_to_device_tensor(host, self.inputs[name])
            else:
                old = self.inputs[name]
                self.inputs[name] = self.tt.to_device(host, self.device, old.memory_config())
                self.tt.deallocate(old)
        if not self.native:
            return self.fn(self.inputs)
        self.tt.execute_trace(self.device, self.trace_id, cq_id=self.cq_id, blocking=True)
        return self.outputs

    def release(self) -> None:
        if self.native and self.trace_id is not None:
            self.tt.release_trace(self.device, self.trace_id)
            self.trace_id = None
