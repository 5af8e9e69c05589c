"""Regressions for issue 10: what a new user and an adversarial tester broke.

Each test failed on the code before its fix."""
from __future__ import annotations

import re

import pytest

from ttmodels.errors import LayoutError, SpecError
from ttmodels.planning.planner import plan_graph
from ttmodels.language.spec import load_graph


def _deep(blocks: int) -> dict:
    return {"name": "deep", "inputs": {"x": {"channels": 32, "size": [16, 16]}},
            "blocks": {"res": {"layers": [
                {"name": "conv1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                 "act": "relu"},
                {"name": "add", "op": "add", "in": ["conv1", "x"]}]}},
            "layers": [{"name": "body", "block": "res", "repeat": blocks}],
            "outputs": {"y": "body"}}


class _CountingList(list):
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


# ---- defect 5: planning is linear in the number of layers ------------------------------------
def test_planning_walks_the_node_list_a_bounded_number_of_times():
    """Node and consumer lookups are indexed: planning walks ``graph.nodes`` a fixed number of
    times whatever the depth (a scan per lookup made planning quadratic)."""
    walks = []
    for blocks in (20, 80):
        g = load_graph(_deep(blocks))
        _CountingList.walks = 0
        g.nodes = _CountingList(g.nodes)
        plan_graph(g)
        walks.append(_CountingList.walks)
    assert walks[0] == walks[1] and walks[0] <= 4, walks


def test_liveness_queries_see_only_live_tensors(monkeypatch):
    """The per-layer liveness query gets the tensors that can still be alive, not every tensor
    planned so far (which made planning quadratic again)."""
    from ttmodels.planning import liveness, planner
    sizes = []
    real = liveness.others_alive

    def spy(i, node, held, *a, **k):
        sizes.append(len(held))
        return real(i, node, held, *a, **k)
    monkeypatch.setattr(planner.lv, "others_alive", spy)
    plan_graph(load_graph(_deep(80)))
    assert sizes and max(sizes) <= 4, max(sizes)     # input, the residual, the output


# ---- defect 6: huge inputs: bounded slice search, error quoting the slice size ---------------
def _one_conv(hw: int, c_in: int = 16) -> dict:
    return {"name": "one", "inputs": {"x": {"channels": c_in, "size": [hw, hw]}},
            "layers": [{"name": "c", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1}],
            "outputs": {"y": "c"}}


def _count_slice_candidates(monkeypatch):
    from ttmodels.ops.conv2d import plan as conv2d_plan
    calls = []
    real = conv2d_plan.slice_candidate

    def counted(self, *a, **k):
        calls.append(a[2])
        return real(self, *a, **k)
    monkeypatch.setattr(conv2d_plan, "slice_candidate", counted)
    return calls


def test_huge_input_fails_fast_quoting_the_slice_size(monkeypatch):
    calls = _count_slice_candidates(monkeypatch)
    g = load_graph("resnet50", input_size=(60000, 60000))
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    msg = str(e.value)
    assert e.value.layer == "conv1"
    # one probe per slicing direction: the finest slicing does not fit, so nothing coarser will
    assert len(calls) <= 4, len(calls)
    assert "30000 height slices of 1 output row it still needs" in msg, msg
    assert "938 width slices of 32 output columns" in msg, msg


def test_bounded_slice_search_finds_the_fewest_slices(monkeypatch):
    """Past the one-by-one range the search doubles and bisects; it still returns the smallest
    slice count that fits (checked against trying every count)."""
    from ttmodels.planning import planner
    from ttmodels.ops.conv2d import plan as conv2d_plan
    g = load_graph(_one_conv(6144))
    sl = plan_graph(g).layers[0].config.slice
    assert sl.num_slices > conv2d_plan.LINEAR_SLICES
    pl = planner._Planner(g, "wormhole_b0", True)
    pl.seed()
    x, node = pl.layouts["x"], g.nodes[0]
    calls = _count_slice_candidates(monkeypatch)
    st, k, _ = conv2d_plan.fewest_slices(pl, node, x, sl.type)
    assert (st, k) == (sl.type, sl.num_slices)
    assert len(calls) < k - 2, len(calls)          # not one probe per slice count
    monkeypatch.undo()
    fits = [n for n in range(2, k + 1)
            if conv2d_plan.slice_candidate(pl, node, x, st, n) is not None]
    assert fits[0] == k, fits


# ---- defects 2, 3, 7: explicit layouts honoured or rejected with file and line ----------------
from ttmodels.planning.plan_checks import check_plan, edge_mismatches  # noqa: E402


def _conv_spec(layout: str, c: int = 64, hw: int = 56) -> str:
    return f"""name: t
inputs: {{x: {{channels: {c}, size: [{hw}, {hw}]}}}}
layers:
  - {{name: c0, op: conv2d, out: {c}, kernel: 3, padding: 1, act: relu}}
  - {{name: c, op: conv2d, out: {c}, kernel: 3, padding: 1, layout: {layout}}}
  - {{name: r, op: relu}}
outputs: {{y: r}}
"""


@pytest.mark.parametrize("layout,kind,grid,c", [
    ("block_sharded l1 4x4", "block_sharded", (4, 4), 128),     # 4 channel tiles over x = 4
    ("block_sharded l1 8x4", "block_sharded", (8, 4), 256),
    ("height_sharded l1 2x2", "height_sharded", (2, 2), 64),
    ("height_sharded l1 8x3", "height_sharded", (8, 3), 64),
])
def test_explicit_conv_grid_is_honoured(layout, kind, grid, c):
    plan = plan_graph(load_graph(_conv_spec(layout, c=c)))
    m = plan.layer("c").output.memory
    assert (m.memory_layout, m.grid, m.num_cores) == (kind, grid, grid[0] * grid[1])
    assert plan.layer("c").inputs[0].memory.grid == grid       # conv reads on those cores
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


def test_explicit_layout_that_cannot_apply_is_a_spec_error(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text(_conv_spec("width_sharded l1 8x1"))
    with pytest.raises(SpecError) as e:
        plan_graph(load_graph(f))
    assert (e.value.file, e.value.line, e.value.layer) == (str(f), 5, "c")
    assert "width_sharded l1 8x1" in str(e.value)
    assert "derives its output cores from its input's and its output channels" in str(e.value)
    # 64 output channels are 2 tiles: a block-sharded output cannot span 4 channel cores
    with pytest.raises(SpecError, match=r"'block_sharded l1 4x4' cannot be applied .* 2x4"):
        plan_graph(load_graph(_conv_spec("block_sharded l1 4x4", c=64)))


def _concat_spec(layout: str) -> str:
    return f"""name: t
inputs: {{x: {{channels: 32, size: [28, 28]}}}}
layers:
  - {{name: a, op: conv2d, out: 32, kernel: 3, padding: 1, layout: interleaved l1}}
  - {{name: b, op: conv2d, in: x, out: 64, kernel: 3, padding: 1, layout: interleaved l1}}
  - {{name: cat, op: concat, in: [a, b], layout: {layout}}}
  - {{name: r, op: relu}}
outputs: {{y: r}}
"""


@pytest.mark.parametrize("layout,grid", [("height_sharded l1", None), ("height_sharded l1 4x2", (4, 2))])
def test_concat_height_sharded_layout_is_honoured(layout, grid):
    plan = plan_graph(load_graph(_concat_spec(layout)))
    m = plan.layer("cat").output.memory
    assert m.memory_layout == "height_sharded" and m.buffer == "l1"
    assert grid is None or m.grid == grid
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


@pytest.mark.parametrize("layout", ["block_sharded l1", "width_sharded", "interleaved dram"])
def test_concat_layout_it_cannot_take_is_a_spec_error(layout):
    with pytest.raises(SpecError) as e:
        plan_graph(load_graph(_concat_spec(layout)))
    assert (e.value.file, e.value.line, e.value.layer) == ("<string>", 6, "cat")
    assert "concat" in e.value.reason and "interleaved/l1" in e.value.reason


@pytest.mark.parametrize("spec,line,what", [
    (_conv_spec("height_sharded dram"), 5, "sharded activations live in L1"),
    (_conv_spec("height_sharded l1", c=1024, hw=28), 5, "B of L1 per core"),
    (_conv_spec("block_sharded l1 1x1", c=512, hw=28), 5, "on the 1x1 grid"),
])
def test_layout_errors_carry_the_layer_file_and_line(tmp_path, spec, line, what):
    f = tmp_path / "s.yaml"
    f.write_text(spec)
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(f))
    assert (e.value.file, e.value.line, e.value.layer) == (str(f), line, "c"), str(e.value)
    assert str(e.value).startswith(f"{f}:{line}, layer 'c': ") and what in str(e.value)


# ---- defect 4: image size bombs: one line, exit 2, nothing huge allocated ---------------------
def _png_header_only(path, w: int, h: int) -> None:
    """A PNG whose header claims w x h (PIL reads the size from IHDR before decoding)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                     chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


@pytest.fixture
def bombs(tmp_path):
    from PIL import Image
    strip = tmp_path / "strip.png"
    Image.new("L", (20000, 1)).save(strip)
    huge = tmp_path / "huge.png"
    _png_header_only(huge, 20000, 20000)         # over twice PIL's limit: PIL raises
    big = tmp_path / "big.png"
    _png_header_only(big, 12000, 12000)           # between PIL's limit and twice it: PIL warns
    return {"strip": strip, "huge": huge, "big": big}


@pytest.mark.parametrize("which,what", [("strip", "aspect ratio over 16:1"),
                                        ("huge", "too large to decode safely"),
                                        ("big", "12000x12000 pixels, more than")])
def test_imagenet_tensor_refuses_size_bombs(bombs, which, what):
    import resource

    from ttmodels.tools.images import ImageError, imagenet_tensor
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ImageError, match=what):
        imagenet_tensor(bombs[which])
    # nothing near the 4 GB the strip used to be resized into (peak RSS grows < 200 MB)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000


@pytest.mark.parametrize("which", ["strip", "huge", "big"])
def test_demo_and_compare_exit_2_with_one_line_on_image_bombs(bombs, which, capsys):
    import importlib.util
    from pathlib import Path

    from ttmodels.tools.cli import main as cli_main
    demo = Path(__file__).resolve().parent.parent / "demos" / "resnet50.py"
    spec = importlib.util.spec_from_file_location("demo_resnet50", demo)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for run in (lambda: mod.main(["--image", str(bombs[which]), "--backend", "sim"]),
                lambda: cli_main(["compare", "resnet18", "--image", str(bombs[which])])):
        assert run() == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: image "), err


# ---- defect 8: weights diagnosed as what they are ---------------------------------------------
_TINY = """name: tiny
inputs: {x: {channels: 3, size: [16, 16]}}
layers:
  - {name: conv1, op: conv2d, out: 16, kernel: 3, padding: 1, bn: bn1, act: relu}
  - {name: pool, op: global_avg_pool}
  - {name: fc, op: linear, out: 4}
outputs: {y: fc}
"""


def _tiny_weights():
    import torch

    from ttmodels.weights.reference import expected_parameters
    g = load_graph(_TINY)
    sd = {k: torch.rand(tuple(s)) + 0.5 for k, s in expected_parameters(g).items()}
    return g, sd


def test_safetensors_named_bin_is_read_as_safetensors(tmp_path):
    from safetensors.torch import save_file

    from ttmodels.weights import load_state_dict
    g, sd = _tiny_weights()
    f = tmp_path / "model.bin"
    save_file(sd, str(f))
    got = load_state_dict(str(f), g)
    assert sorted(got) == sorted(sd) and all(bool((got[k] == sd[k]).all()) for k in sd)


def test_sparse_tensor_is_named_not_a_raw_notimplementederror():
    from ttmodels.errors import WeightsError
    from ttmodels.weights import load_state_dict
    g, sd = _tiny_weights()
    sd["fc.weight"] = sd["fc.weight"].to_sparse()
    with pytest.raises(WeightsError) as e:
        load_state_dict(sd, g)
    assert [k for k, _ in e.value.invalid] == ["fc.weight"]
    assert "fc.weight: torch.sparse_coo tensor; store it dense" in str(e.value)


@pytest.mark.parametrize("typo,near", [("randm", "random"), ("pretrianed", "pretrained")])
def test_misspelt_weights_name_suggests_the_close_one(typo, near, tmp_path, monkeypatch):
    from ttmodels.errors import WeightsError
    from ttmodels.weights import load_state_dict
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WeightsError, match=f"'{typo}' not found; did you mean weights='{near}'"):
        load_state_dict(typo, load_graph(_TINY))


# ---- defect 9: the command line ----------------------------------------------------------------
def _cli(argv, capsys):
    from ttmodels.tools.cli import main
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def tiny_spec(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text(_TINY)
    return f


def test_compare_exit_status_threshold_and_plot_name(tiny_spec, tmp_path, capsys, monkeypatch):
    """One real comparison (threshold 0, --plot without extension), then the same rows against a
    threshold no layer reaches: exit 1."""
    from ttmodels.tools import compare
    rows = []
    real = compare.compare_layers
    monkeypatch.setattr(compare, "compare_layers", lambda *a, **k: rows.extend(real(*a, **k)) or rows)
    target = tmp_path / "vgg_noext"
    rc, out, _ = _cli(["compare", str(tiny_spec), "--threshold", "0", "--plot", str(target)],
                      capsys)
    assert rc == 0 and "all at or above threshold" in out
    assert out.strip().splitlines()[-1] == f"wrote {target}.png"
    assert (tmp_path / "vgg_noext.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr(compare, "compare_layers", lambda *a, **k: rows)
    rc, out, _ = _cli(["compare", str(tiny_spec), "--threshold", "1.01"], capsys)
    assert rc == 1 and "first below 1.01" in out


def test_compare_plot_path_is_checked_before_comparing(tiny_spec, tmp_path, capsys, monkeypatch):
    from ttmodels.tools import compare
    monkeypatch.setattr(compare, "compare_layers",
                        lambda *a, **k: pytest.fail("compared before checking --plot"))
    for bad, why in ((tmp_path / "no" / "such" / "dir.png", "does not exist"),
                     (tmp_path, "is a directory")):
        rc, _, err = _cli(["compare", str(tiny_spec), "--plot", str(bad)], capsys)
        assert rc == 2 and why in err and err.count("\n") == 1, err


def test_plan_into_a_closed_pipe_prints_no_traceback():
    import os
    import subprocess
    import sys
    from pathlib import Path
    import ttmodels
    repo = Path(ttmodels.__file__).resolve().parent.parent     # the package under test
    p = subprocess.Popen([sys.executable, "-m", "ttmodels.tools.cli", "plan", "resnet50", "--format",
                          "json"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    p.stdout.close()                  # the reader (head) has gone before anything is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141
    assert err == "", err


def test_version_and_help_texts(capsys):
    import ttmodels
    from ttmodels.tools.cli import main
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"ttmodels {ttmodels.__version__}"
    helps = {}
    for cmd in ("plan", "compare", "validate"):
        with pytest.raises(SystemExit):
            main([cmd, "-h"])
        helps[cmd] = " ".join(capsys.readouterr().out.split())
    assert "spec a shipped or registered model name" in helps["validate"]
    assert "json: the whole plan (default: table)" in helps["plan"]
    assert "makes the exit status 1 (default: 0.99)" in helps["compare"]


def test_python_dash_m_ttmodels_is_the_command():
    import subprocess
    import sys

    import ttmodels
    out = subprocess.run([sys.executable, "-m", "ttmodels", "--version"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"ttmodels {ttmodels.__version__}", out


def test_plan_that_does_not_fit_suggests_batch_or_input_size():
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph("resnet50", batch_size=1024))
    # the first layer no form fits: the stem's 7x7 conv at 1024 x 224x224, even DRAM-sliced
    # (256 and 512 plan since a layer may fit with the previous program's CBs not counted)
    assert e.value.layer == "conv1" and e.value.file.endswith("resnet.yaml")
    assert re.search(r"; use a smaller (input size or batch|batch or input size)", str(e.value))


# ---- defect 10: what model(...) accepts ------------------------------------------------------
@pytest.mark.parametrize("bad", ["ndarray", "list", "none"])
def test_model_says_what_input_it_accepts(bad):
    import numpy as np

    import ttmodels
    x = {"ndarray": np.zeros((1, 3, 16, 16), np.float32), "list": [[0.0]], "none": None}[bad]
    with ttmodels.build(_TINY, weights="random", backend="sim") as m:
        with pytest.raises(ttmodels.Error) as e:
            m(x)
    msg = str(e.value)
    assert f"input 'x' is a {type(x).__name__}" in msg
    assert "float NCHW torch tensor" in msg and "sim backend tensor" in msg


# ---- defect 11: naming a layer after the block's input ----------------------------------------
def test_layer_named_like_the_blocks_implicit_input():
    spec = """name: t
inputs: {image: {channels: 3, size: [16, 16]}}
blocks:
  b:
    layers:
      - {name: x, op: relu}
layers:
  - {name: s, block: b}
"""
    with pytest.raises(SpecError) as e:
        load_graph(spec)
    assert (e.value.line, e.value.layer) == (6, "s.x")
    assert "'x' is the block's implicit input" in e.value.reason
    assert "duplicate" not in e.value.reason


# ---- spec.py no longer re-labels its own bugs as the user's mistakes --------------------------
def test_internal_bug_in_the_compiler_is_not_reported_as_a_spec_error(monkeypatch):
    from ttmodels.language.spec import compiler as S

    def bug(self, *a, **k):
        raise KeyError("an internal key")
    monkeypatch.setattr(S._Compiler, "parse_inputs", bug)
    with pytest.raises(KeyError, match="an internal key"):
        load_graph(_TINY)


# =============================================================================================
# Issue 25: field tests and an adversarial pass. Each test failed on the code before its fix.
# =============================================================================================
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

_REPO = Path(__file__).resolve().parent.parent
_SPEC = """name: t
inputs: {x: {channels: 8, size: [16, 16]}}
layers:
  - {name: c, op: conv2d, out: 8, kernel: 3, padding: 1}
  - {name: r, op: relu}
"""


def _special_file(kind: str, tmp_path: Path, feed: bytes = b"") -> Path:
    """A path that is no regular file: opening or reading it blocks or never ends. A FIFO gets
    a writer thread that writes ``feed`` once a reader opens it (so code that wrongly opens it
    fails the test instead of hanging); ``_release`` lets that writer go if nobody did."""
    if kind == "fifo":
        import threading
        p = tmp_path / "f.yaml"
        os.mkfifo(p)

        def write():
            try:
                with open(p, "wb") as w:     # blocks until a reader opens the FIFO
                    w.write(feed)
            except OSError:                  # the reader left (_release)
                pass
        threading.Thread(target=write, daemon=True).start()
        return p
    if kind == "symlink-to-device":
        p = tmp_path / "z.safetensors"
        p.symlink_to("/dev/zero")
        return p
    if kind == "directory":
        return tmp_path
    return Path(kind)


def _release(path: Path) -> None:
    """Open a FIFO's read end once, so its writer thread finishes."""
    import stat
    if stat.S_ISFIFO(os.lstat(path).st_mode):
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))


# Paths that must be refused before they are opened (a FIFO blocks, /dev/zero never ends).
SPECIAL_FILES = ["fifo", "/dev/zero", "symlink-to-device", "/dev/null", "directory"]
# Characters YAML refuses anywhere, comments included (NUL, C0 controls, DEL's neighbours).
CONTROL_CHARS = ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\x85\x00", "\ufffe"]


def _cli_sub(args, timeout=60, **kw):
    """``ttmodels ARGS`` in a subprocess (a hang must fail the test, not the test run)."""
    return subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=kw.pop("cwd", _REPO),
                          env={**os.environ, "PYTHONPATH": str(_REPO)}, **kw)


# ---- items 5, 6: spec files that are FIFOs or devices ----------------------------------------
@pytest.mark.parametrize("kind", SPECIAL_FILES)
@pytest.mark.parametrize("how", ["spec", "imports", "extends"])
def test_spec_import_or_extends_that_is_no_regular_file_is_refused(kind, how, tmp_path):
    target = _special_file(kind, tmp_path, feed=_SPEC.encode())
    request_release = target if kind == "fifo" else None
    if how == "spec":
        spec, where = target, (str(target) if kind != "directory" else str(tmp_path))
    else:
        top = tmp_path / "top.yaml"
        ref = f"imports: ['{target}']" if how == "imports" else f"extends: '{target}'"
        top.write_text(f"{ref}\n" + _SPEC.replace("name: t\n", ""))
        spec, where = top, f"{top}:1"
    if kind == "/dev/null" and how != "imports":
        pytest.skip("an empty regular read: 'must be a mapping', tested elsewhere")
    try:
        with pytest.raises(SpecError) as e:
            load_graph(Path(spec) if how == "spec" else spec)
    finally:
        if request_release is not None:
            _release(request_release)
    if kind == "/dev/null":
        return
    assert str(e.value).startswith(where), str(e.value)
    assert "not a spec file" in str(e.value)


def test_validate_on_a_fifo_and_dev_zero_returns_at_once(tmp_path):
    fifo = _special_file("fifo", tmp_path)
    for path in (fifo, "/dev/zero"):
        # a 1 GB address-space limit: reading /dev/zero whole would fail with MemoryError
        r = _cli_sub(["validate", str(path)], timeout=60,
                     preexec_fn=lambda: __import__("resource").setrlimit(
                         __import__("resource").RLIMIT_AS, (6 << 30, 6 << 30)))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-500:]
        assert r.stderr.strip().endswith("not a spec file"), r.stderr


def test_a_spec_file_is_read_no_further_than_the_size_limit(tmp_path, monkeypatch):
    from ttmodels.language import _yaml, registry
    monkeypatch.setattr(registry, "MAX_TEXT", 1000)
    monkeypatch.setattr(_yaml, "MAX_TEXT", 1000)
    f = tmp_path / "big.yaml"
    f.write_text(_SPEC + "#" * 5000 + "\n")
    reads = []
    real = open

    def spy(*a, **k):
        fh = real(*a, **k)
        rd = fh.read
        fh_read = lambda n=-1: reads.append(n) or rd(n)    # noqa: E731
        return type("F", (), {"__enter__": lambda s: s, "__exit__": lambda s, *x: fh.close(),
                              "read": staticmethod(fh_read)})()
    monkeypatch.setattr("builtins.open", spy)
    with pytest.raises(SpecError, match="larger than 1000 characters"):
        load_graph(f)
    assert reads and all(0 <= n <= 1001 for n in reads), reads


# ---- item 9: control characters --------------------------------------------------------------
@pytest.mark.parametrize("ch", CONTROL_CHARS)
@pytest.mark.parametrize("where", ["comment", "value"])
def test_control_character_in_yaml_is_a_spec_error_with_its_line(ch, where, tmp_path):
    f = tmp_path / "ctl.yaml"
    bad = f"# a comment {ch}\n" if where == "comment" else f"doc: 'x{ch}y'\n"
    f.write_text(_SPEC + bad, encoding="utf-8")
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line) == (str(f), 6), str(e.value)
    assert "not allowed in YAML" in str(e.value)


def test_validate_proc_environ_is_one_line():
    r = _cli_sub(["validate", "/proc/self/environ"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-500:]
    assert r.stderr.count("\n") == 1 and "U+0000" in r.stderr, r.stderr


# ---- item 14: top-level sections of the wrong type are located ----------------------------------
@pytest.mark.parametrize("field,value", [("blocks", "5"), ("constants", "2147483648"),
                                         ("layers", "7"), ("blocks", "'text'")])
def test_top_level_section_of_the_wrong_type_names_file_and_line(field, value, tmp_path):
    f = tmp_path / "s.yaml"
    text = _SPEC if field != "layers" else _SPEC.split("layers:")[0]
    f.write_text(text + f"{field}: {value}\n")
    line = text.count("\n") + 1
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line) == (str(f), line), str(e.value)
    assert f"'{field}' must be" in e.value.reason


def test_block_layers_of_the_wrong_type_name_the_block_line(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: t\ninputs: {x: {channels: 8, size: [16, 16]}}\nblocks:\n  b: {layers: 7}\n"
                 "layers:\n  - {name: a, block: b}\n")
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line) == (str(f), 4), str(e.value)


@pytest.mark.parametrize("content", ["- a\n", "5\n", "just text\n"])
def test_import_that_is_not_a_spec_is_reported_at_the_import(content, tmp_path):
    (tmp_path / "lib.yaml").write_text(content)
    f = tmp_path / "s.yaml"
    f.write_text("name: t\nimports: [lib.yaml]\n" + _SPEC.replace("name: t\n", ""))
    with pytest.raises(SpecError) as e:
        load_graph(f)
    assert (e.value.file, e.value.line) == (str(f), 2), str(e.value)
    assert "imported file" in e.value.reason and "lib.yaml" in e.value.reason


# ---- item 18: names from expressions, scoped instances in outputs -----------------------------
def test_lone_placeholder_name_that_evaluates_to_an_integer_is_a_name():
    spec = """name: t
inputs: {x: {channels: 8, size: [16, 16]}}
params: {i: 0}
layers:
  - {name: "${i}", op: conv2d, out: 8, kernel: 3, padding: 1}
  - {name: "${i + 1}", op: relu, in: "0"}
outputs: {y: "1"}
"""
    g = load_graph(spec)
    assert [n.name for n in g.nodes] == ["0", "y"] and g.nodes[1].inputs == ["0"]


def test_an_instance_is_referenced_by_its_scope_name():
    spec = """name: t
inputs: {x: {channels: 8, size: [16, 16]}}
blocks:
  stage:
    layers:
      - {name: conv, op: conv2d, out: 8, kernel: 3, padding: 1}
      - {name: r, op: relu}
    outputs: {out: r, c: conv}
layers:
  - {name: block1, block: stage, scope: trunk_output.block1}
  - {name: block2, block: stage, scope: trunk_output.block2}
  - {name: head, op: relu, in: trunk_output.block1.c}
outputs: {block2: trunk_output.block2, head: head}
"""
    g = load_graph(spec)
    assert g.outputs == ["block2", "head"]
    assert g.producer("block2").inputs == ["trunk_output.block2.conv"]
    assert g.node("head").inputs == ["trunk_output.block1.conv"]


# ---- item 4: weights paths that are FIFOs or devices, through the cache, compare and demos ----
_PREPARE = """
import sys
from ttmodels.weights import cache
from ttmodels.errors import WeightsError
from ttmodels.language.spec import load_graph
g = load_graph(sys.argv[1])
try:
    cache.cached_prepare(g, sys.argv[2], cache=sys.argv[3])
except WeightsError as e:
    print(e)
"""


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "symlink-to-device", "directory"])
def test_weights_path_that_is_no_regular_file_is_refused_before_hashing(kind, tmp_path):
    target = _special_file(kind, tmp_path)
    spec = tmp_path / "tiny.yaml"
    spec.write_text(_TINY)
    try:
        r = subprocess.run([sys.executable, "-c", _PREPARE, str(spec), str(target),
                            str(tmp_path / "cache")], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(_REPO)})
    finally:
        if kind == "fifo":
            _release(target)
    what = {"fifo": "is a FIFO (named pipe)", "directory": "not found (it is a directory)"}.get(
        kind, "is a character device")
    assert r.returncode == 0 and what in r.stdout, (r.stdout, r.stderr[-500:])


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_compare_with_device_weights_exits_2(kind, tmp_path):
    target = _special_file(kind, tmp_path)
    spec = tmp_path / "tiny.yaml"
    spec.write_text(_TINY)
    try:
        r = _cli_sub(["compare", str(spec), "--weights", str(target)])
    finally:
        if kind == "fifo":
            _release(target)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-800:]
    assert "not a weights file" in r.stderr, r.stderr


def test_demo_with_device_weights_exits_2(tmp_path):
    r = subprocess.run([sys.executable, str(_REPO / "demos" / "resnet50.py"), "--model",
                        "resnet18", "--backend", "sim", "--weights", "/dev/zero"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(_REPO)})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-800:]
    assert "is a character device, not a weights file" in r.stderr, r.stderr


# ---- item 7: a safetensors header with a huge number of entries the graph does not use -------
def test_safetensors_reads_only_the_tensors_the_graph_needs(tmp_path, monkeypatch):
    import safetensors
    import safetensors.torch
    import torch
    from safetensors.torch import save_file

    from ttmodels.weights.cache import prepared_parameters
    g, sd = _tiny_weights()
    junk = {f"junk.{i}": torch.zeros(0) for i in range(20000)}
    f = tmp_path / "w.safetensors"
    save_file({**sd, **junk}, str(f))
    read = [0]
    real = safetensors.safe_open

    class Counting:
        def __init__(self, *a, **k):
            self.f = real(*a, **k)

        def __enter__(self):
            self.f.__enter__()
            return self

        def __exit__(self, *a):
            return self.f.__exit__(*a)

        def get_tensor(self, k):
            read[0] += 1
            return self.f.get_tensor(k)

        def get_tensors(self):
            d = self.f.get_tensors()
            read[0] += len(d)
            return d

        def __getattr__(self, name):
            return getattr(self.f, name)
    monkeypatch.setattr(safetensors, "safe_open", Counting)
    monkeypatch.setattr(safetensors.torch, "safe_open", Counting)
    params, info = prepared_parameters(g, f, cache=False)
    assert read[0] == len(sd), read[0]
    assert "ignored 20000 keys" in info and set(params) == {"conv1", "y"}


# ---- items 15, 16: compare's threshold and --ignore ------------------------------------------
def test_compare_ignore_drops_keys_the_hint_names(tiny_spec, tmp_path, capsys, monkeypatch):
    import torch
    from safetensors.torch import save_file
    g, sd = _tiny_weights()
    sd["conv1.dfl.conv.weight"] = torch.zeros(1, 16, 1, 1)
    sd["bn1.num_batches_tracked"] = torch.tensor(3)
    f = tmp_path / "w.safetensors"
    save_file(sd, str(f))
    rc, _, err = _cli(["compare", str(tiny_spec), "--weights", str(f), "--threshold", "0"], capsys)
    assert rc == 2 and "hint: ignore=['conv1.dfl.']" in err and "--ignore conv1.dfl." in err, err
    rc, out, err = _cli(["compare", str(tiny_spec), "--weights", str(f), "--threshold", "0",
                         "--ignore", "conv1.dfl."], capsys)
    assert rc == 0 and "all at or above threshold" in out, err


def test_compare_threshold_must_be_finite(tiny_spec, capsys, monkeypatch):
    from ttmodels.tools import compare
    monkeypatch.setattr(compare, "compare_layers",
                        lambda *a, **k: pytest.fail("compared with a NaN threshold"))
    for bad in ("nan", "inf", "-inf"):
        with pytest.raises(SystemExit) as e:
            _cli(["compare", str(tiny_spec), f"--threshold={bad}"], capsys)
        assert e.value.code == 2
        assert f"argument --threshold: '{bad}': give a finite number" in capsys.readouterr().err


# ---- item 13: the command line when its output fails, and on Ctrl-C --------------------------
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("how", ["stdout", "plot"])
def test_cli_output_onto_a_full_device_is_one_line(how, tmp_path):
    args = ["plan", "resnet18"]
    if how == "plot":
        (tmp_path / "p.png").symlink_to("/dev/full")
        args += ["--plot", str(tmp_path / "p.png")]
    with open("/dev/full" if how == "stdout" else os.devnull, "w") as out:
        r = subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", *args], stdout=out,
                           stderr=subprocess.PIPE, text=True, timeout=120, cwd=_REPO,
                           env={**os.environ, "PYTHONPATH": str(_REPO)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-800:]
    what = "cannot write the output" if how == "stdout" else f"--plot {tmp_path / 'p.png'}"
    assert r.stderr == f"error: {what}: No space left on device\n", r.stderr


def test_ctrl_c_exits_130_without_a_traceback(capsys, monkeypatch):
    from ttmodels.tools import cli

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_run", interrupted)
    try:
        rc = cli.main(["list"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped ttmodels.tools.cli.main")    # not: abort the test run
    assert rc == 130
    assert capsys.readouterr().err == "interrupted\n"


# ---- item 15: the BEV demo's --out ------------------------------------------------------------
def _bevdet_demo():
    import importlib.util
    spec = importlib.util.spec_from_file_location("demo_bevdet", _REPO / "demos" / "bevdet_encoder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("bev", [True, False])
@pytest.mark.parametrize("out", ["dir", "noext", "missing/x.png"])
def test_bevdet_demo_out_is_checked_before_running(bev, out, tmp_path, capsys, monkeypatch):
    mod = _bevdet_demo()
    monkeypatch.setattr(mod, "build_and_run", lambda *a, **k: pytest.fail("ran before --out"))
    target = {"dir": tmp_path, "noext": tmp_path / "bev", "missing/x.png":
              tmp_path / "missing" / "x.png"}[out]
    assert mod.main((["--bev"] if bev else []) + ["--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {target}: ") and err.count("\n") == 1, err
    assert not (tmp_path / "bev.png").exists()


# ---- item 12: a plan the planner and ttnn accept runs on the sim -----------------------------
_MIXED_CONCAT = """name: t
inputs: {x: {channels: 32, size: [16, 16]}}
layers:
  - {name: a, op: conv2d, out: 32, kernel: 3, padding: 1, layout: interleaved l1}
  - {name: b, op: upsample, in: x, scale: 1, mode: bilinear, align_corners: true}
  - {name: cat, op: concat, in: [a, b]}
outputs: {y: cat}
"""


def test_concat_of_a_tile_and_a_row_major_input_runs_on_the_sim(tmp_path):
    import torch

    import ttmodels
    from ttmodels.weights.reference import ReferenceModel, pcc
    from ttmodels.weights import load_state_dict
    f = tmp_path / "mixed.yaml"
    f.write_text(_MIXED_CONCAT)
    plan = ttmodels.plan(f)
    a, b = plan.layer("y").inputs
    assert (a.layout, b.layout) == ("tile", "row_major") and not plan.adapters
    x = torch.randn(1, 32, 16, 16, generator=torch.Generator().manual_seed(0))
    with ttmodels.build(f, weights="random", backend="sim", cache=False) as m:
        y = m(x)
    ref = ReferenceModel(m.plan.graph, load_state_dict("random", m.plan.graph)).run(x)
    y, r = (y["y"] if isinstance(y, dict) else y), (ref["y"] if isinstance(ref, dict) else ref)
    assert y.shape == (1, 64, 16, 16) and pcc(r, y) > 0.999


def test_run_time_layout_error_names_the_spec_line(tmp_path, monkeypatch):
    import torch

    import ttmodels
    from ttmodels.ops.concat import layer as concat_layer
    f = tmp_path / "mixed.yaml"
    f.write_text(_MIXED_CONCAT)

    def refuse(self, inputs):
        raise LayoutError("refused at run time", layer="y", rule="concat.same_format")
    monkeypatch.setattr(concat_layer.Concat, "__call__", refuse)
    with ttmodels.build(f, weights="random", backend="sim", cache=False) as m:
        with pytest.raises(LayoutError) as e:
            m(torch.zeros(1, 32, 16, 16))
    assert (e.value.file, e.value.line, e.value.layer) == (str(f), 6, "y"), str(e.value)


def test_the_sim_still_refuses_a_concat_of_two_dtypes():
    """What concat.same_format is about (one dtype) still holds on the sim, through the table."""
    import torch

    from ttmodels.backends import open_backend
    be = open_backend("sim")
    try:
        tt = be.tt
        a = tt.from_torch(torch.zeros(1, 1, 32, 32), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT,
                          device=be.device)
        b = tt.from_torch(torch.zeros(1, 1, 32, 32), dtype=tt.bfloat8_b, layout=tt.TILE_LAYOUT,
                          device=be.device)
        with pytest.raises(LayoutError, match=r"concat\.same_format"):
            tt.concat([a, b], dim=3)
    finally:
        be.close()
