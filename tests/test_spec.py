"""The spec language: features, shapes (checked against PyTorch), weight keys, registry."""
from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest

from ttmodels.language import expr, registry
from ttmodels.errors import SpecError
from ttmodels.language.graph import LayoutPolicy, Precision, TensorShape
from ttmodels.weights.reference import expected_parameters
from ttmodels.language.spec import load_graph

SPECS = Path(__file__).parent / "specs"


def spec(text: str) -> str:
    return textwrap.dedent(text)


# ---------------------------------------------------------------------------------------------
# torchvision ground truth
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tv_resnet50():
    import torchvision
    return torchvision.models.resnet50(weights=None).eval()


def _torch_shapes(model, n, h, w):
    """Output NCHW shape of every leaf module (last call wins for reused modules like relu)."""
    import torch
    shapes, hooks = {}, []
    for name, mod in model.named_modules():
        if name and not list(mod.children()):
            hooks.append(mod.register_forward_hook(
                lambda m, i, o, name=name: shapes.__setitem__(name, tuple(o.shape))))
    with torch.no_grad():
        model(torch.zeros(n, 3, h, w))
    for hk in hooks:
        hk.remove()
    return shapes


def test_resnet50_state_dict_keys_equal_torchvision(tv_resnet50):
    g = load_graph("resnet50")
    want = {k: tuple(v.shape) for k, v in tv_resnet50.state_dict().items()
            if not k.endswith("num_batches_tracked")}
    got = expected_parameters(g)
    assert set(got) == set(want)
    assert got == want


@pytest.mark.parametrize("n,h,w", [(1, 224, 224), (2, 320, 256)])
def test_resnet50_shapes_match_torch(tv_resnet50, n, h, w):
    g = load_graph("resnet50", batch_size=n, input_size=(h, w))
    ref = _torch_shapes(tv_resnet50, n, h, w)
    checked = 0
    for node in g.nodes:
        if node.op == "conv2d":
            # conv + folded BN: torch's BN module output has the conv's shape.
            assert ref[node.bn] == node.shape.nchw, node.name
            assert ref[node.weights] == node.shape.nchw, node.name
            checked += 1
    assert checked == 53
    assert ref["maxpool"] == g.node("maxpool").shape.nchw
    assert ref["avgpool"] == g.node("avgpool").shape.nchw
    assert g.shape_of("logits") == TensorShape(n, 1, 1, 1000)
    # stage outputs (fused add+relu nodes are named like torchvision's relu modules)
    for stage, (c, s) in {"layer1": (256, 4), "layer2": (512, 8), "layer3": (1024, 16),
                          "layer4": (2048, 32)}.items():
        last = {"layer1": 2, "layer2": 3, "layer3": 5, "layer4": 2}[stage]
        node = g.node(f"{stage}.{last}.relu")
        assert node.op == "add" and node.attrs["activation"] == "relu"
        assert node.shape == TensorShape(n, h // s, w // s, c)


def test_resnet50_structure():
    g = load_graph("resnet50")
    assert g.outputs == ["logits"]
    assert g.inputs == {"image": TensorShape(1, 224, 224, 3)}
    c1 = g.node("conv1")
    assert c1.attrs == dict(in_channels=3, out_channels=64, kernel=(7, 7), stride=(2, 2),
                            padding=(3, 3, 3, 3), dilation=(1, 1), groups=1, bias=False,
                            activation="relu", lowering="conv2d", bn_eps=1e-5)
    assert (c1.weights, c1.bn) == ("conv1", "bn1")
    mp = g.node("maxpool")
    assert mp.attrs == dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1),
                            ceil_mode=False)
    n = g.node("layer1.0.conv1")
    assert (n.weights, n.bn, n.block) == ("layer1.0.conv1", "layer1.0.bn1", "layer1.0")
    # v1.5: stride on the 3x3 conv; the downsample conv is strided too
    assert g.node("layer2.0.conv1").attrs["stride"] == (1, 1)
    assert g.node("layer2.0.conv2").attrs["stride"] == (2, 2)
    ds = g.node("layer2.0.downsample.0")
    assert (ds.weights, ds.bn, ds.attrs["stride"]) == ("layer2.0.downsample.0",
                                                       "layer2.0.downsample.1", (2, 2))
    assert g.node("layer1.0.relu").inputs == ["layer1.0.conv3", "layer1.0.downsample.0"]
    assert g.node("layer1.1.relu").inputs == ["layer1.1.conv3", "layer1.0.relu"]
    fc = g.node("logits")
    assert fc.op == "linear" and fc.weights == "fc"
    assert fc.attrs == dict(in_features=2048, out_features=1000, bias=True, activation=None)
    assert fc.inputs == ["avgpool"]
    names = [x.name for x in g.nodes]
    assert len(names) == len(set(names))
    # topological order: every input is a graph input or an earlier node
    seen = set(g.inputs)
    for x in g.nodes:
        assert all(i in seen for i in x.inputs), x.name
        seen.add(x.name)
    assert all(x.loc is not None and x.loc.line for x in g.nodes)


def test_resnet50_precision_profiles_and_layout():
    # resnet50's default is `precision: auto` (issue 33), resolved in the spec: every conv and
    # the fc have their choice, the activations stay bfloat16; a profile replaces it
    g = load_graph("resnet50")
    mm = [x for x in g.nodes if x.op in ("conv2d", "linear")]
    assert mm and all(x.auto is not None and x.auto.resolved for x in mm)
    assert {x.precision.activations for x in g.nodes} == {"bfloat16"}
    assert {x.layout for x in g.nodes} == {LayoutPolicy("auto")}
    perf = load_graph("resnet50", profile="tt-perf")
    assert {x.precision for x in perf.nodes} == {Precision("bfloat8_b", "bfloat8_b", "LoFi")}
    assert all(x.auto is None for x in perf.nodes)
    assert perf.input_precision.activations == "bfloat8_b"
    assert load_graph("resnet50", profile="default").nodes[0].precision == g.nodes[0].precision


def test_resnet50_stage_outputs_via_extends():
    g = load_graph({"extends": "resnet50",
                    "outputs": [{"logits": "fc"}, "layer1", "layer2", "layer3",
                                "layer4"]}, input_size=(256, 192))
    assert g.outputs == ["logits", "layer1.2.relu", "layer2.3.relu", "layer3.5.relu",
                         "layer4.2.relu"]
    assert g.shape_of("layer3.5.relu") == TensorShape(1, 16, 12, 1024)
    named = load_graph({"extends": "resnet50", "outputs": {"c2": "layer1", "c5": "trunk.c5"}})
    assert named.outputs == ["c2", "c5"]
    assert named.node("c2").inputs == ["layer1.2.conv3", "layer1.1.relu"]
    assert named.node("layer2.0.conv1").inputs == ["c2"]
    # resolved_precision names the fc by its own name: the choice holds whether it is renamed
    # to logits (resnet50, the first spec above) or not (this one)
    assert g.node("logits").auto.resolved and named.node("fc").auto.resolved
    assert g.node("logits").precision == named.node("fc").precision


@pytest.mark.parametrize("model,layer,output", [("efficientnet_b0", "classifier.1", "logits"),
                                                ("mobilenet_v2", "classifier.1", "logits")])
def test_a_shipped_resolution_holds_when_an_extending_spec_renames_no_output(model, layer,
                                                                               output):
    # an entry naming the renamed output (`logits:`) would be "no layer 'logits'" in a spec that
    # extends the model with outputs of its own: the shipped specs name layers by their own name
    shipped = load_graph(model)
    other = load_graph({"extends": model, "outputs": [layer]})
    assert other.node(layer).auto.resolved
    assert other.node(layer).precision == shipped.node(output).precision


def test_bevdet_encoder_shapes_and_keys(tv_resnet50):
    g = load_graph("bevdet_r50_encoder")
    assert g.inputs == {"image": TensorShape(1, 256, 704, 3)}
    assert g.outputs == ["neck", "c4", "c5"]
    assert g.shape_of("neck").nchw == (1, 512, 16, 44)
    assert g.shape_of("c4").nchw == (1, 1024, 16, 44)
    assert g.shape_of("c5").nchw == (1, 2048, 8, 22)
    params = expected_parameters(g)
    backbone = {f"img_backbone.{k}": tuple(v.shape) for k, v in tv_resnet50.state_dict().items()
                if not k.endswith("num_batches_tracked") and not k.startswith("fc.")}
    neck = {"img_neck.lateral_convs.0.conv.weight": (512, 1024, 1, 1),
            "img_neck.lateral_convs.0.conv.bias": (512,),
            "img_neck.lateral_convs.1.conv.weight": (512, 2048, 1, 1),
            "img_neck.lateral_convs.1.conv.bias": (512,),
            "img_neck.fpn_convs.0.conv.weight": (512, 512, 3, 3),
            "img_neck.fpn_convs.0.conv.bias": (512,)}
    assert params == {**backbone, **neck}
    up = g.node("img_neck.up0")
    assert up.attrs == {"scale": (2, 2), "mode": "nearest"}
    assert up.inputs == ["img_neck.lateral_convs.1.conv"]
    merge = g.node("img_neck.merge0")
    assert merge.inputs == ["img_neck.lateral_convs.0.conv", "img_neck.up0"]
    assert g.node("neck").inputs == ["img_neck.merge0"]
    assert g.node("neck").attrs["padding"] == (1, 1, 1, 1) and g.node("neck").attrs["bias"]
    assert g.node("img_neck.lateral_convs.0.conv").inputs == ["c4"]
    assert "fc" not in {x.weights for x in g.nodes}


def test_bevdet_other_size():
    g = load_graph("bevdet_r50_encoder", batch_size=6, input_size=(128, 352))
    assert g.shape_of("neck") == TensorShape(6, 8, 22, 512)
    assert g.shape_of("c5") == TensorShape(6, 4, 11, 2048)


# ---------------------------------------------------------------------------------------------
# language features on small specs
# ---------------------------------------------------------------------------------------------

SMALL = spec("""\
    name: small
    inputs:
      image: {channels: 3, size: [32, 48], divisible_by: 16}
    layers:
      - {name: stem, op: conv2d, out: 16, kernel: 3, stride: 2, padding: 1, bn: stem_bn, act: relu}
      - {name: pool, op: max_pool2d, kernel: 2}
    """)


def test_default_input_is_previous_layer_and_last_layer_is_output():
    g = load_graph(SMALL)
    assert g.name == "small"
    assert g.node("stem").inputs == ["image"] and g.node("pool").inputs == ["stem"]
    assert g.outputs == ["pool"]
    assert g.shape_of("pool") == TensorShape(1, 8, 12, 16)
    assert g.node("pool").attrs["stride"] == (2, 2)   # stride defaults to the kernel
    assert load_graph(SMALL, input_size=(64, 16), batch_size=3).shape_of("pool") == \
        TensorShape(3, 16, 4, 16)


@pytest.mark.parametrize("padding,want", [(2, (2, 2, 2, 2)), ([1, 3], (1, 1, 3, 3)),
                                          ([0, 1, 2, 3], (0, 1, 2, 3))])
def test_conv_padding_forms_and_shapes_match_torch(padding, want):
    import torch
    import torch.nn.functional as F
    g = load_graph({"inputs": {"x": {"channels": 4, "size": [17, 23]}},
                    "layers": [{"name": "c", "op": "conv2d", "out": 6, "kernel": [3, 5],
                                "stride": [2, 3], "padding": padding, "dilation": [2, 1],
                                "groups": 2, "bias": True}]})
    node = g.node("c")
    assert node.attrs["padding"] == want
    t, b, l, r = want
    y = F.conv2d(F.pad(torch.zeros(1, 4, 17, 23), (l, r, t, b)), torch.zeros(6, 2, 3, 5),
                 stride=(2, 3), dilation=(2, 1), groups=2)
    assert node.shape.nchw == tuple(y.shape)
    assert node.attrs["groups"] == 2 and node.attrs["bias"] is True


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("size,kernel,stride,padding,ceil", [
    (15, 3, 2, 1, True), (16, 3, 2, 1, True), (14, 3, 2, 0, True), (7, 2, 2, 1, True),
    (15, 3, 2, 1, False), (10, 4, 3, 2, True)])
def test_pool_shapes_match_torch(op, size, kernel, stride, padding, ceil):
    import torch
    import torch.nn.functional as F
    g = load_graph({"inputs": {"x": {"channels": 2, "size": [size, size + 1]}},
                    "layers": [{"name": "p", "op": op, "kernel": kernel, "stride": stride,
                                "padding": padding, "ceil_mode": ceil}]})
    fn = F.max_pool2d if op == "max_pool2d" else F.avg_pool2d
    y = fn(torch.zeros(1, 2, size, size + 1), kernel, stride, padding, ceil_mode=ceil)
    assert g.node("p").shape.nchw == tuple(y.shape)
    assert g.node("p").attrs["ceil_mode"] is ceil


def test_all_ops_canonical_attrs():
    g = load_graph(spec("""\
        inputs:
          x: {channels: 8, size: [16, 16]}
        constants:
          scale: {shape: [8], value: [1, 2, 3, 4, 5, 6, 7, 8]}
          half: {shape: [1], value: 0.5}
          gamma: {shape: [8], weights: head.gamma}
        layers:
          - {name: a, op: conv2d, out: 8, kernel: 1, lowering: linear}
          - {name: r, op: relu}
          - {name: m, op: multiply, in: [r, scale]}
          - {name: m2, op: multiply, in: [half, m], act: relu}
          - {name: g, op: multiply, in: [m2, gamma]}
          - {name: s, op: add, in: [g, a], act: relu}
          - {name: ap, op: avg_pool2d, kernel: 3, stride: 1, padding: 1, count_include_pad: false}
          - {name: down, op: max_pool2d, kernel: 2}
          - {name: up, op: upsample, scale: 2}
          - {name: upb, op: upsample, in: down, scale: [2, 2], mode: bilinear}
          - {name: up2, op: upsample, in: down, size_of: ap}
          - {name: cat, op: concat, in: [up, upb, up2]}
          - {name: p, op: pad, padding: [0, 1, 2, 3], value: -1}
          - {name: gp, op: global_avg_pool, in: cat}
          - {name: fc, op: linear, out: 10, bias: false, act: relu}
        outputs: [fc, p]
        """))
    assert g.outputs == ["fc", "p"]
    assert g.node("a").attrs["lowering"] == "linear"
    assert g.node("m").inputs == ["r", "scale"] and g.node("m").attrs == {"activation": None}
    assert g.node("m2").inputs == ["half", "m"] and g.node("m2").attrs == {"activation": "relu"}
    assert g.constants["scale"].value == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert g.constants["gamma"].weights == "head.gamma" and g.constants["gamma"].value is None
    assert g.node("ap").attrs == dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1, 1, 1),
                                      ceil_mode=False, count_include_pad=False)
    assert g.node("up").attrs == {"scale": (2, 2), "mode": "nearest"}
    assert g.node("upb").attrs == {"scale": (2, 2), "mode": "bilinear"}
    assert g.node("up2").attrs == {"scale": (2, 2), "mode": "nearest"}
    assert g.shape_of("cat") == TensorShape(1, 16, 16, 24)
    assert g.node("p").attrs == {"padding": (0, 1, 2, 3), "value": -1.0}
    assert g.shape_of("p") == TensorShape(1, 17, 21, 24)
    assert g.node("fc").attrs == dict(in_features=24, out_features=10, bias=False,
                                      activation="relu")
    assert g.shape_of("fc") == TensorShape(1, 1, 1, 10)
    assert g.node("fc").weights == "fc" and g.node("r").weights is None


def test_layout_and_precision_forms_and_inheritance():
    g = load_graph(spec("""\
        inputs:
          x: {channels: 8, size: [16, 16]}
        defaults:
          layout: interleaved dram
          precision: {weights: bfloat16, math_fidelity: HiFi4}
        profiles:
          fast: {activations: bfloat8_b, weights: bfloat4_b, math_fidelity: LoFi}
        blocks:
          two:
            params: {c: 8}
            layers:
              - {name: a, op: conv2d, out: "${c}", kernel: 1}
              - {name: b, op: conv2d, out: "${c}", kernel: 1, layout: width_sharded l1 8x1,
                 precision: {activations: float32, fp32_accum: true}}
        layers:
          - {name: h, op: relu, layout: height_sharded l1 8x8}
          - {name: k, op: relu, layout: {kind: block_sharded, buffer: l1, grid: [4, 2]}}
          - {name: s, op: relu, layout: block_sharded, precision: fast}
          - {name: i, block: two, layout: height_sharded, precision: {weights: bfloat8_b}}
        """), profile="fast")
    assert g.node("h").layout == LayoutPolicy("height_sharded", "l1", (8, 8))
    assert g.node("k").layout == LayoutPolicy("block_sharded", "l1", (4, 2))
    assert g.node("s").layout == LayoutPolicy("block_sharded")
    # profile 'fast' replaces the defaults; per-layer / per-instance settings win over it
    assert g.node("h").precision == Precision("bfloat4_b", "bfloat8_b", "LoFi")
    assert g.node("i.a").layout == LayoutPolicy("height_sharded")
    assert g.node("i.a").precision == Precision("bfloat8_b", "bfloat8_b", "LoFi")
    assert g.node("i.b").layout == LayoutPolicy("width_sharded", "l1", (8, 1))
    assert g.node("i.b").precision == Precision("bfloat8_b", "float32", "LoFi", True)
    g0 = load_graph(spec("""\
        inputs: {x: {channels: 8, size: 8}}
        defaults: {layout: interleaved dram, precision: {weights: bfloat16, math_fidelity: hifi4}}
        layers: [{name: r, op: relu}]
        """))
    assert g0.node("r").layout == LayoutPolicy("interleaved", "dram")
    assert g0.node("r").precision == Precision("bfloat16", "bfloat16", "HiFi4")


BLOCKS = spec("""\
    inputs:
      x: {channels: 16, size: [32, 32]}
    params: {base: 8}
    blocks:
      unit:
        params: {planes: required, stride: 1, project: false, width: "${planes * 2}"}
        layers:
          - {name: conv1, op: conv2d, out: "${width}", kernel: 3, stride: "${stride}", padding: 1,
             bn: bn1, act: relu}
          - {name: conv2, op: conv2d, out: "${planes * 4}", kernel: 1, bn: bn2}
          - {name: proj, when: "${project}", op: conv2d, in: x, out: "${planes * 4}", kernel: 1,
             stride: "${stride}", bn: proj_bn}
          - {name: out, op: add, in: [conv2, "${'proj' if project else 'x'}"], act: relu}
      pair:
        inputs: [left, right]
        layers:
          - {name: cat, op: concat, in: [left, right]}
        outputs: {joined: cat, l: left}
    layers:
      - {name: stage, block: unit, planes: "${base // 2}", repeat: 3,
         first: {stride: 2, project: true}}
      - {name: other, block: unit, planes: 4, in: stage.1}
      - {name: both, block: pair, in: [stage, other]}
      - {name: tail, op: relu, in: both.joined}
    outputs: {main: tail, s0: stage.0, both: both}
    """)


def test_blocks_repeat_first_when_and_expressions():
    g = load_graph(BLOCKS)
    names = [x.name for x in g.nodes]
    # stage.0.out is the output "s0": renamed, its consumers follow
    assert names[:5] == ["stage.0.conv1", "stage.0.conv2", "stage.0.proj", "s0", "stage.1.conv1"]
    assert "stage.1.proj" not in names and "stage.2.proj" not in names
    c1 = g.node("stage.0.conv1")
    assert c1.attrs["stride"] == (2, 2) and c1.attrs["out_channels"] == 8 and c1.bn == "stage.0.bn1"
    assert g.node("stage.1.conv1").attrs["stride"] == (1, 1)
    assert g.node("s0").inputs == ["stage.0.conv2", "stage.0.proj"]
    assert g.node("stage.1.out").inputs == ["stage.1.conv2", "s0"]
    assert g.node("other.conv1").inputs == ["stage.1.out"]
    assert g.node("both").op == "concat"
    assert g.node("both").inputs == ["stage.2.out", "other.out"]
    assert g.node("main").inputs == ["both"] and g.node("main").shape.c == 32
    assert g.outputs == ["main", "s0", "both"]      # renamed output nodes
    assert g.node("s0").weights is None and g.node("s0").block == "stage.0"
    assert g.node("stage.1.conv1").inputs == ["s0"]
    assert g.node("stage.0.proj").block == "stage.0"
    assert g.node("stage.0.conv1").loc.line == 8


def test_imports_relative_and_shipped_blocks():
    g = load_graph(SPECS / "uses_lib.yaml")
    assert [(x.name, x.weights, x.bn, x.attrs["activation"]) for x in g.nodes] == [
        ("stem.a.conv", "stem.a.conv", "stem.a.bn", "relu"),
        ("stem.b.conv", "stem.b.conv", "stem.b.bn", "relu"),
        ("head.a.conv", "head.a.conv", "head.a.bn", None),
        ("head.b.conv", "head.b.conv", "head.b.bn", None)]
    assert {x.loc.file for x in g.nodes} == {"ttmodels/blocks/common.yaml"}
    assert g.name == "uses_lib"
    # the same through a str path
    assert [x.name for x in load_graph(str(SPECS / "uses_lib.yaml")).nodes] == \
        [x.name for x in g.nodes]


def test_scope_puts_a_trunk_under_a_prefix_or_none():
    text = spec("""\
        imports: [ttmodels/resnet]
        inputs: {image: {channels: 3, size: 64}}
        layers:
          - {name: bb, block: resnet_trunk, scope: encoder.body, unit: basic_block, expansion: 1,
             depth1: 1, depth2: 1, depth3: 1, depth4: 1}
          - {name: head, op: conv2d, in: bb.c4, out: 8, kernel: 1, bias: true}
        """)
    g = load_graph(text)
    assert g.node("encoder.body.layer2.0.conv1").weights == "encoder.body.layer2.0.conv1"
    assert g.node("encoder.body.layer2.0.downsample.0").bn == "encoder.body.layer2.0.downsample.1"
    assert g.node("head").inputs == ["encoder.body.layer3.0.relu"]
    assert "encoder.body.layer1.0.downsample.0" not in [x.name for x in g.nodes]
    assert g.shape_of("head") == TensorShape(1, 4, 4, 8)


def test_dict_input_is_not_modified_and_yaml_equals_dict():
    import yaml
    d = yaml.safe_load(BLOCKS)
    before = copy.deepcopy(d)
    g1 = load_graph(d)
    assert d == before
    g2 = load_graph(BLOCKS)
    assert [(x.name, x.inputs, x.attrs, x.shape) for x in g1.nodes] == \
        [(x.name, x.inputs, x.attrs, x.shape) for x in g2.nodes]
    assert g1.source == "<dict>" and g2.source == "<string>"
    assert g1.nodes[0].loc.line is None and g2.nodes[0].loc.line == 8


def test_yaml_anchors_and_merge_keys():
    g = load_graph(spec("""\
        inputs: {x: {channels: 4, size: 8}}
        params:
          conv: &conv {op: conv2d, kernel: 3, padding: 1, out: 4}
        layers:
          - {name: a, <<: *conv}
          - {name: b, <<: *conv, out: 8}
        """))
    assert g.shape_of("b").c == 8 and g.node("a").attrs["kernel"] == (3, 3)


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------

def test_registry_register_list_resolve(tmp_path):
    d = {"inputs": {"x": {"channels": 3, "size": 8}}, "layers": [{"name": "r", "op": "relu"}]}
    registry.register("tiny_test_model", d)
    try:
        d["layers"][0]["op"] = "conv2d"            # later edits do not leak into the registry
        assert "tiny_test_model" in registry.list_models()
        assert {"resnet50", "resnet18", "bevdet_r50_encoder"} <= set(registry.list_models())
        assert load_graph("tiny_test_model").node("r").op == "relu"
        data, source, base = registry.resolve("tiny_test_model")
        assert data["layers"][0]["name"] == "r" and source == "tiny_test_model"
    finally:
        registry.unregister("tiny_test_model")
    assert "tiny_test_model" not in registry.list_models()
    data, source, base = registry.resolve("resnet50")
    assert source == "ttmodels/configs/resnet50.yaml" and base.name == "configs"
    p = tmp_path / "m.yaml"
    p.write_text("inputs: {x: {channels: 3, size: 8}}\nlayers: [{name: r, op: relu}]\n")
    registry.register("from_path_test", p)
    try:
        assert load_graph("from_path_test").outputs == ["r"]
    finally:
        registry.unregister("from_path_test")
    import ttmodels
    assert ttmodels.load_graph("resnet18").name == "resnet18"


# ---------------------------------------------------------------------------------------------
# the expression evaluator
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("planes * 4", 256), ("planes // 3 + 1", 22), ("2 ** 10", 1024), ("-planes % 5", 1),
    ("'downsample.0' if ds else 'x'", "x"), ("ds or planes > 32", True),
    ("not ds and planes == 64", True), ("1 < planes <= 64", True), ("'a' + 'b'", "ab"),
    ("[1, planes]", [1, 64]), ("planes in [32, 64]", True), ("None", None), ("7 / 2", 3.5)])
def test_expressions(text, want):
    assert expr.evaluate(text, {"planes": 64, "ds": False}) == want


@pytest.mark.parametrize("text", [
    "__import__('os')", "planes.bit_length()", "[x for x in []]", "lambda: 1", "planes[0]",
    "open('f')", "{'a': 1}", "f'{planes}'", "2 ** 1000", "'a' * 10", "1 / 0", "unknown + 1",
    "(1).__class__", "planes if", "9 ** 9 ** 9"])
def test_expressions_rejected(text):
    with pytest.raises(expr.ExprError):
        expr.evaluate(text, {"planes": [64]})


def test_substitute_keeps_type_or_formats():
    assert expr.substitute("${a * 2}", {"a": 3}) == 6
    assert expr.substitute("layer${a}.${'x' if b else 'y'}", {"a": 3, "b": True}) == "layer3.x"
    assert expr.substitute("${b}", {"b": False}) is False
    assert expr.substitute("no placeholders", {}) == "no placeholders"


def test_resnet50_graph_computes_torchvision_forward(tv_resnet50):
    """The graph's wiring (residuals, downsample placement, strides) is torchvision's: the float
    reference runner on the graph reproduces torchvision's logits with the same weights."""
    import torch
    from ttmodels.weights.reference import ReferenceModel
    torch.manual_seed(0)
    sd = {k: v.clone() for k, v in tv_resnet50.state_dict().items()}
    for k in sd:   # non-trivial BN statistics so a mis-wired BN would show
        if k.endswith("running_mean"):
            sd[k] = torch.randn_like(sd[k]) * 0.1
        elif k.endswith("running_var"):
            sd[k] = torch.rand_like(sd[k]) + 0.5
    tv_resnet50.load_state_dict(sd)
    x = torch.randn(2, 3, 96, 64)
    g = load_graph("resnet50", batch_size=2, input_size=(96, 64))
    got = ReferenceModel(g, sd).run(x)["logits"].flatten(1)
    with torch.no_grad():
        want = tv_resnet50(x)
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-3), (got - want).abs().max()


def test_extends_a_file_by_path_overrides_keys(tmp_path):
    (tmp_path / "base.yaml").write_text(spec("""\
        imports: [ttmodels/common]
        params: {w: 8}
        inputs: {x: {channels: 3, size: 16}}
        profiles: {fast: {activations: bfloat8_b}}
        layers:
          - {name: a, block: conv_bn_act, out: "${w}", padding: 1}
          - {name: b, op: relu}
        """))
    (tmp_path / "child.yaml").write_text(spec("""\
        extends: base.yaml
        params: {w: 4}
        profiles: {slow: {math_fidelity: HiFi4}}
        outputs: [a, b]
        """))
    g = load_graph(tmp_path / "child.yaml", profile="slow")
    assert g.shape_of("a.conv").c == 4 and g.outputs == ["a.conv", "b"]
    assert g.node("b").precision.math_fidelity == "HiFi4"
    assert load_graph(tmp_path / "child.yaml", profile="fast").node("b").precision.activations \
        == "bfloat8_b"
