"""ttmodels verify: plans judged by the installed ttnn 0.81.1 on a mock Wormhole n150.

No card: tt-metal runs on a mock cluster with the stand-in toolchain of ttmodels.backends.mock_device;
ops run under NO_DISPATCH graph capture. These tests fail (never skip) when the mechanism
breaks: ttnn is a pinned dependency."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ttmodels.backends import mock_device
from ttmodels.errors import DeviceError
from ttmodels.planning.l1_timeline import parse_core_ranges, read
from ttmodels.tools.verify import split_error, verify

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "specs" / "field_report"


def test_overlay_lives_in_the_cache_dir_and_leaves_site_packages_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("TTMODELS_CACHE_DIR", str(tmp_path))
    env = mock_device.environment("n150")
    assert tmp_path in env.root.parents and tmp_path in env.cache.parents
    gxx = env.root / "runtime" / "sfpi" / "compiler" / "bin" / "riscv-tt-elf-g++"
    assert gxx.is_file() and gxx.stat().st_mode & 0o111
    pkg = mock_device._ttnn_package_dir()
    assert not (pkg / "runtime" / "sfpi").exists()
    # the overlay mirrors the package through symlinks
    assert (env.root / "ttnn").is_symlink() or any(p.is_symlink() for p in env.root.iterdir())


def test_stand_in_compiler_answers_version_and_writes_objects(tmp_path, monkeypatch):
    monkeypatch.setenv("TTMODELS_CACHE_DIR", str(tmp_path))
    env = mock_device.environment("n150")
    gxx = str(env.root / "runtime" / "sfpi" / "compiler" / "bin" / "riscv-tt-elf-g++")
    out = subprocess.run([gxx, "--version"], capture_output=True, text=True, check=True)
    assert "riscv-tt-elf-g++" in out.stdout
    obj, dep = tmp_path / "k.o", tmp_path / "k.d"
    subprocess.run([gxx, "-c", "k.cpp", "-o", str(obj), "-MF", str(dep)], check=True)
    assert obj.exists() and obj.stat().st_size == 0 and dep.read_text().startswith(str(obj))
    pch = subprocess.run([gxx, "-x", "c++-header", "h.h", "-o", str(tmp_path / "h.gch")])
    assert pch.returncode != 0
    elf = tmp_path / "k.elf"
    subprocess.run([gxx, "k.o", "-o", str(elf)], check=True)
    b = elf.read_bytes()
    assert b[:4] == b"\x7fELF" and b[4] == 1 and int.from_bytes(b[18:20], "little") == 243


def test_refuses_an_untested_ttnn(monkeypatch):
    monkeypatch.setattr(mock_device, "ttnn_version", lambda: "0.99.0")
    with pytest.raises(DeviceError, match="tested with ttnn 0.81.1"):
        mock_device.environment("n150")


def test_unknown_system_is_a_clear_error():
    with pytest.raises(DeviceError, match="unknown mock system 'n999'"):
        mock_device.descriptor_path("n999")


def test_split_error_reads_tt_fatal():
    e = RuntimeError("TT_FATAL @ /project/ttnn/cpp/ttnn/operations/matmul/device/"
                     "matmul_device_operation.cpp:551: Kt % program_config.in0_block_w == 0\n"
                     "info:\nKt (64) must be divisible by in0_block_w (3)\nbacktrace:\n --- x")
    msg, loc = split_error(e)
    assert msg == "Kt (64) must be divisible by in0_block_w (3)"
    assert loc == "ttnn/cpp/ttnn/operations/matmul/device/matmul_device_operation.cpp:551"


def test_core_ranges_parse():
    assert parse_core_ranges("{[0-0 - 7-6], [0-7 - 3-7]}") == [(0, 0, 7, 6), (0, 7, 3, 7)]


def test_timeline_counts_buffers_per_bank_and_cbs_per_core():
    g = [
        {"node_type": "capture_start", "params": None},
        {"node_type": "buffer_allocate", "params": {"type": "L1", "max_size_per_bank": 100},
         "connections": []},
        {"node_type": "function_start", "params": {"name": "ttmodels::layer::a"}, "stacking_level": 1},
        {"node_type": "circular_buffer_deallocate_all", "params": {}},
        {"node_type": "circular_buffer_allocate",
         "params": {"size": 30, "core_range_set": "{[0-0 - 1-0]}"}},
        {"node_type": "circular_buffer_allocate",
         "params": {"size": 5, "core_range_set": "{[1-0 - 1-0]}"}},
        {"node_type": "buffer_allocate", "params": {"type": "DRAM", "max_size_per_bank": 999},
         "connections": []},
        {"node_type": "buffer_allocate", "params": {"type": "L1", "max_size_per_bank": 50},
         "connections": []},
        {"node_type": "function_end", "params": {"name": "ttmodels::layer::a"}, "stacking_level": 1},
        {"node_type": "buffer_deallocate", "params": {"type": "L1", "max_size_per_bank": 100}},
        {"node_type": "function_start", "params": {"name": "ttmodels::layer::b"}, "stacking_level": 1},
        {"node_type": "circular_buffer_deallocate_all", "params": {}},
        {"node_type": "function_end", "params": {"name": "ttmodels::layer::b"}, "stacking_level": 1},
    ]
    t = read(g)
    a, b = t.step("layer", "a"), t.step("layer", "b")
    assert (a.peak.l1, a.peak.cb, a.peak.total) == (150, 35, 185)   # worst core: 30 + 5
    assert (b.peak.l1, b.peak.cb, b.peak.total) == (50, 35, 85)     # a's CBs until b's program
    assert t.peak.total == 185 and a.live_at_start == 100


@pytest.fixture(scope="module")
def residual_report():
    return verify(FIELD / "residual_shards.yaml")


def test_timeline_peak_equals_ttnn_peak(residual_report):
    r = residual_report
    assert r.peak_total > 0 and r.timeline_peak_total == r.peak_total
    assert max(s.ttnn_peak_total for s in r.steps) == r.peak_total


def test_field_report_graphs_are_accepted_by_ttnn(residual_report):
    for r in (residual_report, verify(FIELD / "conv_multiply.yaml"),
              verify(FIELD / "conv_maxpool.yaml")):
        bad = [(s.name, s.error, s.planned_memory, s.ttnn_memory) for s in r.steps if not s.ok]
        assert not bad, bad
        assert r.fits and r.l1_bank_bytes == 1_360_544
        assert all(s.ttnn_peak_total >= s.ttnn_op_peak_total > 0 for s in r.layers)


def test_a_rejected_step_reports_ttnn_error_and_the_rest_still_runs():
    from ttmodels.planning.planner import plan_graph
    from ttmodels.language.spec import load_graph
    plan = plan_graph(load_graph(FIELD / "conv_maxpool.yaml"))
    conv = plan.layer("conv")
    from dataclasses import replace
    conv.config = replace(conv.config, act_block_h_override=33)   # not a multiple of 32: ttnn rejects it
    r = verify(None, plan=plan)
    c = next(s for s in r.steps if s.name == "conv")
    assert not c.accepted and "multiple of 32" in c.error
    assert c.error_location and c.error_location.split(":")[0].endswith("conv2d_utils.cpp")
    pool = next(s for s in r.steps if s.name == "pool")
    assert pool.accepted                             # ran on the stand-in for conv's output
    assert not r.ok


def test_cli_json_has_the_documented_keys():
    out = subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", "verify",
                          str(FIELD / "conv_multiply.yaml"), "--format", "json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    for k in ("ttnn_version", "device", "l1_bank_bytes"):
        assert k in d
    assert d["ttnn_version"] == "0.81.1" and d["l1_bank_bytes"] == 1_360_544
    keys = {"name", "op", "accepted", "error", "planned_memory", "ttnn_memory", "memory_match",
            "l1_estimate", "ttnn_peak_cb", "ttnn_peak_l1", "ttnn_peak_total"}
    assert [e["name"] for e in d["layers"]] == ["conv", "scaled"]
    for e in d["layers"]:
        assert keys <= set(e) and e["accepted"] and e["memory_match"]


def test_mock_backend_model_returns_specs_not_values():
    import numpy as np
    import torch

    import ttmodels
    with ttmodels.build(FIELD / "conv_multiply.yaml", backend="ttnn-mock") as m:
        out = m.run(torch.zeros(1, 16, 56, 56))["scaled"]
    assert out.shape == (1, 1, 56 * 56, 64) and "HEIGHT_SHARDED" in out.memory_config
    with pytest.raises(DeviceError, match="no values"):
        np.asarray(out)


def test_probe_1x1_on_the_mock_device_reports_acceptance_and_l1(tmp_path, capsys):
    from ttmodels.tools import probe
    out = tmp_path / "p.json"
    rc = probe.run_probe(REPO / "examples" / "my_backbone" / "backbone.yaml", out=str(out),
                         mock=True)
    assert rc == 0
    printed = capsys.readouterr().out
    assert probe.MOCK_NOTE in printed
    d = json.loads(out.read_text())
    assert d["timing"] == probe.MOCK_NOTE and d["shapes"]
    for shape in d["shapes"]:
        kinds = {(c["lowering"], c["kind"]) for c in shape["candidates"]}
        assert ("conv2d", "1d_mcast_in1") in kinds and ("linear", "1d_mcast_in1") in kinds
        for c in shape["candidates"]:
            assert c["time_us"] is None and c["bit_identical_to_conv2d"] is None
            assert c["accepted"] is True and c["ttnn_peak_total"] > 0
    with pytest.raises(Exception, match="times nothing"):
        probe.run_probe("resnet50", mock=True, write_spec=str(tmp_path / "w.yaml"))


def test_a_second_mock_system_in_one_process_is_refused(monkeypatch):
    """tt-metal reads the cluster descriptor once per process: after an n150, an n300 must run
    in its own process (the environment is left as it was)."""
    import os
    monkeypatch.setattr(mock_device, "_OPENED", {"n150"})
    before = os.environ.get(mock_device.ENV_DESC)
    with pytest.raises(DeviceError, match="already opened a mock n150"):
        mock_device.prepare("n300")
    assert os.environ.get(mock_device.ENV_DESC) == before


def test_a_step_ttnn_crashes_on_is_reported_not_run(tmp_path):
    """Issue 25 item 8: `verify --no-adapters` on a conv height-sharded on 2 cores followed by a
    bilinear upsample segfaulted inside ttnn (sliding_window::generate_halo_kernel_config_
    tensors, the rules corpus's CRASHES case). It runs in a subprocess: on the old code the
    process dies with SIGSEGV instead of printing a table."""
    spec = tmp_path / "crash.yaml"
    spec.write_text(
        "name: crash\n"
        "inputs:\n  x: {channels: 16, size: [8, 8]}\n"
        "layers:\n"
        "  - {name: c, op: conv2d, out: 32, kernel: 3, padding: 1, layout: height_sharded l1 2x1}\n"
        "  - {name: up, op: upsample, scale: 2, mode: bilinear}\n")
    p = subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", "verify", str(spec), "--no-adapters",
                        "--format", "json"], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    d = json.loads(p.stdout)
    up = next(s for s in d["layers"] if s["name"] == "up")
    assert not up["accepted"] and "crashes" in up["error"] and "not run" in up["error"]
    assert not (tmp_path / "generated").exists()     # item 17: ttnn's files stay in the cache


def test_ttnn_errors_stay_out_of_stdout_and_its_files_out_of_the_cwd(tmp_path):
    """Issue 25 item 17: tt-metal's logger printed its TT_FATAL/TT_THROW lines on stdout before
    verify's own output (breaking --format json), and wrote generated/ into the current
    directory. The example without adapters has steps ttnn rejects."""
    spec = REPO / "examples" / "my_backbone" / "backbone.yaml"
    p = subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", "verify", str(spec), "--no-adapters",
                        "--format", "json"], capture_output=True, text=True, timeout=900,
                       cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-2000:]
    d = json.loads(p.stdout)                # nothing but the report on stdout
    rejected = [s for s in d["layers"] if not s["accepted"]]
    assert rejected and all(s["error"] for s in rejected)
    assert "TT_FATAL" not in p.stdout and "critical" not in p.stdout
    assert not (tmp_path / "generated").exists()
