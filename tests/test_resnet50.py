"""ResNet50 end to end on the sim backend against torchvision (issue: PCC >= 0.99, batch 2)."""
import pytest
import torch

import ttmodels
from ttmodels.weights.reference import pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict

STAGES = ("layer1", "layer2", "layer3", "layer4")
SPEC = {"extends": "resnet50",
        "outputs": {"logits": "fc", **{f"out_{s}": s for s in STAGES}}}


@pytest.fixture(scope="module")
def setup():
    import torchvision
    graph = load_graph("resnet50", batch_size=2)
    sd = load_state_dict("random", graph, seed=0)
    tv = torchvision.models.resnet50()
    tv.load_state_dict(sd)
    tv.eval()
    feats = {}
    for s in STAGES:
        getattr(tv, s).register_forward_hook(lambda m, i, o, s=s: feats.__setitem__(s, o))
    from ttmodels.weights import synthetic_images
    x = synthetic_images(2, 3, 224, 224, seed=123)
    with torch.no_grad():
        ref = tv(x)
    return sd, x, ref, dict(feats)


def _run(sd, x, profile=None):
    with ttmodels.build(SPEC, weights=sd, backend="sim", batch_size=2, profile=profile) as m:
        return m.run(x)


@pytest.fixture(scope="module")
def default_out(setup):
    sd, x, _, _ = setup
    return _run(sd, x)


def test_logits_pcc_default_profile(setup, default_out):
    _, _, ref, _ = setup
    logits = default_out["logits"]
    assert logits.shape == (2, 1000)
    assert pcc(ref, logits) >= 0.99
    # the top-1 class of a calibrated random net is stable under bfloat16/bfloat8_b rounding
    assert (ref.argmax(1) == logits.argmax(1)).all()


@pytest.mark.parametrize("stage", STAGES)
def test_stage_pcc(setup, default_out, stage):
    _, _, _, feats = setup
    out = default_out[f"out_{stage}"]
    assert out.shape == feats[stage].shape
    assert pcc(feats[stage], out) >= 0.99


def test_formats_are_really_applied(setup, default_out):
    """The default profile's bfloat16 activations / bfloat8_b weights visibly change the result,
    while an all-float32 HiFi4 run of the same layers reproduces torch almost exactly (its pools
    too: ops/pool/exact_window.py, exact_global.py)."""
    sd, x, ref, _ = setup
    fp32 = _run(sd, x, profile="float32")["logits"]
    d_default = (default_out["logits"] - ref).abs().max().item()
    d_fp32 = (fp32 - ref).abs().max().item()
    assert pcc(ref, fp32) > 0.99999
    assert d_default > 20 * d_fp32 and d_default > 1e-3


def test_tt_perf_profile_pcc(setup):
    """TT's shipped ResNet50 precision (bfloat8_b activations and weights, LoFi). TT's own test
    asserts 0.98 on the card; we report ours and hold it to the same bar."""
    sd, x, ref, _ = setup
    logits = _run(sd, x, profile="tt-perf")["logits"]
    p = pcc(ref, logits)
    print(f"tt-perf logits PCC vs torchvision: {p:.5f}")
    assert p >= 0.98
