"""Multi-chip data parallel: which mesh of chips a model runs on, and each chip's share of a batch.

    resolve_mesh("n300")          -> MeshSpec("n300", 1, 2)
    resolve_mesh((2, 4))          -> MeshSpec("2x4", 2, 4)
    per_chip_batch(4, mesh)       -> 2 (an Error when the batch does not divide)

The distributed engine is ttnn's own ``MeshDevice``: one replica of the model per chip, weights
replicated, inputs split on the batch dimension, outputs concatenated (docs/multichip.md). Pure
data; nothing here imports ttnn or torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Error

#: Tenstorrent Wormhole systems by name -> (rows, cols) of their ttnn MeshDevice. An n300 card is
#: two chips on one board (TT's n300 ResNet50 is "DP=2", tt-metal README.md); a T3000 is four n300
#: cards, eight chips, which TT's data-parallel ResNet50 opens as "8 devices in 1x8 mesh
#: configuration" (tt-metal's T3000/TG ResNet50 README, models/demos/t3000/resnet50).
SYSTEMS: dict[str, tuple[int, int]] = {"n150": (1, 1), "n300": (1, 2), "t3000": (1, 8)}


@dataclass(frozen=True)
class MeshSpec:
    """A rows x cols mesh of chips; ``name`` is a system name ("n300") or "RxC"."""
    name: str
    rows: int
    cols: int

    @property
    def num_chips(self) -> int:
        return self.rows * self.cols

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def describe(self) -> str:
        chips = f"{self.num_chips} chip{'s' if self.num_chips != 1 else ''}"
        if self.name in SYSTEMS:
            return f"{self.name} ({self.rows}x{self.cols}, {chips})"
        return f"{self.rows}x{self.cols} ({chips})"

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": [self.rows, self.cols], "num_chips": self.num_chips}


def resolve_mesh(mesh) -> MeshSpec | None:
    """``None`` (one chip, no mesh), a system name in ``SYSTEMS``, a ``(rows, cols)`` pair or a
    ``MeshSpec``; anything else is an Error that lists what is accepted."""
    if mesh is None or isinstance(mesh, MeshSpec):
        return mesh
    if isinstance(mesh, str):
        key = mesh.strip().lower()
        if key in SYSTEMS:
            return MeshSpec(key, *SYSTEMS[key])
        rc = key.split("x")
        if len(rc) == 2 and all(p.isdigit() for p in rc):
            return _from_pair((int(rc[0]), int(rc[1])), mesh)
        raise Error(f"unknown mesh {mesh!r}: expected one of {sorted(SYSTEMS)} or 'ROWSxCOLS'")
    if isinstance(mesh, (tuple, list)) and len(mesh) == 2:
        return _from_pair(tuple(mesh), mesh)
    raise Error(f"mesh must be None, one of {sorted(SYSTEMS)} or (rows, cols); got {mesh!r}")


def _from_pair(pair: tuple, given) -> MeshSpec:
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
        raise Error(f"mesh {given!r}: rows and cols must be positive integers")
    rows, cols = pair
    for name, shape in SYSTEMS.items():
        if shape == (rows, cols):
            return MeshSpec(name, rows, cols)
    return MeshSpec(f"{rows}x{cols}", rows, cols)


def num_chips(mesh: MeshSpec | None) -> int:
    return 1 if mesh is None else mesh.num_chips


def per_chip_batch(batch_size: int, mesh: MeshSpec | None) -> int:
    """Each chip's batch: data parallel gives every chip the same number of samples."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise Error(f"batch_size must be a positive integer, got {batch_size!r}")
    n = num_chips(mesh)
    if batch_size % n:
        lo, hi = (batch_size // n) * n, -(-batch_size // n) * n
        near = f"{lo} or {hi}" if lo else f"{hi}"
        raise Error(f"batch_size {batch_size} does not divide over the {n} chips of mesh "
                    f"{mesh.describe()}: data parallel runs the same batch on every chip "
                    f"(use a multiple of {n}, e.g. {near})")
    return batch_size // n
