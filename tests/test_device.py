"""Backend selection (no card needed) and the layers on a real Tenstorrent card (``device``)."""
from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

from ttmodels.backends import open_backend, select
from ttmodels.errors import DeviceError
from ttmodels.language.graph import Constant, Graph, Node, Precision, TensorShape

S = TensorShape


# ---- selection (runs everywhere) ---------------------------------------------------------

def test_ttnn_backend_without_card_raises_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(select, "DEVICE_DIR", tmp_path / "no-such-dir")
    with pytest.raises(DeviceError, match=r"no Tenstorrent device found.*backend='sim'"):
        open_backend("ttnn")
    empty = tmp_path / "tenstorrent"
    empty.mkdir()
    monkeypatch.setattr(select, "DEVICE_DIR", empty)
    with pytest.raises(DeviceError, match="lists no device"):
        open_backend("ttnn")


def test_auto_picks_sim_without_card_and_logs_it(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(select, "DEVICE_DIR", tmp_path / "no-such-dir")
    monkeypatch.delenv("TTMODELS_BACKEND", raising=False)
    with caplog.at_level(logging.INFO, logger="ttmodels"):
        be = open_backend("auto")
    try:
        assert be.name == "sim"
        assert be.device.l1_small_size > 0
    finally:
        be.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "ttmodels"]
    assert len(lines) == 1 and "sim" in lines[0] and "no Tenstorrent card" in lines[0]


def test_auto_picks_ttnn_when_a_card_is_listed(monkeypatch, tmp_path):
    d = tmp_path / "tenstorrent"
    d.mkdir()
    (d / "0").touch()
    monkeypatch.delenv("TTMODELS_BACKEND", raising=False)
    assert select.card_present(d)
    assert select.resolve("auto", device_dir=d) == "ttnn"
    monkeypatch.setenv("TTMODELS_BACKEND", "sim")
    assert select.resolve("auto", device_dir=d) == "sim"


def test_unknown_backend_name():
    with pytest.raises(DeviceError, match="unknown backend 'cuda'"):
        open_backend("cuda")


def test_backend_closes_once_and_records():
    with open_backend("sim") as be:
        with be.record() as calls:
            be.tt.from_torch(torch.zeros(1, 1, 32, 32), dtype=be.tt.bfloat16)
        assert [c.name for c in calls] == ["from_torch"]
        assert be.tt.__name__.endswith("sim")          # recording proxy removed afterwards
    assert be.closed and not be.device.is_open
    be.close()                                         # idempotent


def test_trace_helper_replays_on_sim():
    from ttmodels.planning import planner
    from ttmodels.runtime.executor import Executor, to_torch_nchw
    g, params = _conv_relu_pool_graph(Precision("bfloat16", "bfloat16", "HiFi4"))
    with open_backend("sim") as be:
        ex = Executor(planner.plan_graph(g), params, be)
        x1, x2 = torch.randn(1, 16, 16, 16), torch.randn(1, 16, 16, 16)
        ex.capture_trace({"x": x1})
        y2 = to_torch_nchw(be, ex.run_traced({"x": x2})["p"], g.shape_of("p"))
        ref = to_torch_nchw(be, ex.run({"x": x2})["p"], g.shape_of("p"))
        assert torch.equal(y2, ref)
        ex.release_trace()


# ---- on a card ---------------------------------------------------------------------------

def _pcc(a, b) -> float:
    return torch.corrcoef(torch.stack([a.flatten().float(), b.flatten().float()]))[0, 1].item()


def _conv_relu_pool_graph(P=Precision()):
    nodes = [Node("c", "conv2d", ["x"], dict(in_channels=16, out_channels=32, kernel=(3, 3),
                                             stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1),
                                             groups=1, bias=True, activation=None,
                                             lowering="auto"), S(1, 16, 16, 32), precision=P,
                  weights="c"),
             Node("r", "relu", ["c"], {}, S(1, 16, 16, 32), precision=P),
             Node("p", "max_pool2d", ["r"], dict(kernel=(2, 2), stride=(2, 2),
                                                 padding=(0, 0, 0, 0), dilation=(1, 1),
                                                 ceil_mode=False), S(1, 8, 8, 32), precision=P)]
    g = Graph("crp", {"x": S(1, 16, 16, 16)}, nodes, {}, ["p"], input_precision=P)
    gen = torch.Generator().manual_seed(0)
    params = {"c": {"weight": torch.randn(32, 16, 3, 3, generator=gen) / 12,
                    "bias": torch.randn(32, generator=gen) * 0.1}}
    return g, params


@pytest.fixture(scope="module")
def card():
    with open_backend("ttnn") as be:
        yield be


def _run_on_card(card, g, params, inputs):
    from ttmodels.planning.planner import plan_graph
    from ttmodels.runtime.executor import Executor, to_torch_nchw
    ex = Executor(plan_graph(g), params, card)
    out = ex.run(inputs)
    return {k: to_torch_nchw(card, v, g.shape_of(k)) for k, v in out.items()}


@pytest.mark.device
def test_conv_relu_pool_on_card(card):
    g, params = _conv_relu_pool_graph()
    x = torch.randn(1, 16, 16, 16)
    out = _run_on_card(card, g, params, {"x": x})["p"]
    ref = F.max_pool2d(F.relu(F.conv2d(x, params["c"]["weight"], params["c"]["bias"],
                                       padding=1)), 2)
    assert out.shape == ref.shape and _pcc(out, ref) >= 0.99


@pytest.mark.device
def test_trace_on_card():
    from ttmodels.planning.planner import plan_graph
    from ttmodels.runtime.executor import Executor, to_torch_nchw
    g, params = _conv_relu_pool_graph()
    with open_backend("ttnn", trace_region_size=1 << 22) as be:
        ex = Executor(plan_graph(g), params, be)
        x1, x2 = torch.randn(1, 16, 16, 16), torch.randn(1, 16, 16, 16)
        ex.capture_trace({"x": x1})
        traced = to_torch_nchw(be, ex.run_traced({"x": x2})["p"], g.shape_of("p"))
        eager = to_torch_nchw(be, ex.run({"x": x2})["p"], g.shape_of("p"))
        ex.release_trace()
    assert _pcc(traced, eager) >= 0.999


def _one(op, attrs, in_shape, out_shape, inputs=("x",), constants=None, weights=None):
    P = Precision()
    node = Node("n", op, list(inputs), attrs, out_shape, precision=P, weights=weights)
    ins = {i: in_shape for i in inputs if not constants or i not in constants}
    return Graph("one", ins, [node], constants or {}, ["n"], input_precision=P)


@pytest.mark.device
def test_each_layer_kind_on_card(card):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 32, 16, 16, generator=gen)
    y = torch.randn(1, 32, 16, 16, generator=gen)
    k = torch.rand(32, generator=gen) + 0.5
    w, b = torch.randn(10, 32, generator=gen) * 0.2, torch.randn(10, generator=gen)
    v = torch.randn(2, 32, 1, 1, generator=gen)
    xs = S(1, 16, 16, 32)
    cases = [
        (_one("avg_pool2d", dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0),
                                 ceil_mode=False, count_include_pad=True), xs, S(1, 8, 8, 32)),
         {}, {"x": x}, F.avg_pool2d(x, 2)),
        (_one("global_avg_pool", {}, xs, S(1, 1, 1, 32)), {}, {"x": x},
         x.mean((2, 3), keepdim=True)),
        (_one("add", {"activation": "relu"}, xs, xs, inputs=("x", "y")), {}, {"x": x, "y": y},
         F.relu(x + y)),
        (_one("multiply", {"activation": None}, xs, xs, inputs=("x", "k"),
              constants={"k": Constant("k", (32,))}), {"k": {"value": k}}, {"x": x},
         x * k.view(1, -1, 1, 1)),
        (_one("linear", dict(in_features=32, out_features=10, bias=True, activation=None),
              S(2, 1, 1, 32), S(2, 1, 1, 10), weights="n"), {"n": {"weight": w, "bias": b}},
         {"x": v}, F.linear(v.reshape(2, 32), w, b).reshape(2, 10, 1, 1)),
        (_one("upsample", dict(scale=(2, 2), mode="nearest"), xs, S(1, 32, 32, 32)), {},
         {"x": x}, F.interpolate(x, scale_factor=2)),
        (_one("concat", {}, xs, S(1, 16, 16, 64), inputs=("x", "y")), {}, {"x": x, "y": y},
         torch.cat([x, y], 1)),
        (_one("pad", dict(padding=(1, 1, 2, 2), value=0.0), xs, S(1, 18, 20, 32)), {},
         {"x": x}, F.pad(x, (2, 2, 1, 1))),
    ]
    for g, params, inputs, ref in cases:
        out = _run_on_card(card, g, params, inputs)["n"]
        assert out.shape == ref.shape, g.nodes[0].op
        assert _pcc(out, ref) >= 0.99, g.nodes[0].op
