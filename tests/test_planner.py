"""Planner tests: graphs built directly from graph.py dataclasses (no YAML)."""
import re

import pytest

from ttmodels.planning import rules
from ttmodels.errors import LayoutError
from ttmodels.language.graph import Constant, Graph, LayoutPolicy, Node, Precision, TensorShape
from ttmodels.planning.layout import BLOCK, HEIGHT, INTERLEAVED, TILE_LAYOUT, MemSpec
from ttmodels.planning.planner import plan_graph
from ttmodels.planning.plan_checks import check_plan, edge_mismatches


def conv(name, inp, out_shape, cin, cout, k, s=1, p=None, layout=None, **kw):
    p = k // 2 if p is None else p
    return Node(name, "conv2d", [inp],
                dict(in_channels=cin, out_channels=cout, kernel=(k, k), stride=(s, s),
                     padding=(p, p, p, p), dilation=(1, 1), groups=1, bias=True, activation=None,
                     lowering="conv2d"),
                out_shape, layout=layout or LayoutPolicy(), **kw)


def assert_valid(plan):
    assert check_plan(plan) == []
    assert edge_mismatches(plan) == []


def field_report_graph():
    return Graph("field", {"x": TensorShape(1, 224, 224, 3)}, [
        Node("pad", "pad", ["x"], dict(padding=(3, 3, 3, 3), value=0.0), TensorShape(1, 230, 230, 3)),
        conv("conv1", "pad", TensorShape(1, 112, 112, 64), 3, 64, 7, 2, 0,
             layout=LayoutPolicy("height_sharded", "l1")),
        Node("scale", "multiply", ["conv1", "gamma"], dict(activation=None),
             TensorShape(1, 112, 112, 64)),
    ], {"gamma": Constant("gamma", (64,), 0.5)}, ["scale"])


def test_field_report_pad_conv_multiply_by_channel_constant():
    plan = plan_graph(field_report_graph())
    assert_valid(plan)
    c1 = plan.layer("conv1")
    assert c1.output.memory.memory_layout == HEIGHT and c1.output.memory.buffer == "l1"
    assert c1.config.shard_layout == HEIGHT and c1.config.reshard_if_not_optimal is False
    # ttnn 0.81 binary_ng broadcasts an interleaved [1,1,1,C] TILE operand over a sharded a
    # (no sharded-broadcast check any more): the constant stays interleaved, the conv output
    # flows in unchanged, and nothing is moved.
    g = plan.constant_layouts["gamma"]
    assert g.memory.memory_layout == INTERLEAVED and g.layout == TILE_LAYOUT
    assert plan.adapters_into("scale") == []
    s = plan.layer("scale")
    assert s.inputs[0] == c1.output and s.config.broadcast == "row_b"
    assert s.config.native_l1_sharding is False
    assert s.output.memory == c1.output.memory          # binary_ng: output follows a
    # ttnn 0.81.1 also takes a row-major constant next to a sharded a (mock-device corpus,
    # tests/test_rules_vs_ttnn.py), but not shapes that do not broadcast
    rm = g.__class__(g.memory, "row_major", g.dtype)
    assert rules.check("multiply", [c1.output, rm], {},
                       shapes=[(1, 1, 12544, 64), (1, 1, 1, 64)]) == []
    bad = rules.check("multiply", [c1.output, g], {}, shapes=[(1, 1, 12544, 64), (1, 1, 1, 32)])
    assert [v.rule for v in bad] == ["binary.broadcast"]


def test_field_report_constant_first_operand_is_swapped():
    g = field_report_graph()
    g.nodes[2].inputs = ["gamma", "conv1"]
    plan = plan_graph(g)
    assert_valid(plan)
    assert plan.layer("scale").config.swap_operands is True
    assert plan.layer("scale").output.memory.memory_layout == HEIGHT


def test_conv_to_maxpool_needs_no_adapter():
    g = Graph("cp", {"x": TensorShape(1, 112, 112, 64)}, [
        conv("c", "x", TensorShape(1, 112, 112, 64), 64, 64, 3),
        Node("mp", "max_pool2d", ["c"], dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1),
                                             dilation=(1, 1), ceil_mode=False),
             TensorShape(1, 56, 56, 64)),
    ], {}, ["mp"])
    plan = plan_graph(g)
    assert_valid(plan)
    assert plan.adapters == []
    c, mp = plan.layer("c"), plan.layer("mp")
    assert c.output.memory.sharded and mp.inputs[0] == c.output
    assert mp.output.memory.memory_layout == c.output.memory.memory_layout
    assert mp.output.memory.grid == c.output.memory.grid
    assert mp.config.applied_shard_scheme is None   # already sharded: pool keeps it


def residual_graph(dtype_b="bfloat16"):
    return Graph("res", {"x": TensorShape(1, 56, 56, 64)}, [
        conv("a", "x", TensorShape(1, 56, 56, 64), 64, 64, 3, layout=LayoutPolicy("height_sharded", "l1")),
        conv("b", "x", TensorShape(1, 56, 56, 64), 64, 64, 1, layout=LayoutPolicy("block_sharded", "l1"),
             precision=Precision(activations=dtype_b)),
        Node("add", "add", ["a", "b"], dict(activation="relu"), TensorShape(1, 56, 56, 64)),
    ], {}, ["add"])


def test_residual_add_different_shard_specs_one_adapter_onto_the_wider_grid():
    # a is height sharded on 49 cores, b block sharded on 16: b moves onto a's grid, where ttnn
    # would put the output anyway (the operand on more cores wins), whatever the bytes
    for dtype_a, dtype_b in (("bfloat16", "bfloat8_b"), ("bfloat8_b", "bfloat16")):
        g = residual_graph(dtype_b)
        g.nodes[0].precision = Precision(activations=dtype_a)
        plan = plan_graph(g)
        assert_valid(plan)
        ads = plan.adapters_into("add")
        assert len(ads) == 1 and ads[0].src == "b" and ads[0].kind == "reshard"
        assert ads[0].after.memory == plan.layer("a").output.memory
        assert plan.layer("add").output.memory == plan.layer("a").output.memory
        assert plan.layer("add").config.native_l1_sharding is True


def test_residual_add_without_adapters_is_accepted_but_not_native():
    plan = plan_graph(residual_graph(), adapters=False)
    assert plan.adapters == []
    assert check_plan(plan) == []          # 0.81 runs it (TensorAccessor path) ...
    add = plan.layer("add")
    assert [v.rule for v in rules.advise("add", add.inputs, {}, shapes=[(1, 1, 3136, 64)] * 2)] == \
        ["binary.native_sharding"]         # ... but not on the native L1-sharded kernels


def one_conv(n, h, w, cin, cout, k):
    return Graph("one", {"x": TensorShape(n, h, w, cin)},
                 [conv("c", "x", TensorShape(n, h, w, cout), cin, cout, k)], {}, ["c"])


@pytest.mark.parametrize("shape,k,kind", [
    ((1, 112, 112, 64, 64), 3, HEIGHT),
    ((1, 56, 56, 64, 256), 1, HEIGHT),
    ((1, 14, 14, 1024, 256), 1, BLOCK),
    ((1, 7, 7, 2048, 512), 1, BLOCK),
    ((16, 7, 7, 512, 512), 3, BLOCK),
])
def test_auto_shard_choice(shape, k, kind):
    plan = plan_graph(one_conv(*shape, k))
    layer = plan.layer("c")
    assert layer.config.shard_layout == kind
    assert layer.output.memory.memory_layout == kind
    assert layer.l1_bytes_per_core <= plan.l1_budget
    assert_valid(plan)


def test_over_budget_tries_other_layout():
    # height sharding a 3x3 1024->1024 conv streams 1024 output channels x one kernel row of
    # weights per core (3.3 MB): over budget, so the explicit height policy fails while auto
    # finds a layout that fits
    g = one_conv(1, 14, 14, 1024, 1024, 3)
    g.nodes[0].layout = LayoutPolicy("height_sharded", "l1")
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    assert e.value.layer == "c"
    m = re.search(r"conv2d needs at least (\d+) B of L1 per core \(height_sharded", str(e.value))
    assert m, str(e.value)
    from ttmodels.planning.l1 import l1_bank_bytes
    bank = l1_bank_bytes()
    assert int(m.group(1)) > bank and f"left by the {bank} B bank" in str(e.value)
    g.nodes[0].layout = LayoutPolicy()
    plan = plan_graph(g)
    assert plan.layer("c").config.shard_layout != HEIGHT
    assert plan.layer("c").l1_bytes_per_core <= plan.l1_budget


def test_over_budget_everywhere_raises_naming_layer_and_bytes():
    # a 1x1 stride-1 (matmul) conv never DRAM-slices (conv2d_DRAM hands it to conv2d_L1): no L1
    # form fits, so it runs its matmul out of DRAM interleaved (ttnn's own automatic config);
    # held to an L1 layout, nothing fits and the error names the layer and the bank
    plan = plan_graph(one_conv(1, 1024, 1024, 256, 256, 1))
    assert plan.layer("c").output.memory.buffer == "dram"
    g = one_conv(1, 1024, 1024, 256, 256, 1)
    g.nodes[0].layout = LayoutPolicy(HEIGHT, "l1")
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    msg = str(e.value)
    from ttmodels.planning.l1 import l1_bank_bytes
    assert "layer 'c'" in msg and str(l1_bank_bytes()) in msg


def test_over_budget_3x3_conv_is_dram_sliced():
    plan = plan_graph(one_conv(1, 1024, 1024, 256, 256, 3))
    c = plan.layer("c")
    assert c.config.slice.num_slices >= 2
    assert c.inputs[0].memory == MemSpec(INTERLEAVED, "dram") == c.output.memory
    assert c.l1_bytes_per_core <= plan.l1_budget
    assert check_plan(plan) == []


def backbone():
    return Graph("bb", {"x": TensorShape(1, 64, 64, 3)}, [
        Node("pad", "pad", ["x"], dict(padding=(3, 3, 3, 3), value=0.0), TensorShape(1, 70, 70, 3)),
        conv("c1", "pad", TensorShape(1, 32, 32, 64), 3, 64, 7, 2, 0),
        Node("r1", "relu", ["c1"], {}, TensorShape(1, 32, 32, 64), precision=Precision(activations="bfloat8_b")),
        Node("mp", "max_pool2d", ["r1"], dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1),
                                              dilation=(1, 1), ceil_mode=False), TensorShape(1, 16, 16, 64)),
        conv("c2", "mp", TensorShape(1, 16, 16, 64), 64, 64, 3),
        Node("add", "add", ["c2", "mp"], dict(activation="relu"), TensorShape(1, 16, 16, 64)),
        Node("up", "upsample", ["add"], dict(scale=(2, 2), mode="nearest"), TensorShape(1, 32, 32, 64)),
        Node("cat", "concat", ["up", "c1"], {}, TensorShape(1, 32, 32, 128)),
        Node("gap", "global_avg_pool", ["cat"], {}, TensorShape(1, 1, 1, 128)),
        Node("fc", "linear", ["gap"], dict(in_features=128, out_features=10, bias=True, activation=None),
             TensorShape(1, 1, 1, 10)),
    ], {}, ["fc"])


def test_every_plan_passes_rules_and_no_adapter_variant_fails_where_expected():
    plan = plan_graph(backbone())
    assert_valid(plan)
    kinds = {(a.dst, a.kind) for a in plan.adapters}
    assert ("r1", "typecast") in kinds          # relu has no dtype argument
    assert ("up", "to_layout") in kinds         # sharded upsample needs ROW_MAJOR
    # ttnn 0.81.1's global average pool is a reduction with an interleaved L1 output: linear
    # takes it as it is (no sharded_to_interleaved)
    assert plan.layer("gap").output.memory == MemSpec(INTERLEAVED, "l1")
    assert not any(dst == "fc" for dst, _ in kinds)
    assert plan.layer("mp").config.output_layout == TILE_LAYOUT  # pool converts on its own
    for a in plan.adapters:
        assert a.before != a.after and a.reason
    bare = plan_graph(backbone(), adapters=False)
    assert bare.adapters == []
    failing = {(name, v.rule) for name, v in check_plan(bare)}
    assert ("fc", "linear.tile") in failing
    # pool2d's row-major output (8-row height shards) is tilized by ttnn.add with its shard spec
    assert ("add", "binary.layout") in failing
    assert ("up", "upsample.layout") in failing


def test_plan_rendering():
    plan = plan_graph(field_report_graph())
    text = str(plan)
    assert "conv1" in text and "height_sharded" in text and "L1 B/core" in text
    d = plan.to_dict()
    assert [l["name"] for l in d["layers"]] == ["pad", "conv1", "scale"]
    assert d["layers"][1]["output"]["memory"]["memory_layout"] == HEIGHT
    import json
    json.loads(plan.to_json())
    plan2 = plan_graph(residual_graph("bfloat8_b"))
    assert "reshard" in str(plan2) and "b -> add[1]" in str(plan2)


def test_sharded_policy_in_dram_is_rejected():
    g = one_conv(1, 56, 56, 64, 64, 3)
    g.nodes[0].layout = LayoutPolicy("height_sharded", "dram")
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    assert e.value.layer == "c" and e.value.rule == "tensor.shard_l1"


# ---------------------------------------------------------------------------------------------
# over-budget binary ops write into operand a (output_tensor=a, TT's ResNet50 ttnn.add_)
# ---------------------------------------------------------------------------------------------

def big_residual(order=("ca", "cb"), extra_reader=None):
    """BEVDet b6 layer1 sized: two 1x1 convs to 6x64x176x256 (540 KB height shards per core)
    added; three such shards do not fit a Wormhole core, two do."""
    s_in, s_out = TensorShape(6, 64, 176, 64), TensorShape(6, 64, 176, 256)
    # both convs held in L1 (height shards): a 1x1 conv may otherwise run from DRAM into DRAM,
    # and the add then has no operand in L1 to write into
    held = LayoutPolicy(HEIGHT, "l1")
    nodes = [conv("ca", "x", s_out, 64, 256, 1, layout=held),
             conv("cb", "x", s_out, 64, 256, 1, layout=held),
             Node("add", "add", list(order), dict(activation="relu"), s_out)]
    outputs = ["add"]
    if extra_reader:
        nodes.append(Node("r", "relu", [extra_reader], {}, s_out))
        outputs.append("r")
    return Graph("big", {"x": s_in}, nodes, {}, outputs)


def test_over_budget_add_is_planned_in_place():
    # the sums' own remedy; by address this graph needs more (plan_alloc: cb's CBs clash with
    # the two 540 KB outputs, as in bevdet b6's layer1, tests/test_l1_alloc.py)
    plan = plan_graph(big_residual(), addresses=False)
    assert_valid(plan)
    add, ca = plan.layer("add"), plan.layer("ca")
    assert add.config.inplace is True and add.config.swap_operands is False
    assert add.output == ca.output == add.inputs[0]       # the output is a's buffer
    assert add.config.l1_parts["output"] == 0
    assert add.l1_bytes_per_core <= plan.l1_budget < \
        add.l1_bytes_per_core + ca.output.memory.shard_shape[0] * 256 * 2
    assert plan.adapters == []


def test_in_place_writes_into_the_operand_nothing_else_reads():
    # a (= ca) is read again after the add: the op is turned around to write into cb
    plan = plan_graph(big_residual(extra_reader="ca"), addresses=False)
    assert_valid(plan)
    add = plan.layer("add")
    assert add.config.inplace is True and add.config.swap_operands is True
    assert add.output == plan.layer("cb").output
    # both operands read again: no in-place, and the error says why
    g = big_residual(extra_reader="ca")
    g.nodes.append(Node("r2", "relu", ["cb"], {}, TensorShape(6, 64, 176, 256)))
    g.outputs.append("r2")
    _add_runs_through_dram_else_says_why(g, "other layers")


def _add_runs_through_dram_else_says_why(g, why):
    """Neither operand can take the output: the add runs from or into DRAM (the planner's last
    remedy, ``dram_fallback``); without that remedy, the error says why in place did not work."""
    import copy
    from ttmodels.planning import planner as P
    plan = plan_graph(copy.deepcopy(g), addresses=False)
    add = plan.layer("add")
    assert not add.config.inplace
    assert add.output.memory.buffer == "dram" or \
        any(sp.for_layer == "add" for sp in plan.spills)
    assert "DRAM" in plan.choices["add"]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(P._Planner, "dram_fallback", lambda *a, **k: None)
        with pytest.raises(LayoutError) as e:
            plan_graph(g)
    assert e.value.layer == "add" and "in place" in str(e.value) and why in str(e.value)


def test_in_place_needs_the_output_dtype_of_a():
    g = big_residual()
    g.nodes[2].precision = Precision(activations="float32")   # a float32 output of bf16 a
    _add_runs_through_dram_else_says_why(g, "dtype")


def test_in_place_is_only_used_over_budget():
    small = big_residual()
    for n in small.nodes:
        n.shape = TensorShape(1, 64, 176, n.shape.c)
    small.inputs["x"] = TensorShape(1, 64, 176, 64)
    add = plan_graph(small).layer("add")
    assert not add.config.inplace and add.config.l1_parts["output"] > 0


@pytest.mark.parametrize("batch", [1, 2])
def test_resnet50_224_plans_unchanged(batch):
    """The plans of ResNet50 at 224x224 are byte-for-byte the fixtures: no DRAM slicing and no
    in-place adds where everything fits (fixtures regenerated when the output memory configs were
    made ttnn 0.81.1's own, tests/test_verify_models.py; slicing and in-place never changed them)."""
    import json
    from pathlib import Path

    from ttmodels.language.spec import load_graph
    fixture = Path(__file__).parent / "data" / f"plan_resnet50_b{batch}_224.json"
    # at the precision the fixtures were made at (resnet50's shipped default is `precision:
    # auto` since issue 33, whose choice may be re-resolved)
    spec = {"extends": "resnet50", "defaults": {"layout": "auto", "precision": {
        "activations": "bfloat16", "weights": "bfloat8_b", "math_fidelity": "HiFi2"}}}
    plan = plan_graph(load_graph(spec, batch_size=batch))
    d = json.loads(plan.to_json())
    d.pop("ttnn")           # ttnn's verdicts on the plan (ttnn_oracle), not the plan itself
    # the device-time estimate of it, and why each conv's layout won (tests/test_estimate.py):
    # figures of a model, not the plan (regenerated when the planner chose by the estimate)
    d.pop("estimate"), d.pop("choices", None)
    for layer in d["layers"]:
        layer.pop("device_us")
    assert d == json.loads(fixture.read_text())
    assert not any(l.config.inplace or l.config.slice for l in plan.layers)
