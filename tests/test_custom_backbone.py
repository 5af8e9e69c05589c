"""Custom backbones from user code (docs/custom_backbones.md): a user's spec files outside the
package importing library blocks and each other, registration, the CLI on user files, weights from
the user's own nn.Module through ``key_map``, and PCC on sim against an equivalent torch module."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ttmodels
from ttmodels.language import registry
from ttmodels.errors import SpecError, WeightsError

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "my_backbone"
sys.path.insert(0, str(EXAMPLE))
from torch_model import KEY_MAP as PREFIX_MAP  # noqa: E402  (the user's module and its key_map)
from torch_model import my_backbone as torch_backbone  # noqa: E402
from torch_model import user_key  # noqa: E402

from ttmodels.weights.reference import pcc  # noqa: E402
SIZE = (64, 64)          # p4 is 4x4, p5 2x2: the FPN's upsample + add still sees a real 2x grid
PCC_MIN = 0.99

# The example as a Python dict (the doc shows the same): library blocks by import, fpn2 inline.
FPN2 = {
    "params": {"out": 128},
    "inputs": ["c4", "c5"],
    "layers": [
        {"name": "lateral_convs.1", "block": "conv_bn_act", "in": "c5", "out": "${out}",
         "kernel": 1, "norm": False, "bias": True, "act": None},
        {"name": "top_down", "block": "fpn_lateral_merge", "scope": "",
         "in": ["c4", "lateral_convs.1"], "out": "${out}", "index": 0},
        {"name": "fpn_convs.0", "block": "conv_bn_act", "in": "top_down", "out": "${out}",
         "kernel": 3, "padding": 1, "norm": False, "bias": True, "act": None},
        {"name": "fpn_convs.1", "block": "conv_bn_act", "in": "lateral_convs.1", "out": "${out}",
         "kernel": 3, "padding": 1, "norm": False, "bias": True, "act": None},
    ],
    "outputs": {"p4": "fpn_convs.0", "p5": "fpn_convs.1"},
}
EXAMPLE_DICT = {
    "name": "my_backbone",
    "imports": ["ttmodels/resnet", "ttmodels/fpn"],
    "params": {"fpn_channels": 128},
    "inputs": {"image": {"channels": 3, "size": [224, 224], "divisible_by": 32}},
    "blocks": {"fpn2": FPN2},
    "layers": [
        {"name": "conv1", "op": "conv2d", "out": 64, "kernel": 7, "stride": 2, "padding": 3,
         "bn": "bn1", "act": "relu"},
        {"name": "maxpool", "op": "max_pool2d", "kernel": 3, "stride": 2, "padding": 1},
        {"name": "layer1", "block": "basic_block", "planes": 64, "repeat": 2},
        *[{"name": f"layer{i}", "block": "basic_block", "planes": p, "repeat": 2,
           "first": {"stride": 2, "downsample": True}}
          for i, p in ((2, 128), (3, 256), (4, 512))],
        {"name": "neck", "block": "fpn2", "in": ["layer3", "layer4"], "out": "${fpn_channels}"},
    ],
    "outputs": {"p4": "neck.p4", "p5": "neck.p5"},
}

def callable_map(user_key: str) -> str | None:
    m = re.fullmatch(r"fpn\.(inner|layer)_blocks\.(\d)\.(.*)", user_key)
    if m:
        kind = "lateral_convs" if m[1] == "inner" else "fpn_convs"
        return f"neck.{kind}.{m[2]}.conv.{m[3]}"
    if user_key.startswith("body."):
        return user_key[len("body."):]
    return None


@pytest.fixture(scope="module")
def user_module():
    """The torch module holding seeded, BatchNorm-calibrated random weights (no trained
    checkpoint offline) under the user's own key names."""
    from ttmodels.weights import random_state_dict
    graph = ttmodels.load_graph(EXAMPLE / "backbone.yaml", input_size=SIZE)
    sd = random_state_dict(graph, seed=0)
    module = torch_backbone()
    missing, unexpected = module.load_state_dict({user_key(k): v for k, v in sd.items()},
                                                 strict=False)
    assert not unexpected and all(k.endswith("num_batches_tracked") for k in missing)
    return module


@pytest.fixture()
def user_dir(tmp_path):
    """The example copied outside the package: nothing may depend on where it lives."""
    d = tmp_path / "somewhere" / "my_backbone"
    shutil.copytree(EXAMPLE, d)
    return d


def _check_pcc(model, module):
    import torch
    x = torch.randn(1, 3, *SIZE, generator=torch.Generator().manual_seed(1))
    got = model.run(x)
    with torch.no_grad():
        ref = module(x)
    assert list(got) == ["p4", "p5"]
    for name in ("p4", "p5"):
        assert got[name].shape == ref[name].shape, name
        value = pcc(got[name], ref[name])
        assert value >= PCC_MIN, f"{name}: PCC {value:.5f} < {PCC_MIN}"


def _signature(graph):
    return [(n.name, n.op, tuple(n.inputs), n.attrs, n.shape, n.weights, n.bn, n.precision,
             n.layout) for n in graph.nodes]


# ---------------------------------------------------------------------------------------------
# the example: file outside the package and dict, PCC against torch
# ---------------------------------------------------------------------------------------------

def test_example_file_outside_package_matches_torch(user_dir, user_module):
    model = ttmodels.build(user_dir / "backbone.yaml", weights=user_module, key_map=PREFIX_MAP,
                           backend="sim", input_size=SIZE, cache=False)
    assert model.graph.source == str(user_dir / "backbone.yaml")
    assert model.graph.shape_of("p4").c == 128 and model.graph.shape_of("p5").h == SIZE[0] // 32
    _check_pcc(model, user_module)


def test_example_dict_is_the_same_graph_and_matches_torch(user_dir, user_module):
    from_file = ttmodels.load_graph(str(user_dir / "backbone.yaml"), input_size=SIZE)
    from_dict = ttmodels.load_graph(EXAMPLE_DICT, input_size=SIZE)
    assert _signature(from_dict) == _signature(from_file)
    assert from_dict.outputs == from_file.outputs == ["p4", "p5"]
    model = ttmodels.build(EXAMPLE_DICT, weights=user_module.state_dict(), key_map=callable_map,
                           backend="sim", input_size=SIZE, cache=False)
    _check_pcc(model, user_module)


def test_shipped_example_matches_python_dict():
    # The doc shows both; they must not drift apart.
    assert _signature(ttmodels.load_graph(EXAMPLE / "backbone.yaml")) == \
        _signature(ttmodels.load_graph(EXAMPLE_DICT))


# ---------------------------------------------------------------------------------------------
# key_map: the three forms, and one error listing what does not fit
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["exact", "prefix", "callable"])
def test_key_map_forms(form, user_module):
    from ttmodels.weights import load_state_dict
    graph = ttmodels.load_graph(EXAMPLE / "backbone.yaml", input_size=SIZE)
    usd = user_module.state_dict()
    spec_keys = list(graph_keys(graph))
    key_map = {"exact": {k: user_key(k) for k in spec_keys},   # {spec_key: user_key}
               "prefix": PREFIX_MAP, "callable": callable_map}[form]
    sd = load_state_dict(user_module, graph, key_map=key_map, strict=False)
    assert sorted(sd) == sorted(spec_keys)
    for k in spec_keys:
        assert sd[k].data_ptr() != usd[user_key(k)].data_ptr()      # a copy ...
        assert bool((sd[k] == usd[user_key(k)].float()).all()), k     # ... of the right tensor


def graph_keys(graph):
    from ttmodels.weights.reference import expected_parameters
    return expected_parameters(graph)


def test_unmapped_keys_are_one_weights_error(user_module):
    from ttmodels.weights import load_state_dict
    graph = ttmodels.load_graph(EXAMPLE / "backbone.yaml", input_size=SIZE)
    partial = {k: v for k, v in PREFIX_MAP.items() if not k.startswith("fpn.layer_blocks")}
    # load_state_dict is strict: the user keys no entry renamed are listed, with the spec keys
    # they leave missing, in one error.
    with pytest.raises(WeightsError) as ei:
        load_state_dict(user_module, graph, key_map=partial)
    e = ei.value
    assert sorted(e.missing) == sorted(f"neck.fpn_convs.{i}.conv.{p}" for i in (0, 1)
                                       for p in ("weight", "bias"))
    assert sorted(e.unexpected) == sorted(f"fpn.layer_blocks.{i}.{p}" for i in (0, 1)
                                          for p in ("weight", "bias"))
    assert "key_map" in str(e) and "neck.fpn_convs.1.conv.bias" in str(e)
    # build ignores keys outside the spec's top-level names (a whole checkpoint may be passed),
    # so there the error lists the missing spec keys.
    with pytest.raises(WeightsError, match=r"4 missing") as ei:
        ttmodels.build(EXAMPLE / "backbone.yaml", weights=user_module, key_map=partial,
                       backend="sim", input_size=SIZE, cache=False)
    assert "neck.fpn_convs.0.conv.weight" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# user files: errors name the user's file and line; imports, cycles, missing files
# ---------------------------------------------------------------------------------------------

def test_error_names_user_file_and_line(user_dir):
    spec = user_dir / "backbone.yaml"
    text = spec.read_text()
    assert "planes: 256" in text
    spec.write_text(text.replace("planes: 256", "planes: 256, strde: 2"))
    line = next(i for i, ln in enumerate(spec.read_text().splitlines(), 1) if "strde" in ln)
    with pytest.raises(SpecError, match=r"unknown field 'strde'.*did you mean 'stride'") as ei:
        ttmodels.load_graph(spec)
    assert ei.value.file == str(spec) and ei.value.line == line
    assert str(ei.value).startswith(f"{spec}:{line}, layer 'layer3'")


def test_error_in_user_block_file_names_both_files(user_dir):
    blocks = user_dir / "blocks.yaml"
    text = blocks.read_text()
    assert "in: top_down," in text
    blocks.write_text(text.replace("in: top_down,", "in: top_dwn,"))
    line = next(i for i, ln in enumerate(blocks.read_text().splitlines(), 1) if "top_dwn" in ln)
    spec_line = next(i for i, ln in enumerate((user_dir / "backbone.yaml").read_text()
                                               .splitlines(), 1) if "block: fpn2" in ln)
    with pytest.raises(SpecError, match=r"top_dwn.*did you mean 'top_down'") as ei:
        ttmodels.load_graph(user_dir / "backbone.yaml")
    e = ei.value
    assert e.file == str(blocks) and e.line == line and e.layer == "neck.fpn_convs.0"
    # ... and the instance that used the block, in the spec file
    assert f"an instance of block 'fpn2' at {user_dir / 'backbone.yaml'}:{spec_line}" in str(e)


def test_user_files_import_each_other_by_relative_path(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "stem.yaml").write_text(
        "imports: [ttmodels/common, more/act.yaml]\n"
        "blocks:\n"
        "  stem:\n"
        "    params: {out: 8}\n"
        "    layers:\n"
        "      - {name: c, block: conv_bn_act, out: \"${out}\", padding: 1}\n"
        "      - {name: a, block: act}\n")
    (lib / "more").mkdir()
    (lib / "more" / "act.yaml").write_text("blocks:\n  act:\n    layers: [{name: r, op: relu}]\n")
    (tmp_path / "net.yaml").write_text(
        "imports: [lib/stem.yaml]\n"
        "inputs: {image: {channels: 3, size: 32}}\n"
        "layers: [{name: s, block: stem, out: 4}]\n")
    g = ttmodels.load_graph(tmp_path / "net.yaml")
    assert [n.name for n in g.nodes] == ["s.c.conv", "s.a.r"]
    assert g.shape_of("s.a.r").c == 4


def test_cycle_between_user_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text(
        "inputs: {image: {channels: 3, size: 32}}\n"
        "imports: [sub/b.yaml]\n"
        "layers: [{name: r, op: relu}]\n")
    (tmp_path / "sub" / "b.yaml").write_text("blocks: {}\nimports:\n  - ../a.yaml\n")
    with pytest.raises(SpecError, match=r"import cycle") as ei:
        ttmodels.load_graph(tmp_path / "a.yaml")
    e = ei.value
    assert e.file.endswith("b.yaml") and e.line == 3
    assert "a.yaml" in str(e) and "b.yaml" in str(e)


def test_missing_user_file(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "inputs: {image: {channels: 3, size: 32}}\n"
        "imports:\n"
        "  - ttmodels/resnet\n"
        "  - blocks/mine.yaml\n"
        "layers: [{name: r, op: relu}]\n")
    with pytest.raises(SpecError, match=r"mine.yaml' does not exist") as ei:
        ttmodels.load_graph(tmp_path / "a.yaml")
    assert ei.value.file == str(tmp_path / "a.yaml") and ei.value.line == 4


# ---------------------------------------------------------------------------------------------
# library blocks: by import and by ttmodels/<file>/<block>
# ---------------------------------------------------------------------------------------------

TRUNK18 = {"unit": "basic_block", "expansion": 1, "depth1": 2, "depth2": 2, "depth3": 2,
           "depth4": 2}
INPUTS = {"image": {"channels": 3, "size": 64}}


def test_spec_importing_a_library_block():
    g = ttmodels.load_graph({"imports": ["ttmodels/resnet"], "inputs": INPUTS, "layers": [
        {"name": "trunk", "block": "resnet_trunk", "scope": "", **TRUNK18}],
        "outputs": {"c4": "trunk.c4", "c5": "trunk.c5"}})
    resnet18 = ttmodels.load_graph({"extends": "resnet18", "inputs": INPUTS})
    trunk = [n.name for n in resnet18.nodes if n.op not in ("global_avg_pool", "linear")]
    assert [n.name for n in g.nodes if n.name not in ("c4", "c5")] == \
        [t for t in trunk if t not in ("layer3.1.relu", "layer4.1.relu")]
    assert g.shape_of("c5").c == 512 and g.shape_of("c4").h == 4


def test_qualified_library_block_without_import():
    by_import = ttmodels.load_graph({"imports": ["ttmodels/resnet"], "inputs": INPUTS, "layers": [
        {"name": "trunk", "block": "resnet_trunk", **TRUNK18}]})
    qualified = ttmodels.load_graph({"inputs": INPUTS, "layers": [
        {"name": "trunk", "block": "ttmodels/resnet/resnet_trunk",
         **dict(TRUNK18, unit="ttmodels/resnet/basic_block")}]})
    assert _signature(qualified) == _signature(by_import)


def test_qualified_library_block_ignores_user_blocks_of_the_same_name():
    # A user block named like a library one may wrap it; inside the library block, names mean
    # the library file's blocks (its conv_bn_act, not the user's).
    spec = {"inputs": INPUTS, "blocks": {
        "basic_block": {"params": {"planes": "required"}, "layers": [
            {"name": "inner", "block": "ttmodels/resnet/basic_block", "planes": "${planes}"}]},
        "conv_bn_act": {"layers": [{"name": "hijacked", "op": "relu"}]}},
        "layers": [
            {"name": "b", "block": "basic_block", "planes": 3},
            {"name": "c", "op": "conv2d", "out": 8, "kernel": 3, "stride": 2, "padding": 1},
            {"name": "neck", "block": "ttmodels/fpn/custom_fpn2", "in": ["b", "c"], "out": 16}]}
    names = [n.name for n in ttmodels.load_graph(spec).nodes]
    assert names[:3] == ["b.inner.conv1", "b.inner.conv2", "b.inner.relu"]
    assert "neck.fpn_convs.0.conv" in names and not any("hijacked" in n for n in names)


@pytest.mark.parametrize("block,match", [
    ("ttmodels/resnet/basic_blok", r"unknown block 'basic_blok' in 'ttmodels/resnet' "
                                   r"\(did you mean 'basic_block'\?\)"),
    ("ttmodels/resnt/basic_block", r"unknown block file 'ttmodels/resnt'.*did you mean "
                                   r"'ttmodels/resnet'"),
])
def test_qualified_block_errors_name_file_and_line(tmp_path, block, match):
    p = tmp_path / "net.yaml"
    p.write_text("inputs: {image: {channels: 3, size: 32}}\nlayers:\n"
                 f"  - {{name: a, block: {block}, planes: 8}}\n")
    with pytest.raises(SpecError, match=match) as ei:
        ttmodels.load_graph(p)
    assert ei.value.file == str(p) and ei.value.line == 3 and ei.value.layer == "a"


# ---------------------------------------------------------------------------------------------
# registration, discovery, CLI
# ---------------------------------------------------------------------------------------------

def test_register_path_text_and_dict(user_dir):
    names = {"cb_test_path": user_dir / "backbone.yaml",
             "cb_test_str": str(user_dir / "backbone.yaml"),
             "cb_test_text": (user_dir / "blocks.yaml").read_text().replace(
                 "imports: [ttmodels/fpn]", "imports: [ttmodels/fpn, ttmodels/resnet]")
             + "\n" + (user_dir / "backbone.yaml").read_text().split("blocks.yaml", 1)[1]
             .split("\n", 1)[1],
             "cb_test_dict": EXAMPLE_DICT}
    try:
        for name, spec in names.items():
            ttmodels.register(name, spec)
        assert set(names) <= set(ttmodels.list_models())
        expected = _signature(ttmodels.load_graph(EXAMPLE_DICT, input_size=SIZE))
        for name in names:
            plan = ttmodels.plan(name, input_size=SIZE)
            assert _signature(plan.graph) == expected, name
    finally:
        for name in names:
            registry.unregister(name)
    assert not set(names) & set(ttmodels.list_models())


def test_cli_validate_and_plan_user_file(user_dir, capsys):
    from ttmodels.tools.cli import main
    spec = str(user_dir / "backbone.yaml")
    assert main(["validate", spec, "--input-size", *map(str, SIZE)]) == 0
    assert "valid (35 layers, outputs: p4, p5)" in capsys.readouterr().out
    assert main(["plan", spec, "--input-size", *map(str, SIZE), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"p4"' in out and "neck.lateral_convs.0.conv" in out
    (user_dir / "blocks.yaml").write_text((user_dir / "blocks.yaml").read_text()
                                          .replace("c4, c5", "c4, c4"))
    assert main(["validate", spec]) == 2
    assert re.search(r"blocks\.yaml:\d+.*duplicate input name", capsys.readouterr().err)


def test_cli_compare_user_file(tmp_path, capsys):
    from ttmodels.tools.cli import main
    (tmp_path / "tiny.yaml").write_text(
        "imports: [ttmodels/resnet]\n"
        "inputs: {image: {channels: 3, size: 32}}\n"
        "layers:\n"
        "  - {name: stem, op: conv2d, out: 16, kernel: 3, stride: 2, padding: 1, bn: bn0,\n"
        "     act: relu}\n"
        "  - {name: b, block: basic_block, planes: 32, stride: 2, downsample: true}\n")
    assert main(["compare", str(tmp_path / "tiny.yaml")]) == 0
    out = capsys.readouterr().out
    assert "b.relu" in out and "all at or above threshold" in out


def test_console_script_from_a_scratch_directory(user_dir, tmp_path):
    exe = Path(sys.executable).with_name("ttmodels")
    if not exe.exists():
        pytest.skip("the ttmodels console script is not installed next to this python")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = subprocess.run([str(exe), "validate", str(user_dir / "backbone.yaml")], cwd=scratch,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "valid (35 layers, outputs: p4, p5)" in r.stdout


# ---------------------------------------------------------------------------------------------
# docs/custom_backbones.md stays true: its YAML is the example, its dict is EXAMPLE_DICT, its
# parameter table is the shipped blocks'
# ---------------------------------------------------------------------------------------------

DOC = REPO / "docs" / "custom_backbones.md"


def test_doc_shows_the_example_files_and_dict():
    text = DOC.read_text()
    yamls = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert yamls == [(EXAMPLE / "blocks.yaml").read_text(), (EXAMPLE / "backbone.yaml").read_text()]
    code = next(c for c in re.findall(r"```python\n(.*?)```", text, re.S) if "SPEC = {" in c)
    code = code.split("graph = ")[0]          # the dict only, no graph building
    ns: dict = {}
    exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - our own doc
    assert ns["SPEC"] == EXAMPLE_DICT


def test_doc_parameter_table_matches_shipped_blocks():
    import yaml
    shipped = {}
    for f in sorted((REPO / "ttmodels" / "blocks").glob("*.yaml")):
        for name, bd in yaml.safe_load(f.read_text())["blocks"].items():
            shipped[f"ttmodels/{f.stem}/{name}"] = {
                p: str(d).lower() if isinstance(d, bool) else str(d)
                for p, d in (bd.get("params") or {}).items()}
    documented: dict[str, dict[str, str]] = {}
    block = None
    for row in re.findall(r"^\| (`ttmodels/[^|]*`|) *\| `(\w+)` \| ([^|]+) \|", DOC.read_text(),
                          re.M):
        block = row[0].strip("`") or block
        documented.setdefault(block, {})[row[1]] = row[2].strip()
    assert documented == shipped
