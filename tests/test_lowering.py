"""1x1 stride-1 convs lowered to ttnn.linear (``lowering: linear``) against ttnn.conv2d.

The issue's requirement: on the sim both lowerings give identical bits. Both quantize the same
[Cin, Cout] weight matrix in the weights dtype (block-float exponents shared along output
channels), convert the bias to the weights dtype, apply the same math-fidelity truncation, fuse
ReLU before the output rounding and round to the same output dtype. The float32 accumulation
order is the same too: like tt-metal's conv2d (``is_mm_conv``), the sim's conv2d computes a 1x1
stride-1 conv with the same [M, K] x [K, N] matmul as its linear.
"""
from __future__ import annotations

import copy

import pytest
import torch

import ttmodels
from ttmodels import weights as W
from ttmodels.backends import Backend
from ttmodels.runtime.layers import make_layer
from ttmodels.planning.planner import plan_graph
from ttmodels.planning.plan_checks import check_plan
from ttmodels.language.spec import load_graph


def _spec(lowering: str, name: str, size, cin: int, convs) -> dict:
    layers = []
    for i, (cout, act, bn) in enumerate(convs):
        layer = {"name": f"c{i}", "op": "conv2d", "out": cout, "kernel": 1, "lowering": lowering}
        if act:
            layer["act"] = act
        if bn:
            layer["bn"] = f"bn{i}"
            layer["bias"] = False
        layers.append(layer)
    return {"name": name, "inputs": {"x": {"channels": cin, "size": list(size)}},
            "layers": layers, "outputs": [f"c{i}" for i in range(len(convs))]}


# (name, batch, (H, W), Cin, [(Cout, act, bn)], expected solver kind of each conv)
CASES = [
    # M = 2*56*56 = 6272 rows: N = 256 is > 8x narrower -> 1D (in1 multicast, height sharded);
    # N = 1024 is not -> 2D
    ("tall", 2, (56, 56), 64, [(256, "relu", True), (1024, None, True), (256, "relu", False)],
     ["1d_mcast_in1", "2d_mcast", "1d_mcast_in1"]),
    # M = 16*16 = 256 rows vs N = 1024 / 256: not narrow: 2D (block sharded)
    ("square", 1, (16, 16), 256, [(1024, "relu", True), (256, None, True)],
     ["2d_mcast", "2d_mcast"]),
]


def _graphs(case):
    name, batch, size, cin, convs, _ = case
    return (load_graph(_spec(low, name, size, cin, convs), batch_size=batch)
            for low in ("conv2d", "linear"))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plans_record_the_lowering(case):
    g_conv, g_lin = _graphs(case)
    p_conv, p_lin = plan_graph(g_conv), plan_graph(g_lin)
    assert check_plan(p_conv) == [] and check_plan(p_lin) == []
    for i, kind in enumerate(case[-1]):
        lin = p_lin.layer(f"c{i}")
        assert lin.config.lowering == "linear"
        mm = lin.config.matmul
        assert mm["kind"] == kind
        assert mm["K"] == g_lin.node(f"c{i}").attrs["in_channels"]
        act = g_lin.node(f"c{i}").attrs.get("activation")
        assert mm["fused_activation"] == ("relu" if act == "relu" else None)
        assert p_conv.layer(f"c{i}").config.lowering is None
    ks = {p_lin.layer(f"c{i}").config.matmul["K"] for i in range(len(case[-1]))}
    assert ks <= {64, 256, 1024}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_conv2d_and_linear_lowerings_are_bit_identical_on_sim(case):
    name, batch, size, cin, convs, _ = case
    g_conv, g_lin = _graphs(case)
    sd = W.load_state_dict("random", g_conv)
    x = torch.randn(batch, cin, *size, generator=torch.Generator().manual_seed(7))
    outs = {}
    for low, g in (("conv2d", g_conv), ("linear", g_lin)):
        spec = _spec(low, name, size, cin, convs)
        model = ttmodels.build(spec, weights=copy.deepcopy(dict(sd)), backend="sim",
                               batch_size=batch, cache=False)
        try:
            outs[low] = model.run(x)
            for i in range(len(convs)):
                layer = model.executor.layers[f"c{i}"]
                assert layer.lowering == low
        finally:
            model.backend.close()
    for i in range(len(convs)):
        a, b = outs["conv2d"][f"c{i}"], outs["linear"][f"c{i}"]
        assert a.shape == b.shape
        assert torch.isfinite(a).all() and a.abs().sum() > 0
        diff = (a - b).abs().max().item()
        assert torch.equal(a, b), f"c{i}: conv2d and linear differ (max abs diff {diff})"


# ---------------------------------------------------------------------------------------------
# contract: the linear call binds to the real ttnn.linear signature, configs are real objects
# ---------------------------------------------------------------------------------------------

def test_linear_lowering_call_binds_to_real_ttnn():
    import ttnn
    from test_contracts import bind_error, realtypes_backend  # noqa: E402
    g = load_graph(_spec("linear", "tall", (56, 56), 64, [(256, "relu", True)]), batch_size=2)
    plan = plan_graph(g)
    pl = plan.layer("c0")
    params = W.prepare_parameters(g, W.load_state_dict("random", g))
    be: Backend = realtypes_backend()
    layer = make_layer(pl, params["c0"], be, input_shapes=[g.shape_of("x")])
    layer([object()])
    calls = be.tt.calls
    assert [c.name for c in calls if c.name in ("conv2d", "linear")] == ["linear"]
    (lin,) = [c for c in calls if c.name == "linear"]
    assert bind_error("linear", lin.args, lin.kwargs) is None
    pc = lin.kwargs["program_config"]
    assert isinstance(pc, ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig)
    assert pc.fused_activation is not None and "activation" not in lin.kwargs
    assert isinstance(lin.kwargs["memory_config"], ttnn.MemoryConfig)
    assert lin.kwargs["memory_config"].memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    # weights: [Cin, Cout] TILE in the weights dtype; bias [1, 1, 1, Cout]
    w_call, b_call = [c for c in calls if c.name == "from_torch"][:2]
    assert tuple(w_call.args[0].shape) == (64, 256)
    assert tuple(b_call.args[0].shape) == (1, 1, 1, 256)
    assert w_call.kwargs["layout"] == ttnn.TILE_LAYOUT
    assert w_call.kwargs["dtype"] == ttnn.bfloat8_b
    for c in calls:
        if c.name == "from_torch":
            assert bind_error("from_torch", c.args, c.kwargs) is None
