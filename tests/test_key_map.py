"""key_map reshapes and drops (issue 23 item 4): the dict entries ``{spec_key: {from:, reshape:}}``
and ``{key_or_prefix: None}``, a callable's ``(spec_key, shape)``, the errors naming the keys,
the prepared-weight cache keyed by them, and ``ttmodels compare --key-map FILE --input X.npy
--profile P``."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import ttmodels
from ttmodels.tools.cli import main as cli_main
from ttmodels.errors import WeightsError
from ttmodels.weights import load_state_dict

SPEC = {
    "name": "km",
    "inputs": {"image": {"channels": 3, "size": [16, 16]}},
    "profiles": {"float32": {"activations": "float32", "weights": "float32",
                             "math_fidelity": "HiFi4", "fp32_accum": True}},
    "layers": [
        {"name": "conv1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "bn": "bn1",
         "act": "relu"},
        {"name": "proj", "op": "conv2d", "out": 16, "kernel": 1, "bias": True},
        {"name": "pool", "op": "global_avg_pool"},
        {"name": "fc", "op": "linear", "out": 10},
    ],
    "outputs": {"logits": "fc"},
}


class UserNet(torch.nn.Module):
    """The same network as a user wrote it: the 1x1 conv is a per-pixel nn.Linear (weight
    [16, 32], no 1x1 dims), and an auxiliary head the spec has no layer for."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.stem_bn = torch.nn.BatchNorm2d(32)
        self.mix = torch.nn.Linear(32, 16)
        self.head = torch.nn.Linear(16, 10)
        self.aux = torch.nn.Linear(16, 2)

    def forward(self, x):
        y = torch.relu(self.stem_bn(self.stem(x)))
        y = self.mix(y.permute(0, 2, 3, 1)).mean(dim=(1, 2))
        return self.head(y)


KEY_MAP = {
    "stem.": "conv1.",
    "stem_bn.": "bn1.",
    "proj.weight": {"from": "mix.weight", "reshape": [16, 32, 1, 1]},
    "proj.bias": "mix.bias",
    "head.": "fc.",
    "aux.": None,
}


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    m = UserNet().eval()
    with torch.no_grad():
        m.stem_bn.running_mean.normal_(0, 0.1)
        m.stem_bn.running_var.uniform_(0.5, 1.5)
    return m


def test_reshape_and_drop_entries_load_a_user_module(net):
    graph = ttmodels.load_graph(SPEC)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    sd = load_state_dict(net, graph, key_map=KEY_MAP)
    assert sd["proj.weight"].shape == (16, 32, 1, 1)
    torch.testing.assert_close(sd["proj.weight"].view(16, 32), net.mix.weight)
    assert sorted(sd.report.ignored) == ["aux.bias", "aux.weight"]
    assert "dropped by key_map" in sd.report.ignored_reason
    # nothing the user gave is modified
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert net.mix.weight.shape == (16, 32)
    # the built model computes the user's network
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with ttmodels.build(SPEC, weights=net, key_map=KEY_MAP, backend="sim", batch_size=2,
                        profile="float32", cache=False) as m:
        got = m(x)
    with torch.no_grad():
        want = net(x)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def test_without_the_reshape_the_key_is_mis_shaped_and_without_the_drop_unexpected(net):
    graph = ttmodels.load_graph(SPEC)
    plain = dict(KEY_MAP, **{"proj.weight": "mix.weight"})
    with pytest.raises(WeightsError) as e:
        load_state_dict(net, graph, key_map=plain)
    assert [k for k, *_ in e.value.mismatched] == ["proj.weight"]
    assert "proj.weight: expected [16, 32, 1, 1], got [16, 32]" in str(e.value)
    keep_aux = {k: v for k, v in KEY_MAP.items() if k != "aux."}
    with pytest.raises(WeightsError) as e:
        load_state_dict(net, graph, key_map=keep_aux)
    assert sorted(e.value.unexpected) == ["aux.bias", "aux.weight"]
    assert "ignore=['aux.']" in str(e.value)


def test_reshape_errors_name_the_keys(net):
    graph = ttmodels.load_graph(SPEC)
    bad = dict(KEY_MAP, **{"proj.weight": {"from": "mix.weight", "reshape": [16, 31, 1, 1]}})
    with pytest.raises(WeightsError) as e:
        load_state_dict(net, graph, key_map=bad)
    msg = str(e.value)
    assert "'mix.weight' (for spec key 'proj.weight')" in msg and "[16, 32]" in msg \
        and "[16, 31, 1, 1]" in msg
    for shape in ([16, 0, 1], "16x32", [16, -1, -1], [True, 32]):
        with pytest.raises(WeightsError, match="entry 'proj.weight': 'reshape' must be"):
            load_state_dict(net, graph, key_map=dict(KEY_MAP, **{"proj.weight": {
                "from": "mix.weight", "reshape": shape}}))
    with pytest.raises(WeightsError, match=r"entry 'proj.weight': a mapping value is"):
        load_state_dict(net, graph, key_map=dict(KEY_MAP, **{"proj.weight": {
            "from": "mix.weight", "shape": [16, 32, 1, 1]}}))
    # -1 is inferred; an entry whose 'from' key does not exist is reported as unused
    ok = dict(KEY_MAP, **{"proj.weight": {"from": "mix.weight", "reshape": [16, -1, 1, 1]}})
    assert load_state_dict(net, graph, key_map=ok)["proj.weight"].shape == (16, 32, 1, 1)
    with pytest.raises(WeightsError) as e:
        load_state_dict(net, graph, key_map=dict(KEY_MAP, **{"proj.weight": {
            "from": "mixer.weight", "reshape": [16, 32, 1, 1]}}))
    assert "missing" in str(e.value) and "'proj.weight': {'from': 'mixer.weight'" in str(e.value)
    # a drop entry that matches nothing is reported as well
    with pytest.raises(WeightsError, match="matched nothing.*'extra.': None"):
        load_state_dict(net, graph, key_map=dict(KEY_MAP, **{"extra.": None,
                                                             "proj.weight": "mix.weight"}))


def test_a_callable_key_map_may_return_a_shape_and_is_cached_by_it(net, tmp_path):
    from ttmodels.weights import cache as cache_mod
    graph = ttmodels.load_graph(SPEC)
    names = {"stem.weight": "conv1.weight", "mix.bias": "proj.bias", "head.weight": "fc.weight",
             "head.bias": "fc.bias"}

    def fn(shape):
        def f(k):
            if k.startswith("aux."):
                return None
            if k.startswith("stem_bn."):
                return "bn1." + k[len("stem_bn."):]
            if k == "mix.weight":
                return ("proj.weight", shape)
            return names[k]
        return f
    sd = load_state_dict(net, graph, key_map=fn([16, 32, 1, 1]))
    assert sd["proj.weight"].shape == (16, 32, 1, 1)
    with pytest.raises(WeightsError, match="key_map on key 'mix.weight': 'reshape' must be"):
        load_state_dict(net, graph, key_map=fn([16, 0]))
    with pytest.raises(WeightsError, match="give a spec key, \\(spec key, shape\\) or None"):
        load_state_dict(net, graph, key_map=lambda k: (k, [1], 2))
    # the cache tells two reshapes apart (the callable's code is the same)
    a = cache_mod.key_map_identity(graph, net, fn([16, 32, 1, 1]))
    b = cache_mod.key_map_identity(graph, net, fn([16, -1, 1, 1]))
    assert a != b


def test_compare_takes_a_key_map_file_a_saved_input_and_a_profile(net, tmp_path, capsys):
    spec = tmp_path / "km.yaml"
    spec.write_text(json.dumps(SPEC))                       # JSON is YAML
    weights = tmp_path / "user.safetensors"
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(weights))
    km = tmp_path / "km.yaml.map"
    km.write_text("stem.: conv1.\nstem_bn.: bn1.\nproj.weight: {from: mix.weight, reshape: "
                  "[16, 32, 1, 1]}\nproj.bias: mix.bias\nhead.: fc.\naux.: null\n")
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 24)).astype(np.float32)
    npy = tmp_path / "x.npy"
    np.save(npy, x)
    args = ["compare", str(spec), "--weights", str(weights), "--key-map", str(km), "--input",
            str(npy), "--batch", "2", "--profile", "float32"]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "2x32x24x16" in out and "all at or above threshold" in out   # the .npy's size
    rows = [l.split() for l in out.splitlines() if l.startswith(("conv1", "proj", "logits"))]
    assert len(rows) == 3 and all(float(r[3]) > 0.9999 for r in rows)
    # the default profile on the same input: lower, so --profile reached the run
    assert cli_main(args[:-2] + ["--threshold", "0.9999999"]) == 1
    capsys.readouterr()

    # bad inputs: one line each, exit 2
    bad_map = tmp_path / "bad.map"
    bad_map.write_text("- a\n- b\n")
    (tmp_path / "obj.npy").write_bytes(b"not numpy")
    cases = [
        (["--key-map", str(bad_map)], "expected a mapping of key names"),
        (["--key-map", str(tmp_path / "none.map")], "no such file"),
        (["--key-map", str(tmp_path)], "a directory"),
        (["--input", str(tmp_path / "obj.npy")], "not a .npy array"),
        (["--input", str(npy), "--batch", "3"], "holds 2 images, --batch is 3"),
        (["--input", str(npy), "--batch", "2", "--input-size", "16", "16"],
         "the input has shape [2, 3, 32, 24]"),
        (["--input", str(npy), "--image", "x.jpg"], "--image or --input, not both"),
    ]
    for extra, want in cases:
        base = ["compare", str(spec), "--weights", str(weights)]
        if "--key-map" not in extra:
            base += ["--key-map", str(km)]
        rc = cli_main(base + extra)
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and want in err[0], (extra, err)
