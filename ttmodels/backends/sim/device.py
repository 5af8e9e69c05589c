"""The simulated device: a Wormhole n150 (8x8 worker grid) that needs no card."""
from __future__ import annotations

from ...arch import DEFAULT_GRID
from .types import Arch, CoreCoord


class SimDevice:
    """What layer code asks a ttnn device: its arch and compute grid. Nothing is allocated."""

    def __init__(self, device_id: int = 0, l1_small_size: int = 0, trace_region_size: int = 0,
                 num_command_queues: int = 1, worker_l1_size: int | None = None):
        self.device_id = device_id
        self.l1_small_size = l1_small_size
        self.trace_region_size = trace_region_size
        self.num_command_queues = num_command_queues
        self.worker_l1_size = worker_l1_size
        self.is_open = True

    def arch(self) -> Arch:
        return Arch.WORMHOLE_B0

    def compute_with_storage_grid_size(self) -> CoreCoord:
        return CoreCoord(*DEFAULT_GRID)

    def core_grid(self):
        from .types import CoreGrid
        return CoreGrid(x=8, y=8)

    def id(self) -> int:
        return self.device_id

    def get_num_devices(self) -> int:
        return 1

    def __repr__(self):
        return f"SimDevice(id={self.device_id}, wormhole_b0 8x8{'' if self.is_open else ', closed'})"


def open_device(*, device_id: int = 0, l1_small_size: int = 0, trace_region_size: int = 0,
                dispatch_core_config=None, worker_l1_size: int | None = None,
                num_command_queues: int = 1) -> SimDevice:
    # num_command_queues is documented by ttnn.open_device's docstring (not in its nb signature).
    return SimDevice(device_id, l1_small_size, trace_region_size, num_command_queues, worker_l1_size)


def close_device(device: SimDevice) -> None:
    device.is_open = False


def synchronize_device(device: SimDevice, cq_id=None, sub_device_ids=()) -> None:
    """Every sim op completes before it returns."""
