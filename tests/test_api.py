"""The public surface: ttmodels.plan/build/register/list_models, the error hierarchy, the CLI."""
import json
import subprocess
import sys

import pytest

import ttmodels
from ttmodels.tools import cli


def test_error_hierarchy():
    for cls in (ttmodels.SpecError, ttmodels.LayoutError, ttmodels.WeightsError):
        assert issubclass(cls, ttmodels.Error)
    assert issubclass(ttmodels.Error, ValueError)


def test_import_is_light():
    code = ("import sys, ttmodels; heavy = [m for m in ('torch', 'torchvision', 'ttnn') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_plan_function_not_shadowed_by_submodules():
    import importlib
    for mod in ("planning.plans", "planning.planner", "planning.plan_format", "language.spec",
                "runtime.executor", "runtime.builder"):
        importlib.import_module(f"ttmodels.{mod}")
    assert callable(ttmodels.plan) and callable(ttmodels.build)


def test_plan_api_residual_block():
    plan = ttmodels.plan("resnet18", batch_size=2)
    names = [pl.name for pl in plan.layers]
    assert names[0] == "conv1" and "layer1.0.relu" in names
    add = plan.layer("layer1.0.relu")
    assert add.node.op == "add" and add.node.inputs == ["layer1.0.conv2", "maxpool"]
    assert add.output.memory.memory_layout != "interleaved"     # stays in L1 shards
    for a in plan.adapters:
        assert a.kind in ("to_memory_config", "sharded_to_interleaved", "interleaved_to_sharded",
                          "reshard", "to_layout", "typecast") and a.reason
    table = str(plan)
    assert "layer1.0.relu" in table and "adapters" in table
    d = json.loads(plan.to_json())
    assert len(d["layers"]) == len(plan.layers)


def test_cli_plan_and_validate(tmp_path, capsys):
    assert cli.main(["plan", "resnet18", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "layer1.0.relu" in out and "L1" in out
    assert cli.main(["plan", "resnet18", "--format", "json"]) == 0
    json.loads(capsys.readouterr().out)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ninputs:\n  x: {channels: 3, size: [32, 32]}\nlayers:\n"
                   "  - {name: c, op: conv2d, out: 8, kernel: 3}\n"
                   "  - {name: a, op: add, in: [c, x]}\n")
    assert cli.main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:6" in err and "'a'" in err
    assert cli.main(["validate", "resnet50"]) == 0


def test_cli_batch_defaults_to_the_spec_declared_batch(capsys):
    # resnet50_tt declares `batch: 16` (its layouts' batch): without --batch the CLI takes it
    assert cli.main(["plan", "resnet50_tt", "--format", "json", "--no-ttnn"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["estimate"]["samples"] == 16
    # a spec that declares none still defaults to 1
    assert cli.main(["plan", "resnet18", "--format", "json", "--no-ttnn"]) == 0
    assert json.loads(capsys.readouterr().out)["estimate"]["samples"] == 1


def test_backend_auto_is_sim_without_card(caplog):
    from ttmodels.backends import open_backend
    with caplog.at_level("INFO", logger="ttmodels"):
        with open_backend("auto") as be:
            assert be.name == "sim"
    assert any("sim" in r.getMessage() for r in caplog.records)


def test_build_rejects_wrong_input_shape():
    import torch
    spec = {"name": "tiny", "inputs": {"x": {"channels": 3, "size": [16, 16]}},
            "layers": [{"name": "c", "op": "conv2d", "out": 8, "kernel": 3, "padding": 1}]}
    with ttmodels.build(spec, weights="random", backend="sim") as m:
        assert m(torch.randn(1, 3, 16, 16)).shape == (1, 8, 16, 16)
        with pytest.raises(ttmodels.Error, match="expects NCHW"):
            m(torch.randn(1, 3, 8, 8))


def test_cli_compare_prints_per_layer_table_and_plot(tmp_path, capsys):
    png = tmp_path / "pcc.png"
    assert cli.main(["compare", "resnet18", "--input-size", "64", "64", "--plot", str(png)]) == 0
    out = capsys.readouterr().out.splitlines()
    plan = ttmodels.plan("resnet18", input_size=(64, 64))
    rows = [line for line in out if line.split() and line.split()[0] in
            {pl.name for pl in plan.layers}]
    assert len(rows) == len(plan.layers)
    pccs = [float(r.split()[3]) for r in rows]
    assert all(0.99 <= p <= 1.0 for p in pccs), pccs      # the default threshold: exit status 0
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_compare_marks_first_layer_below_threshold():
    from ttmodels.tools.compare import LayerDiff, format_table
    rows = [LayerDiff("a", "conv2d", "[1]", 0.999, 0.1, 1.0), LayerDiff("b", "add", "[1]", 0.95, 1.0, 1.0),
            LayerDiff("c", "relu", "[1]", 0.90, 1.0, 1.0)]
    text = format_table(rows, 0.99)
    line_b = next(line for line in text.splitlines() if line.startswith("b "))
    assert "first below" in line_b
    assert "first below" not in next(line for line in text.splitlines() if line.startswith("c "))


def test_model_accepts_backend_tensors():
    import torch
    spec = {"name": "tiny2", "inputs": {"x": {"channels": 3, "size": [16, 16]}},
            "layers": [{"name": "c", "op": "conv2d", "out": 16, "kernel": 3, "padding": 1,
                        "act": "relu"},
                       {"name": "p", "op": "max_pool2d", "kernel": 2, "stride": 2}]}
    x = torch.randn(1, 3, 16, 16)
    with ttmodels.build(spec, weights="random", backend="sim") as m:
        want = m(x)
        tx = m.executor.input_tensor("x", x)     # [1, 1, N*H*W, C] in the plan's input layout
        got = m(tx)
        assert torch.equal(got, want) and got.shape == (1, 16, 8, 8)
        summary = m.summary().splitlines()
        assert summary[0].startswith("model tiny2: backend sim, weights random")
        rows = {line.split()[0]: line.split() for line in summary if line.split()}
        assert rows["c"][1] == "conv2d" and rows["p"][1:3] == ["max_pool2d", "1x8x8x16"]
