"""Every defect of a spec is a SpecError naming the file, the line and the layer."""
from __future__ import annotations

import copy
import random
import time
from pathlib import Path

import pytest
import yaml

from ttmodels.errors import SpecError
from ttmodels.language.spec import load_graph

SPECS = Path(__file__).parent / "specs"
REPO = Path(__file__).resolve().parent.parent

BASE = """\
inputs:
  image: {channels: 3, size: [64, 64], divisible_by: 32}
layers:
  - {name: c1, op: conv2d, out: 16, kernel: 3, padding: 1, bn: bn1, act: relu}
  - {name: c2, op: conv2d, out: 32, kernel: 3, stride: 2, padding: 1}
"""
NEXT = BASE.count("\n") + 1     # line number of a layer appended to BASE


def fails(spec, match: str, **kw) -> SpecError:
    with pytest.raises(SpecError, match=match) as ei:
        load_graph(spec, **kw)
    return ei.value


@pytest.mark.parametrize("layer,match,layer_name", [
    ("{name: x, op: rleu}", r"unknown op 'rleu' \(did you mean 'relu'\?\)", "x"),
    ("{name: x, op: conv2d, out: 3, kernal: 3}", r"unknown field 'kernal'.*did you mean 'kernel'",
     "x"),
    ("{name: x, op: conv2d, out: three, kernel: 3}", r"'out' must be an integer, got str", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: [3, 3, 3]}", r"'kernel' must be an integer or a list",
     "x"),
    ("{name: x, op: relu, in: 5}", r"'in' must be a layer name or a list", "x"),
    ("{name: x, op: relu, in: [5]}", r"a layer reference must be a name", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 3, bias: yes please}", r"'bias' must be true or false",
     "x"),
    ("{op: relu}", r"layer has no 'name'", None),
    ("{name: c1, op: relu}", r"duplicate layer name 'c1' \(first defined at <string>:4\)", "c1"),
    ("{name: x, op: relu, in: c3}", r"unknown layer 'c3' \(did you mean 'c[12]'\?\)", "x"),
    ("{name: x, op: add, in: [c2, x]}", r"refers to itself \(cycle\)", "x"),
    ("{name: x, op: add, in: [c2, c1]}", r"channel mismatch: add of 'c2' \(32 channels\) and 'c1' "
     r"\(16 channels\)", "x"),
    ("{name: x, op: concat, in: [c2, c1]}", r"spatial mismatch: concat", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 0}", r"'kernel' must be >= 1, got 0", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 3, stride: 0}", r"'stride' must be >= 1", "x"),
    ("{name: x, op: max_pool2d, kernel: 2, stride: -1}", r"'stride' must be >= 1", "x"),
    ("{name: x, op: conv2d, out: 0, kernel: 1}", r"'out' must be >= 1", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 99}", r"does not fit", "x"),
    ("{name: x, op: max_pool2d, kernel: 3, padding: 2}", r"at most half the kernel", "x"),
    ("{name: x, op: relu, layout: hieght_sharded}", r"invalid layout 'hieght_sharded' \(did you "
     r"mean 'height_sharded'\?\)", "x"),
    ("{name: x, op: relu, layout: {kind: height_sharded, buffer: sram}}", r"invalid buffer 'sram'",
     "x"),
    ("{name: x, op: relu, precision: {activations: bfloat9}}", r"invalid dtype 'bfloat9'", "x"),
    ("{name: x, op: relu, precision: {weights: int8}}", r"invalid dtype 'int8'", "x"),
    ("{name: x, op: relu, precision: {math_fidelity: HiFi5}}", r"invalid math fidelity", "x"),
    ("{name: x, op: relu, precision: {accum: true}}", r"unknown precision field 'accum'", "x"),
    ("{name: x, op: relu, layout: block_sharded l1 9x8}", r"impossible shard grid 9x8", "x"),
    ("{name: x, op: relu, layout: {kind: block_sharded, grid: [0, 2]}}",
     r"impossible shard grid 0x2", "x"),
    ("{name: x, op: relu, layout: {kind: block_sharded, grid: [-1, 2]}}",
     r"impossible shard grid", "x"),
    ("{name: x, op: relu, layout: interleaved l1 4x4}", r"only applies to sharded layouts", "x"),
    ("{name: x, op: linear, out: 10, in_features: 16}", r"in_features is 16 but 'c2' has 32",
     "x"),
    ("{name: x, op: channel_shuffle, groups: 3}", r"'groups' 3 must divide the 32 channels", "x"),
    ("{name: x, op: permute, dims: [1, 0, 2, 3]}", r"keeps the batch first", "x"),
    ("{name: x, op: permute, dims: [0, 1, 2]}", r"'dims' must be a list of 4 integers", "x"),
    ("{name: x, op: reshape, shape: [32, 17, 16]}", r"must be positive and hold the 32768 values",
     "x"),
    ("{name: x, op: layer_scale, param_shape: cxhxw}", r"invalid param_shape 'cxhxw'", "x"),
    ("{name: x, op: layer_norm, eps: 0}", r"'eps' must be > 0", "x"),
    ("{name: x, op: upsample, scale: 2, size_of: c1}", r"exactly one of 'scale' or 'size_of'",
     "x"),
    ("{name: x, op: upsample, in: c1, size_of: c2}", r"spatial mismatch: cannot upsample 64x64",
     "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 3, act: swish}", r"invalid act 'swish'", "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 3, lowering: linear}", r"lowering: linear needs a 1x1",
     "x"),
    ("{name: x, op: conv2d, out: 8, kernel: 1, in_channels: 16}", r"channel mismatch: "
     r"in_channels is 16", "x"),
    ("{name: x, op: conv2d, out: 9, kernel: 1, groups: 2}", r"groups=2 must divide", "x"),
    ("{name: x, op: add}", r"add takes 2 inputs, got 1", "x"),
    ("{name: x, op: relu, in: [c1, c2]}", r"relu takes 1 input, got 2", "x"),
    ("{name: x, op: relu, repeat: 0}", r"'repeat' must be an integer", "x"),
    ("{name: x, op: relu, when: maybe}", r"'when' must be true or false", "x"),
    ("{name: x, op: relu, block: y}", r"either 'op' or 'block'", "x"),
    ("{name: x, block: bottlenek}", r"unknown block 'bottlenek'", "x"),
    ("{name: 'a b', op: relu}", r"invalid layer name", None),
    ("{name: x, op: conv2d, out: '${1 +}', kernel: 1}", r"invalid expression", "x"),
    ("{name: x, op: conv2d, out: '${planes}', kernel: 1}", r"unknown name 'planes'", "x"),
    ("{name: x, op: conv2d, out: '${open(1)}', kernel: 1}", r"Call is not allowed", "x"),
    ("relu", r"a layer must be a mapping", None),
])
def test_layer_errors_name_line_and_layer(layer, match, layer_name):
    e = fails(BASE + f"  - {layer}\n", match)
    assert (e.file, e.line, e.layer) == ("<string>", NEXT, layer_name)
    assert f"<string>:{NEXT}" in str(e)


def test_forward_reference_is_reported_as_later():
    e = fails(BASE + "  - {name: x, op: relu, in: y}\n  - {name: y, op: relu}\n", r"'y' is defined "
              r"later")
    assert e.line == NEXT and e.layer == "x"


def test_block_style_fields_point_at_their_own_line():
    text = BASE + "  - name: x\n    op: conv2d\n    out: 8\n    kernel: 3\n    stride: 0\n"
    e = fails(text, r"'stride' must be >= 1")
    assert e.line == NEXT + 4 and e.layer == "x"


def test_yaml_syntax_error_has_line():
    e = fails(BASE + "  - {name: x, op: relu\n  - {name: y, op: relu}\n", r"YAML syntax error")
    assert e.line in (NEXT, NEXT + 1) and e.file == "<string>"
    e = fails("inputs:\n  image: {channels: 3\n   size: [1, 2]\n", "YAML syntax error")
    assert e.line is not None
    e = fails(BASE + "  - {name: x, op: conv2d, out: ${a}, kernel: 1}\n", r"quote expressions")
    assert e.line == NEXT


def test_duplicate_yaml_key():
    e = fails(BASE + "  - {name: x, op: relu, op: add}\n", r"duplicate key 'op'")
    assert e.line == NEXT


def test_top_level_errors():
    e = fails("inputs: {image: {channels: 3, size: 32}}\nlayer: []\n", r"unknown field 'layer' "
              r"in the spec \(did you mean 'layers'\?\)")
    assert e.line == 2
    e = fails("inputs: {image: {channels: 3, size: 32}}\n", r"no 'layers:'")
    e = fails("layers: [{name: r, op: relu}]\n", r"no 'inputs:'")
    e = fails("inputs:\n  image: {channels: 3, size: [32, 0]}\nlayers: [{name: r, op: relu}]\n",
              r"'size' must be >= 1")
    assert e.line == 2 and e.layer == "image"
    e = fails("inputs:\n  image: {channels: 3, sise: 32}\nlayers: [{name: r, op: relu}]\n",
              r"unknown field 'sise'.*did you mean 'size'")
    assert e.line == 2
    fails("- 1\n- 2\n", r"must be a YAML mapping")
    fails(BASE + "outputs: [c3]\n", r"unknown layer 'c3'")
    fails(BASE + "outputs: {c1: c2}\n", r"already the name of another tensor")


def test_input_size_not_divisible():
    e = fails(BASE.replace("[64, 64]", "[64, 65]"), r"65 of 'image' is not divisible by 32")
    assert e.line == 2 and e.layer == "image"
    e = fails("resnet50", r"not divisible by 32", input_size=(225, 224))
    import ttmodels
    from pathlib import Path
    lines = (Path(ttmodels.__file__).parent / "configs" / "resnet50.yaml").read_text().splitlines()
    assert e.file == "ttmodels/configs/resnet50.yaml" and "image" in lines[e.line - 1]
    fails("resnet50", r"input_size must be", input_size=(224,))
    fails("resnet50", r"input_size must be", input_size=(224, -32))
    fails("resnet50", r"batch_size must be", batch_size=0)


def test_unknown_profile_and_model():
    e = fails("resnet50", r"unknown precision profile 'tt-pref'.*did you mean 'tt-perf'",
              profile="tt-pref")
    assert e.file == "ttmodels/configs/resnet50.yaml"
    fails("resnet5", r"unknown model 'resnet5' \(did you mean 'resnet50'\?\)")
    fails(BASE + "  - {name: x, op: relu, precision: fast}\n", r"unknown precision profile 'fast'")
    fails(12, r"a spec is a model name")


def test_constants_errors():
    head = "inputs: {x: {channels: 4, size: 8}}\nconstants:\n"
    e = fails(head + "  s: {shape: [4], value: [1, 2]}\nlayers: [{name: r, op: relu}]\n",
              r"has 2 numbers, shape \[4\] needs 4")
    assert e.line == 3 and e.layer == "s"
    fails(head + "  s: {shape: [4]}\nlayers: [{name: r, op: relu}]\n", r"exactly one of")
    fails(head + "  s: {shape: [0], value: 1}\nlayers: [{name: r, op: relu}]\n",
          r"positive integers")
    e = fails(head + "  s: {shape: [3], value: 1}\nlayers:\n  - {name: r, op: multiply, "
              "in: [x, s]}\n", r"does not broadcast")
    assert e.line == 5
    fails(head + "  s: {shape: [4], value: 1}\nlayers:\n  - {name: r, op: relu, in: s}\n",
          r"constant 's' cannot be an input of relu")
    fails(head + "  x: {shape: [4], value: 1}\nlayers:\n  - {name: r, op: relu}\n",
          r"duplicate name 'x'")


def test_import_cycle_names_both_files_and_line():
    e = fails(SPECS / "cycle_a.yaml", r"import cycle")
    assert e.file.endswith("cycle_b.yaml") and e.line == 3
    assert "cycle_a.yaml" in str(e) and "cycle_b.yaml" in str(e)


def test_missing_import_names_importer_and_line():
    e = fails(SPECS / "missing_import.yaml", r"does_not_exist.yaml' does not exist")
    assert e.file.endswith("missing_import.yaml") and e.line == 5
    fails(str(SPECS / "nope.yaml"), r"does not exist")


def test_error_inside_block_names_instance_and_block_line():
    e = fails(SPECS / "uses_broken.yaml", r"channel mismatch")
    assert e.file.endswith("lib/my_blocks.yaml") and e.line == 13
    assert e.layer == "bad.b"
    assert "instance of block 'broken'" in str(e) and "uses_broken.yaml:6" in str(e)


def test_block_instance_errors():
    blocks = """\
inputs: {x: {channels: 4, size: 8}}
blocks:
  b:
    params: {n: required, k: 3}
    layers:
      - {name: c, op: conv2d, out: "${n}", kernel: "${k}", padding: 1}
  loop:
    layers:
      - {name: again, block: loop}
layers:
"""
    line = blocks.count("\n") + 1
    e = fails(blocks + "  - {name: i, block: b}\n", r"block 'b' needs parameter 'n'")
    assert e.line == line and e.layer == "i"
    e = fails(blocks + "  - {name: i, block: b, m: 3}\n", r"unknown field 'm'")
    assert e.line == line
    e = fails(blocks + "  - {name: i, block: b, n: 4, k: 0}\n", r"'kernel' must be >= 1")
    assert e.line == 6 and e.layer == "i.c" and f"<string>:{line}" in str(e)
    e = fails(blocks + "  - {name: i, block: loop}\n", r"instantiates itself")
    assert e.line == 9
    e = fails(blocks + "  - {name: i, block: b, n: 4, in: [x, x]}\n", r"takes 1 input")
    assert e.line == line
    e = fails(blocks + "  - {name: i, block: b, n: 4, repeat: 2, first: {name: j}}\n",
              r"'first' cannot override 'name'")
    # at the top level every full name is visible; inside a block only its own names are
    ok = load_graph(blocks + "  - {name: i, block: b, n: 4}\n  - {name: j, op: relu, in: i.c}\n")
    assert ok.node("j").inputs == ["i.c"]
    inner = blocks.replace("  loop:", "  peek:\n    layers:\n      - {name: p, op: relu, in: i.c}\n"
                           "  loop:")
    e = fails(inner + "  - {name: i, block: b, n: 4}\n  - {name: j, block: peek}\n",
              r"unknown layer 'i.c'")
    assert e.line == 9 and e.layer == "j.p"


def test_when_skipped_layer_reference():
    text = """\
inputs: {x: {channels: 4, size: 8}}
blocks:
  b:
    params: {enabled: false}
    layers:
      - {name: opt, op: relu, when: "${enabled}"}
      - {name: use, op: relu, in: opt}
layers:
  - {name: i, block: b}
"""
    e = fails(text, r"'opt' is switched off by its 'when:'")
    assert e.line == 7 and e.layer == "i.use"


def test_alias_bomb_fails_fast():
    t = time.perf_counter()
    e = fails(SPECS / "bomb.yaml", r"expands to more than")
    assert time.perf_counter() - t < 10
    assert e.file.endswith("bomb.yaml") and e.line is not None
    fails("a: &r [*r]\n", r"nesting deeper")


def test_bad_tags_and_keys():
    fails("inputs: !!python/object:os.system {}\n", r"unsupported YAML tag")
    fails("? [1, 2]\n: 3\n", r"mapping keys must be plain scalars")
    fails({"inputs": {1: 2}}, r"mapping key 1 is not a string")
    d = {"layers": []}
    d["layers"].append(d)
    fails(d, r"reference cycle")
    fails({"inputs": {"x": {"channels": 3, "size": 8}}, "layers": [object()]},
          r"unsupported value")


def test_dict_input_not_mutated_on_error_or_success():
    d = {"inputs": {"image": {"channels": 3, "size": [32, 32]}},
         "blocks": {"b": {"params": {"n": 8}, "layers": [
             {"name": "c", "op": "conv2d", "out": "${n}", "kernel": 3}]}},
         "layers": [{"name": "i", "block": "b", "repeat": 2, "first": {"n": 4}},
                    {"name": "j", "op": "add", "in": ["i", "i.0"]}]}
    before = copy.deepcopy(d)
    fails(d, r"channel mismatch")
    assert d == before
    d["layers"][1]["in"] = ["i", "i.1"]
    before = copy.deepcopy(d)
    load_graph(d)
    assert d == before


# ---------------------------------------------------------------------------------------------
# fuzz: mangled shipped specs never raise anything but a SpecError, and never an internal one
# ---------------------------------------------------------------------------------------------

_VALUES = [None, 0, -1, 1, 2, 3.5, True, "", "x", "${", "${planes}", "${1/0}", [], [1],
           [1, 2, 3], {}, {"a": 1}, "relu", "layer1", "auto", "l1", [0, 0], 10 ** 9]


def _paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


def _check(spec):
    try:
        load_graph(spec)
    except SpecError as e:
        assert "internal error" not in str(e), str(e)


def test_fuzz_text_mutations():
    rng = random.Random(1234)
    base = (REPO / "ttmodels/configs/bevdet_r50_encoder.yaml").read_text()
    for _ in range(120):
        t = list(base)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(t))
            r = rng.random()
            if r < .4:
                del t[i]
            elif r < .8:
                t.insert(i, rng.choice("{}[]:,-#&*'\"\n 0a$"))
            else:
                t[i] = rng.choice("xyz019")
        _check("".join(t))


def test_fuzz_value_mutations():
    rng = random.Random(99)
    blocks = {}
    for f in ("resnet", "fpn", "common"):
        blocks.update(yaml.safe_load((REPO / f"ttmodels/blocks/{f}.yaml").read_text())["blocks"])
    d0 = yaml.safe_load((REPO / "ttmodels/configs/bevdet_r50_encoder.yaml").read_text())
    d0.pop("imports")
    d0["blocks"] = blocks
    paths = list(_paths(d0))[1:]
    for _ in range(120):
        d = copy.deepcopy(d0)
        for _ in range(rng.randint(1, 2)):
            p = rng.choice(paths)
            o = d
            try:
                for k in p[:-1]:
                    o = o[k]
                if rng.random() < 0.2 and isinstance(o, dict):
                    o.pop(p[-1], None)
                else:
                    o[p[-1]] = copy.deepcopy(rng.choice(_VALUES))
            except (KeyError, IndexError, TypeError):
                pass
        _check(d)


def test_extends_cycle_and_missing_base(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\ninputs: {x: {channels: 3, size: 8}}\n"
                                     "layers: [{name: r, op: relu}]\n")
    e = fails(tmp_path / "a.yaml", r"'extends' cycle")
    assert e.file.endswith("b.yaml") and e.line == 1 and "a.yaml" in str(e)
    (tmp_path / "c.yaml").write_text("inputs: {x: {channels: 3, size: 8}}\n\nextends: gone.yaml\n")
    e = fails(tmp_path / "c.yaml", r"gone.yaml' does not exist")
    assert e.file.endswith("c.yaml") and e.line == 3
