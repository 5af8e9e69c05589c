"""float32 stays float32 where ttnn allows it (issue 33: the importer's float32 self-check).
The reshape family (flatten, reshape, permute, channel_shuffle) typecast every input to bfloat16,
the float32 profile's largest loss on shufflenet_v2 (0.99981 before: each unit's shuffle rounded
its output); a standalone batch_norm's constants were bfloat16 (densenet121's BNs)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import ttmodels

SPEC = """
name: shuffle_f32
inputs:
  image: {channels: 3, size: [32, 32]}
profiles:
  float32: {activations: float32, weights: float32, math_fidelity: HiFi4, fp32_accum: true}
layers:
  - {name: conv, op: conv2d, out: 8, kernel: 3, padding: 1, bias: true}
  - {name: shuffle, op: channel_shuffle, groups: 2}
outputs: {out: shuffle}
"""


def _weights():
    g = torch.Generator().manual_seed(0)
    return {"conv.weight": torch.randn(8, 3, 3, 3, generator=g),
            "conv.bias": torch.randn(8, generator=g)}


def test_a_float32_channel_shuffle_is_planned_in_float32():
    plan = ttmodels.plan(SPEC, input_size=(32, 32), profile="float32", oracle=False)
    shuffle = next(l for l in plan.layers if l.node.op == "channel_shuffle")
    assert [x.dtype for x in shuffle.inputs] == ["float32"]
    assert shuffle.output.dtype == "float32"


def test_a_float32_channel_shuffle_is_exact_on_the_sim():
    sd = _weights()
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    y = F.conv2d(x, sd["conv.weight"], sd["conv.bias"], padding=1)
    ref = y.reshape(1, 2, 4, 32, 32).transpose(1, 2).reshape(1, 8, 32, 32)
    with ttmodels.build(SPEC, weights=sd, backend="sim", input_size=(32, 32),
                        profile="float32", cache=False) as m:
        out = m(x)
    # bfloat16 would be off by ~2**-9 of each value (0.02 here); float32 with fp32_accum by ~1e-6
    assert float((out.reshape(ref.shape) - ref).abs().max()) < 1e-4 * float(ref.abs().max())


BN_SPEC = """
name: bn_f32
inputs:
  image: {channels: 8, size: [16, 16]}
profiles:
  float32: {activations: float32, weights: float32, math_fidelity: HiFi4, fp32_accum: true}
layers:
  - {name: bn, op: batch_norm, weights: bn}
outputs: {out: bn}
"""


def test_a_float32_batch_norm_has_float32_constants_and_is_exact_on_the_sim():
    """A standalone batch_norm's per-channel scale and shift (binary_ng operands) are float32
    in a float32 profile: bfloat16 ones rounded each (densenet121's pre-activation BNs)."""
    g = torch.Generator().manual_seed(2)
    sd = {"bn.weight": torch.rand(8, generator=g) + 0.5, "bn.bias": torch.randn(8, generator=g),
          "bn.running_mean": torch.randn(8, generator=g),
          "bn.running_var": torch.rand(8, generator=g) + 0.5}
    plan = ttmodels.plan(BN_SPEC, input_size=(16, 16), profile="float32", oracle=False)
    bn = next(l for l in plan.layers if l.node.op == "batch_norm")
    assert bn.config.constant_dtype == "float32"
    x = torch.randn(1, 8, 16, 16, generator=torch.Generator().manual_seed(3))
    ref = F.batch_norm(x, sd["bn.running_mean"], sd["bn.running_var"], sd["bn.weight"],
                       sd["bn.bias"], eps=1e-5)
    with ttmodels.build(BN_SPEC, weights=sd, backend="sim", input_size=(16, 16),
                        profile="float32", cache=False) as m:
        out = m(x)
    assert float((out.reshape(ref.shape) - ref).abs().max()) < 1e-4 * float(ref.abs().max())


def test_the_self_check_names_the_pools_ttnn_runs_in_bfloat16():
    """ttnn 0.81.1's pool2d reads bfloat16 only. A float32 max pool no longer goes through it
    (ops/pool/exact_window.py: googlenet's 13 max pools gave 0.99972 on BN-calibrated weights
    through pool2d), so the self-check names none here and the PCC is float32's; a pool the plan
    still typecasts is named when the PCC is short."""
    from dataclasses import replace

    from ttmodels.tools import importer
    from ttmodels.tools.importer.selfcheck import CheckResult
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.MaxPool2d(2),
                                 torch.nn.Conv2d(8, 8, 1)).eval()
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    text = importer.import_module(module, x, name="pooled", check=False)
    res = importer.check_spec(text, module, importer.trace(module, x), x)
    assert res.bfloat16_pools == () and res.pcc >= importer.PCC_MIN
    short = CheckResult(0.9998, 0.01, bfloat16_pools=("gap",))
    assert "pool2d reads and writes bfloat16 only" in short.summary()
    assert "bfloat16" not in replace(short, pcc=1.0).summary()
