"""Multi-chip data parallel: which mesh of chips a model runs on, and each chip's share of a batch.

    resolve_mesh("n300")          -> MeshSpec("n300", 1, 2)
    resolve_mesh((2, 4))          -> MeshSpec("2x4", 2, 4)
    resolve_target("galaxy")      -> Target(DEVICES["galaxy"], MeshSpec("galaxy", 8, 4))
    per_chip_batch(4, mesh)       -> 2 (an Error when the batch does not divide)

The distributed engine is ttnn's own ``MeshDevice``: one replica of the model per chip, weights
replicated, inputs split on the batch dimension, outputs concatenated (docs/multichip.md). Pure
data; nothing here imports ttnn or torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Error

@dataclass(frozen=True)
class System:
    """A Tenstorrent system a user names in one word (``--device p150``): its chips' arch
    (``ttmodels.arch``), the ttnn MeshDevice shape it opens as and how it dispatches."""
    name: str
    arch: str
    shape: tuple[int, int]
    dispatch: str               # "worker" | "eth": which cores run the command dispatcher
    what: str

    @property
    def num_chips(self) -> int:
        return self.shape[0] * self.shape[1]


#: Every system by name. An n300 card is two chips on one board (TT's n300 ResNet50 is "DP=2",
#: tt-metal README.md); a T3000 is four n300 cards, eight chips, which TT's data-parallel ResNet50
#: opens as "8 devices in 1x8 mesh configuration" (tt-metal models/demos/t3000/resnet50); a
#: Wormhole Galaxy is 32 chips, opened 8x4 by TT's Galaxy ResNet50 (models/demos/tg/resnet50).
#: Multi-chip Wormhole systems dispatch over ethernet cores, keeping the 8x8 workers per chip;
#: the mock p150x4 opens with worker dispatch only (docs/multichip.md).
DEVICES: dict[str, System] = {s.name: s for s in (
    System("n150", "wormhole_b0", (1, 1), "worker", "one Wormhole chip"),
    System("n300", "wormhole_b0", (1, 2), "eth", "an n300 card: two Wormhole chips"),
    System("t3000", "wormhole_b0", (1, 8), "eth", "a T3000: eight Wormhole chips"),
    System("galaxy", "wormhole_b0", (8, 4), "eth", "a Galaxy: 32 Wormhole chips"),
    System("p150", "blackhole", (1, 1), "worker", "a Blackhole p150 card"),
    System("p150x4", "blackhole", (1, 4), "worker", "four Blackhole p150 cards"),
)}
DEFAULT_DEVICE = "n150"

#: The systems' mesh shapes by name (``--mesh NAME``).
SYSTEMS: dict[str, tuple[int, int]] = {n: s.shape for n, s in DEVICES.items()}


def chip_system(arch: str) -> str:
    """The single-chip system of ``arch`` ("n150" for Wormhole, "p150" for Blackhole): what
    the planner's ttnn oracle asks about a plan for any system of that arch (every chip of a
    data-parallel plan runs the same per-chip plan)."""
    for s in DEVICES.values():
        if s.arch == arch and s.shape == (1, 1):
            return s.name
    raise Error(f"no single-chip system of arch {arch!r}; known: {known_devices()}")


def known_devices() -> str:
    return ", ".join(DEVICES)


def get_device(name) -> System:
    """The system called ``name``; anything else is an Error listing the known names."""
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in DEVICES:
        raise Error(f"unknown device {name!r}; known: {known_devices()}")
    return DEVICES[key]


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
    for name, system in DEVICES.items():   # --mesh RxC is Wormhole chips (the Blackhole
        if system.shape == (rows, cols) and system.arch == "wormhole_b0":   # ones by name)
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


@dataclass(frozen=True)
class Target:
    """What a plan is for: the system (its arch) and, for data parallel, the mesh of chips."""
    system: System
    mesh: MeshSpec | None

    @property
    def arch(self) -> str:
        return self.system.arch


def resolve_target(device=None, mesh=None, arch: str | None = None) -> Target:
    """The system and mesh a user named: ``device`` (a name in ``DEVICES``), ``mesh`` (as
    ``resolve_mesh``: a system name or rows x cols of Wormhole chips), or neither (n150; or the
    single chip of ``arch``). Names that disagree are an Error, and so is an unknown one."""
    sys_ = get_device(device) if device is not None else None
    m = resolve_mesh(mesh)
    if sys_ is None:
        if m is not None and m.name in DEVICES:
            sys_ = DEVICES[m.name]
        elif m is not None:      # rows x cols of Wormhole chips, dispatched as a T3000's
            sys_ = System(m.name, "wormhole_b0", m.shape, "eth", m.describe())
        else:
            sys_ = DEVICES[chip_system(arch) if arch is not None else DEFAULT_DEVICE]
    elif m is None:
        m = None if sys_.shape == (1, 1) else MeshSpec(sys_.name, *sys_.shape)
    elif m.shape != sys_.shape:
        raise Error(f"device {sys_.name} ({sys_.what}) and mesh {m.describe()} disagree: "
                    f"give one of them")
    else:
        m = MeshSpec(sys_.name, *sys_.shape)
    if arch is not None and arch != sys_.arch:
        raise Error(f"arch {arch!r} and device {sys_.name} ({sys_.arch}) disagree: give the "
                    "device alone")
    return Target(sys_, m)
