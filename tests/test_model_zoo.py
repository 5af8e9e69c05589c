"""MobileNetV2, EfficientNet-B0, ResNeXt-50 32x4d and Wide ResNet-50-2 on the sim backend against
torchvision float32 (issue 11: torchvision state dicts load as they are; batch 2; logits PCC >=
0.99 on BN-calibrated random weights; the result is not a float32 run in disguise).

Input sizes are below 224 to keep CI time modest (the PCC claim is about the formats, which do
not depend on the image size; README lists the 224x224 figures, measured with the same code)."""
import pytest
import torch

import ttmodels
from ttmodels.weights.reference import pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

CASES = {                      # model -> test input size
    "mobilenet_v2": 128,
    "efficientnet_b0": 96,
    "resnext50_32x4d": 64,
    "wide_resnet50_2": 64,
}


@pytest.fixture(scope="module")
def torchvision():
    return pytest.importorskip("torchvision")


def _setup(torchvision, name):
    size = CASES[name]
    graph = load_graph(name, batch_size=2, input_size=(size, size))
    sd = load_state_dict("random", graph, seed=0)
    tv = getattr(torchvision.models, name)()
    tv.load_state_dict(sd)            # strict: the spec's keys are torchvision's, shapes included
    tv.eval()
    x = synthetic_images(2, 3, size, size, seed=123)
    with torch.no_grad():
        ref = tv(x)
    return size, sd, x, ref


def _run(name, size, sd, x, profile=None):
    with ttmodels.build(name, weights=sd, backend="sim", batch_size=2, input_size=(size, size),
                        profile=profile) as m:
        return m(x)


@pytest.mark.parametrize("name", list(CASES))
def test_torchvision_state_dict_loads_and_sim_matches(torchvision, name):
    size, sd, x, ref = _setup(torchvision, name)
    # the state dict torchvision itself produces (num_batches_tracked included) is accepted as is
    tv_sd = getattr(torchvision.models, name)().state_dict()
    graph = load_graph(name, batch_size=2, input_size=(size, size))
    assert set(load_state_dict(tv_sd, graph)) == set(sd)
    out = _run(name, size, sd, x)
    assert out.shape == ref.shape == (2, 1000)
    p = pcc(ref, out)
    print(f"{name} {size}x{size} default profile logits PCC vs torchvision: {p:.5f}")
    assert p >= 0.99
    # the default formats really apply: an all-float32 run is much closer to torch
    fp32 = _run(name, size, sd, x, profile="float32")
    d_default = (out - ref).abs().max().item()
    d_fp32 = (fp32 - ref).abs().max().item()
    # (efficientnet: the float32 run still has the SFPU silu model, see ttmodels/ops/activations.py)
    assert d_default > 2 * d_fp32 and d_default > 1e-3


# issue 33: the shipped `precision: auto` of these models was resolved on torchvision's own
# initialisation (torch.manual_seed(0), BN statistics from train-mode passes, momentum None, over
# 2 x 4 synthetic images, seeds 100 and 101) on synthetic input seed 0. On another input it must
# still hold 0.99, where their old default (bfloat8_b weights, HiFi2) did not.
OLD_DEFAULT = {"activations": "bfloat16", "weights": "bfloat8_b", "math_fidelity": "HiFi2"}


def _torchvision_initialised(torchvision, name):
    torch.manual_seed(0)
    tv = getattr(torchvision.models, name)(weights=None)
    for mod in tv.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None             # a plain average over the calibration passes
    tv.train()
    with torch.no_grad():
        for seed in (100, 101):
            tv(synthetic_images(4, 3, 224, 224, seed=seed))
    return tv.eval()


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_auto_precision_holds_on_torchvision_initialised_weights(torchvision, name):
    tv = _torchvision_initialised(torchvision, name)
    sd = tv.state_dict()
    x = synthetic_images(1, 3, 224, 224, seed=5)        # not the resolution's input
    with torch.no_grad():
        ref = tv(x)
    got = {}
    for what, spec in (("auto", name),
                       ("old default", {"extends": name,
                                        "defaults": {"layout": "auto", "precision": OLD_DEFAULT}})):
        with ttmodels.build(spec, weights=sd, backend="sim", batch_size=1,
                            input_size=(224, 224)) as m:
            got[what] = pcc(ref, m(x))
    print(f"{name} torchvision-initialised logits PCC: {got}")
    assert got["auto"] >= 0.99 > got["old default"]
