"""Layers and the Executor on the sim backend, against float32 torch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ttmodels.planning import planner  # noqa: E402
from ttmodels.backends import sim  # noqa: E402

from ttmodels.backends import open_backend  # noqa: E402
from ttmodels.errors import LayoutError, WeightsError  # noqa: E402
from ttmodels.language.graph import Constant, Graph, Node, Precision, TensorShape  # noqa: E402
from ttmodels.runtime.layers import Layer, layer_class, make_layer  # noqa: E402
from ttmodels.runtime.executor import Executor, to_torch_nchw  # noqa: E402

S = TensorShape
BF16 = Precision("bfloat16", "bfloat16", "HiFi4", False)
DEFAULT = Precision()          # bfloat8_b weights, bfloat16 activations, HiFi2


def pcc(a, b) -> float:
    return torch.corrcoef(torch.stack([a.flatten().float(), b.flatten().float()]))[0, 1].item()


@pytest.fixture(scope="module")
def be():
    with open_backend("sim") as b:
        yield b


def run_graph(be, graph, params, x):
    plan = planner.plan_graph(graph)
    ex = Executor(plan, params, be)
    out = ex.run(x)
    return {k: to_torch_nchw(be, v, graph.shape_of(k)) for k, v in out.items()}, ex


def single(op, attrs, in_shape, out_shape, precision=BF16, inputs=("x",), constants=None,
           weights=None):
    node = Node("n", op, list(inputs), attrs, out_shape, precision=precision, weights=weights)
    ins = {i: in_shape for i in inputs if not constants or i not in constants}
    return Graph("one", ins, [node], constants or {}, ["n"], input_precision=precision)


def conv_attrs(cin, cout, k, s, p, act=None, groups=1):
    return dict(in_channels=cin, out_channels=cout, kernel=(k, k), stride=(s, s),
                padding=(p, p, p, p), dilation=(1, 1), groups=groups, bias=True,
                activation=act, lowering="auto")


@pytest.mark.parametrize("cin,cout,k,s,p,hw,act,prec,thresh", [
    (16, 32, 3, 1, 1, 16, "relu", BF16, 0.999),
    (32, 64, 1, 1, 0, 8, None, BF16, 0.999),
    (16, 32, 3, 2, 1, 16, "relu", DEFAULT, 0.99),
    (3, 32, 3, 1, 1, 16, "relu", DEFAULT, 0.99),       # RGB input straight from DRAM
])
def test_conv2d_matches_torch(be, cin, cout, k, s, p, hw, act, prec, thresh):
    o = (hw + 2 * p - k) // s + 1
    g = single("conv2d", conv_attrs(cin, cout, k, s, p, act), S(1, hw, hw, cin),
               S(1, o, o, cout), precision=prec, weights="n")
    gen = torch.Generator().manual_seed(1)
    w, b = torch.randn(cout, cin, k, k, generator=gen) / (cin * k * k) ** 0.5, \
        torch.randn(cout, generator=gen) * 0.1
    x = torch.randn(1, cin, hw, hw, generator=gen)
    out, ex = run_graph(be, g, {"n": {"weight": w, "bias": b}}, {"x": x})
    ref = F.conv2d(x, w, b, stride=s, padding=p)
    ref = F.relu(ref) if act else ref
    assert out["n"].shape == ref.shape
    assert pcc(out["n"], ref) >= thresh
    # A second run reuses the prepared weights and gives the same result.
    out2 = to_torch_nchw(be, ex.run({"x": x})["n"], g.shape_of("n"))
    assert torch.equal(out2, out["n"])
    assert ex.layers["n"].prepared


def test_pools_and_relu_match_torch(be):
    x = torch.randn(2, 32, 16, 16, generator=torch.Generator().manual_seed(2))
    cases = [
        ("max_pool2d", dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1),
                            ceil_mode=False), S(2, 8, 8, 32),
         F.max_pool2d(x, 3, 2, 1)),
        ("avg_pool2d", dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), ceil_mode=False,
                            count_include_pad=True), S(2, 8, 8, 32), F.avg_pool2d(x, 2, 2)),
        ("relu", {}, S(2, 16, 16, 32), F.relu(x)),
    ]
    for op, attrs, oshape, ref in cases:
        out, _ = run_graph(be, single(op, attrs, S(2, 16, 16, 32), oshape), {}, {"x": x})
        assert out["n"].shape == ref.shape, op
        assert pcc(out["n"], ref) >= 0.999, op


def test_conv_then_global_pool_head(be):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 16, 8, 8, generator=gen)
    w, b = torch.randn(64, 16, 3, 3, generator=gen) / 12, torch.randn(64, generator=gen) * 0.1
    nodes = [Node("c", "conv2d", ["x"], conv_attrs(16, 64, 3, 1, 1, "relu"), S(2, 8, 8, 64),
                  precision=BF16, weights="c"),
             Node("gap", "global_avg_pool", ["c"], {}, S(2, 1, 1, 64), precision=BF16)]
    g = Graph("head", {"x": S(2, 8, 8, 16)}, nodes, {}, ["gap"], input_precision=BF16)
    out, _ = run_graph(be, g, {"c": {"weight": w, "bias": b}}, {"x": x})
    ref = F.relu(F.conv2d(x, w, b, padding=1)).mean((2, 3), keepdim=True)
    assert out["gap"].shape == ref.shape and pcc(out["gap"], ref) >= 0.999


def test_binary_ops_with_tensor_and_constant(be):
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(1, 32, 8, 8, generator=gen), torch.randn(1, 32, 8, 8, generator=gen)
    g = Graph("add", {"a": S(1, 8, 8, 32), "b": S(1, 8, 8, 32)},
              [Node("n", "add", ["a", "b"], {"activation": "relu"}, S(1, 8, 8, 32),
                    precision=BF16)], {}, ["n"], input_precision=BF16)
    out, _ = run_graph(be, g, {}, {"a": a, "b": b})
    assert pcc(out["n"], F.relu(a + b)) >= 0.999
    scale = torch.rand(32, generator=gen) + 0.5
    for order in (["a", "k"], ["k", "a"]):       # the constant may be either operand
        g = Graph("mul", {"a": S(1, 8, 8, 32)},
                  [Node("n", "multiply", order, {"activation": None}, S(1, 8, 8, 32),
                        precision=BF16)], {"k": Constant("k", (32,))}, ["n"],
                  input_precision=BF16)
        out, _ = run_graph(be, g, {"k": {"value": scale}}, {"a": a})
        assert pcc(out["n"], a * scale.view(1, -1, 1, 1)) >= 0.999


def test_linear_upsample_concat_pad(be):
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 64, 1, 1, generator=gen)
    w, b = torch.randn(10, 64, generator=gen) * 0.2, torch.randn(10, generator=gen)
    g = single("linear", dict(in_features=64, out_features=10, bias=True, activation=None),
               S(2, 1, 1, 64), S(2, 1, 1, 10), weights="n")
    out, _ = run_graph(be, g, {"n": {"weight": w, "bias": b}}, {"x": x})
    assert pcc(out["n"].reshape(2, 10), F.linear(x.reshape(2, 64), w, b)) >= 0.99

    y = torch.randn(1, 32, 8, 8, generator=gen)
    out, _ = run_graph(be, single("upsample", dict(scale=(2, 2), mode="nearest"), S(1, 8, 8, 32),
                                  S(1, 16, 16, 32)), {}, {"x": y})
    assert pcc(out["n"], F.interpolate(y, scale_factor=2, mode="nearest")) >= 0.999

    out, _ = run_graph(be, single("pad", dict(padding=(1, 2, 0, 3), value=0.0), S(1, 8, 8, 32),
                                  S(1, 11, 11, 32)), {}, {"x": y})
    ref = F.pad(y, (0, 3, 1, 2))
    assert out["n"].shape == ref.shape and pcc(out["n"], ref) >= 0.999

    z = torch.randn(1, 16, 8, 8, generator=gen)
    g = Graph("cat", {"a": S(1, 8, 8, 32), "b": S(1, 8, 8, 16)},
              [Node("n", "concat", ["a", "b"], {}, S(1, 8, 8, 48), precision=BF16)], {}, ["n"],
              input_precision=BF16)
    out, _ = run_graph(be, g, {}, {"a": y, "b": z})
    assert pcc(out["n"], torch.cat([y, z], 1)) >= 0.999


def test_executor_frees_tensors_after_last_consumer(be):
    P = BF16
    nodes = [Node("r1", "relu", ["x"], {}, S(1, 8, 8, 32), precision=P),
             Node("r2", "relu", ["r1"], {}, S(1, 8, 8, 32), precision=P),
             Node("s", "add", ["r1", "r2"], {"activation": None}, S(1, 8, 8, 32), precision=P),
             Node("r3", "relu", ["s"], {}, S(1, 8, 8, 32), precision=P)]
    g = Graph("chain", {"x": S(1, 8, 8, 32)}, nodes, {}, ["r3", "r1"], input_precision=P)
    plan = planner.plan_graph(g)
    ex = Executor(plan, {}, be)
    with be.record() as calls:
        out = ex.run({"x": torch.randn(1, 32, 8, 8)})
    freed = [c.args[0] for c in calls if c.name == "deallocate"]
    # x after r1, r2 and s after their last consumers; r1 is an output and stays alive.
    assert len(freed) == 3 + sum(1 for a in plan.adapters)
    assert all(not any(f is o for o in out.values()) for f in freed)
    assert out["r1"].is_allocated() and out["r3"].is_allocated()
    x = torch.randn(1, 32, 8, 8)
    xt = ex.input_tensor("x", x)
    ex.run({"x": xt})
    assert xt.is_allocated()            # tensors the caller passed are never freed


def test_layer_errors_name_layer_and_key(be):
    node = Node("stem", "conv2d", ["x"], conv_attrs(3, 8, 3, 1, 1), S(1, 8, 8, 8),
                weights="backbone.stem")
    pl = planner.plan_graph(Graph("g", {"x": S(1, 8, 8, 3)}, [node], {}, ["stem"])).layers[0]
    with pytest.raises(WeightsError, match=r"layer 'stem'.*'weight'.*backbone\.stem\.weight"):
        make_layer(pl, {}, be, input_shapes=[S(1, 8, 8, 3)])
    with pytest.raises(WeightsError, match=r"shape \(8, 3, 5, 5\), expected \(8, 3, 3, 3\)"):
        make_layer(pl, {"weight": torch.zeros(8, 3, 5, 5)}, be, input_shapes=[S(1, 8, 8, 3)])
    with pytest.raises(LayoutError, match="input_shapes"):   # weights are prepared at build
        make_layer(pl, {"weight": torch.zeros(8, 3, 3, 3)}, be)
    with pytest.raises(Exception, match="unknown model input"):
        Executor(planner.plan_graph(Graph("g", {"x": S(1, 8, 8, 3)}, [node], {}, ["stem"])),
                 {"stem": {"weight": torch.zeros(8, 3, 3, 3)}}, be).run(
                     {"x": torch.zeros(1, 3, 8, 8), "y": torch.zeros(1)})


def test_params_are_not_modified(be):
    w = torch.randn(8, 3, 3, 3)
    w0 = w.clone()
    node = Node("c", "conv2d", ["x"], conv_attrs(3, 8, 3, 1, 1), S(1, 8, 8, 8), weights="c")
    plan = planner.plan_graph(Graph("g", {"x": S(1, 8, 8, 3)}, [node], {}, ["c"]))
    Executor(plan, {"c": {"weight": w, "bias": torch.zeros(8)}}, be).run({"x": torch.randn(1, 3, 8, 8)})
    assert torch.equal(w, w0)


def test_every_graph_op_has_a_layer():
    from ttmodels.ops import OPS
    for op in OPS:
        assert issubclass(layer_class(op), Layer), op


def test_conv_on_dram_input_asks_for_the_l1_path():
    """ttnn 0.81 auto-slices a conv whose input is in DRAM (output in DRAM) unless given
    L1_FULL; the plan wants L1 shards out, so the layer must pass Op2DL1FullSliceConfig."""
    import ttmodels
    from ttmodels.backends import open_backend
    from ttmodels.runtime.executor import Executor
    from ttmodels.weights import load_state_dict, prepare_parameters

    spec = {"name": "stem", "inputs": {"x": {"channels": 3, "size": [32, 32]}},
            "layers": [{"name": "c", "op": "conv2d", "out": 16, "kernel": 3, "padding": 1}]}
    plan = ttmodels.plan(spec)
    assert plan.layer("c").inputs[0].memory.buffer == "dram"
    graph = plan.graph
    with open_backend("sim") as be:
        ex = Executor(plan, prepare_parameters(graph, load_state_dict("random", graph)), be)
        with be.record() as calls:
            ex.run({"x": torch.randn(1, 3, 32, 32)})
    conv = [c for c in calls if c.name == "conv2d"]
    assert conv and str(conv[0].kwargs["slice_config"]).endswith("L1_FULL,num_slices=0)")
