"""A mock Tenstorrent device: the installed ttnn judges plans without a card.

tt-metal can run against a *mock cluster* (``TT_METAL_MOCK_CLUSTER_DESC_PATH``, a tt-umd cluster
descriptor): no kernel driver, no firmware launch, no kernel ever executed. Two things still
stop ``ttnn.open_device`` on a machine without Tenstorrent's toolchain:

* the JIT build wants the RISC-V compiler at ``<runtime root>/runtime/sfpi`` (the PyPI wheel
  ships none: ``TT_THROW: sfpi not found``);
* the firmware build key of a mock cluster matches none of the wheel's precompiled firmware, so
  firmware is "built" too.

So we give tt-metal an *overlay runtime root*: a directory that mirrors the installed ttnn
package with symlinks and adds ``runtime/sfpi/compiler/bin/riscv-tt-elf-g++``, a stand-in that
answers ``--version``, writes empty ``.o``/``.d`` files for compile steps, refuses precompiled
headers (tt-metal then builds without one) and writes a minimal RISC-V ELF32 for link steps
(tt-metal reads the ELF's sections and symbols, it never runs it). The overlay and tt-metal's
JIT cache live under ttmodels' cache directory (``TTMODELS_CACHE_DIR``, default
``~/.cache/ttmodels``), never in site-packages or ``~/.cache/tt-metal-cache``.

Ops then run under ``ttnn.graph`` NO_DISPATCH capture (``ttmodels.tools.verify``): ttnn's own
validation (``TT_FATAL``), output specs, program creation and circular-buffer/L1 accounting,
with no data. What this cannot check: kernel compilation (the stand-in compiles nothing),
numerics, device time and hangs.

tt-metal reads these variables once, when it first initialises its runtime (the first device
open or host tile conversion), so ``prepare()`` must run before that; ``open_device`` says so
when it was too late.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import DeviceError
from ..runtime.mesh import DEVICES, SYSTEMS

log = logging.getLogger("ttmodels")

# ttnn versions this mechanism was tested with; any other is refused (the overlay relies on the
# wheel's directory layout and the JIT build's command lines).
TESTED_TTNN_VERSIONS = ("0.81.1",)

DATA = Path(__file__).resolve().parents[1] / "data"
# System name -> (tt-umd cluster descriptor shipped in ttmodels/data, mesh shape (rows, cols));
# the mesh shapes are ttmodels.runtime.mesh.SYSTEMS' (what a ttnn MeshDevice of that system is
# opened as), the dispatch cores its ``DEVICES`` entry's. Each descriptor says how its mock grid
# may differ from a real board's (docs/multichip.md "Mock systems and real boards"); the Galaxy's
# is written by scripts/galaxy_descriptor.py.
MOCK_SYSTEMS: dict[str, tuple[str, tuple[int, int]]] = {
    "n150": ("wormhole_n150_mock_cluster.yaml", SYSTEMS["n150"]),
    "n300": ("wormhole_n300_mock_cluster.yaml", SYSTEMS["n300"]),
    "t3000": ("t3000_mock_cluster.yaml", SYSTEMS["t3000"]),
    "galaxy": ("wormhole_galaxy_mock_cluster.yaml", SYSTEMS["galaxy"]),
    "p150": ("blackhole_p150_mock_cluster.yaml", SYSTEMS["p150"]),
    "p150x4": ("blackhole_p150x4_mock_cluster.yaml", SYSTEMS["p150x4"]),
}

ENV_ROOT = "TT_METAL_RUNTIME_ROOT"
ENV_DESC = "TT_METAL_MOCK_CLUSTER_DESC_PATH"
ENV_CACHE = "TT_METAL_CACHE"


@dataclass(frozen=True)
class MockEnvironment:
    """Where the mock runtime lives: ``root`` (overlay), ``cache`` (tt-metal's JIT cache),
    ``descriptor`` (cluster descriptor), ``system`` (its name) and the ttnn version."""
    system: str
    descriptor: Path
    root: Path
    cache: Path
    ttnn_version: str


def ttnn_version() -> str:
    try:
        return importlib.metadata.version("ttnn")
    except importlib.metadata.PackageNotFoundError:
        raise DeviceError("the mock device needs the ttnn package (pip install ttnn==0.81.1)") \
            from None


def _ttnn_package_dir() -> Path:
    # Found without importing ttnn: tt-metal must see the environment before it initialises.
    spec = importlib.util.find_spec("ttnn")
    if spec is None or spec.origin is None:
        raise DeviceError("the mock device needs the ttnn package (pip install ttnn==0.81.1)")
    return Path(spec.origin).resolve().parent


def descriptor_path(system: str) -> Path:
    if system not in MOCK_SYSTEMS:
        raise DeviceError(f"unknown mock system {system!r}; known: {sorted(MOCK_SYSTEMS)}")
    p = DATA / MOCK_SYSTEMS[system][0]
    if not p.is_file():
        raise DeviceError(f"mock system {system!r}: its cluster descriptor {p.name} is not "
                          "shipped with this ttmodels")
    return p


def mock_dir() -> Path:
    from ..weights.cache import default_cache_dir
    return default_cache_dir() / "ttnn-mock"


# ---- the stand-in toolchain --------------------------------------------------------------------

_GXX = """#!/bin/sh
# ttmodels' stand-in riscv-tt-elf-g++ for mock devices: produces nothing that can run.
out=""; dep=""; compile=0; header=0; fw=""
if [ "$1" = "--version" ]; then echo "riscv-tt-elf-g++ (ttmodels mock stand-in) 0.0.0"; exit 0; fi
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift;;
    -MF) dep="$2"; shift;;
    -c) compile=1;;
    c++-header) header=1;;
    -Wl,--just-symbols=*) fw="${1#-Wl,--just-symbols=}";;
  esac
  shift
done
# tt-metal builds without a precompiled header when making one fails.
if [ $header = 1 ]; then echo "ttmodels mock stand-in: no precompiled headers" >&2; exit 1; fi
if [ $compile = 1 ]; then : > "$out"; if [ -n "$dep" ]; then echo "$out:" > "$dep"; fi; exit 0; fi
exec "__PYTHON__" "__ELF_WRITER__" "$out" "$fw"
"""


def _write_if_changed(path: Path, text: str, mode: int | None = None) -> None:
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(text)
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, path)


def _link(target: Path, link: Path) -> None:
    if link.is_symlink():
        if Path(os.readlink(link)) == target:
            return
        link.unlink()
    elif link.exists():
        return
    try:
        link.symlink_to(target)
    except FileExistsError:  # another process made it at the same moment
        pass


def build_overlay(pkg: Path, root: Path) -> Path:
    """Mirror ``pkg`` (the installed ttnn) under ``root`` with symlinks, with ``runtime/sfpi``
    replaced by the stand-in toolchain. Idempotent; writes only under ``root``."""
    (root / "runtime").mkdir(parents=True, exist_ok=True)
    for entry in pkg.iterdir():
        if entry.name != "runtime":
            _link(entry, root / entry.name)
    for entry in (pkg / "runtime").iterdir():
        if entry.name != "sfpi":
            _link(entry, root / "runtime" / entry.name)
    bindir = root / "runtime" / "sfpi" / "compiler" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    # Link steps: the python running ttmodels writes the ELF (ttmodels/backends/_mock_elf.py, a script).
    gxx = _GXX.replace("__PYTHON__", sys.executable).replace(
        "__ELF_WRITER__", str(Path(__file__).resolve().parent / "_mock_elf.py"))
    _write_if_changed(bindir / "riscv-tt-elf-g++", gxx,
                      stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return root


def environment(system: str = "n150") -> MockEnvironment:
    """The mock environment for ``system`` (overlay built if needed; nothing set yet)."""
    version = ttnn_version()
    if version not in TESTED_TTNN_VERSIONS:
        raise DeviceError(f"the mock device was tested with ttnn {', '.join(TESTED_TTNN_VERSIONS)}"
                          f" only; ttnn {version} is installed (its runtime layout or JIT build "
                          "may differ): install ttnn==0.81.1 or use backend='sim'")
    desc = descriptor_path(system)
    base = mock_dir() / f"ttnn-{version}"
    root = build_overlay(_ttnn_package_dir(), base / "root")
    cache = base / "jit-cache"
    cache.mkdir(parents=True, exist_ok=True)
    return MockEnvironment(system, desc, root, cache, version)


def prepare(system: str = "n150") -> MockEnvironment:
    """Point tt-metal at the mock runtime for ``system``. Call before ttnn initialises (before
    ``import ttnn`` is safest); ``open_device`` / ``open_mesh_device`` call it themselves."""
    env = environment(system)
    want = {ENV_ROOT: str(env.root), ENV_DESC: str(env.descriptor), ENV_CACHE: f"{env.cache}/"}
    current = {k: os.environ.get(k) for k in want}
    if current != want and _OPENED - {system}:
        raise DeviceError(f"this process already opened a mock {sorted(_OPENED - {system})[0]}; "
                          "tt-metal reads its cluster descriptor once per process: run "
                          f"the {system} check in its own process")
    os.environ.update(want)
    os.environ.setdefault("TT_METAL_LOGGER_LEVEL", "ERROR")
    os.environ.setdefault("TT_LOGGER_LEVEL", "error")
    # tt-metal writes generated/ (fabric maps, watcher) under its logs path, the current
    # directory by default, and its logger prints TT_THROW lines on stdout (which would break
    # `verify --format json`): both go next to the overlay; verify reports ttnn's errors itself
    logs = env.root.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TT_METAL_LOGS_PATH", str(logs))
    os.environ.setdefault("TT_LOGGER_FILE", str(logs / "tt-metal.log"))
    return env


_OPENED: set[str] = set()   # mock systems this process has opened


_TOO_LATE = ("; ttnn initialised its runtime before the mock device was prepared (tt-metal "
             "reads TT_METAL_RUNTIME_ROOT once): call ttmodels.backends.mock_device.prepare() before "
             "the first ttnn call, or run `ttmodels verify` in its own process")


def open_device(system: str = "n150", *, l1_small_size: int, trace_region_size: int = 0):
    """``(ttnn, device)``: a mock single chip (``system`` "n150" or "p150"). Failures are
    DeviceErrors."""
    env = prepare(system)
    if MOCK_SYSTEMS[system][1] != (1, 1):
        raise DeviceError(f"mock system {system!r} has {MOCK_SYSTEMS[system][1]} chips: open it "
                          "as a mesh")
    import ttnn
    try:
        dev = ttnn.open_device(device_id=0, l1_small_size=int(l1_small_size),
                               trace_region_size=int(trace_region_size))
    except Exception as e:
        raise DeviceError(f"could not open the mock {system} device: {first_line(e)}"
                          + (_TOO_LATE if "sfpi not found" in str(e) else "")) from e
    _OPENED.add(system)
    # Per-op sub-graphs in ttnn.graph captures need the slow runtime path: with fast runtime
    # mode ttnn records only its FastOperation summaries (ttnn/graph.py begin_graph_capture).
    ttnn.CONFIG.enable_fast_runtime_mode = False
    return ttnn, dev


def open_mesh_device(mesh, *, l1_small_size: int, trace_region_size: int = 0):
    """``(ttnn, mesh_device)``: every chip of the mock system ``mesh`` (a ``MeshSpec`` of one of
    ``MOCK_SYSTEMS``, e.g. "n300", "t3000", "galaxy", "p150x4") opened as one ttnn MeshDevice of its shape, through
    the same ``ttnn_backend.open_mesh`` a card uses. Failures are DeviceErrors."""
    system = mesh.name
    if system not in MOCK_SYSTEMS or MOCK_SYSTEMS[system][1] != mesh.shape:
        shipped = ", ".join(f"{k} {r}x{c}" for k, (_, (r, c)) in MOCK_SYSTEMS.items())
        raise DeviceError(f"no mock cluster descriptor for a {mesh.describe()} mesh; shipped: "
                          f"{shipped}")
    prepare(system)
    from .ttnn_backend import open_mesh
    try:
        ttnn, dev = open_mesh(mesh, l1_small_size=l1_small_size,
                              trace_region_size=trace_region_size, system=DEVICES[system])
    except DeviceError as e:
        raise DeviceError(f"mock {system}: {e}" + (_TOO_LATE if "sfpi not found" in str(e)
                                                   else "")) from e
    _OPENED.add(system)
    ttnn.CONFIG.enable_fast_runtime_mode = False   # per-op sub-graphs, as in open_device
    return ttnn, dev


def l1_bank_bytes(ttnn, device) -> int:
    """The allocator's L1 bank size per core for the options the device was opened with
    (what a real allocation is checked against: '... but bank size is N B')."""
    return int(ttnn.device.get_memory_view(device, ttnn.BufferType.L1).total_bytes_per_bank)


def chip_facts(ttnn, device) -> dict[str, int | list[int]]:
    """What ``ttmodels.arch`` records about a chip, as this open device reports it (opened with
    l1_small_size=0): the worker grid, the L1 bank and where the allocator's range starts (from
    the address of a first, one-tile L1 buffer: the allocator places buffers top down), the L1
    and DRAM bank counts, and the allocator's alignment (two one-row 32 B shards' distance)."""
    import torch
    grid = device.compute_with_storage_grid_size()
    l1 = ttnn.device.get_memory_view(device, ttnn.BufferType.L1)
    dram = ttnn.device.get_memory_view(device, ttnn.BufferType.DRAM)
    t = ttnn.from_torch(torch.zeros(1, 1, 32, 32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                        device=device, memory_config=ttnn.L1_MEMORY_CONFIG)
    top = int(t.buffer_address()) + 32 * 32 * 2
    ttnn.deallocate(t)
    one_core = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))})
    tiny = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                             ttnn.ShardSpec(one_core, [1, 16], ttnn.ShardOrientation.ROW_MAJOR))
    a, b = (ttnn.from_torch(torch.zeros(1, 1, 1, 16), dtype=ttnn.bfloat16,
                            layout=ttnn.ROW_MAJOR_LAYOUT, device=device, memory_config=tiny)
            for _ in range(2))
    alignment = int(a.buffer_address()) - int(b.buffer_address())
    ttnn.deallocate(a)
    ttnn.deallocate(b)
    bank = int(l1.total_bytes_per_bank)
    return {"grid": [int(grid.x), int(grid.y)], "l1_bank_no_l1_small": bank,
            "l1_base": top - bank, "l1_banks": int(l1.num_banks),
            "dram_banks": int(dram.num_banks), "l1_alignment": alignment}


def first_line(e: BaseException) -> str:
    """ttnn's exception text up to its backtrace, on one line."""
    msg = str(e).split("backtrace:")[0].strip()
    msg = msg.replace("\ninfo:\n", " | ").replace("\n", " ")
    return " ".join(msg.split())
