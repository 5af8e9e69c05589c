"""The pools' device time (planning/estimate.py). max_pool2d / avg_pool2d run the halo program,
then read ``kh`` window rows of ``kw`` sticks per output row from the halo'd shard (as conv2d's
height-sharded reader: tt-metal's pool reader kernels); the reduction runs on the SFPU/FPU
under the reads. A global pool reads its input once. DRAM-sliced pools repeat that per slice
with their slice's DRAM traffic."""
from __future__ import annotations

import math

from ...language.graph import round_up
from ...planning.estimate import CostEnv, Phase, movement_phase
from . import exact_global
from ...planning.layout import ROW_MAJOR, TensorLayout
from . import exact_window


def cost(layer, env: CostEnv):
    node = layer.node
    if getattr(layer.config, "lowering", None) == exact_global.LOWERING:
        return exact_global.cost(layer, env)
    if getattr(layer.config, "exact", False):
        return exact_phases(layer, env)
    ins = env.shape(node.inputs[0])
    kernel = getattr(node.attrs, "kernel", None)
    if not kernel or node.op.startswith("global"):
        return (movement_phase(env, [(layer.inputs[0], ins)], (layer.output, node.shape),
                               node.op),)
    kh, kw = kernel
    m = layer.output.memory
    cores = (m.num_cores or m.grid[0] * m.grid[1]) if m.sharded and m.grid else env.grid_cores
    slices = layer.config.slice.num_slices if layer.config.slice else 1
    out_rows = math.ceil(node.shape.rows / cores / slices)
    in_rows = math.ceil(ins.rows / cores / slices)
    stick = max(16, int(round_up(ins.c, 8) * 2))
    phases = []
    for _ in range(slices):
        run = max(16, int(min(ins.w * stick, 2048)))     # as conv2d's halo: runs of sticks
        halo = env.local_cycles(run, in_rows * stick / run) + \
            env.remote_cycles(run, (kh - 1) * ins.w * stick / run, read=False)
        reads = env.local_cycles(stick * kw, out_rows * kh)
        if slices > 1:
            io = movement_phase(env, [(layer.inputs[0], ins)], (layer.output, node.shape), "io")
            phases.append(Phase(noc_cycles=io.noc_cycles / slices,
                                dram_bytes=io.dram_bytes / slices, what="slice io"))
        phases.append(Phase(noc_cycles=halo, what="halo"))
        phases.append(Phase(noc_cycles=reads, what=node.op))
    return tuple(phases)


def exact_phases(layer, env: CostEnv) -> tuple[Phase, ...]:
    """The exact float32 pool's programs (ops/pool/exact_window.py), each costed as its own op
    is: slices, pad, layout changes and binaries are data movements (``movement_phase``, as the
    binary ops' generic cost) between the DRAM-interleaved tensors it makes."""
    node = layer.node
    ins = env.shape(node.inputs[0])
    g = exact_window.window(node.attrs, node.op, ins, node.shape)
    x, y = layer.inputs[0], layer.output
    rm = TensorLayout(y.memory, ROW_MAJOR, "float32")
    out = node.shape
    phases = []
    if x.layout != ROW_MAJOR:
        phases.append(movement_phase(env, [(x, ins)], (rm, ins), "untilize"))
    src = ins
    t, b, l, r = g.pad
    if (t, b, l, r) != (0, 0, 0, 0):
        src = type(ins)(ins.n, ins.h + t + b, ins.w + l + r, ins.c)
        phases.append(movement_phase(env, [(rm, ins)], (rm, src), "pad"))
    taps = len(g.taps())
    slice_p = movement_phase(env, [(rm, out)], (rm, out), "slice")
    fold_p = movement_phase(env, [(rm, out), (rm, out)], (rm, out), "maximum"
                            if node.op == "max_pool2d" else "add")
    phases += [slice_p] * taps + [fold_p] * (taps - 1)
    if node.op == "avg_pool2d":
        phases.append(movement_phase(env, [(rm, out)], (rm, out), "multiply"))
    if y.layout != ROW_MAJOR:
        phases.append(movement_phase(env, [(rm, out)], (y, out), "tilize"))
    return tuple(phases)
