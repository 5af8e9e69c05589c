"""The DRAM form of a bfloat16 global pool (issue 33: "the planner never fails a model that ttnn
can run"): a global_avg_pool whose map, moved from DRAM into L1 shards for pool2d, does not fit
beside pool2d's own copies of it (efficientnet_b0 batch 32's SE pool over 32x56x56x144) runs as
``ttnn.mean`` on the DRAM map (ops/pool/plan.py ``whole_map_fits``, ops/pool/exact_global.py)."""
import sys
from pathlib import Path

from ttmodels.language.spec import load_graph
from ttmodels.ops.pool import exact_global as EG
from ttmodels.planning.planner import plan_graph

sys.path.insert(0, str(Path(__file__).parent))
from mock_helpers import run_own_process  # noqa: E402

BF16 = {"activations": "bfloat16", "weights": "bfloat16", "math_fidelity": "HiFi2"}


def spec(batch: int) -> dict:
    """A conv's 144-channel 56x56 map into a global pool and a 1x1 conv (the SE block's
    shape)."""
    return {"name": "se_gap", "batch": batch,
            "inputs": {"x": {"channels": 144, "size": [56, 56]}},
            "defaults": {"precision": BF16},
            "layers": [{"name": "c1", "op": "conv2d", "out": 144, "kernel": 1},
                       {"name": "gap", "op": "global_avg_pool"},
                       {"name": "fc", "op": "conv2d", "out": 16, "kernel": 1}],
            "outputs": ["fc"]}


def test_a_global_pool_too_large_for_pool2d_reduces_from_dram():
    """Batch 32: pool2d's sharded map and its interleaved copies need ~1.5 MB per core, over
    the bank; the plan (it was refused before) reads the map from DRAM with ttnn.mean, and only
    the reduce's CBs and the small output take L1."""
    plan = plan_graph(load_graph(spec(32)), oracle=False)
    pool = plan.layer("gap")
    assert pool.config.lowering == EG.LOWERING
    assert pool.inputs[0].memory.buffer == "dram" and pool.inputs[0].layout == "tile"
    assert pool.output.dtype == "bfloat16" and pool.output.memory.buffer == "l1"
    # less than a tenth of the map's share of one core (the pool2d path holds it three times)
    share = 32 * 56 * 56 * 144 * 2 // plan.l1_banks
    assert pool.l1_bytes_per_core < share // 10


def test_a_global_pool_that_fits_keeps_pool2d():
    """Batch 8 of the same map fits pool2d in L1: unchanged (no DRAM round trip)."""
    pool = plan_graph(load_graph(spec(8)), oracle=False).layer("gap")
    assert pool.config.lowering is None and pool.config.kernel == (56, 56)


_REAL = """
import sys
sys.path.insert(0, {tests!r})
from test_pool_global_dram import spec
from ttmodels.language.spec import load_graph
from ttmodels.planning.planner import plan_graph
from ttmodels.tools.verify import verify
plan = plan_graph(load_graph(spec(32)))
assert plan.layer("gap").config.lowering == "mean"
rep = verify(None, plan=plan)
print("OK", rep.ok and rep.fits, rep.completed)
"""


def test_the_dram_global_pool_runs_on_the_mock_device():
    """One real run (its own process: one mock system per process), planned with ttnn asked:
    ttnn 0.81.1 accepts the bfloat16 mean over the DRAM map at batch 32 and the run reaches the
    end within the bank."""
    out = run_own_process(_REAL.format(tests=str(Path(__file__).parent)), timeout=900)
    assert "OK True True" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
