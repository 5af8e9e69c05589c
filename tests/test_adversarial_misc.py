"""Issue 35, items 7 and 16-22: key maps, ignore=, demos' arguments, hardtanh bounds, huge
integers, meta/complex inputs and compare on inputs that are not RGB."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttmodels.errors import Error, SpecError, WeightsError
from ttmodels.language.spec import load_graph

REPO = Path(__file__).resolve().parent.parent

_TINY = """name: tiny
inputs: {x: {channels: 3, size: [16, 16]}}
layers:
  - {name: conv1, op: conv2d, out: 16, kernel: 3, padding: 1, bn: bn1, act: relu}
  - {name: pool, op: global_avg_pool}
  - {name: fc, op: linear, out: 4}
outputs: {y: fc}
"""


@pytest.fixture
def tiny_spec(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text(_TINY)
    return f


def _cli(argv, capsys):
    from ttmodels.tools.cli import main
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---- item 7: the key-map reader has the spec reader's guards ---------------------------------
def _alias_bomb() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_key_map_alias_bomb_is_refused_at_once(tiny_spec, tmp_path, capsys, monkeypatch):
    from ttmodels.tools import compare
    bomb = tmp_path / "bomb.map"
    bomb.write_text(_alias_bomb())
    assert len(bomb.read_bytes()) < 800
    with pytest.raises(Error, match=r"bomb.map:\d+: YAML document expands to more than"):
        compare.read_key_map(bomb)
    monkeypatch.setattr(compare, "compare_layers",
                        lambda *a, **k: pytest.fail("compared with an alias-bomb key map"))
    rc, _, err = _cli(["compare", str(tiny_spec), "--key-map", str(bomb)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "alias bomb" in err, err


def test_key_map_file_size_is_limited(tmp_path, monkeypatch):
    from ttmodels.language import _yaml, registry
    from ttmodels.tools import compare
    monkeypatch.setattr(_yaml, "MAX_TEXT", 100)
    monkeypatch.setattr(registry, "MAX_TEXT", 100)
    big = tmp_path / "big.map"
    big.write_text("".join(f"k{i}.: s{i}.\n" for i in range(100)))
    with pytest.raises(Error, match="larger than 100 characters"):
        compare.read_key_map(big)


# ---- item 16: the demos' --out and --weights are checked before anything runs -----------------
def _demo(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"demo_{name}", REPO / "demos" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("out", ["dir", "dir.png", "missing/x.png", "/proc/self/x.png"])
def test_detect_demo_out_is_checked_before_running(out, tmp_path, capsys, monkeypatch):
    mod = _demo("detect")
    import ttmodels.tools.runs as runs
    monkeypatch.setattr(runs, "build_and_run", lambda *a, **k: pytest.fail("ran before --out"))
    (tmp_path / "dir.png").mkdir()
    target = {"dir": str(tmp_path), "dir.png": str(tmp_path / "dir.png"),
              "missing/x.png": str(tmp_path / "missing" / "x.png")}.get(out, out)
    assert mod.main(["--out", target, "--size", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {target}: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("demo", ["detect", "resnet50", "bevdet_encoder"])
@pytest.mark.parametrize("value", ["", "  "])
def test_demo_refuses_empty_weights(demo, value, capsys, monkeypatch, tmp_path):
    import ttmodels
    import ttmodels.tools.runs as runs
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ttmodels, "build", lambda *a, **k: pytest.fail("built with --weights ''"))
    monkeypatch.setattr(runs, "build_and_run", lambda *a, **k: pytest.fail("ran --weights ''"))
    mod = _demo(demo)
    argv = ["--weights", value] + (["--backend", "sim"] if demo != "detect" else ["--size", "64"])
    assert mod.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: --weights {value!r}: empty; name the weights (see --help) or leave " \
                  "--weights out for the default\n", err


# ---- item 17: ignore= of the wrong type is a WeightsError naming it ---------------------------
def _tiny_weights():
    import torch

    from ttmodels.weights.reference import expected_parameters
    g = load_graph(_TINY)
    return g, {k: torch.rand(tuple(s)) + 0.5 for k, s in expected_parameters(g).items()}


@pytest.mark.parametrize("ignore,what", [(5, "got int 5"), ([None], "got NoneType None in [None]"),
                                         (b"x", "got bytes b'x'"), (["fc.", 3], "got int 3"),
                                         ({"a": 1}, "got dict"), ([""], "got str ''")])
@pytest.mark.parametrize("weights", ["dict", "random"])
def test_ignore_of_the_wrong_type_is_a_weights_error(ignore, what, weights, tmp_path):
    import ttmodels
    from ttmodels.weights import load_state_dict
    from ttmodels.weights.cache import cached_prepare
    g, sd = _tiny_weights()
    w = sd if weights == "dict" else "random"
    for call in (lambda: load_state_dict(w, g, ignore=ignore),
                 lambda: cached_prepare(g, w, cache=tmp_path / "cache", ignore=ignore),
                 lambda: ttmodels.build(_TINY, weights=w, ignore=ignore, backend="sim")):
        with pytest.raises(WeightsError, match=r"^ignore= takes (a )?key prefix") as e:
            call()
        assert what in str(e.value), str(e.value)


# ---- item 18: each dropped key its own reason; hints name flags that exist; duplicate keys --------
def test_each_dropped_key_gets_its_own_reason():
    import torch

    from ttmodels.weights import load_state_dict
    g, sd = _tiny_weights()
    sd["aux.w"] = torch.zeros(1)
    with pytest.raises(WeightsError) as e:
        load_state_dict(sd, g, key_map={"conv1.weight": None}, ignore=["fc.", "aux."])
    lines = str(e.value).splitlines()
    assert lines[1] == ("  missing (3): conv1.weight (dropped by key_map), fc.weight (under "
                        "ignore= fc.), fc.bias (under ignore= fc.)"), lines
    assert lines[2:] == ["  ignored, dropped by key_map (1): conv1.weight",
                         "  ignored, under ignore= fc. (2): fc.weight, fc.bias",
                         "  ignored, under ignore= aux. (1): aux.w"], lines


def test_ignore_hint_names_the_command_that_has_the_flag():
    import torch

    from ttmodels.weights import load_state_dict
    g, sd = _tiny_weights()
    sd["head.dfl.conv.weight"] = torch.zeros(1)
    with pytest.raises(WeightsError) as e:
        load_state_dict(sd, g)
    hint = str(e.value).splitlines()[-1]
    assert hint == ("  hint: ignore=['head.'] drops the keys under those prefixes (ttmodels "
                    "compare: --ignore head.); key_map= renames keys"), hint
    # the demos take no --ignore: a hint aimed at them would name a flag they do not have
    for demo in ("detect", "resnet50", "bevdet_encoder", "custom_backbone"):
        assert "--ignore" not in (REPO / "demos" / f"{demo}.py").read_text(), demo


def test_key_map_file_with_a_duplicate_key_is_refused(tiny_spec, tmp_path, capsys, monkeypatch):
    from ttmodels.tools import compare
    km = tmp_path / "km.map"
    km.write_text("conv1.: conv1.\nfc.weight: fc.weight\nconv1.: other.\n")
    monkeypatch.setattr(compare, "compare_layers",
                        lambda *a, **k: pytest.fail("compared with a duplicate key"))
    rc, _, err = _cli(["compare", str(tiny_spec), "--key-map", str(km)], capsys)
    assert rc == 2 and err == (f"error: --key-map {km}:3: duplicate key 'conv1.' (first at "
                               "line 1)\n"), err


# ---- items 19, 20: hardtanh bounds and numbers no float holds, at validate time ----------------
_BIG = "1" + "0" * 400
_ONE_LAYER = """name: t
inputs: {x: {channels: 16, size: [16, 16]}}
layers:
  - {name: c, op: conv2d, out: 16, kernel: 1}
  - %s
outputs: {y: a}
"""


@pytest.mark.parametrize("layer,what", [
    ("{name: a, op: hardtanh, min_val: 2, max_val: -2}", "'max_val' (-2.0) is below 'min_val' (2.0)"),
    ("{name: a, op: hardtanh, min_val: 2}", "'max_val' (1.0) is below 'min_val' (2.0)"),
    ("{name: a, op: hardtanh, min_val: .nan}", "'min_val' must be a finite number"),
    ("{name: a, op: hardtanh, max_val: .inf}", "'max_val' must be a finite number"),
    ("{name: a, op: hardtanh, min_val: -.inf}", "'min_val' must be a finite number"),
    ("{name: a, op: conv2d, out: 16, kernel: 1, act: 'hardtanh(2, -2)'}",
     "'max_val' (-2.0) is below 'min_val' (2.0)"),
    ("{name: a, op: conv2d, out: 16, kernel: 1, act: 'hardtanh(-1, 1e999)'}",
     "'max_val' must be a finite number"),
    ("{name: a, op: add, in: [c, x], act: {hardtanh: [.nan, 1]}}", "'min_val' must be a finite"),
    ("{name: a, op: conv2d, out: 16, kernel: 1, act: {hardtanh: {min_val: -.inf}}}",
     "'min_val' must be a finite number"),
    ("{name: a, op: conv2d, out: 16, kernel: 1, act: {name: hardtanh, min_val: 3, max_val: 1}}",
     "'max_val' (1.0) is below 'min_val' (3.0)"),
    # item 20: integers of 401 digits
    (f"{{name: a, op: hardtanh, max_val: {_BIG}}}", "'max_val' must be a finite number, got an "
     "integer of 1329 bits"),
    (f"{{name: a, op: conv2d, out: 16, kernel: 1, act: {{hardtanh: [-1, {_BIG}]}}}}",
     "'max_val' is too large for a float"),
    (f"{{name: a, op: conv2d, out: 16, kernel: 1, act: 'hardtanh(-{_BIG})'}}",
     "'min_val' must be a finite number"),
    (f"{{name: a, op: batch_norm, eps: {_BIG}}}", "'eps' must be a finite number, got an integer"),
    (f"{{name: a, op: conv2d, out: 16, kernel: 1, bn: {{name: bn, eps: {_BIG}}}}}",
     "'eps' must be a finite number, got an integer"),
    (f"{{name: a, op: layer_norm, eps: {_BIG}}}", "'eps' must be a finite number, got an integer"),
])
def test_bad_bounds_and_huge_numbers_are_spec_errors_at_their_line(layer, what, tmp_path):
    f = tmp_path / "net.yaml"
    f.write_text(_ONE_LAYER % layer)
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line, e.value.layer) == (str(f), 5, "a"), str(e.value)
    assert what in str(e.value) and len(str(e.value)) < 400, str(e.value)


def test_equal_hardtanh_bounds_are_a_constant_and_accepted():
    g = load_graph(_ONE_LAYER % "{name: a, op: hardtanh, min_val: 0.5, max_val: 0.5}")
    assert g.nodes[-1].attrs.min_val == g.nodes[-1].attrs.max_val == 0.5


# ---- item 21: meta and complex inputs are refused at the model's call ---------------------------
_LN = """name: ln
inputs: {x: {channels: 32, size: [8, 8]}}
layers:
  - {name: c, op: conv2d, out: 32, kernel: 1}
  - {name: n, op: layer_norm}
outputs: {y: n}
"""


@pytest.fixture(scope="module")
def tiny_models():
    import ttmodels
    models = [ttmodels.build(s, weights="random", backend="sim") for s in (_TINY, _LN)]
    yield models
    for m in models:
        m.close()


@pytest.mark.parametrize("kind,what", [
    ("meta", "is a meta tensor: it has a shape but no values"),
    ("complex", "is complex (torch.complex64); the model takes real values")])
def test_meta_and_complex_inputs_are_refused(kind, what, tiny_models):
    import torch
    for model in tiny_models:
        shape = model.graph.inputs["x"]
        dims = (shape.n, shape.c, shape.h, shape.w)
        x = torch.empty(dims, device="meta") if kind == "meta" else \
            torch.randn(dims, dtype=torch.complex64)
        for call in (model, model.run):
            with pytest.raises(Error) as e:
                call(x)
            assert type(e.value) is Error and str(e.value).startswith(f"input 'x' {what}"), \
                str(e.value)
        assert model(torch.randn(dims)).is_meta is False     # a real input still runs


# ---- item 22: compare on an input that is not RGB, and a constant reference ---------------------
_POOL16 = """name: pool16
inputs: {x: {channels: 16, size: [16, 16]}}
layers:
  - {name: pool, op: global_avg_pool}
outputs: {y: pool}
"""

_CONST = """name: const
inputs: {x: {channels: 3, size: [16, 16]}}
layers:
  - {name: c, op: conv2d, out: 32, kernel: 3, padding: 1}
  - {name: h, op: hardtanh, min_val: 0.3, max_val: 0.3}
  - {name: pool, op: global_avg_pool}
outputs: {y: pool}
"""


def test_compare_makes_an_input_that_fits_a_spec_that_is_not_rgb(tmp_path, capsys):
    from ttmodels.tools.compare import _image_batch
    spec = tmp_path / "pool16.yaml"
    spec.write_text(_POOL16)
    x = _image_batch(None, load_graph(spec).inputs["x"])
    assert tuple(x.shape) == (1, 16, 16, 16)
    per_channel = x.mean(dim=(2, 3)).flatten()
    assert len(set(per_channel.tolist())) == 16          # each channel its own picture
    rc, out, err = _cli(["compare", str(spec)], capsys)
    assert rc == 0 and "all at or above threshold" in out and "const" not in out, out + err
    # an image has 3 channels: it cannot fill 16, and says what to pass instead
    rc, out, err = _cli(["compare", str(spec), "--image", str(tmp_path / "any.png")], capsys)
    assert rc == 2 and err == ("error: --image: this spec's input has 16 channels, an image 3 "
                               "(RGB) or 1 (gray); pass --input FILE.npy holding [1, 16, 16, "
                               "16]\n"), err


def test_compare_judges_a_constant_reference_by_its_max_abs_error(tmp_path, capsys):
    from ttmodels.tools.compare import LayerDiff, format_table
    spec = tmp_path / "const.yaml"
    spec.write_text(_CONST)
    rc, out, err = _cli(["compare", str(spec)], capsys)
    assert rc == 0 and "all at or above threshold" in out, out + err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:-1]}
    assert rows["h"][3] == rows["y"][3] == "const"
    assert 0 < float(rows["y"][4]) < 1e-2                 # 0.3 in bfloat16: 0.30078
    assert "2 with a constant reference" in out.splitlines()[-1]
    # a constant reference the run is far from still fails; the PCC cannot tell either way
    far = LayerDiff("p", "global_avg_pool", "1x1x1x32", 1.0, 0.2, 0.0, ref_constant=True,
                    ref_abs=0.3)
    near = LayerDiff("p", "global_avg_pool", "1x1x1x32", 0.0, 1e-3, 0.0, ref_constant=True,
                     ref_abs=0.3)
    assert not far.passes(0.99) and near.passes(0.99)
    assert "first below 0.99: p" in format_table([near, far], 0.99).splitlines()[-1]


@pytest.mark.parametrize("text,line,what", [
    (_ONE_LAYER % f"{{name: a, op: pad, padding: 1, value: {_BIG}}}", 5,
     "pad 'value' is too large for a float"),
    ("name: t\ninputs: {x: {channels: 16, size: [16, 16]}}\nconstants:\n"
     f"  k: {{shape: [1], value: {_BIG}}}\nlayers:\n  - {{name: a, op: mul, in: [x, k]}}\n"
     "outputs: {y: a}\n", 4, "constant value holds an integer too large for a float"),
    ("name: t\ninputs: {x: {channels: 2, size: [16, 16]}}\nconstants:\n"
     f"  k: {{shape: [2], value: [1, -{_BIG}]}}\nlayers:\n  - {{name: a, op: mul, in: [x, k]}}\n"
     "outputs: {y: a}\n", 4, "constant value holds an integer too large for a float"),
])
def test_other_numbers_no_float_holds_are_spec_errors(text, line, what, tmp_path):
    f = tmp_path / "net.yaml"
    f.write_text(text)
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line) == (str(f), line) and what in str(e.value), str(e.value)
