"""Issue 11: the activation table, the op vocabulary and every op's pieces; each new op against
the float32 torch reference on sim; the SE block from a user file; the per-image broadcast plan."""
import re
from pathlib import Path

import pytest
import torch

import ttmodels
from ttmodels.ops import activations as A
from ttmodels import ops
from ttmodels.planning import rules
from ttmodels.backends import sim
from ttmodels.runtime.layers import Layer
from ttmodels.planning.plan_config import PlanConfig
from ttmodels.planning.planner import plan_graph
from ttmodels.weights.reference import ReferenceModel, node_parameters, pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

ROOT = Path(__file__).resolve().parents[1]


# ---- the registry walk -------------------------------------------------------------------------

@pytest.mark.parametrize("op", ops.OPS)
def test_every_op_has_every_piece(op):
    """One registry entry (ttmodels/ops/<module>.py) holds every fact of the op."""
    d = ops.get(op)
    assert d.name == op and d.family and d.doc and d.attrs_doc
    # spec fields and their types
    assert all(isinstance(f, ops.Field) for f in d.fields)
    assert len(set(d.field_names)) == len(d.fields)
    assert d.arity in (1, 2, "2+")
    # attrs and shape inference, float32 reference, parameter schema
    assert callable(d.parse) and callable(d.reference) and callable(d.params)
    if d.parametric:   # preparation for the layer, seeded random init, BN calibration
        assert d.prepare and d.prepared_shapes and d.init_random and d.calibrate
    # planning hook and layout rules
    assert callable(d.plan), op
    assert callable(d.rules) and rules.check_function(op) is d.rules
    assert any(op in r.op.split("|") for r in rules.RULES.values()), op   # a rule of its own
    assert rules.output_function(op) is d.output          # what it produces
    assert d.output_shape in (None, "same", "broadcast", "concat")
    assert op not in rules._CHECKS and op not in rules._OUTPUTS    # no parallel tables
    # its typed, frozen plan config
    assert issubclass(d.config, PlanConfig) and d.config.__dataclass_params__.frozen
    # layer class and the sim ops it calls
    assert issubclass(d.layer.resolve(), Layer)
    assert d.sim_ops and all(callable(getattr(sim, f, None)) for f in d.sim_ops), d.sim_ops


def test_ops_live_in_modules_of_their_own():
    """Every op's entry is built by one module of ttmodels/ops (a family shares one)."""
    mods = {}
    for op, d in ops.REGISTRY.items():
        mods.setdefault(d.parse.__module__, set()).add(d.family)
        assert d.parse.__module__.startswith("ttmodels.ops."), op
        assert d.reference.__module__ == d.parse.__module__, op
    assert all(len(fams) == 1 for fams in mods.values()), mods
    with pytest.raises(ValueError, match="twice"):
        ops.register(ops.get("conv2d"))


def test_plans_carry_each_ops_typed_config():
    """Every planned layer's config is its op's frozen dataclass; as_attrs (the rules' and the
    JSON's view) round-trips; a hand-written mapping with an unknown key is refused."""
    from dataclasses import FrozenInstanceError
    from ttmodels.errors import LayoutError
    from ttmodels.ops.upsample import GridSamplePlan
    from ttmodels.planning.plans import PlannedLayer
    g = load_graph({"inputs": {"x": {"channels": 16, "size": 8}}, "layers": [
        {"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "act": "relu"},
        {"name": "l", "op": "conv2d", "out": 32, "kernel": 1, "lowering": "linear"},
        {"name": "a", "op": "add", "in": ["c", "l"]},
        {"name": "bn", "op": "batch_norm", "act": "silu"},
        {"name": "s", "op": "slice", "channels": [0, 16]},
        {"name": "h", "op": "hardswish"},
        {"name": "mp", "op": "max_pool2d", "kernel": 2},
        {"name": "up", "op": "upsample", "scale": 2},
        {"name": "ub", "op": "upsample", "in": "c", "scale": 2, "mode": "bilinear",
         "align_corners": True},
        {"name": "cat", "op": "concat", "in": ["up", "s"]},
        {"name": "pd", "op": "pad", "padding": 1},
        {"name": "gp", "op": "global_avg_pool"},
        {"name": "fc", "op": "linear", "out": 10},
        # issue 23's ops
        {"name": "ln", "op": "layer_norm", "in": "a"},
        {"name": "ls", "op": "layer_scale"},
        {"name": "sm", "op": "softmax"},
        {"name": "sh", "op": "channel_shuffle", "groups": 2},
        {"name": "fl", "op": "flatten"}], "outputs": ["fc", "ub", "h", "fl"]})
    plan = plan_graph(g)
    assert {l.node.op for l in plan.layers} >= {"conv2d", "add", "batch_norm", "slice", "concat",
                                                "max_pool2d", "upsample", "pad", "linear",
                                                "layer_norm", "layer_scale", "softmax",
                                                "channel_shuffle", "flatten"}
    for l in plan.layers:
        want = GridSamplePlan if l.name == "ub" else ops.get(l.node.op).config
        assert type(l.config) is want, (l.name, type(l.config))
        assert type(l.config).from_attrs(l.config.as_attrs()) == l.config
        with pytest.raises(FrozenInstanceError):
            l.config.l1_parts = {}
    assert plan.layer("l").config.lowering == "linear" and plan.layer("c").config.lowering is None
    conv = plan.layer("c")
    with pytest.raises(LayoutError, match="shard_layuot.*layer 'c'|layer 'c'.*shard_layuot"):
        PlannedLayer(conv.node, conv.inputs, conv.output, 0, {"shard_layuot": "height_sharded"})


def test_parametric_ops_schema_and_prepared_shapes():
    g = load_graph({"inputs": {"x": {"channels": 8, "size": 8}}, "layers": [
        {"name": "c", "op": "conv2d", "out": 16, "kernel": 3, "groups": 2, "bn": "cbn"},
        {"name": "b", "op": "batch_norm"},
        {"name": "p", "op": "global_avg_pool"},
        {"name": "fc", "op": "linear", "out": 4}]})
    assert ops.PARAMETRIC == ("conv2d", "conv_transpose2d", "linear", "batch_norm",
                              "layer_norm", "layer_scale", "grn", "group_norm")
    assert node_parameters(g.node("c"))["c.weight"] == (16, 4, 3, 3)
    assert node_parameters(g.node("fc")) == {"fc.weight": (4, 16), "fc.bias": (4,)}
    assert node_parameters(g.node("p")) == {}
    from ttmodels.weights import prepared_shapes
    shapes = prepared_shapes(g)
    assert shapes["c"] == {"weight": (16, 4, 3, 3), "bias": (16,)}      # BN folded into a bias
    assert shapes["b"] == {"scale": (16,), "shift": (16,)} and "p" not in shapes


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
    for name in ("relu", "relu6", "leaky_relu"):
        act = A.parse(name)
        assert torch.equal(A.sim_apply(act, x), A.torch_apply(act, x)), name
    # the SFPU kernels (tests/test_sfpu.py has them bit for bit): within bfloat16 ulps of torch
    for name in ("sigmoid", "gelu", "tanh", "silu", "hardsigmoid", "hardswish"):
        d = (A.sim_apply(name, x) - A.torch_apply(name, x)).abs().max()
        assert 0 < d < 0.04, (name, float(d))
    # approximate modes: the LUTs, a few hundredths off (the fast sigmoid's 3 pieces: 0.12)
    ds = (A.sim_apply("sigmoid", x, approximate=True) - torch.sigmoid(x)).abs().max()
    dg = (A.sim_apply("gelu", x, approximate=True) - torch.nn.functional.gelu(x)).abs().max()
    assert 1e-3 < ds < 0.13 and 1e-3 < dg < 0.04
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
    if not A.get(name).fuses_conv:      # hardswish: its own layer after the conv
        _check([CONV, {"name": "f", "op": name}, {"name": "a", "op": name, "in": "c"}],
               out=["f", "a"])
        return
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
        assert mul.config.broadcast == "row_b"
    else:
        # per image: both operands go 4-D, so neither may stay sharded (binary.reshape_broadcast)
        assert mul.config.broadcast == "per_image"
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
    assert A.docs_table() in act_table      # made from the table, not written beside it


def test_an_op_package_is_the_whole_op_and_is_found_by_the_registry():
    """Issue 22: adding an op is its package plus tests. channel_shuffle is such a package
    (``ops/channel_shuffle/``): not named in ``ops/__init__``'s list, found there; its spec
    fields, shape inference, reference and ttnn calls are its own; its planning and layer
    are the reshape family's, named by its own ``plan.py`` / ``layer.py``."""
    import importlib

    import ttmodels.ops as ops_pkg
    from ttmodels.ops.reshape.layer import Reshape
    from ttmodels.ops.reshape.plan import plan as reshape_plan

    d = ops.get("channel_shuffle")
    assert "channel_shuffle" not in ops_pkg._FIRST and "channel_shuffle" in ops_pkg._FOUND
    assert d.package == "ttmodels.ops.channel_shuffle"
    own = importlib.import_module(d.package)
    assert d.parse is own.parse and d.reference is own.reference
    assert d.plan is reshape_plan and d.layer.resolve() is Reshape
    # nothing of it is left in the reshape family's package
    reshape_pkg = importlib.import_module(ops.get("reshape").package)
    assert d.package != reshape_pkg.__name__
    assert "channel_shuffle" not in [od.name for od in ops.REGISTRY.values()
                                     if od.parse is reshape_pkg.parse]
    # its steps: a view as [rows, g, C/g], a transpose, a flatten back
    g = load_graph({"name": "t", "inputs": {"x": {"channels": 8, "size": 2}},
                    "layers": [{"name": "s", "op": "channel_shuffle", "groups": 2}]})
    s = g.inputs["x"]
    assert own.steps(g.node("s"), s) == [("reshape", (1, 4, 2, 4)), ("permute", (0, 1, 3, 2)),
                                         ("reshape", (1, 1, 4, 8))]
