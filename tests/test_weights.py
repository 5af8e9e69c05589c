"""Weight sources, strict key checks, BatchNorm folding, random-weight calibration, the cache."""
from __future__ import annotations

import os
import pickle
import urllib.error

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from test_reference import GraphBuilder, resnet_graph, small_graph, small_net
from ttmodels.weights import cache as cache_mod
from ttmodels.weights import cache as C
from ttmodels import weights as W
from ttmodels.errors import WeightsError
from ttmodels.language.graph import Precision
from ttmodels.weights.reference import ReferenceModel, expected_parameters


def _same(a: dict, b: dict):
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], dict):
            _same(a[k], b[k])
        else:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


# --------------------------------------------------------------------------------------------
# BatchNorm folding
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias,groups,eps", [(False, 1, 1e-5), (True, 1, 1e-5), (True, 4, 1e-3)])
def test_fold_batchnorm_matches_conv_then_bn(bias, groups, eps):
    g = torch.Generator().manual_seed(0)
    conv = nn.Conv2d(8, 12, 3, padding=1, bias=bias, groups=groups)
    bn = nn.BatchNorm2d(12, eps=eps).eval()
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g))
        bn.weight.copy_(torch.rand(12, generator=g) + 0.5)
        bn.bias.copy_(torch.randn(12, generator=g))
        bn.running_mean.copy_(torch.randn(12, generator=g))
        # Tiny variances make eps matter: dropping or mis-placing eps breaks the comparison.
        bn.running_var.copy_(torch.rand(12, generator=g) * 1e-3)
    x = torch.randn(2, 8, 10, 10, generator=g)
    args = [t.detach().clone() for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var)]
    w, b = W.fold_batchnorm(conv.weight, conv.bias, *args, eps=eps)
    assert w.dtype == b.dtype == torch.float32
    with torch.no_grad():
        want = bn(conv(x))
        got = F.conv2d(x, w, b, padding=1, groups=groups)
    assert (got - want).abs().max().item() <= 1e-4 * max(1.0, want.abs().max().item())
    # Default eps is BatchNorm's 1e-5 and the inputs are left alone.
    if eps == 1e-5:
        w2, _ = W.fold_batchnorm(conv.weight, conv.bias, *args)
        assert torch.equal(w, w2)
    assert torch.equal(args[3], bn.running_var)


def test_prepared_parameters_reproduce_reference():
    graph, net = small_graph(), small_net()
    sd = W.load_state_dict(net, graph)
    p = W.prepare_parameters(graph, sd)
    assert set(p) == {"conv1", "b_conv1", "b_conv2", "down", "fc"}
    assert set(p["conv1"]) == {"weight", "bias"} and p["conv1"]["weight"].shape == (8, 3, 7, 7)
    assert {k: {n: tuple(t.shape) for n, t in d.items()} for k, d in p.items()} == W.prepared_shapes(graph)
    x = torch.randn(2, 3, 32, 32)
    ref = ReferenceModel(graph, sd).run(x, return_all=True)
    y = F.relu(F.conv2d(x, p["conv1"]["weight"], p["conv1"]["bias"], stride=2, padding=3))
    assert (y - ref["conv1"]).abs().max().item() < 1e-4


# --------------------------------------------------------------------------------------------
# strict checks and errors
# --------------------------------------------------------------------------------------------

def test_missing_unexpected_and_misshaped_listed_together():
    graph = small_graph()
    sd = small_net().state_dict()
    del sd["b_bn1.running_var"]
    sd["conv9.weight"] = torch.zeros(3)
    sd["fc.weight"] = torch.zeros(10, 17)
    with pytest.raises(WeightsError) as ei:
        W.load_state_dict(sd, graph)
    e = ei.value
    msg = str(e)
    assert "1 missing, 1 unexpected, 1 mis-shaped" in msg
    assert "b_bn1.running_var" in msg and "conv9.weight" in msg
    assert "fc.weight: expected [10, 16], got [10, 17]" in msg
    assert e.missing == ["b_bn1.running_var"] and e.unexpected == ["conv9.weight"]
    assert [m[0] for m in e.mismatched] == ["fc.weight"]
    # num_batches_tracked is accepted and ignored; strict=False tolerates extras only.
    sd2 = small_net().state_dict()
    sd2["junk"] = torch.zeros(1)
    assert "bn1.num_batches_tracked" in sd2
    out = W.load_state_dict(sd2, graph, strict=False)
    assert "junk" not in out and "bn1.num_batches_tracked" not in out


def test_long_lists_are_truncated_with_counts():
    graph = resnet_graph(50)
    with pytest.raises(WeightsError) as ei:
        W.load_state_dict({f"x{i}": torch.zeros(1) for i in range(30)}, graph)
    msg = str(ei.value)
    n = len(expected_parameters(graph))
    assert f"{n} missing, 30 unexpected" in msg
    assert f"missing ({n}):" in msg and f"... and {n - 20} more" in msg
    assert "unexpected (30):" in msg and "... and 10 more" in msg
    assert len(ei.value.missing) == n


def test_non_float_and_non_finite_values_are_rejected():
    graph = small_graph()
    sd = small_net().state_dict()
    sd["fc.bias"] = torch.zeros(10, dtype=torch.int64)
    sd["conv1.weight"] = sd["conv1.weight"].clone()
    sd["conv1.weight"][0, 0, 0, 0] = float("nan")
    sd["b_bn2.running_var"] = -sd["b_bn2.running_var"]
    with pytest.raises(WeightsError, match=r"\): 3 with invalid values\n") as ei:
        W.load_state_dict(sd, graph)
    msg = str(ei.value)
    assert "mis-shaped" not in msg and ei.value.mismatched == []
    assert dict(ei.value.invalid) == {
        "fc.bias": "dtype torch.int64 is not floating point",
        "conv1.weight": "contains NaN or Inf",
        "b_bn2.running_var": "negative BatchNorm variance"}
    assert "invalid values (3): " in msg


def test_corrupt_and_truncated_files(tmp_path):
    graph, net = small_graph(), small_net()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(WeightsError, match="bad.safetensors"):
        W.load_state_dict(str(bad), graph)
    good = tmp_path / "good.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(good))
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(WeightsError, match="cut.safetensors"):
        W.load_state_dict(cut, graph)
    pth = tmp_path / "w.pth"
    torch.save(net.state_dict(), pth)
    trunc = tmp_path / "trunc.pth"
    trunc.write_bytes(pth.read_bytes()[: pth.stat().st_size // 2])
    with pytest.raises(WeightsError, match="trunc.pth.*corrupt or truncated"):
        W.load_state_dict(str(trunc), graph)
    with pytest.raises(WeightsError, match="nope.pth' not found"):
        W.load_state_dict(str(tmp_path / "nope.pth"), graph)
    with pytest.raises(WeightsError, match="unsupported weights source"):
        W.load_state_dict(42, graph)


class _Evil:
    def __init__(self):
        self.x = 1


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickles_with_custom_classes_are_refused(tmp_path):
    path = tmp_path / "evil.pth"
    sd = dict(small_net().state_dict())
    torch.save({"state_dict": sd, "extra": _Evil()}, path)
    with pytest.raises(WeightsError, match="evil.pth.*weights_only=True"):
        W.load_state_dict(path, small_graph())
    # A plain pickle (not a torch zip) with an object inside is refused the same way.
    raw = tmp_path / "raw.pt"
    with open(raw, "wb") as f:
        pickle.dump(_Evil(), f)
    with pytest.raises(WeightsError, match="raw.pt"):
        W.load_state_dict(raw, small_graph())


def test_all_sources_give_identical_parameters(tmp_path):
    graph, net = small_graph(), small_net()
    st = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(st))
    pth = tmp_path / "w.pth"
    torch.save(net.state_dict(), pth)
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"model": net.state_dict(), "epoch": 3}, ckpt)
    base = W.load_state_dict(net, graph)
    for src in (net.state_dict(), dict(net.state_dict()), str(st), st, pth, str(ckpt)):
        _same(W.load_state_dict(src, graph), base)
    _same(W.prepare_parameters(graph, W.load_state_dict(str(st), graph)),
          W.prepare_parameters(graph, base))
    # Half-precision inputs are converted to float32 copies.
    half = {k: v.half() for k, v in net.state_dict().items()}
    out = W.load_state_dict(half, graph)
    assert out["conv1.weight"].dtype == torch.float32
    assert half["conv1.weight"].dtype == torch.float16


def test_user_dict_is_not_modified_and_not_aliased():
    graph, net = small_graph(), small_net()
    sd = net.state_dict()
    before = {k: v.clone() for k, v in sd.items()}
    keys = list(sd)
    out = W.load_state_dict(sd, graph, key_map={"": ""})
    params = W.prepare_parameters(graph, out)
    out["conv1.weight"].zero_()
    params["fc"]["weight"].zero_()
    assert list(sd) == keys
    assert all(torch.equal(sd[k], before[k]) for k in keys)
    assert net.fc.weight.abs().sum() > 0


# --------------------------------------------------------------------------------------------
# key_map and prefixes (BEVDet)
# --------------------------------------------------------------------------------------------

def bevdet_like_graph():
    b = GraphBuilder("bevdet_like", n=1, h=32, w=32, c=3)
    x = b.conv("stem", b.input, 8, 3, 2, 1, weights="img_backbone.conv1", bn_prefix="img_backbone.bn1")
    c2 = b.conv("l1", x, 16, 3, 2, 1, weights="img_backbone.layer1.0.conv1",
                bn_prefix="img_backbone.layer1.0.bn1")
    lat0 = b.conv("lat0", x, 8, 1, 1, 0, bias=True, bn=False, act=None,
                  weights="img_neck.lateral_convs.0.conv")
    lat1 = b.conv("lat1", c2, 8, 1, 1, 0, bias=True, bn=False, act=None,
                  weights="img_neck.lateral_convs.1.conv")
    up = b.upsample("up", lat1, 2)
    s = b.binary("sum", "add", lat0, up)
    out = b.conv("fpn0", s, 8, 3, 1, 1, bias=True, bn=False, act=None, weights="img_neck.fpn_convs.0.conv")
    return b.done(out)


def test_bevdet_checkpoint_under_state_dict_loads_only_the_encoder(tmp_path, caplog):
    graph = bevdet_like_graph()
    enc = W.random_state_dict(graph, seed=1)
    full = dict(enc)
    full["img_backbone.bn1.num_batches_tracked"] = torch.tensor(7)
    extra = {f"img_view_transformer.depth_net.{i}.weight": torch.randn(4) for i in range(5)}
    extra.update({f"pts_bbox_head.task_heads.{i}.bias": torch.randn(2) for i in range(7)})
    full.update(extra)
    path = tmp_path / "bevdet-r50.pth"
    torch.save({"meta": {"epoch": 20, "CLASSES": ["car"]}, "state_dict": full,
                "optimizer": {"state": {}, "param_groups": []}}, path)
    with pytest.raises(WeightsError, match=r"(?s)12 unexpected.*hint: ignore=\['img_view_transformer.', 'pts_bbox_head.'\]") as ei:
        W.load_state_dict(path, graph)
    assert sorted(ei.value.unexpected) == sorted(extra)
    with caplog.at_level("INFO", logger="ttmodels.weights"):
        out = W.load_state_dict(path, graph, select_prefix=["img_backbone", "img_neck."])
    _same(out, {k: enc[k] for k in expected_parameters(graph)})
    assert len(out.report.ignored) == 12
    assert out.report.summary().endswith("ignored 12 keys outside img_backbone./img_neck.")
    assert "ignored 12 keys outside img_backbone./img_neck." in caplog.text
    auto = W.load_state_dict(path, graph, select_prefix="auto")
    _same(auto, out)
    ign = W.load_state_dict(path, graph, ignore=["img_view_transformer", "pts_bbox_head"])
    _same(ign, out)
    assert len(ign.report.ignored) == 12
    params, info = C.prepared_parameters(graph, str(path), cache=False)
    assert "ignored 12 keys" in info and set(params) == {"stem", "l1", "lat0", "lat1", "fpn0"}


def test_key_map_forms():
    graph, net = small_graph(), small_net()
    sd = net.state_dict()
    base = W.load_state_dict(sd, graph)
    prefixed = {"module.backbone." + k: v for k, v in sd.items()}
    out = W.load_state_dict(prefixed, graph, key_map={"module.backbone.": "", "unused.": "x."})
    _same(out, base)
    assert out.report.unused_key_map == ["'unused.': 'x.'"]
    # Exact renames, both directions, take precedence over prefixes.
    renamed = dict(sd)
    renamed["head.w"] = renamed.pop("fc.weight")
    renamed["head.b"] = renamed.pop("fc.bias")
    out = W.load_state_dict(renamed, graph, key_map={"fc.weight": "head.w", "head.b": "fc.bias"})
    _same(out, base)
    # Callable: None drops (counted as ignored).
    junk = dict(sd, **{"aux.x": torch.zeros(1)})
    out = W.load_state_dict(junk, graph, key_map=lambda k: None if k.startswith("aux.") else k)
    _same(out, base)
    assert out.report.ignored == ["aux.x"]
    # Two keys onto one spec key and unmatched entries are reported.
    dup = dict(sd, **{"copy.fc.bias": sd["fc.bias"]})
    with pytest.raises(WeightsError, match="fc.bias <- both"):
        W.load_state_dict(dup, graph, key_map={"copy.": ""})
    with pytest.raises(WeightsError, match="matched nothing.*'fc.weight': 'nothing'"):
        W.load_state_dict(renamed, graph, key_map={"fc.weight": "nothing"})


# --------------------------------------------------------------------------------------------
# random weights, pretrained
# --------------------------------------------------------------------------------------------

def test_calibrated_random_weights_keep_activations_order_one():
    graph = resnet_graph(50, n=1, size=64)
    sd = W.random_state_dict(graph, seed=0)
    # Held-out synthetic images (other seed than calibration) and a real photo-like batch.
    x = W.synthetic_images(8, 3, 64, 64, seed=99)
    outs = ReferenceModel(graph, sd).run(x, return_all=True)
    stds = {k: v.std().item() for k, v in outs.items() if k != "image"}
    bad = {k: s for k, s in stds.items() if not 0.1 < s < 4.0}
    assert not bad, bad
    logits = outs["fc"].flatten(1)
    assert 0.3 < logits.std().item() < 3.0
    # BN statistics really were set from data (not left at 0 / 1).
    assert sd["layer3.2.bn2.running_var"].std() > 0 and sd["bn1.running_mean"].abs().max() > 0
    # On held-out images every BN sees inputs close to its running statistics: the normalised
    # pre-activation has per-channel mean ~0 and std ~1. The placeholders (0 / 1) do not.
    def bn_mismatch(state):
        model = ReferenceModel(graph, state)
        env = model.run(x, return_all=True)
        worst = 0.0
        for node in graph.nodes:
            if node.op == "conv2d" and node.bn:
                y = model.conv_raw(node, env[node.inputs[0]])
                z = (y - state[f"{node.bn}.running_mean"].view(1, -1, 1, 1)) / \
                    state[f"{node.bn}.running_var"].sqrt().view(1, -1, 1, 1)
                m = z.mean(dim=(0, 2, 3)).abs().median().item()
                s = z.std(dim=(0, 2, 3)).log().abs().median().item()
                worst = max(worst, m, s)
        return worst

    assert bn_mismatch(sd) < 0.4
    assert bn_mismatch(W.random_state_dict(graph, seed=0, calibrate=False)) > 1.0


def test_random_weights_are_seeded_and_complete():
    graph = bevdet_like_graph()
    a = W.load_state_dict("random", graph, seed=3)
    _same(a, W.load_state_dict(None, graph, seed=3))
    b = W.load_state_dict("random", graph, seed=4)
    assert not torch.equal(a["img_backbone.conv1.weight"], b["img_backbone.conv1.weight"])
    assert list(a) == list(expected_parameters(graph))
    y = ReferenceModel(graph, a).run(W.synthetic_images(2, 3, 32, 32, seed=8))["fpn0"]
    assert 0.2 < y.std().item() < 5


def test_pretrained_download_failure_says_how_to_provide_the_file(monkeypatch, tmp_path):
    import torchvision.models._api as api

    def offline(url, *a, **k):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(api, "load_state_dict_from_url", offline)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(WeightsError) as ei:
        W.load_state_dict("pretrained", resnet_graph(50))
    msg = str(ei.value)
    assert "ResNet50_Weights.IMAGENET1K_V2" in msg and "no network" in msg
    assert "safetensors" in msg and "weights/resnet50.safetensors" in msg
    with pytest.raises(WeightsError, match="bevdet-r50.pth"):
        W.load_state_dict("pretrained", bevdet_like_graph())


def test_pretrained_uses_torchvision_weights_api(monkeypatch):
    import torchvision
    import torchvision.models._api as api
    sd = torchvision.models.resnet18().state_dict()
    seen = []

    def fake(url, *a, **k):
        seen.append(url)
        return sd

    monkeypatch.setattr(api, "load_state_dict_from_url", fake)
    out = W.load_state_dict("pretrained", resnet_graph(18))
    assert seen == [torchvision.models.ResNet18_Weights.DEFAULT.url]
    assert torch.equal(out["fc.weight"], sd["fc.weight"])
    assert "ResNet18_Weights.IMAGENET1K_V1" in out.report.source


# --------------------------------------------------------------------------------------------
# prepared-weight cache
# --------------------------------------------------------------------------------------------

@pytest.fixture
def counting(monkeypatch):
    calls = {"load": 0, "prepare": 0}
    real_load, real_prep = W.load_state_dict, W.prepare_parameters

    def load(*a, **k):
        calls["load"] += 1
        return real_load(*a, **k)

    def prep(*a, **k):
        calls["prepare"] += 1
        return real_prep(*a, **k)

    monkeypatch.setattr(W, "load_state_dict", load)
    monkeypatch.setattr(W, "prepare_parameters", prep)
    return calls


def test_cache_hit_skips_work(tmp_path, counting):
    graph = small_graph()
    first = cache_mod.cached_prepare(graph, "random", Precision(), cache=tmp_path)
    assert not first.cache_hit and counting == {"load": 1, "prepare": 1}
    assert first.cache_path is not None and first.cache_path.is_file()
    second = cache_mod.cached_prepare(graph, "random", Precision(), cache=tmp_path)
    assert second.cache_hit and counting == {"load": 1, "prepare": 1}
    _same(dict(first), dict(second))
    # Anything in the key changes -> miss.
    cache_mod.cached_prepare(graph, "random", Precision(weights="bfloat16"), cache=tmp_path)
    cache_mod.cached_prepare(graph, "random", Precision(), cache=tmp_path, seed=1)
    assert counting["load"] == 3
    # No cache -> always work.
    cache_mod.cached_prepare(graph, "random", Precision(), cache=False)
    assert counting["load"] == 4


def test_cache_key_follows_file_content(tmp_path, counting):
    graph, net = small_graph(), small_net()
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path))
    cdir = tmp_path / "cache"
    a = cache_mod.cached_prepare(graph, path, cache=cdir)
    assert cache_mod.cached_prepare(graph, path, cache=cdir).cache_hit
    sd = net.state_dict()
    sd["fc.bias"] = sd["fc.bias"] + 1
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    b = cache_mod.cached_prepare(graph, path, cache=cdir)
    assert not b.cache_hit and torch.allclose(b["fc"]["bias"], a["fc"]["bias"] + 1)
    # Random weights are calibrated at the input size, so it is part of their key.
    assert cache_mod.cache_key(graph, None, "random") != \
        cache_mod.cache_key(small_graph(size=64), None, "random")
    # In-memory dicts are keyed by their bytes.
    k1 = cache_mod.cache_key(graph, None, net.state_dict())
    assert k1 == cache_mod.cache_key(graph, None, dict(net.state_dict()))
    assert k1 != cache_mod.cache_key(graph, None, sd)
    assert k1 != cache_mod.cache_key(bevdet_like_graph(), None, net.state_dict())


def _corrupt_data(p):
    data = bytearray(p.read_bytes())
    data[-5] ^= 0xFF
    p.write_bytes(bytes(data))


def _wrong_key(p):
    t = load_file(str(p))
    save_file(t, str(p), metadata={"format": cache_mod.CACHE_FORMAT, "key": "other", "checksum": "x",
                                   "user": "{}"})


def _stale_shapes(p):
    from safetensors import safe_open
    with safe_open(str(p), "pt") as f:
        meta = f.metadata()
    t = load_file(str(p))
    t["fc::weight"] = torch.zeros(3, 3)
    meta["checksum"] = cache_mod.tensors_checksum(t)
    save_file(t, str(p), metadata=meta)


@pytest.mark.parametrize("damage", [lambda p: p.write_bytes(b"garbage"), _corrupt_data, _wrong_key,
                                    _stale_shapes, lambda p: p.write_bytes(p.read_bytes()[:200])])
def test_corrupt_cache_entry_is_rebuilt(tmp_path, counting, damage, caplog):
    graph = small_graph()
    first = cache_mod.cached_prepare(graph, "random", cache=tmp_path)
    damage(first.cache_path)
    with caplog.at_level("WARNING", logger="ttmodels.weights.cache"):
        again = cache_mod.cached_prepare(graph, "random", cache=tmp_path)
    assert not again.cache_hit and counting["load"] == 2
    assert "invalid" in caplog.text
    _same(dict(first), dict(again))
    assert cache_mod.cached_prepare(graph, "random", cache=tmp_path).cache_hit


def test_weight_cache_store(tmp_path, monkeypatch):
    monkeypatch.setenv("TTMODELS_CACHE_DIR", str(tmp_path / "envdir"))
    assert cache_mod.WeightCache().dir == tmp_path / "envdir"
    monkeypatch.delenv("TTMODELS_CACHE_DIR")
    assert cache_mod.default_cache_dir().parts[-2:] == (".cache", "ttmodels")
    c = cache_mod.WeightCache(tmp_path / "c")
    assert c.get("k1") is None
    t = {"a::weight": torch.arange(6.0).view(2, 3)}
    c.put("k1", t, {"graph": "g"})
    got = c.get("k1", expect={"a::weight": (2, 3)}, metadata={"graph": "g"})
    assert torch.equal(got["a::weight"], t["a::weight"])
    assert c.get("k1", metadata={"graph": "other"}) is None      # metadata mismatch: dropped
    assert not c.path("k1").exists()
    assert not list((tmp_path / "c").glob("*.tmp"))
    with pytest.raises(ValueError):
        c.path("../x")


def test_cache_postprocess_is_stored(tmp_path):
    graph = small_graph()

    def halve(params):
        return {n: {k: v / 2 for k, v in d.items()} for n, d in params.items()}

    a = cache_mod.cached_prepare(graph, "random", cache=tmp_path, postprocess=halve, postprocess_tag="h1")
    b = cache_mod.cached_prepare(graph, "random", cache=tmp_path, postprocess=halve, postprocess_tag="h1")
    plain = cache_mod.cached_prepare(graph, "random", cache=tmp_path)
    assert b.cache_hit and not plain.cache_hit
    assert torch.equal(b["fc"]["weight"], plain["fc"]["weight"] / 2)
    _same(dict(a), dict(b))


def test_prepared_parameters_for_the_builder(tmp_path):
    graph, net = small_graph(), small_net()
    params, info = C.prepared_parameters(graph, net.state_dict(), cache=str(tmp_path))
    n = len(expected_parameters(graph))
    assert info == f"state dict ({len(net.state_dict())} keys): {n} tensors", info
    params2, info2 = C.prepared_parameters(graph, net, cache=str(tmp_path))
    assert params2.cache_hit and info2.endswith("[cached]")
    _same(dict(params), dict(params2))
    assert os.listdir(tmp_path)


# --------------------------------------------------------------------------------------------
# the shipped specs
# --------------------------------------------------------------------------------------------

def _spec_graph(name):
    from ttmodels.language import spec
    from ttmodels.errors import SpecError
    try:
        return spec.load_graph(name, batch_size=1)
    except SpecError as e:
        if "unknown model" in str(e):
            pytest.skip(f"config '{name}' not shipped yet")
        raise


def test_resnet50_spec_takes_torchvision_state_dict_and_matches_it():
    import torchvision
    graph = _spec_graph("resnet50")
    torch.manual_seed(0)
    net = torchvision.models.resnet50().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.2, 0.6, generator=g)
                m.running_mean.normal_(0, 0.1, generator=g)
                m.running_var.uniform_(0.5, 1.5, generator=g)
    sd = W.load_state_dict(net, graph)          # strict: exact torchvision names and shapes
    assert len(sd) == len([k for k in net.state_dict() if not k.endswith("num_batches_tracked")])
    s = graph.inputs[next(iter(graph.inputs))]
    x = W.synthetic_images(1, 3, s.h, s.w, seed=2)
    out = ReferenceModel(graph, sd).run(x)
    logits = out[graph.outputs[0]].flatten(1)
    with torch.no_grad():
        want = net(x)
    assert (logits - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item())
    params = W.prepare_parameters(graph, sd)
    assert {tuple(d["weight"].shape) for d in params.values() if "weight" in d} >= {(1000, 2048)}


def test_bevdet_encoder_spec_uses_bevdet_names(tmp_path):
    graph = _spec_graph("bevdet_r50_encoder")
    keys = expected_parameters(graph)
    assert "img_backbone.conv1.weight" in keys and "img_backbone.bn1.running_var" in keys
    assert "img_neck.lateral_convs.0.conv.weight" in keys and "img_neck.fpn_convs.0.conv.bias" in keys
    assert W.graph_prefixes(graph) == ("img_backbone.", "img_neck.")
    full = {k: torch.randn(s) * 0.01 for k, s in keys.items()}
    for k in keys:
        if k.endswith("running_var"):
            full[k] = torch.ones(keys[k])
    full.update({"img_view_transformer.depth_net.weight": torch.zeros(3),
                 "pts_bbox_head.shared_conv.conv.weight": torch.zeros(2)})
    path = tmp_path / "bevdet-r50.pth"
    torch.save({"meta": {}, "state_dict": full}, path)
    out = W.load_state_dict(path, graph, select_prefix="auto")
    assert len(out) == len(keys) and len(out.report.ignored) == 2


# --------------------------------------------------------------------------------------------
# issue 25: cache keys, entry checks, unusable cache locations, weights that escaped as foreign
# exceptions. Each test failed on the code before its fix.
# --------------------------------------------------------------------------------------------

def _strip(prefix, k):
    return k[len(prefix):] if k.startswith(prefix) else None


class _Stripper:
    """A callable object whose behaviour is its state."""

    def __init__(self, prefix):
        self.prefix = prefix

    def __call__(self, k):
        return _strip(self.prefix, k)


def _two_models():
    """Two different weight sets for small_graph under prefixes a. and b. of one state dict."""
    graph = small_graph()
    a = W.random_state_dict(graph, seed=1, calibrate=False)
    b = W.random_state_dict(graph, seed=2, calibrate=False)
    both = {**{f"a.{k}": v for k, v in a.items()}, **{f"b.{k}": v for k, v in b.items()}}
    return graph, both, a, b


@pytest.mark.parametrize("make", [
    lambda p: __import__("functools").partial(_strip, p),
    lambda p: (lambda k: _strip(p, k)),          # a closure: same code, another prefix
    _Stripper,
])
@pytest.mark.parametrize("source", ["dict", "file"])
def test_callable_key_map_is_keyed_by_what_it_maps_not_its_code(make, source, tmp_path, counting):
    graph, both, a, b = _two_models()
    src = both
    if source == "file":
        src = tmp_path / "both.safetensors"
        save_file({k: v.contiguous() for k, v in both.items()}, str(src))
    cdir = tmp_path / "cache"
    pa = cache_mod.cached_prepare(graph, src, key_map=make("a."), cache=cdir)
    pb = cache_mod.cached_prepare(graph, src, key_map=make("b."), cache=cdir)
    assert not pb.cache_hit and counting["load"] == 2
    _same(dict(pa), W.prepare_parameters(graph, a))
    _same(dict(pb), W.prepare_parameters(graph, b))
    again = cache_mod.cached_prepare(graph, src, key_map=make("a."), cache=cdir)
    assert again.cache_hit and counting["load"] == 2      # same mapping: still cached
    _same(dict(again), dict(pa))


def test_cache_entry_with_other_dtypes_is_rebuilt(tmp_path, counting, caplog):
    from safetensors import safe_open
    graph = small_graph()
    first = cache_mod.cached_prepare(graph, "random", cache=tmp_path)
    p = first.cache_path
    with safe_open(str(p), "pt") as f:
        meta = f.metadata()
    t = {k: v.to(torch.float16) for k, v in load_file(str(p)).items()}
    meta["checksum"] = cache_mod.tensors_checksum(t)     # a crafted, self-consistent entry
    save_file(t, str(p), metadata=meta)
    with caplog.at_level("WARNING", logger="ttmodels.weights.cache"):
        again = cache_mod.cached_prepare(graph, "random", cache=tmp_path)
    assert not again.cache_hit and "dtypes other than float32" in caplog.text
    _same(dict(first), dict(again))


def test_huge_finite_weights_are_warned_about(caplog):
    graph, net = small_graph(), small_net()
    sd = dict(net.state_dict())
    sd["conv1.weight"] = sd["conv1.weight"].clone()
    sd["conv1.weight"][0, 0, 0, 0] = 3e38
    with caplog.at_level("WARNING", logger="ttmodels.weights"):
        W.load_state_dict(sd, graph)
    assert "conv1.weight (|w| up to 3e+38)" in caplog.text and "overflow" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="ttmodels.weights"):
        W.load_state_dict(net, graph)                      # ordinary weights: nothing said
    assert caplog.text == ""


@pytest.mark.parametrize("bad", ["sparse", "meta"])
def test_sparse_or_meta_tensors_through_the_cache_are_a_weights_error(bad, tmp_path):
    graph, net = small_graph(), small_net()
    sd = dict(net.state_dict())
    sd["fc.weight"] = sd["fc.weight"].to_sparse() if bad == "sparse" else \
        torch.empty(sd["fc.weight"].shape, device="meta")
    with pytest.raises(WeightsError) as e:
        cache_mod.cached_prepare(graph, sd, cache=tmp_path)
    assert [k for k, _ in e.value.invalid] == ["fc.weight"]
    assert ("meta tensor" if bad == "meta" else "store it dense") in str(e.value)


@pytest.mark.parametrize("where", ["dict", "pth"])
def test_non_string_keys_are_a_weights_error(where, tmp_path):
    graph, net = small_graph(), small_net()
    sd = dict(net.state_dict())
    sd[0] = torch.zeros(1)
    src = sd
    if where == "pth":
        src = tmp_path / "w.pth"
        torch.save(sd, src)
    with pytest.raises(WeightsError, match=r"1 keys are not strings \(int 0\)"):
        C.prepared_parameters(graph, src, cache=tmp_path / "c")


@pytest.mark.parametrize("cache", ["x" * 5000, "a\0b", "~nosuchuser_ttm/x", 5, ["c"]])
def test_unusable_cache_location_builds_without_cache(cache, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    graph = small_graph()
    with caplog.at_level("WARNING", logger="ttmodels.weights.cache"):
        out = cache_mod.cached_prepare(graph, "random", cache=cache)
    assert not out.cache_hit and out.cache_path is None
    assert "building without the cache" in caplog.text
    assert list(tmp_path.iterdir()) == []           # nothing created where we stand (~nosuchuser)


def test_unusable_cache_dir_from_the_environment(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TTMODELS_CACHE_DIR", "y" * 5000)
    with caplog.at_level("WARNING", logger="ttmodels.weights.cache"):
        out = cache_mod.cached_prepare(small_graph(), "random", cache=True)
    assert out.cache_path is None and "building without the cache" in caplog.text


def test_empty_weights_name_says_so():
    with pytest.raises(WeightsError) as e:
        W.load_state_dict("", small_graph())
    assert "weights='' names no file" in str(e.value) and "directory" not in str(e.value)


def test_ignore_drops_prefixes_and_the_hint_names_it(tmp_path):
    """Ultralytics' DFL conv has weights but no layer: the hint names ignore= / --ignore with
    the prefix that drops it and nothing the graph uses."""
    import ttmodels
    graph, net = small_graph(), small_net()
    sd = dict(net.state_dict())
    sd["b_conv1.dfl.conv.weight"] = torch.zeros(1, 16, 1, 1)
    with pytest.raises(WeightsError) as e:
        W.load_state_dict(sd, graph)
    msg = str(e.value)
    assert "hint: ignore=['b_conv1.dfl.']" in msg and "--ignore b_conv1.dfl." in msg
    assert "select_prefix" not in msg and "ignore_prefixes" not in msg
    out = W.load_state_dict(sd, graph, ignore="b_conv1.dfl.")
    assert out.report.ignored == ["b_conv1.dfl.conv.weight"]
    assert set(out) == set(expected_parameters(graph))
    # build takes it too
    import inspect
    assert "ignore" in inspect.signature(ttmodels.build).parameters
