"""How ttnn's objects compare with a plan's: memory-config keys, layout strings, a device
tensor's L1 per core, ttnn's error split into message and ``file:line``, and the steps ttnn 0.81.1
crashes on. Shared by ``verify`` (the real run) and ``ttnn_oracle`` (the planner's questions);
imports nothing heavy and nothing above it.
"""
from __future__ import annotations

import re

from ..planning.layout import BLOCK, MemSpec, TensorLayout

_FATAL = re.compile(r"TT_(?:FATAL|THROW) @ (?P<file>\S+?):(?P<line>\d+): (?P<cond>.*)")


def _cores_of(memspec: MemSpec) -> frozenset[tuple[int, int]]:
    from ..backends.common import core_ranges
    n = None if memspec.memory_layout == BLOCK else memspec.num_cores
    return frozenset((x, y) for (sx, sy), (ex, ey) in core_ranges(tuple(memspec.grid), n)
                     for x in range(sx, ex + 1) for y in range(sy, ey + 1))


def planned_memory_key(memspec: MemSpec) -> tuple:
    """What must agree between the plan's MemSpec and ttnn's MemoryConfig."""
    if not memspec.sharded:
        return (memspec.memory_layout, memspec.buffer)
    return (memspec.memory_layout, memspec.buffer, tuple(memspec.shard_shape),
            _cores_of(memspec), memspec.orientation)


def ttnn_memory_key(mc) -> tuple:
    layout = str(mc.memory_layout).split(".")[-1].split("::")[-1].lower()
    buffer = str(mc.buffer_type).split(".")[-1].split("::")[-1].lower()
    if mc.shard_spec is None:
        return (layout, buffer)
    ss = mc.shard_spec
    cores = frozenset((x, y) for r in ss.grid.ranges()
                      for x in range(r.start.x, r.end.x + 1)
                      for y in range(r.start.y, r.end.y + 1))
    orient = str(ss.orientation).split(".")[-1].split("::")[-1].lower()
    return (layout, buffer, tuple(int(v) for v in ss.shape), cores, orient)


def describe_key(key: tuple) -> str:
    if len(key) == 2:
        return f"{key[0]}/{key[1]}"
    layout, buffer, shape, cores, orient = key
    xs, ys = [c[0] for c in cores], [c[1] for c in cores]
    box = f"{max(xs) + 1}x{max(ys) + 1}" if cores else "0x0"
    extra = "" if orient == "row_major" else f" {orient}"
    return f"{layout}/{buffer} {len(cores)} cores in {box} shard {shape[0]}x{shape[1]}{extra}"


def _layout_str(t: TensorLayout) -> str:
    return f"{t.layout} {t.dtype}"


def _ttnn_layout_str(tensor) -> str:
    lay = "tile" if "TILE" in str(tensor.layout).upper() else "row_major"
    dt = str(tensor.dtype).split(".")[-1].split("::")[-1].lower()
    return f"{lay} {dt}"


def l1_bytes_per_core(tt, tensor) -> int:
    """Bytes of L1 one core (bank) holds of a device tensor: a shard's pages, or an interleaved
    L1 tensor's pages spread round-robin over the L1 banks (the allocator reserves the same range
    in every bank, so the first bank's share is what each pays); 0 in DRAM or on the host.
    Computed from the tensor itself: graph-capture tensor ids are not unique across a run (ids of
    freed tensors are reused), so looking inputs up in the timeline by id can pick another
    tensor's buffer."""
    try:
        if not tensor.is_allocated():
            return 0
        mc = tensor.memory_config()
    except Exception:          # host tensors have no memory config
        return 0
    if "L1" not in str(mc.buffer_type).upper():
        return 0
    page = int(tensor.buffer_aligned_page_size())
    if mc.shard_spec is not None:
        sh, sw = (int(v) for v in mc.shard_spec.shape)
        if "TILE" in str(tensor.layout).upper():
            t = tensor.tile.tile_shape if hasattr(tensor.tile, "tile_shape") else (32, 32)
            return -(-sh // t[0]) * -(-sw // t[1]) * page
        return sh * page
    banks = tensor.device().compute_with_storage_grid_size()
    n = banks.x * banks.y
    return -(-int(tensor.buffer_num_pages()) // n) * page


def split_error(e: BaseException) -> tuple[str, str | None]:
    """(first line of ttnn's message, ``file:line`` of its TT_FATAL) for an exception."""
    from ..backends.mock_device import first_line
    text = str(e).split("backtrace:")[0]
    loc = None
    m = _FATAL.search(text)
    if m:
        loc = f"{m.group('file').removeprefix('/project/')}:{m.group('line')}"
    info = text.split("info:", 1)
    if m and len(info) == 2 and info[1].strip():
        msg = info[1].strip().splitlines()[0].strip()
    elif m:
        msg = m.group("cond").strip()
    else:
        msg = first_line(e)
    return msg, loc


# Steps ttnn 0.81.1 crashes on (a signal, not a TT_FATAL: the process dies), found by the rules
# corpus (tests/rules_corpus.py CRASHES) and the adversarial pass: reported as rejected, never run.
KNOWN_CRASH = ("ttnn 0.81.1 crashes (SIGSEGV in sliding_window::generate_halo_kernel_config_"
               "tensors) on a bilinear upsample of a TILE height-sharded input: not run")


def known_crash(kind: str, obj) -> str | None:
    """Why ``verify`` must not hand this step to ttnn, or None."""
    if kind != "layer" or obj.node.op != "upsample" or \
            obj.node.attrs.get("mode") != "bilinear" or not obj.inputs:
        return None
    x = obj.inputs[0]
    if x.layout == "tile" and x.memory.memory_layout == "height_sharded":
        return KNOWN_CRASH
    return None
