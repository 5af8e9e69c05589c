"""unet_resnet34 (issue 23 item 5): segmentation_models_pytorch's ``Unet("resnet34", classes=1)``
key names, PCC on the sim against a pure-torch reference (tests/unet_reference.py), the real run
on the mock device.

Weights: seeded random with calibrated BatchNorm. The decoder is a plain chain of ten
conv-BN-ReLU layers with no identity path; at init (BN shift ~ 0) such a chain is chaotic and
amplifies any rounding with depth, as trained decoders do not (mask PCC 0.975 in the default
formats, float32 1.0000), so its BNs get the shift of about 1 the other non-residual nets' random
weights have (``random_state_dict(bn_shift=...)``)."""
from __future__ import annotations

import math

import pytest
import torch

import ttmodels
from ttmodels.weights.reference import expected_parameters, optional_keys, pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, random_state_dict, synthetic_images

SIZE = 128
# smp's Unet("resnet34") parameter count (encoder 21,284,672 + decoder + head; BN running
# statistics not counted)
PARAMS = 24_436_369


@pytest.fixture(scope="module")
def reference():
    pytest.importorskip("torchvision")
    from unet_reference import UnetResNet34
    graph = load_graph("unet_resnet34", input_size=(SIZE, SIZE))
    sd = random_state_dict(graph, seed=0, bn_shift={"decoder.": 1.0})
    ref = UnetResNet34().eval()
    ref.load_state_dict(sd)                    # strict: the spec's keys are the reference's
    x = synthetic_images(1, 3, SIZE, SIZE, seed=123)
    with torch.no_grad():
        want = ref(x)
    return graph, ref, x, want


def test_keys_are_smp_and_the_parameter_count_is_smp(reference):
    graph, ref, _, _ = reference
    expected = expected_parameters(graph)
    ref_sd = ref.state_dict()
    assert set(ref_sd) - optional_keys(graph) == set(expected)
    assert all(tuple(ref_sd[k].shape) == tuple(s) for k, s in expected.items())
    assert sum(math.prod(s) for k, s in expected.items() if "running_" not in k) == PARAMS
    assert "decoder.blocks.0.conv1.0.weight" in expected and "segmentation_head.0.bias" in expected
    assert list(graph.shape_of("mask").nhwc) == [1, SIZE, SIZE, 1]
    # the whole state dict, num_batches_tracked included, loads as it is
    assert set(load_state_dict(ref_sd, graph)) == set(expected)
    # more classes: extend the spec
    g3 = load_graph({"extends": "unet_resnet34", "params": {"classes": 3}})
    assert list(g3.shape_of("mask").nhwc)[-1] == 3


@pytest.mark.parametrize("profile", [None, "float32"])
def test_sim_matches_the_torch_reference(reference, profile):
    graph, ref, x, want = reference
    with ttmodels.build("unet_resnet34", weights=ref.state_dict(), backend="sim",
                        input_size=(SIZE, SIZE), profile=profile) as m:
        got = m(x)
    assert got.shape == want.shape == (1, 1, SIZE, SIZE)
    p = pcc(want, got)
    print(f"unet_resnet34 {SIZE}x{SIZE} {profile or 'default'} mask PCC {p:.5f}")
    if profile == "float32":
        assert p > 0.9999
    else:
        assert 0.99 <= p < 0.9995        # the default formats apply, and hold


def test_plans_at_the_shipped_256(capsys):
    from ttmodels.tools.cli import main as cli_main
    assert cli_main(["plan", "unet_resnet34"]) == 0
    out = capsys.readouterr().out
    assert "decoder.blocks.4.conv2.0" in out and "every step placed" in out


def test_unet_resnet34_runs_for_real_on_the_mock_device(real_run):
    # (at 128x128 ttnn 0.81.1 picks a conv kernel for the encoder's layer2 1x1 downsample whose
    # source the wheel does not ship; 256x256, the spec's size, runs to the end)
    _, r = real_run("unet_resnet34", input_size=(256, 256))
    rejected = [(s.name, s.error) for s in r.steps if not s.accepted]
    assert not rejected, rejected
    assert all(s.memory_match and s.layout_match for s in r.steps)
    assert {s.op for s in r.layers} >= {"conv2d", "upsample", "concat", "add", "max_pool2d"}
    assert r.ok and r.real
