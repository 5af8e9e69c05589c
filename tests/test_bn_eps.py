"""BatchNorm eps per layer (issue 23): conv2d's ``bn: {name:, eps:}`` and batch_norm's ``eps``
reach the torch reference, the folding and the standalone scale/shift; negative running variances
of a standalone batch_norm are refused like a folded BN's (issue 22)."""
from __future__ import annotations

import pytest
import torch

import ttmodels
from ttmodels.errors import SpecError, WeightsError
from ttmodels.weights.reference import pcc

SIZE = 16
EPS = 1e-3      # MobileNetV3, GoogLeNet and Ultralytics' BatchNorms


def _spec(conv_bn, bn_extra: dict) -> dict:
    return {
        "name": "bn_eps",
        "inputs": {"image": {"channels": 3, "size": [SIZE, SIZE]}},
        "profiles": {"float32": {"activations": "float32", "weights": "float32",
                                 "math_fidelity": "HiFi4", "fp32_accum": True}},
        "layers": [
            {"name": "conv1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
             "bn": conv_bn, "act": "relu"},
            {"name": "conv2", "op": "conv2d", "out": 32, "kernel": 1, "bias": True},
            {"name": "bn2", "op": "batch_norm", **bn_extra},
        ],
        "outputs": {"out": "bn2"},     # the output renames layer bn2 to "out" (keys: bn2.*)
    }


class _Net(torch.nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(32, eps=eps)
        self.conv2 = torch.nn.Conv2d(32, 32, 1)
        self.bn2 = torch.nn.BatchNorm2d(32, eps=eps)

    def forward(self, x):
        return self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))


@pytest.fixture(scope="module")
def net():
    """Running variances of the order of eps (as in trained nets' quiet channels), so that eps
    changes the output's scale channel by channel."""
    torch.manual_seed(0)
    m = _Net(EPS).eval()
    with torch.no_grad():
        for bn in (m.bn1, m.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.1)
            bn.running_mean.normal_(0.0, 0.01)
            bn.running_var.uniform_(1e-5, 3e-3)
    return m


def _pcc(spec, net) -> float:
    model = ttmodels.build(spec, weights=net.state_dict(), backend="sim", profile="float32",
                           cache=False)
    x = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1)) * 0.05
    with torch.no_grad():
        ref = net(x)
    return pcc(model.run(x)["out"], ref)


def test_bn_eps_matches_torch_and_the_default_eps_does_not(net):
    assert _pcc(_spec({"name": "bn1", "eps": EPS}, {"eps": EPS}), net) > 0.9999
    # the same weights with torch's default eps are far off: the eps above is what matched
    assert _pcc(_spec("bn1", {}), net) < 0.99


def test_eps_reaches_the_folded_conv_and_the_standalone_scale(net):
    from ttmodels.weights.cache import prepared_parameters
    g = ttmodels.load_graph(_spec({"name": "bn1", "eps": EPS}, {"eps": EPS}))
    assert g.node("conv1").attrs["bn_eps"] == EPS and g.node("out").attrs["eps"] == EPS
    params, _ = prepared_parameters(g, net.state_dict(), cache=False)
    scale = net.bn1.weight / torch.sqrt(net.bn1.running_var + EPS)
    torch.testing.assert_close(params["conv1"]["weight"],
                               net.conv1.weight * scale.view(-1, 1, 1, 1))
    torch.testing.assert_close(params["out"]["scale"],
                               net.bn2.weight / torch.sqrt(net.bn2.running_var + EPS))


def test_default_eps_is_torchs():
    g = ttmodels.load_graph(_spec("bn1", {}))
    assert g.node("conv1").attrs["bn_eps"] == torch.nn.BatchNorm2d(1).eps
    assert g.node("out").attrs["eps"] == torch.nn.BatchNorm2d(1).eps


@pytest.mark.parametrize("conv_bn, bn_extra, match", [
    ({"name": "bn1", "eps": -1e-3}, {}, r"'eps' must be > 0"),
    ({"name": "bn1", "eps": "small"}, {}, r"'eps' must be a finite number"),
    ({"eps": 1e-3}, {}, r"'bn' needs a 'name'"),
    ({"name": "bn1", "epsilon": 1e-3}, {}, r"unknown field 'epsilon'.*did you mean 'eps'"),
    ("bn1", {"eps": 0}, r"'eps' must be > 0"),
])
def test_bad_eps_names_the_layer(conv_bn, bn_extra, match):
    with pytest.raises(SpecError, match=match) as e:
        ttmodels.load_graph(_spec(conv_bn, bn_extra))
    assert "conv1" in str(e.value) or "bn2" in str(e.value)


def test_negative_variance_of_a_standalone_batch_norm_is_refused(net):
    sd = {k: v.clone() for k, v in net.state_dict().items()}
    sd["bn2.running_var"][3] = -0.5
    with pytest.raises(WeightsError, match=r"bn2\.running_var.*negative BatchNorm variance"):
        ttmodels.build(_spec("bn1", {}), weights=sd, backend="sim", cache=False)


@pytest.mark.parametrize("imports, layer", [
    ("ttmodels/resnet", {"block": "resnet_trunk", "unit": "basic_block", "expansion": 1,
                         "depth1": 1, "depth2": 1, "depth3": 1, "depth4": 1}),
    ("ttmodels/resnet", {"block": "resnet_trunk", "depth1": 1, "depth2": 1, "depth3": 1,
                         "depth4": 1}),
    ("ttmodels/common", {"block": "conv_bn_act", "out": 16}),
    ("ttmodels/mobilenet", {"block": "inverted_residual", "inp": 3, "out": 16}),
    ("ttmodels/efficientnet", {"block": "mbconv", "inp": 3, "out": 16}),
    ("ttmodels/bevdet", {"block": "custom_resnet", "depth": 1}),
])
def test_shipped_blocks_pass_bn_eps_to_every_batch_norm(imports, layer):
    spec = {"name": "blocks", "imports": [imports],
            "inputs": {"image": {"channels": 3, "size": [64, 64]}},
            "layers": [{"name": "b", "bn_eps": EPS, **layer}]}
    g = ttmodels.load_graph(spec)
    bns = [n for n in g.nodes if n.bn]
    assert bns and all(n.attrs["bn_eps"] == EPS for n in bns)
    default = dict(spec, layers=[{"name": "b", **layer}])
    assert all(n.attrs["bn_eps"] == 1e-5 for n in ttmodels.load_graph(default).nodes if n.bn)


def test_conv_bn_act_without_norm_has_no_batch_norm():
    spec = {"name": "plain", "imports": ["ttmodels/common"],
            "inputs": {"image": {"channels": 3, "size": [16, 16]}},
            "layers": [{"name": "b", "block": "conv_bn_act", "out": 8, "norm": False,
                        "bias": True}]}
    (n,) = ttmodels.load_graph(spec).nodes
    assert n.bn is None and "bn_eps" not in n.attrs
