"""A small multi-layer spec (conv -> relu -> maxpool -> conv -> residual add) end to end on sim,
against the float32 torch reference of the same graph and weights."""
import pytest
import torch

import ttmodels
from ttmodels.formats import quantize
from ttmodels.weights.reference import ReferenceModel, pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

SPEC = """
name: small_residual
inputs:
  x: {channels: 3, size: [32, 32]}
defaults:
  precision: {activations: bfloat16, weights: bfloat8_b, math_fidelity: HiFi4}
profiles:
  float32: {activations: float32, weights: float32, math_fidelity: HiFi4, fp32_accum: true}
  bfp8: {activations: bfloat8_b, weights: bfloat8_b, math_fidelity: LoFi}
layers:
  - {name: conv1, op: conv2d, out: 32, kernel: 3, padding: 1, bn: bn1}
  - {name: act1, op: relu}
  - {name: pool, op: max_pool2d, kernel: 2, stride: 2}
  - {name: conv2, op: conv2d, out: 32, kernel: 3, padding: 1, bn: bn2}
  - {name: res, op: add, in: [conv2, pool], act: relu}
outputs: [res]
"""


@pytest.fixture(scope="module")
def case():
    graph = load_graph(SPEC, batch_size=2)
    sd = load_state_dict("random", graph, seed=3)
    x = synthetic_images(2, 3, 32, 32, seed=11)
    ref = ReferenceModel(graph, sd).run({"x": x})["res"]
    return sd, x, ref


def _sim(sd, x, profile=None):
    with ttmodels.build(SPEC, weights=sd, backend="sim", batch_size=2, profile=profile) as m:
        assert m.backend_name == "sim"
        return m(x)


def test_float32_profile_matches_reference(case):
    """float32 everywhere, the max pool too (ttnn 0.81.1's pool2d reads bfloat16 only, so a
    float32 window pool runs as slices and SFPU maxima: ops/pool/exact_window.py): exact to
    1e-4 against the plain float32 reference."""
    sd, x, ref = case
    out = _sim(sd, x, "float32")
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_bfloat16_activations_within_their_tolerance(case):
    sd, x, ref = case
    out = _sim(sd, x)
    # bfloat16 outputs: every value is a bfloat16 number
    assert torch.equal(quantize(out, "bfloat16"), out)
    # bfloat8_b weights (7-bit mantissa, shared exponent) + bfloat16 activations (8-bit): a few
    # parts in a hundred of the output's range at worst, and far from a float32 result
    err = (out - ref).abs().max().item()
    assert err <= 0.03 * ref.abs().max().item()
    assert err > 1e-3
    assert pcc(ref, out) >= 0.999


def test_block_float_activations_are_coarser(case):
    sd, x, ref = case
    default_err = (_sim(sd, x) - ref).abs().max().item()
    out = _sim(sd, x, "bfp8")
    assert torch.equal(quantize(out.permute(0, 2, 3, 1).reshape(1, 1, -1, 32), "bfloat8_b"),
                       out.permute(0, 2, 3, 1).reshape(1, 1, -1, 32))
    assert (out - ref).abs().max().item() > default_err
    assert pcc(ref, out) >= 0.99
