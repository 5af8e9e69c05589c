"""Issue 34 class 6: group_norm (torch's nn.GroupNorm, smp's FPN head) against torch on the sim,
its rules against ttnn 0.81.1, the layer's weight/mask preparation against ttnn's own helpers,
and a real run on the mock device."""
from __future__ import annotations

import pytest
import torch

import ttmodels
from ttmodels.errors import SpecError
from ttmodels.planning import rules as R
from ttmodels.planning.layout import BLOCK, HEIGHT, INTERLEAVED, MemSpec, TensorLayout
from ttmodels.weights.reference import pcc

GN_SPEC = {
    "name": "gn_ops", "inputs": {"image": {"channels": 8, "size": [16, 12]}},
    "profiles": {"float32": {"activations": "float32", "weights": "float32",
                             "math_fidelity": "HiFi4", "fp32_accum": True}},
    "layers": [
        {"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1, "bias": True},
        {"name": "gn", "op": "group_norm", "groups": 32, "eps": 1e-5},
        {"name": "r", "op": "relu"},
        {"name": "c2", "op": "conv2d", "out": 96, "kernel": 1, "bias": True},
        {"name": "gn2", "op": "group_norm", "groups": 3, "weights": "norm2"},
    ],
    "outputs": {"gn": "gn", "gn2": "gn2"}}


class _GnNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(8, 64, 3, padding=1)
        self.gn = torch.nn.GroupNorm(32, 64)
        self.c2 = torch.nn.Conv2d(64, 96, 1)
        self.norm2 = torch.nn.GroupNorm(3, 96)
        with torch.no_grad():
            for m in (self.gn, self.norm2):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)

    def forward(self, x):
        gn = self.gn(self.c1(x))
        return {"gn": gn, "gn2": self.norm2(self.c2(torch.relu(gn)))}


@pytest.fixture(scope="module")
def gn_net():
    torch.manual_seed(0)
    return _GnNet().eval()


@pytest.mark.parametrize("profile, threshold", [("float32", 0.99999), (None, 0.999)])
def test_group_norm_matches_torch_on_the_sim(gn_net, profile, threshold):
    """Per sample and group statistics: batch 2 with different images (a norm over the whole
    batch, or over the channels of a pixel, would not match)."""
    x = torch.randn(2, 8, 16, 12, generator=torch.Generator().manual_seed(1))
    x[1] = 3.0 * x[1] + 1.0
    with torch.no_grad():
        ref = gn_net(x)
    model = ttmodels.build(GN_SPEC, weights=gn_net.state_dict(), backend="sim", profile=profile,
                           batch_size=2, cache=False)
    out = model.run(x)
    got = {k: float(pcc(out[k], ref[k])) for k in ref}
    assert all(p >= threshold for p in got.values()), got
    # a layer norm over each pixel's channels is a different function: the test can tell
    ln = torch.nn.functional.layer_norm(gn_net.c1(x).permute(0, 2, 3, 1), (64,)).permute(0, 3, 1, 2)
    assert pcc(out["gn"], ln) < 0.99


def test_group_norm_spec_errors():
    bad = dict(GN_SPEC, layers=[{"name": "c1", "op": "conv2d", "out": 48, "kernel": 1},
                                {"name": "gn", "op": "group_norm", "groups": 32}],
               outputs={"gn": "gn"})
    with pytest.raises(SpecError, match=r"'groups' \(32\) must divide the input's 48 channels"):
        ttmodels.load_graph(bad)


def test_group_norm_rules():
    tile = TensorLayout(MemSpec(INTERLEAVED, "l1"), "tile", "bfloat16")
    shape = [(1, 1, 384, 64)]
    assert R.check("group_norm", [tile], {"num_groups": 32}, shapes=shape) == []
    hs = TensorLayout(R.sharded_memspec(HEIGHT, 384, 64, num_cores=8), "tile", "bfloat16")
    bs = TensorLayout(R.sharded_memspec(BLOCK, 384, 64, grid=(2, 2)), "tile", "bfloat16")
    for t in (hs, bs):
        assert [v.rule for v in R.check("group_norm", [t], {"num_groups": 32}, shapes=shape)] \
            == ["group_norm.interleaved"]
    bf8 = TensorLayout(MemSpec(INTERLEAVED, "dram"), "tile", "bfloat8_b")
    assert [v.rule for v in R.check("group_norm", [bf8], {"num_groups": 32}, shapes=shape)] \
        == ["group_norm.dtype"]
    rm = TensorLayout(MemSpec(INTERLEAVED, "dram"), "row_major", "bfloat16")
    assert [v.rule for v in R.check("group_norm", [rm], {"num_groups": 32}, shapes=shape)] \
        == ["group_norm.tile"]
    assert [v.rule for v in R.check("group_norm", [tile], {"num_groups": 16},
                                    shapes=[(1, 1, 384, 48)])] == ["group_norm.channels"]


def test_group_norm_plan_feeds_it_bfloat16_tile_interleaved():
    """The default profile's bfloat8_b activations are typecast before it (ttnn refuses them);
    a height-sharded conv output is interleaved first."""
    from ttmodels.planning.planner import plan_graph
    plan = plan_graph(ttmodels.load_graph(GN_SPEC, batch_size=2))
    for name in ("gn", "gn2"):
        (layer,) = [l for l in plan.layers if l.name == name]
        x = layer.inputs[0]
        assert not x.memory.sharded and x.layout == "tile" and x.dtype == "bfloat16", x
        assert layer.output.memory == x.memory and layer.config.num_groups in (32, 3)
    from ttmodels.planning.plan_checks import check_plan
    assert check_plan(plan) == []


_HELPERS = r'''
from ttmodels.backends import mock_device
mock_device.prepare("n150")
import torch, ttnn
from ttnn.operations.normalization import dram_group_norm_virtual_columns
from ttmodels.backends import sim
from ttmodels.ops.group_norm.columns import virtual_columns
bad = []
for gx in range(1, 9):
    for c, g in ((32, 1), (32, 8), (64, 32), (96, 3), (96, 32), (128, 32), (128, 16), (192, 32),
                 (256, 32), (320, 32), (384, 32), (512, 32), (96, 6), (160, 32)):
        want = dram_group_norm_virtual_columns(ttnn.CoreGrid(x=gx, y=8), c, g)
        if virtual_columns(gx, c, g) != want:
            bad.append(("cols", gx, c, g, want))
            continue
        m = ttnn.to_torch(ttnn.create_group_norm_input_mask(c, g, want, ttnn.bfloat16)).float()
        s = sim.to_torch(sim.create_group_norm_input_mask(c, g, want, sim.bfloat16)).float()
        if m.shape != s.shape or not torch.equal(m, s):
            bad.append(("mask", gx, c, g, tuple(m.shape), tuple(s.shape)))
        w = torch.arange(c, dtype=torch.float32)
        if not torch.equal(ttnn.create_group_norm_weight_bias_rm(w, c, want),
                           sim.create_group_norm_weight_bias_rm(w, c, want)):
            bad.append(("weight", gx, c, g))
print("BAD", bad)
'''


def test_group_norm_preparation_matches_ttnn_helpers():
    """The column split the layer computes, and the sim's mask and weight formats, are ttnn
    0.81.1's own (its C++ ``dram_group_norm_virtual_columns``, ``create_group_norm_input_mask``
    and ``create_group_norm_weight_bias_rm``), over grids 1-8 wide and FPN / ResNet widths. Host
    functions only, in their own process (ttnn's runtime reads the mock descriptor once)."""
    pytest.importorskip("ttnn")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _HELPERS], capture_output=True, text=True,
                       timeout=300)
    line = [l for l in r.stdout.splitlines() if l.startswith("BAD")]
    assert line == ["BAD []"], (r.stdout[-2000:], r.stderr[-2000:])


def test_group_norm_runs_for_real_on_the_mock_device(real_run):
    plan, report = real_run(GN_SPEC, batch_size=2)
    assert [l.node.op for l in plan.layers].count("group_norm") == 2
    bad = [(s.name, s.error or (s.planned_memory, s.ttnn_memory)) for s in report.steps
           if not s.ok]
    assert report.completed and not bad, bad
    assert len(report.steps) == report.planned_steps


def test_import_recognises_group_norm():
    """torch's nn.GroupNorm imports as a group_norm layer keyed by its module (weight/bias load
    as they are) and the self-check reproduces the module in float32."""
    import yaml
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.GroupNorm(16, 64, eps=1e-6),
                            torch.nn.ReLU(), torch.nn.Conv2d(64, 32, 1),
                            torch.nn.GroupNorm(32, 32, affine=False)).eval()
    with torch.no_grad():
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.normal_(0.0, 0.2)
    spec = ttmodels.import_module(m, torch.randn(1, 3, 24, 20))
    gns = [l for l in yaml.safe_load(spec)["layers"] if l.get("op") == "group_norm"]
    assert [(l["name"], l["groups"]) for l in gns] == [("1", 16), ("4", 32)]
    assert gns[0]["eps"] == 1e-6 and gns[1]["affine"] is False
    assert spec.pcc >= 0.9999, spec.report


def test_group_norm_of_channels_ttnn_cannot_split_is_a_clear_plan_error():
    from ttmodels.errors import LayoutError
    from ttmodels.planning.planner import plan_graph
    spec = dict(GN_SPEC, layers=[{"name": "c1", "op": "conv2d", "out": 48, "kernel": 1},
                                 {"name": "gn", "op": "group_norm", "groups": 16}],
                outputs={"gn": "gn"})
    with pytest.raises(LayoutError, match=r"group_norm of 48 channels in 16 groups") as e:
        plan_graph(ttmodels.load_graph(spec))
    assert e.value.layer == "gn"


MERGE_SPEC = {
    "name": "fpn_merge", "inputs": {"image": {"channels": 32, "size": [16, 16]}},
    "layers": [
        {"name": "a0", "op": "conv2d", "out": 64, "kernel": 3, "stride": 2, "padding": 1},
        {"name": "a1", "op": "group_norm", "groups": 32},
        {"name": "a", "op": "upsample", "scale": 2},
        {"name": "b0", "op": "conv2d", "in": "image", "out": 64, "kernel": 3, "padding": 1},
        {"name": "b1", "op": "group_norm", "groups": 32},
        {"name": "b", "op": "relu"},
        {"name": "m", "op": "add", "in": ["a", "b"]}],
    "outputs": {"m": "m"}}


def test_fpn_merge_of_a_row_major_and_a_tile_branch_runs_as_planned(real_run):
    """smp FPN's merge: an upsampled branch (ROW_MAJOR) plus a group_norm -> relu branch
    (TILE). ttnn 0.81.1's add gives TILE for mixed layouts, either order; the plan said
    ROW_MAJOR (the first operand's) and verify failed on FPN's ``decoder.merge.add_2``."""
    plan, report = real_run(MERGE_SPEC)
    m = plan.layer("m")
    assert [t.layout for t in m.inputs] == ["row_major", "tile"] and m.output.layout == "tile"
    bad = [(s.name, s.error or (s.planned_layout, s.ttnn_layout)) for s in report.steps
           if not s.ok]
    assert report.completed and not bad, bad
