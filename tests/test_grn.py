"""Issue 34 class 6: grn (ConvNeXt-V2's GlobalResponseNorm, timm's ``GlobalResponseNorm``)
composed of ttnn reductions and binary ops: against timm's module on the sim, its rule against
ttnn 0.81.1, a real run on the mock device, and the import of timm's module."""
from __future__ import annotations

import pytest
import torch

import ttmodels
from ttmodels.planning import rules as R
from ttmodels.planning.layout import INTERLEAVED, MemSpec, TensorLayout
from ttmodels.weights.reference import pcc

timm = pytest.importorskip("timm")

GRN_SPEC = {
    "name": "grn_ops", "inputs": {"image": {"channels": 8, "size": [14, 10]}},
    "profiles": {"float32": {"activations": "float32", "weights": "float32",
                             "math_fidelity": "HiFi4", "fp32_accum": True}},
    "layers": [
        {"name": "fc1", "op": "conv2d", "out": 160, "kernel": 1, "bias": True, "act": "gelu"},
        {"name": "grn", "op": "grn"},
        {"name": "fc2", "op": "conv2d", "out": 40, "kernel": 1, "bias": True},
    ],
    "outputs": {"grn": "grn", "fc2": "fc2"}}


class _GrnNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from timm.layers.grn import GlobalResponseNorm
        self.fc1 = torch.nn.Conv2d(8, 160, 1)
        self.grn = GlobalResponseNorm(160, channels_last=False)
        self.fc2 = torch.nn.Conv2d(160, 40, 1)
        with torch.no_grad():
            self.grn.weight.normal_(0.0, 0.5)
            self.grn.bias.normal_(0.0, 0.2)

    def forward(self, x):
        g = self.grn(torch.nn.functional.gelu(self.fc1(x)))
        return {"grn": g, "fc2": self.fc2(g)}


@pytest.fixture(scope="module")
def grn_net():
    torch.manual_seed(0)
    return _GrnNet().eval()


@pytest.mark.parametrize("profile, threshold", [("float32", 0.99999), (None, 0.999)])
def test_grn_matches_timm_on_the_sim(grn_net, profile, threshold):
    """Per-sample statistics: batch 2 with images of different scale (statistics over the whole
    batch would not match). The normalization really acts: without it (weight * x instead of
    weight * x * Nx) the output differs."""
    x = torch.randn(2, 8, 14, 10, generator=torch.Generator().manual_seed(1))
    x[1] = 4.0 * x[1]
    with torch.no_grad():
        ref = grn_net(x)
    model = ttmodels.build(GRN_SPEC, weights=grn_net.state_dict(), backend="sim",
                           profile=profile, batch_size=2, cache=False)
    out = model.run(x)
    got = {k: float(pcc(out[k], ref[k])) for k in ref}
    assert all(p >= threshold for p in got.values()), got
    with torch.no_grad():
        h = torch.nn.functional.gelu(grn_net.fc1(x))
        w, b = grn_net.grn.weight.view(1, -1, 1, 1), grn_net.grn.bias.view(1, -1, 1, 1)
        plain = h + b + w * h
    assert pcc(out["grn"], plain) < 0.999


def test_grn_rule_and_plan():
    rm = TensorLayout(MemSpec(INTERLEAVED, "l1"), "row_major", "bfloat16")
    assert R.check("grn", [rm], {}, shapes=[(1, 1, 140, 160)]) == []    # ttnn accepts it
    assert [v.rule for v in R.advise("grn", [rm], {}, shapes=[(1, 1, 140, 160)])] == ["grn.tile"]
    from ttmodels.planning.planner import plan_graph
    plan = plan_graph(ttmodels.load_graph(GRN_SPEC, batch_size=2))
    (layer,) = [l for l in plan.layers if l.name == "grn"]
    x = layer.inputs[0]
    assert not x.memory.sharded and x.layout == "tile" and layer.output.memory == x.memory


def test_grn_runs_for_real_on_the_mock_device(real_run):
    plan, report = real_run(GRN_SPEC, batch_size=2)
    assert [l.node.op for l in plan.layers].count("grn") == 1
    bad = [(s.name, s.error or (s.planned_memory, s.ttnn_memory)) for s in report.steps
           if not s.ok]
    assert report.completed and not bad, bad
    assert len(report.steps) == report.planned_steps


@pytest.mark.parametrize("channels_last", [False, True])
def test_import_recognises_timms_global_response_norm(channels_last):
    """timm's GlobalResponseNorm imports as one grn layer keyed by its module, NCHW (after 1x1
    convs, ConvNeXt-V2's conv MLP) or channels-last (between Linear layers)."""
    import yaml
    from timm.layers.grn import GlobalResponseNorm

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
            self.fc1 = torch.nn.Linear(32, 64) if channels_last else torch.nn.Conv2d(32, 64, 1)
            self.grn = GlobalResponseNorm(64, channels_last=channels_last)
            self.fc2 = torch.nn.Linear(64, 32) if channels_last else torch.nn.Conv2d(64, 32, 1)
            with torch.no_grad():
                self.grn.weight.normal_(0.0, 0.5)
                self.grn.bias.normal_(0.0, 0.2)

        def forward(self, x):
            x = self.stem(x)
            if channels_last:
                return x + self.fc2(self.grn(self.fc1(x.permute(0, 2, 3, 1)))).permute(0, 3, 1, 2)
            return x + self.fc2(self.grn(self.fc1(x)))

    torch.manual_seed(0)
    spec = ttmodels.import_module(Block().eval(), torch.randn(1, 3, 16, 12))
    grns = [l for l in yaml.safe_load(spec)["layers"] if l.get("op") == "grn"]
    assert [l["name"] for l in grns] == ["grn"]
    assert spec.pcc >= 0.9999, spec.report
