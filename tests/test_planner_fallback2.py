"""The planner's last remedy (issue 33 point 4): when no L1 layout, smaller blocking, reorder,
spill or DRAM slicing fits, the op runs from and/or into DRAM interleaved
(``planner._Planner.dram_fallback``), the fastest such form by the estimate."""
import sys
from pathlib import Path

import pytest

from ttmodels.errors import LayoutError
from ttmodels.language.spec import load_graph
from ttmodels.planning.planner import plan_graph

sys.path.insert(0, str(Path(__file__).parent))
from test_plan_ttnn_figures import Scripted, _estimate  # noqa: E402

F32 = {"activations": "float32", "weights": "float32", "math_fidelity": "HiFi4",
       "fp32_accum": True}

# timm gernet_s float32's stages.3.0 (224x224): the depthwise conv2_kxk (1680 channels, 7x7 out)
# and the 1x1 conv3 (1680 -> 560). Once the planner put this tail over the bank: it counted the
# depthwise conv's float32 halo at bfloat16 size and took the rest of ttnn's figure for CBs, so
# the reshard into conv3, allocated under those CBs, came to 1,375,392 B per core. With the halo
# in float32 (ops/conv2d/l1.py) ttnn's real figures fit in L1 as planned (the real test below).
GERNET_TAIL = {
    "name": "gernet_tail", "inputs": {"x": {"channels": 384, "size": [14, 14]}},
    "defaults": {"precision": F32},
    "layers": [
        {"name": "pre", "op": "conv2d", "in": "x", "out": 384, "kernel": 1, "bias": True,
         "act": "relu"},
        {"name": "c1", "op": "conv2d", "in": "pre", "out": 1680, "kernel": 1, "bias": True,
         "act": "relu"},
        {"name": "dw", "op": "conv2d", "out": 1680, "kernel": 3, "stride": 2, "padding": 1,
         "groups": 1680, "bias": True, "act": "relu"},
        {"name": "pw", "op": "conv2d", "out": 560, "kernel": 1, "bias": True},
        {"name": "sc", "op": "conv2d", "in": "pre", "out": 560, "kernel": 1, "stride": 2,
         "bias": True},
        {"name": "add", "op": "add", "in": ["pw", "sc"], "act": "relu"}]}

# ttnn 0.81.1's own figures for the two convs on the mock n150 (the oracle's answers)
TTNN_DW, TTNN_PW = 1_284_320, 729_088


def _gernet_figures(step) -> int:
    if step.kind != "layer":
        return 1000
    if step.name == "dw":
        return TTNN_DW
    if step.name == "pw":
        return TTNN_PW
    return _estimate(step)


def test_the_gernet_tail_plans_in_l1_and_runs_for_real():
    """ttnn itself judges every step while planning (the oracle on the mock n150) and then runs
    the plan: every tensor in L1, no spill, and the model's step totals are ttnn's (within
    ttnn's L1_SMALL reader-index buffers, a few hundred bytes)."""
    from ttmodels.tools.verify import verify
    plan = plan_graph(load_graph(GERNET_TAIL), oracle=True)
    assert plan.spills == [] or not [sp for sp in plan.spills if sp.for_layer == "pw"]
    report = verify(None, plan=plan)
    assert report.real and report.completed, report
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert not bad
    adapter = next(s for s in report.steps if s.name.startswith("dw -> pw"))
    assert adapter.model_match and abs(adapter.live_estimate - adapter.ttnn_peak_total) <= 512


# torchvision DeepLabV3's ASPP image-pooling branch (global pool, 1x1 conv, bilinear upsample
# back to the map) on a 64x64 map: the bilinear upsample of the 1x1 map put its whole 64x64x256
# output on the input's one height shard (2,097,152 B per core)
ASPP_POOL = {"name": "aspp_pool", "inputs": {"x": {"channels": 256, "size": [64, 64]}},
             "layers": [
                 {"name": "b0", "op": "conv2d", "in": "x", "out": 256, "kernel": 1,
                  "act": "relu"},
                 {"name": "pool", "op": "global_avg_pool", "in": "x"},
                 {"name": "pool_conv", "op": "conv2d", "out": 256, "kernel": 1, "act": "relu"},
                 {"name": "pool_up", "op": "upsample", "mode": "bilinear", "size_of": "x"},
                 {"name": "cat", "op": "concat", "in": ["b0", "pool_up"]},
                 {"name": "project", "op": "conv2d", "out": 256, "kernel": 1, "act": "relu"}],
             "outputs": ["project", "pool_up"]}


def test_a_bilinear_upsample_of_a_1x1_map_plans_as_nearest_within_the_bank():
    plan = plan_graph(load_graph(ASPP_POOL), oracle=False)
    up = plan.layer("pool_up")
    assert up.config.mode == "nearest"
    assert up.l1_bytes_per_core < plan.l1_bank_bytes
    assert max(s.total for s in plan.step_l1) <= plan.l1_bank_bytes


def test_the_1x1_upsample_on_the_sim_is_torchs_bilinear():
    """Half-pixel bilinear from one pixel is that pixel everywhere: the nearest run equals
    torch's bilinear of the same bfloat16 tensor exactly."""
    import torch
    import torch.nn.functional as F
    import ttmodels
    spec = dict(ASPP_POOL, outputs=["pool_up", "pool_conv"])
    model = ttmodels.build(spec, weights="random", backend="sim", batch_size=1, cache=False)
    try:
        out = model.run(torch.randn(1, 256, 64, 64))
    finally:
        model.close()
    pc = out["pool_conv"].reshape(1, 256, 1, 1)
    assert pc.abs().sum() > 0
    want = F.interpolate(pc, size=(64, 64), mode="bilinear", align_corners=False)
    assert torch.equal(out["pool_up"], want)


def test_the_aspp_image_pooling_branch_plans_and_runs_for_real():
    """ttnn judges every step while planning and then runs the plan on the mock n150. Before:
    "ttnn sizes upsample at 2,118,656 B per core, over the 1,229,472 B left"."""
    from ttmodels.tools.verify import verify
    plan = plan_graph(load_graph(ASPP_POOL), oracle=True)
    assert plan.layer("pool_up").config.mode == "nearest"
    report = verify(None, plan=plan)
    assert report.real and report.completed, report
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert not bad


# ---- adapters and spills are judged by ttnn while planning (issue 33: never a plan with a
# step ttnn rejected; before, only ``confirm`` asked about them) -----------------------------

def _rejecting(tmp_path, figures, refuse):
    """A scripted oracle with ttnn's L1 ``figures`` that rejects the adapter/spill steps
    ``refuse(step)`` picks."""
    from ttmodels.tools import ttnn_oracle as O

    class Rejects(Scripted):
        def _run_batch(self, batch):
            return [O.Answer(False, error=f"Scripted: no {s.op}") if s.kind == "adapter" and
                    refuse(s) else a for s, a in zip(batch, super()._run_batch(batch))]
    return Rejects(tmp_path, figures)


def test_a_plan_never_holds_an_adapter_ttnn_rejects(tmp_path):
    """With the reshard into ``pw`` refused, no L1 form of ``pw`` is left: the last remedy reads
    ``dw`` from DRAM, spilled right after it is made (no other layer reads it: the spill's move
    allocates no L1 and ends dw's program, so its CBs are gone before ``pw``)."""
    base = plan_graph(load_graph(GERNET_TAIL), oracle=False)
    assert any(a.kind == "reshard" for a in base.adapters)     # what the table alone plans
    o = _rejecting(tmp_path, _gernet_figures, lambda s: s.op == "reshard")
    plan = plan_graph(load_graph(GERNET_TAIL), oracle=o)
    assert not [a.edge for a in plan.adapters if a.kind == "reshard"]
    assert not [(s.kind, s.name) for s in plan.ttnn.steps if s.status == "rejected"]
    assert any("ttnn rejects the reshard adapter" in r for r in plan.ttnn.candidates_rejected)
    (sp,) = [sp for sp in plan.spills if sp.for_layer == "pw"]
    assert sp.tensor == "dw" and sp.after == "dw" and sp.to.memory.buffer == "dram"
    assert [a.before.memory.buffer for a in plan.adapters if a.dst == "pw"] in ([], ["dram"])
    assert max(s.total for s in plan.step_l1) <= plan.l1_bank_bytes
    assert "inputs dw from DRAM" in plan.choices["pw"]


def test_without_the_last_remedy_the_refused_adapter_is_the_reason(tmp_path, monkeypatch):
    from ttmodels.planning import planner as P
    monkeypatch.setattr(P._Planner, "dram_fallback", lambda *a, **k: None)
    o = _rejecting(tmp_path, _gernet_figures, lambda s: s.op == "reshard")
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(GERNET_TAIL), oracle=o)
    assert e.value.layer == "pw" and "ttnn rejects the reshard adapter dw -> pw" in str(e.value)


def test_a_spill_ttnn_rejects_is_no_remedy(tmp_path):
    """``pw`` gets ``dw`` only through DRAM once the reshard is refused (above): with the spill
    refused too, ``plan`` refuses the layer rather than returning a plan whose spill ttnn
    rejects."""
    o = _rejecting(tmp_path, _gernet_figures,
                   lambda s: s.op == "reshard" or getattr(s, "_plan_kind", "") == "spill")
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(GERNET_TAIL), oracle=o)
    assert e.value.layer == "pw"
