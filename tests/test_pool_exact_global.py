"""The float32 global pool (issue 33 "float32 means float32"): a global_avg_pool (or an
adaptive_avg_pool2d to 1x1) with float32 activations runs as ``ttnn.mean`` over the map's rows on
the accurate fp32 reduce (ops/pool/exact_global.py), not as bfloat16 pool2d."""
import sys
from pathlib import Path

import pytest
import torch

import ttmodels
from ttmodels.language.spec import load_graph
from ttmodels.ops.pool import exact_global as EG
from ttmodels.planning.planner import plan_graph

sys.path.insert(0, str(Path(__file__).parent))
from mock_helpers import run_own_process  # noqa: E402

F32 = {"activations": "float32", "weights": "float32", "math_fidelity": "HiFi4",
       "fp32_accum": True}


def _spec(op: str, c: int, hw: int, precision=F32, **attrs) -> dict:
    return {"name": f"gap_{op}", "inputs": {"x": {"channels": c, "size": [hw, hw]}},
            "defaults": {"precision": precision},
            "layers": [{"name": "pool", "op": op, **attrs}], "outputs": ["pool"]}


@pytest.mark.parametrize("op,attrs,batch,hw", [
    ("global_avg_pool", {}, 1, 7),              # 49 rows: two tiles, the second padded
    ("global_avg_pool", {}, 2, 12),             # 144 rows: reshaped to [2, 1, 144, C]
    ("adaptive_avg_pool2d", {"size": 1}, 1, 14),
])
def test_a_float32_global_pool_on_the_sim_is_float32_exact(op, attrs, batch, hw):
    """Against the float64 mean: within a few float32 ulps (float32 adds in the device's order,
    then one float32 multiply by 1/(H*W)); the bfloat16 pool2d path misses by ~1e-3."""
    c = 48
    m = ttmodels.build(_spec(op, c, hw, **attrs), weights="random", backend="sim",
                       batch_size=batch)
    x = torch.randn(batch, c, hw, hw, generator=torch.Generator().manual_seed(5)) + 0.3
    with m.executor.record() as calls:
        got = m.run(x)["pool"].reshape(batch, c).double()
    assert "mean" in [k.name for k in calls]
    want = x.double().mean(dim=(2, 3))
    err = ((got - want).abs() / want.abs().clamp_min(1e-3)).max().item()
    # float32 ulp is 1.2e-7: the adds' rounding grows with the 49-144 terms (but not past
    # 2e-6 relative for positive-mean maps); bfloat16's 8 bits are 4e-3
    assert err < 2e-6, err


def test_the_sim_adds_in_the_devices_order():
    """The sim's float32 mean is ``accurate_fp32_row_mean``: tiles folded in order, the tile's
    32 rows by the SFPU tree, one multiply. A sum where the order shows: 2^24 then 31 ones in
    the first tile's rows 1..31. In float32, 2^24 + 1 rounds back to 2^24, so a left-to-right
    sum loses every one; the SFPU tree adds the ones to each other first (rows 4+r, 8+r, 12+r
    and the lower face), keeping most of them."""
    x = torch.zeros(1, 1, 32, 1)
    x[0, 0, 0, 0] = 2.0 ** 24
    x[0, 0, 1:, 0] = 1.0
    seq = torch.tensor(0.0)
    for v in x.flatten():
        seq = seq + v               # float32, left to right
    got = EG.accurate_fp32_row_sum(x).item()
    assert seq.item() == 2.0 ** 24
    # r = 0: 2^24 + (1 + (1 + 1)) = 2^24 + 3 -> 2^24 + 4 (ties to even); + lower face 4 -> 2^24 + 8
    # r = 1..3: 8 ones each; (s0 + s1) + (s2 + s3) = (2^24 + 8 + 8) + 16 = 2^24 + 32
    assert got == 2.0 ** 24 + 32


def test_the_float32_global_pool_plan_has_no_bfloat16_typecast():
    g = load_graph(_spec("global_avg_pool", 64, 7))
    plan = plan_graph(g, oracle=False)
    pool = plan.layer("pool")
    assert pool.config.lowering == EG.LOWERING
    assert pool.inputs[0].dtype == "float32" == pool.output.dtype
    assert pool.inputs[0].layout == "tile" and not pool.inputs[0].memory.sharded
    assert not [a for a in plan.adapters if a.kind == "typecast"]


def test_a_bfloat16_global_pool_plan_is_unchanged():
    bf16 = {"activations": "bfloat16", "weights": "bfloat16", "math_fidelity": "HiFi2"}
    pool = plan_graph(load_graph(_spec("global_avg_pool", 64, 7, bf16)), oracle=False).layer("pool")
    assert pool.config.lowering is None and pool.output.dtype == "bfloat16"
    assert pool.config.kernel == (7, 7)


def test_adaptive_pools_to_larger_sizes_keep_ttnns_op():
    pool = plan_graph(load_graph(_spec("adaptive_avg_pool2d", 64, 8, size=2)),
                      oracle=False).layer("pool")
    assert pool.config.lowering is None


def test_the_lowering_costs_its_sfpu_folds():
    """One program: the input read once, and per core 3 SFPU instructions per 32-lane vector of
    each input tile it folds (2 channel tiles on 2 cores: 2 tile rows; 25 tile rows split over
    the 32 cores each column may use: one tile each, plus the second stage's)."""
    from ttmodels.arch import get as arch_get
    from ttmodels.ops.pool.cost import cost
    from ttmodels.planning.estimate import CostEnv, estimate
    sfpu = []
    for hw in (7, 28):
        plan = plan_graph(load_graph(_spec("global_avg_pool", 64, hw)), oracle=False)
        (phase,) = cost(plan.layer("pool"), CostEnv(arch_get(plan.arch), plan))
        sfpu.append(phase.sfpu_cycles)
        assert estimate(plan).layer_us()["pool"] > 0
    assert sfpu == [(2 * 3 + 2) * 32, (1 * 3 + 2 + 5) * 32]


_REAL = """
import sys
from ttmodels.language.spec import load_graph
from ttmodels.planning.planner import plan_graph
from ttmodels.tools.verify import verify
sys.path.insert(0, {tests!r})
from test_pool_exact_global import F32
spec = {{"name": "f32_gap", "batch": 2, "inputs": {{"x": {{"channels": 64, "size": [7, 7]}}}},
        "defaults": {{"precision": F32}},
        "layers": [{{"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1}},
                   {{"name": "gap", "op": "global_avg_pool"}},
                   {{"name": "fc", "op": "conv2d", "out": 16, "kernel": 1}},
                   {{"name": "ap", "op": "adaptive_avg_pool2d", "in": "c1", "size": 1}}],
        "outputs": ["fc", "ap"]}}
plan = plan_graph(load_graph(spec), oracle=False)
assert plan.layer("gap").config.lowering == "mean" == plan.layer("ap").config.lowering
rep = verify(None, plan=plan)
print("OK", rep.ok and rep.fits)
"""


def test_the_float32_global_pool_runs_on_the_mock_device():
    """One real run (its own process: one mock system per process): ttnn 0.81.1 runs the
    reshape, the accurate fp32 mean and the reshape back as planned, batch 2, for a
    global_avg_pool and an adaptive_avg_pool2d to 1x1; every step accepted, within the bank."""
    import os
    out = run_own_process(_REAL.format(tests=str(Path(__file__).parent)), timeout=600)
    assert "OK True" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]


def test_the_lowerings_buffers_are_the_ones_ttnn_allocates():
    """plan_alloc.op_events against the mock device's run (n150, 0.81.1: scripts/
    measure_op_events.py of a 256-channel 28x28 float32 map into the pool, batch 2): the
    reshaped input, the first stage's partial rows, the mean's [2, 1, 1, 256], free the
    partials, the output, free the mean's, free the reshaped input (bytes per bank)."""
    from ttmodels.planning import plan_alloc as PA
    spec = _spec("global_avg_pool", 256, 28)       # a conv's L1 output into the pool
    spec["layers"] = [{"name": "c1", "op": "conv2d", "out": 256, "kernel": 1}] + spec["layers"]
    plan = plan_graph(load_graph(spec, batch_size=2), oracle=False)
    ev = PA.op_events(plan.layer("pool"), plan.graph, plan.l1_banks)
    allocs = [(e[0], e[2]) if e[0] == PA.ALLOC else (e[0],) for e in ev if e[0] != PA.PROGRAM]
    assert allocs == [("alloc", 28672), ("alloc", 1024), ("alloc", 4096), ("free",),
                      ("alloc", 4096), ("free",), ("free",)]
    one = plan_graph(load_graph(spec), oracle=False)
    ev = PA.op_events(one.layer("pool"), one.graph, one.l1_banks)
    assert [(e[0], e[2]) if e[0] == PA.ALLOC else (e[0],) for e in ev
            if e[0] != PA.PROGRAM] == [("alloc", 1024), ("alloc", 4096), ("free",)]


# the mock device's runs (n150, 0.81.1; scripts/measure_op_events.py): (C, H, W, whether
# ttnn.mean allocated the first stage's partial rows)
_SPLITS = [(64, 7, 7, False), (64, 16, 16, False), (64, 24, 24, False), (64, 24, 25, False),
           (64, 25, 25, True), (64, 24, 28, True), (64, 26, 26, True), (64, 28, 28, True), (32, 28, 28, True),
           (256, 28, 28, True), (1024, 28, 28, True), (2048, 28, 28, False),
           (1024, 14, 14, False), (256, 56, 56, True)]


@pytest.mark.parametrize("c,h,w,split", _SPLITS)
def test_the_two_stage_rule_matches_the_measured_runs(c, h, w, split):
    assert EG.splits_rows(1, h * w, c) is split


def test_the_lowerings_buffers_are_not_counted_as_cbs():
    """The reshaped input, the partial rows and the mean's [N, 1, 1, C] are buffers the
    allocator places (op_events above), not circular buffers: counted as both, the pool's CB
    region sat their size too high (as a biased linear's matmul output did, convnext_tiny b8)."""
    from ttmodels.ops.pool.exact_global import REDUCE_CB_TILES
    from ttmodels.planning.l1 import layer_parts, tile_bytes
    spec = _spec("global_avg_pool", 256, 28)
    spec["layers"] = [{"name": "c1", "op": "conv2d", "out": 256, "kernel": 1}] + spec["layers"]
    pool = plan_graph(load_graph(spec, batch_size=2), oracle=False).layer("pool")
    assert {"reshaped_input", "partials", "mean_out"} <= set(pool.config.l1_parts)
    assert layer_parts(pool)["cb"] == REDUCE_CB_TILES * tile_bytes("float32")
