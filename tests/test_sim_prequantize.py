"""Warm builds on the sim read conv weights already rounded to their format from the weight cache
(``ttmodels/backends/sim/prequantize.py``) and give the same bits as a build that rounds them."""
from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import ttmodels
from ttmodels.weights import cache as cache_mod
from ttmodels.ops.conv2d import sim as sim_ops
from ttmodels.weights import prepare_parameters, random_state_dict, synthetic_images

# stem 3x3, depthwise 3x3, 1x1 matmul convs; bfloat8_b weights (mobilenet_v2's shipped default
# is `precision: auto` since issue 33, whose choice has bfloat16 weights)
SPEC = {"extends": "mobilenet_v2", "defaults": {"layout": "auto", "precision": {
    "activations": "bfloat16", "weights": "bfloat8_b", "math_fidelity": "HiFi2"}}}
SIZE = (64, 64)


@pytest.fixture(scope="module")
def weights():
    graph = ttmodels.load_graph(SPEC, batch_size=1, input_size=SIZE)
    return random_state_dict(graph, seed=0, calibrate=False)


def _build(sd, **kw):
    return ttmodels.build(SPEC, weights=sd, backend="sim", batch_size=1, input_size=SIZE, **kw)


@pytest.fixture
def rounding_calls(monkeypatch):
    """Shapes of the in-place roundings of conv weight matrices (``ops.quantize_``) made while
    building (a build runs no op, so every call there rounds a conv weight)."""
    calls = []
    real = sim_ops.quantize_

    def spy(data, dtype):
        calls.append(tuple(data.shape))
        return real(data, dtype)
    monkeypatch.setattr(sim_ops, "quantize_", spy)
    return calls


@pytest.mark.parametrize("profile", [None, "tt-perf"])
def test_warm_build_reuses_rounded_weights_with_the_same_bits(tmp_path, weights, rounding_calls,
                                                              profile):
    x = synthetic_images(1, 3, *SIZE, seed=3)
    with _build(weights, cache=False, keep_params=True, profile=profile) as m:  # rounds at prepare
        want = m(x)
    rounding_calls.clear()
    with _build(weights, cache=tmp_path, profile=profile) as m:
        assert rounding_calls, "the cold build rounds the conv weights (once, for the cache)"
        cold = m(x)
    rounding_calls.clear()
    with _build(weights, cache=tmp_path, profile=profile) as m:
        assert "[cached]" in m.weights_info
        assert rounding_calls == [], "a warm build must not round the cached conv weights again"
        warm = m(x)
    for got in (cold, warm):
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_cached_entry_holds_rounded_weights(tmp_path, weights):
    graph = ttmodels.load_graph(SPEC, batch_size=1, input_size=SIZE)
    folded = prepare_parameters(graph, weights)
    with _build(weights, cache=tmp_path):
        pass
    (entry,) = tmp_path.glob("*.safetensors")            # the build's one cache entry
    stored = load_file(str(entry))
    bf8 = sim_ops.T.DataType.BFLOAT8_B
    for node, groups in (("features.1.conv.0.0", 32), ("features.1.conv.1", 1)):  # depthwise, 1x1
        w = stored[f"{node}::weight"]
        assert w.dtype == torch.bfloat16        # holds bfloat8_b values exactly, half the bytes
        w = w.float()
        assert torch.equal(w, sim_ops.quantized_conv_weight(folded[node]["weight"], groups, bf8))
        assert not torch.equal(w, folded[node]["weight"]), "bfloat8_b rounding moved some values"
    assert torch.equal(stored["logits::weight"], folded["logits"]["weight"])  # not a conv


def test_prequantized_entry_with_wrong_shapes_is_rebuilt(tmp_path, weights, caplog):
    x = synthetic_images(1, 3, *SIZE, seed=3)
    with _build(weights, cache=tmp_path) as m:
        want = m(x)
    (entry,) = tmp_path.glob("*.safetensors")
    with safe_open(str(entry), "pt") as f:
        meta = f.metadata()
    t = load_file(str(entry))
    t["logits::bias"] = torch.zeros(3)
    meta["checksum"] = cache_mod.tensors_checksum(t)   # a consistent entry, but not this graph's
    save_file(t, str(entry), metadata=meta)
    with caplog.at_level("WARNING", logger="ttmodels.weights.cache"):
        with _build(weights, cache=tmp_path) as m:
            assert "[cached]" not in m.weights_info
            got = m(x)
    assert "tensor names or shapes differ" in caplog.text
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_kept_params_stay_the_folded_float32_weights(weights):
    with _build(weights, cache=False, keep_params=True) as m:
        w = m.executor.layers["features.1.conv.0.0"].params["weight"]
    folded = prepare_parameters(ttmodels.load_graph(SPEC, batch_size=1, input_size=SIZE), weights)
    assert torch.equal(w, folded["features.1.conv.0.0"]["weight"])
