"""Issue 11: the activation table, the op vocabulary and every op's pieces; each new op against
the float32 torch reference on sim; the SE block from a user file; the per-image broadcast plan."""
import re
from pathlib import Path

import pytest
import torch

import ttmodels
from ttmodels import activations as A
from ttmodels import ops, rules
from ttmodels.backends import sim
from ttmodels.layers import LAYERS
from ttmodels.planner import _Planner, plan_graph, plan_hook
from ttmodels.reference import ReferenceModel, node_parameters, pcc
from ttmodels.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

ROOT = Path(__file__).resolve().parents[1]


# ---- the registry walk -------------------------------------------------------------------------

@pytest.mark.parametrize("op", ops.OPS)
def test_every_op_has_every_piece(op):
    assert op in ops.SPEC_FIELDS                                   # spec fields
    assert callable(getattr(_Planner, f"plan_{plan_hook(op)}", None)), op   # planning hook
    assert op in rules._CHECKS                                     # layout rules
    assert any(op in r.op.split("|") or r.op == "*" for r in rules.RULES.values())
    assert op in LAYERS                                            # layer class
    from ttmodels import reference
    assert op in reference._KNOWN_OPS                              # torch reference
    if op in ops.PARAMETRIC:                                       # parameter schema
        assert op in ("conv2d", "conv_transpose2d", "linear", "batch_norm")


@pytest.mark.parametrize("name", A.NAMES)
def test_activation_row_is_complete(name, ttnn):
    d = A.ACTIVATIONS[name]
    # the fused form exists in the real ttnn and the sim mirrors its enum value
    real = getattr(ttnn.UnaryOpType, d.unary_op)
    assert getattr(sim.UnaryOpType, d.unary_op).value == real.value
    act = A.parse(name)
    uwp = A.unary_with_param(ttnn, act)
    assert isinstance(uwp, ttnn.UnaryWithParam) and uwp.op_type == real
    assert isinstance(ttnn.Conv2dConfig(activation=uwp).activation, ttnn.UnaryWithParam)
    # standalone: the real function exists and takes the table's fixed keywords
    fn = getattr(ttnn, d.ttnn_function)
    sig = str(type(fn.function).__call__.__nb_signature__)
    for k, _ in d.standalone_kwargs:
        assert k in sig, (name, k)
    assert callable(getattr(sim, d.ttnn_function))
    # the sim's round trip of the fused form gives back the activation
    back, approx = A.from_unary(d.unary_op, A.unary_with_param(sim, act).params)
    assert back == act and approx is False
    assert d.source


@pytest.fixture(scope="module")
def ttnn():
    return pytest.importorskip("ttnn")


def test_activation_numerics():
    x = torch.linspace(-8, 8, 20001)
    for name in ("relu", "relu6", "leaky_relu", "sigmoid", "gelu", "tanh"):
        act = A.parse(name)
        assert torch.equal(A.sim_apply(act, x), A.torch_apply(act, x)), name
    for name in ("hardsigmoid", "hardswish"):    # x * 0.16666667f + 0.5: ulps from torch
        act = A.parse(name)
        assert (A.sim_apply(act, x) - A.torch_apply(act, x)).abs().max() < 1e-6
    # silu is the SFPU's piecewise sigmoid times x: close to torch, never equal
    d = (A.sim_apply("silu", x) - A.torch_apply("silu", x)).abs()
    assert 1e-3 < d.max() < 0.05
    # approximate modes: the LUTs, a few hundredths off
    ds = (A.sim_apply("sigmoid", x, approximate=True) - torch.sigmoid(x)).abs().max()
    dg = (A.sim_apply("gelu", x, approximate=True) - torch.nn.functional.gelu(x)).abs().max()
    assert 1e-3 < ds < 0.02 and 1e-3 < dg < 0.03
    assert A.parse({"leaky_relu": 0.2}) == "leaky_relu(0.2)" == A.parse("leaky_relu(0.2)")
    with pytest.raises(ValueError):
        A.parse("swish")


# ---- each op against torch on sim --------------------------------------------------------------

def _check(layers, *, c=16, size=12, batch=2, out=None, threshold=0.995, seed=0):
    spec = {"name": "op", "inputs": {"x": {"channels": c, "size": size}},
            "layers": layers, **({"outputs": out} if out else {})}
    g = load_graph(spec, batch_size=batch)
    sd = load_state_dict("random", g, seed=seed)
    x = synthetic_images(batch, c, size, size, seed=seed + 1)
    ref = ReferenceModel(g, sd).run({"x": x})
    with ttmodels.build(spec, weights=sd, backend="sim", batch_size=batch) as m:
        got = m.run(x)
    for k in ref:
        p = pcc(ref[k], got[k])
        assert p >= threshold, (k, p)
        assert not torch.equal(ref[k], got[k])        # rounded to the formats, not torch's
    return g, m


CONV = {"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "bn": "bn"}


@pytest.mark.parametrize("name", A.NAMES)
def test_activation_fused_in_conv_and_standalone(name):
    _check([{**CONV, "act": name}, {"name": "a", "op": name}], out=["c", "a"])


@pytest.mark.parametrize("op", ["add", "multiply", "subtract"])
def test_binary_ops_tensor_and_per_image_broadcast(op):
    _check([CONV, {"name": "d", "op": "conv2d", "in": "x", "out": 32, "kernel": 1, "bn": "bn2"},
            {"name": "p", "op": "global_avg_pool", "in": "d"},
            {"name": "t", "op": op, "in": ["c", "d"], "act": "relu"},
            {"name": "b", "op": op, "in": ["c", "p"]}], out=["t", "b"])


@pytest.mark.parametrize("groups", [32, 8])
def test_depthwise_and_grouped_conv(groups):
    _check([CONV, {"name": "g", "op": "conv2d", "out": 32, "kernel": 3, "stride": 2, "padding": 1,
                   "groups": groups, "bn": "gbn", "act": "relu6"}])


def test_batch_norm_slice_adaptive_pool_identity():
    g, _ = _check([{"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1},
                   {"name": "bn", "op": "batch_norm", "act": "silu"},
                   {"name": "s", "op": "slice", "channels": [8, 24]},
                   {"name": "i", "op": "identity"},
                   {"name": "ap", "op": "adaptive_avg_pool2d", "size": [3, 3]}],
                  out=["bn", "s", "i", "ap"])
    assert g.node("s").shape.c == 16 and (g.node("ap").shape.h, g.node("ap").shape.w) == (3, 3)
    assert set(node_parameters(g.node("bn"))) == {f"bn.{k}" for k in
                                                   ("weight", "bias", "running_mean", "running_var")}


# ---- the SE block: user file, plan, torch ----------------------------------------------------------

SE_YAML = """
name: se_net
inputs:
  image: {channels: 3, size: [32, 32]}
blocks:
  se:
    params: {squeeze: required, channels: required}
    layers:
      - {name: pool, op: global_avg_pool}
      - {name: fc1, op: conv2d, out: "${squeeze}", kernel: 1, bias: true, act: silu}
      - {name: fc2, op: conv2d, out: "${channels}", kernel: 1, bias: true, act: sigmoid}
      - {name: scale, op: multiply, in: [x, fc2]}
layers:
  - {name: stem, op: conv2d, out: 32, kernel: 3, stride: 2, padding: 1, bn: stem_bn, act: silu}
  - {name: se, block: se, squeeze: 8, channels: 32}
  - {name: head, op: conv2d, out: 16, kernel: 1, bn: head_bn}
"""


class TorchSE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Conv2d(3, 32, 3, 2, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(32)
        self.se = nn.Module()
        self.se.fc1 = nn.Conv2d(32, 8, 1)
        self.se.fc2 = nn.Conv2d(8, 32, 1)
        self.head = nn.Conv2d(32, 16, 1, bias=False)
        self.head_bn = nn.BatchNorm2d(16)

    def forward(self, x):
        x = torch.nn.functional.silu(self.stem_bn(self.stem(x)))
        s = x.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.se.fc2(torch.nn.functional.silu(self.se.fc1(s))))
        return self.head_bn(self.head(x * s))


def test_se_example_in_the_docs_is_this_file():
    text = (ROOT / "docs" / "custom_backbones.md").read_text()
    assert re.findall(r"```yaml se\n(.*?)```", text, re.S) == [SE_YAML.lstrip("\n")]


@pytest.mark.parametrize("batch", [1, 2])
def test_se_block_from_a_user_file_matches_torch(tmp_path, batch):
    path = tmp_path / "se_net.yaml"
    path.write_text(SE_YAML)
    g = load_graph(str(path), batch_size=batch)
    sd = load_state_dict("random", g, seed=4)
    tm = TorchSE().eval()
    tm.load_state_dict(sd)
    x = synthetic_images(batch, 3, 32, 32, seed=9)
    with torch.no_grad():
        ref = tm(x)
    with ttmodels.build(str(path), weights=sd, backend="sim", batch_size=batch) as m:
        out = m(x)
        plan = m.plan
    assert pcc(ref, out) >= 0.99
    mul = next(l for l in plan.layers if l.name == "se.scale")
    ads = [a for a in plan.adapters if a.dst == "se.scale"]
    if batch == 1:
        # [1,1,H*W,C] x [1,1,1,C]: binary_ng broadcasts b over the rows of a sharded a
        assert mul.config["broadcast"] == "row_b"
    else:
        # per image: both operands go 4-D, so neither may stay sharded (binary.reshape_broadcast)
        assert mul.config["broadcast"] == "per_image"
        assert all(not t.memory.sharded for t in mul.inputs)
        assert {a.kind for a in ads} <= {"sharded_to_interleaved", "to_layout"} and ads


def test_spec_errors_for_new_ops():
    from ttmodels.errors import SpecError
    base = {"inputs": {"x": {"channels": 8, "size": 8}}}
    bad = [
        ([{"name": "a", "op": "conv2d", "out": 8, "kernel": 1, "act": "swish"}], "invalid act"),
        ([{"name": "s", "op": "slice", "channels": [4, 12]}], "channels"),
        ([{"name": "p", "op": "global_avg_pool"},
          {"name": "m", "op": "subtract", "in": ["p", "x"]}], "second operand"),
        ([{"name": "l", "op": "leaky_relu", "slope": "x"}], "slope"),
    ]
    for layers, msg in bad:
        with pytest.raises(SpecError, match=msg):
            load_graph({**base, "layers": layers})


# ---- docs stay true --------------------------------------------------------------------------------

def test_spec_docs_tables_match_the_registry():
    text = (ROOT / "docs" / "spec.md").read_text()
    ops_table = text.split("## Ops and their fields")[1].split("\n## ")[0]
    documented = set()
    for row in re.findall(r"^\| ([^|]+) \|", ops_table, re.M):
        documented.update(re.findall(r"`([a-z0-9_]+)`", row))
    assert documented >= set(ops.OPS), set(ops.OPS) - documented
    act_table = text.split("## Activations")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", act_table, re.M)
    assert rows == list(A.NAMES)
