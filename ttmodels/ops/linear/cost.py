"""linear's device time (planning/estimate.py): a matmul program. Sources: tt-metal's matmul
op performance model (``2 * M * K * N`` mul-adds over the cores, times the fidelity phases), on
the tiles each core computes: its program config's ``per_core_M x per_core_N`` when one is
given, else ttnn's auto config spreads the output tiles over the grid
(``split_work_to_cores``); the weights [K, N] are read from DRAM once."""
from __future__ import annotations

import math

from ...language.graph import TILE, round_up
from ...planning.estimate import CostEnv, Phase, fused_sfpu_cycles
from ...planning.layout import bytes_per_element


def matmul_phase(layer, env: CostEnv, m: int, k: int, n: int, cfg_pc=None) -> Phase:
    mt, kt, nt = (math.ceil(v / TILE) for v in (m, k, n))
    if cfg_pc is not None and getattr(cfg_pc, "per_core_M", None):
        pm, pn = cfg_pc.per_core_M, cfg_pc.per_core_N
    else:
        cores = min(env.grid_cores, mt * nt)
        per = math.ceil(mt * nt / cores)
        pm, pn = 1, per
    macs = pm * pn * kt * TILE ** 3
    w_bpe = bytes_per_element(layer.node.precision.weights)
    w_bytes = round_up(k, TILE) * round_up(n, TILE) * w_bpe
    # in0 blocks arrive by multicast: every core receives its rows' [per_core_M, K] tiles
    act = env.remote_cycles(2048, pm * kt * TILE * TILE * 2 / 2048)
    sfpu = fused_sfpu_cycles(layer, pm * pn)
    return Phase(compute_cycles=env.fpu_cycles(macs, env.fidelity(layer)), noc_cycles=act,
                 dram_bytes=w_bytes, what="matmul", sfpu_cycles=sfpu)


def cost(layer, env: CostEnv):
    s = layer.node.shape
    k = env.shape(layer.node.inputs[0]).c
    pc = getattr(layer.config, "program_config", None)
    return (matmul_phase(layer, env, s.rows, k, s.c, pc),)
