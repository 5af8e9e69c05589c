"""The plan picture (``ttmodels/planning/plan_plot.py``): its data model, the PNG, and that the numbers it
draws are the ones the plan table / JSON / verify records print."""
import json
import os
import re
from types import SimpleNamespace

import pytest

import ttmodels
from ttmodels.planning.planner import plan_graph
from ttmodels.language.spec import load_graph
from ttmodels.tools import cli
from ttmodels.errors import Error
from ttmodels.planning.plan_plot import (LAYOUT_COLOURS, PART_LABELS, PARTS, RUNS_AS, SPILL,
                                check_plot_path, classify_part,
                                draw_plan, figure_size, layer_live, layer_parts, plot_data,
                                stage_of, thin_ticks, tick_label)
from ttmodels.planning.plans import Adapter


@pytest.fixture(scope="module")
def r50():
    return ttmodels.plan("resnet50", batch_size=2)


@pytest.fixture(scope="module")
def r18():
    return ttmodels.plan("resnet18")


def _table_l1(plan) -> dict[str, int]:
    """The 'L1 B/core' column of the printed table, by layer name."""
    lines = str(plan).splitlines()
    head = lines[1]
    col = head.index("L1 B/core")
    out = {}
    for line in lines[3:]:
        if not line.strip():
            break
        m = re.match(r"[\d,]+", line[col:])
        out[line.split()[0]] = int(m.group(0).replace(",", ""))
    return out


# ---- data model, no pixels -----------------------------------------------------------------

def test_parts_are_classified_by_l1_model_names():
    assert classify_part("input") == classify_part("input1") == "inputs"
    assert classify_part("output") == "outputs"
    assert classify_part("halo") == "halo"
    for k in ("act_cb", "tilized_act_cb", "weights_cb", "partials_cb", "bias_cb", "cb0",
              "out_cb", "window_cb", "reduce_cb", "untilize_cb", "halo_cb", "in0_cb", "in1_cb"):
        assert classify_part(k) == "cb", k
    # copies of the input the op makes before its main program are buffers, not CBs (the next
    # program does not inherit them: liveness.layer_cbs)
    for k in ("tilized_input", "input_copy", "halo_phase_extra", "untilize_phase", "s2i_phase",
              "reduce_phase"):
        assert classify_part(k) == "inputs", k
    # a biased linear's matmul output (freed after the bias add) is a buffer, not a CB
    assert classify_part("bias_add_output") == "outputs"


def test_layer_parts_sum_to_the_estimate_and_keep_each_class(r50):
    for pl in r50.layers:
        parts = layer_parts(pl)
        assert sum(parts.values()) == pl.l1_bytes_per_core, pl.name
        raw = pl.config.l1_parts
        assert parts["inputs"] == sum(v for k, v in raw.items() if k.startswith("input") or
                                      k in ("tilized_input", "halo_phase_extra") or
                                      k.endswith("_phase"))
        # a biased linear's matmul output is a second output buffer, not a CB
        assert parts["outputs"] == raw["output"] + raw.get("bias_add_output", 0)
        assert parts["halo"] == raw.get("halo", 0)
    conv2 = layer_parts(r50.layer("layer1.0.conv2"))        # 3x3 conv: a halo buffer
    assert conv2["halo"] > 0 and conv2["cb"] > 0


# BEVDet's stem conv at batch 12 (2 MB/core unsliced): DRAM-sliced
STEM_CONV12 = {"name": "stem", "inputs": {"x": {"channels": 3, "size": [256, 704]}},
               "layers": [{"name": "conv1", "op": "conv2d", "out": 64, "kernel": 7, "stride": 2,
                           "padding": 3, "bn": "bn1", "bias": False, "act": "relu"}]}


def test_inplace_add_has_no_output_bytes():
    plan = ttmodels.plan("bevdet_r50_encoder", batch_size=6, input_size=(256, 704))
    data = plot_data(plan)
    adds = [b for b in data.layers if "in place" in b.runs_as]
    assert adds and all(b.outputs == 0 and b.op == "add" for b in adds)
    # the stem conv fits L1 by ttnn's own per-op figure; the max pool after it does not (its
    # halo, measured on the mock device, docs/layouts.md): only DRAM-sliced layers are drawn
    # DRAM interleaved with no grid
    sliced = [b for b in data.layers if "dram-sliced" in b.runs_as]
    assert "img_backbone.conv1" not in [b.name for b in sliced]
    assert "img_backbone.maxpool" in [b.name for b in sliced]
    assert all(b.layout_kind == "dram_interleaved" and b.grid is None for b in sliced)
    stem = plan_graph(load_graph(STEM_CONV12, batch_size=12))
    (b,) = [b for b in plot_data(stem).layers if "dram-sliced" in b.runs_as]
    assert b.layout_kind == "dram_interleaved" and b.grid is None


def test_linear_lowered_conv_is_split_by_the_shards_it_holds():
    spec = {"name": "mm", "inputs": {"x": {"channels": 64, "size": [56, 56]}},
            "layers": [{"name": "c0", "op": "conv2d", "out": 256, "kernel": 1,
                        "lowering": "linear"}], "outputs": ["c0"]}
    plan = ttmodels.plan(spec, batch_size=2)
    pl = plan.layer("c0")
    assert set(pl.config.l1_parts) == {"matmul"}
    parts = layer_parts(pl)
    sh_in, sw_in = pl.inputs[0].memory.shard_shape
    sh_out, sw_out = pl.output.memory.shard_shape
    assert parts["inputs"] == sh_in * sw_in * 2            # bfloat16 in0 shard
    assert parts["outputs"] == sh_out * sw_out * 2
    assert parts["cb"] > 0 and sum(parts.values()) == pl.l1_bytes_per_core
    assert plot_data(plan).layers[0].runs_as == ("as linear",)


def test_liveness_fields_are_read_when_present_and_zero_when_absent(r18):
    pl = next(l for l in r18.layers if l.live_tensors)       # the planner's liveness fields
    assert layer_live(pl) == (pl.live_l1 - pl.l1_bytes_per_core,
                              tuple(sorted(pl.live_tensors.items(), key=lambda kv: -kv[1])))
    assert layer_live(SimpleNamespace(l1_bytes_per_core=1000)) == (0, ())
    fake = SimpleNamespace(l1_bytes_per_core=1000, live_l1=1500,
                           live_tensors={"a": 200, "b": 300})
    assert layer_live(fake) == (500, (("b", 300), ("a", 200)))
    # only the names: their sum
    assert layer_live(SimpleNamespace(l1_bytes_per_core=1000, live_tensors={"a": 7}))[0] == 7
    # live_l1 wins: the bar tops at the figure the table prints
    assert layer_live(SimpleNamespace(l1_bytes_per_core=1000, live_l1=1100,
                                      live_tensors={"a": 7}))[0] == 100


def test_plan_with_liveness_bank_and_spill(r18, monkeypatch):
    plan = ttmodels.plan("resnet18")
    first = plan.layers[2]
    first.live_l1 = first.l1_bytes_per_core + 4096
    first.live_tensors = {"maxpool": 4096}
    assert plan.l1_bank_bytes == 1_360_544
    a0 = plan.adapters[0] if plan.adapters else None
    lay = plan.layers[1].output
    plan.adapters.append(Adapter(plan.layers[1].name, plan.layers[4].name, 1, "to_memory_config",
                                 lay, lay, "spill: frees 4,096 B/core for x"))
    plan.adapters.append(Adapter(plan.layers[1].name, plan.layers[5].name, 0, SPILL, lay, lay,
                                 "back"))
    data = plot_data(plan)
    b = data.layers[2]
    assert b.live == 4096 and b.total == first.live_l1 and b.live_tensors == (("maxpool", 4096),)
    assert data.bank == 1_360_544 and data.budget == plan.l1_budget
    spills = [e for e in data.edges if e.kind == SPILL]
    assert [(e.index, e.call) for e in spills] == [(4, "to_memory_config"), (5, SPILL)]
    # the planner's own spills (liveness.Spill) are drawn on the layer they make room for
    from ttmodels.planning.liveness import Spill
    plan.spills.append(Spill(plan.layers[1].name, plan.layers[2].name, lay, lay, 4096,
                             plan.layers[6].name))
    assert [e.index for e in plot_data(plan).edges if e.kind == SPILL] == [4, 5, 6]
    assert data.strip_rows[-1] == SPILL
    assert "spills" in data.subtitle and "no liveness" not in data.subtitle
    if a0 is not None:
        assert any(e.kind == a0.kind for e in data.edges)


def test_stages_follow_blocks(r50):
    data = plot_data(r50)
    # the stem (conv1, maxpool) is the resnet spec's "trunk" block
    assert [s.name for s in data.stages] == ["trunk", "layer1", "layer2", "layer3", "layer4",
                                             "avgpool", "logits"]
    assert sum(s.size for s in data.stages) == len(r50.layers)
    l2 = next(s for s in data.stages if s.name == "layer2")
    assert data.layers[l2.start].name == "layer2.0.conv1"
    assert tick_label(data.layers[l2.start]) == "0.conv1"
    assert tick_label(data.layers[0]) == "conv1"
    node = SimpleNamespace(block="img_backbone.layer3.5", name="c4")
    assert stage_of(node) == "img_backbone.layer3"


def test_ticks_are_thinned_with_stage_starts_kept(r50):
    data = plot_data(r50)
    assert thin_ticks(data, 500) == list(range(len(data.layers)))
    ticks = thin_ticks(data, 20)
    k = -(-len(data.layers) // 20)
    assert len(ticks) <= 20 + 1
    assert all(b - a >= k for a, b in zip(ticks, ticks[1:]))
    for s in data.stages:
        assert s.start in ticks or any(abs(s.start - t) < k for t in ticks)


def test_verify_records_duck_typed(r18):
    names = [pl.name for pl in r18.layers]
    recs = [
        {"name": names[0], "accepted": True, "memory_match": True, "ttnn_peak_total": 1234},
        SimpleNamespace(name=names[1], accepted=False, memory_match=True, error="TT_FATAL x",
                        ttnn_peak_total=None),
        SimpleNamespace(name=names[2], accepted=True, memory_match=False, error=None,
                        ttnn_peak_total=99),
        {"name": "nothing -> here[0]", "accepted": True, "memory_match": True},
    ]
    data = plot_data(r18, recs)
    assert [(m.index, m.peak_total, m.bad) for m in data.verify] == \
        [(0, 1234, False), (1, None, True), (2, 99, True)]
    assert data.verify_unplaced == ("nothing -> here[0]",)
    assert "ttnn: 1/3 layers accepted as planned" in data.subtitle
    assert data.bank == r18.l1_bank_bytes == 1_360_544      # the plan's own bank
    assert plot_data(r18, recs, l1_bank_bytes=1_393_312).bank == 1_393_312
    # an adapter's record, named by its edge, lands on its consumer and is not a layer's peak
    # (resnet18 has no adapter now that the global pool gives interleaved L1: resnet50's)
    r50 = ttmodels.plan("resnet50", batch_size=2)
    a = r50.adapters[0]
    data = plot_data(r50, [{"name": a.edge, "accepted": False, "memory_match": True,
                            "ttnn_peak_total": 5}])
    (m,) = data.verify
    assert m.adapter == a.edge and m.index == [pl.name for pl in r50.layers].index(a.dst) \
        and m.bad
    assert "1 adapter rejected" in data.subtitle


# ---- the path check and the CLI ------------------------------------------------------------

@pytest.mark.parametrize("rel,msg", [
    ("missing/plan.png", "does not exist"),
    ("plan.jpg", "ending in .png"),
    ("plan", "ending in .png"),
    ("adir.png", "is a directory"),
    ("afile/plan.png", "does not exist"),
])
def test_bad_plot_path_fails_before_planning(tmp_path, capsys, monkeypatch, rel, msg):
    (tmp_path / "adir.png").mkdir()
    (tmp_path / "afile").write_text("x")
    planned = []
    monkeypatch.setattr(ttmodels, "plan", lambda *a, **k: planned.append(a))
    assert cli.main(["plan", "resnet18", "--plot", str(tmp_path / rel)]) == 2
    err = capsys.readouterr().err
    assert planned == []
    assert err.count("\n") == 1 and err.startswith("error: --plot ") and msg in err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root can write into a read-only directory")
def test_unwritable_plot_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(Error, match="not writable"):
            check_plot_path(ro / "p.png")
    finally:
        ro.chmod(0o700)


def test_cli_plan_plot_writes_png_and_keeps_json_clean(tmp_path, capsys):
    from PIL import Image

    png = tmp_path / "Plan.PNG"
    assert cli.main(["plan", "resnet18", "--format", "json", "--plot", str(png)]) == 0
    out = capsys.readouterr()
    json.loads(out.out)                       # stdout is the JSON alone
    assert f"wrote {png}" in out.err
    data = plot_data(ttmodels.plan("resnet18"))
    w, h = figure_size(data)
    with Image.open(png) as im:
        im.verify()
    with Image.open(png) as im:
        assert im.format == "PNG"
        assert im.size == (round(w * 100), round(h * 100))
        im = im.convert("RGB")
        colours = {c for _, c in im.getcolors(maxcolors=1 << 24)}
    # the picture is not blank: the layout strip's and the bars' colours are in it
    hexes = {"#%02x%02x%02x" % c for c in colours}
    assert LAYOUT_COLOURS["height_sharded"] in hexes and "#4c72b0" in hexes


# ---- the numbers drawn are the numbers printed ---------------------------------------------

def test_drawn_numbers_equal_table_json_and_verify(r50):
    from matplotlib.colors import to_hex
    from matplotlib.figure import Figure

    doc = json.loads(r50.to_json())
    table = _table_l1(r50)
    recs = [{"name": l["name"], "accepted": i != 3, "memory_match": True,
             "ttnn_peak_total": l["l1_bytes_per_core"] + 17 * i}
            for i, l in enumerate(doc["layers"])]
    data = plot_data(r50, recs)
    fig = Figure(figsize=figure_size(data))
    axes = draw_plan(fig, data)
    ax = axes["l1"]
    stacks = {c.get_label(): [r.get_height() for r in c] for c in ax.containers}
    drawn_total = [sum(stacks[label][i] for label in stacks) for i in range(len(data.layers))]
    not_own = (PART_LABELS["live"], PART_LABELS["carried"])
    drawn_own = [sum(stacks[label][i] for label in stacks if label not in not_own)
                 for i in range(len(data.layers))]
    for i, layer in enumerate(doc["layers"]):
        assert drawn_own[i] == layer["l1_bytes_per_core"] == table[layer["name"]]
        assert drawn_own[i] == sum(layer["config"]["l1_parts"].values())
        assert drawn_total[i] == layer["live_l1_bytes_per_core"]
    inputs = stacks["op inputs"]
    for i, layer in enumerate(doc["layers"]):
        parts = layer["config"]["l1_parts"]
        assert inputs[i] == sum(v for k, v in parts.items() if classify_part(k) == "inputs")
    # with liveness: the live stack too, and (resnet50 b2) the carried CBs of the step before
    assert len(stacks) == len(PARTS)
    carried = stacks[PART_LABELS["carried"]]
    assert any(carried)
    for i, pl in enumerate(r50.layers):
        st = next(s for s in r50.step_l1 if s.kind == "layer" and s.name == pl.name)
        assert carried[i] == max(st.first + st.carry - st.own, 0)
    budget = [ln.get_ydata()[0] for ln in ax.get_lines() if "budget" in ln.get_label()]
    assert budget == [doc["l1_budget"]]
    # verify points sit at the records' ttnn_peak_total
    pts = [c for c in ax.collections if c.get_label() == "ttnn peak_total (verify)"]
    xy = pts[0].get_offsets()
    assert [int(y) for y in xy[:, 1]] == [r["ttnn_peak_total"] for r in recs]
    bad = [c for c in ax.collections if "rejected" in c.get_label()][0].get_offsets()
    assert [int(x) for x in bad[:, 0]] == [3]
    # the layout strip: one patch per layer in the colour of the JSON output memory
    strip = [p for p in axes["layout"].patches if (p.get_gid() or "").startswith("layout:")]
    assert [p.get_gid() for p in strip] == [f"layout:{l['name']}" for l in doc["layers"]]
    for patch, layer in zip(strip, doc["layers"]):
        mem = layer["output"]["memory"]
        kind = mem["memory_layout"] if mem["memory_layout"] != "interleaved" \
            else f"{mem['buffer']}_interleaved"
        assert to_hex(patch.get_facecolor()) == LAYOUT_COLOURS[kind]
    # adapter markers at the consumers the JSON names, one row per kind
    edges = axes["edges"]
    rows = [t.get_text() for t in edges.get_yticklabels()]
    drawn = sorted((rows[int(y)], int(x)) for c in edges.collections
                   for x, y in c.get_offsets() if rows[int(y)] not in RUNS_AS)
    idx = {l["name"]: i for i, l in enumerate(doc["layers"])}
    assert drawn == sorted((a["kind"], idx[a["dst"]]) for a in doc["adapters"])


def test_bevdet_demo_figure_has_the_plan_strip(tmp_path):
    import importlib.util
    from pathlib import Path

    import torch
    from PIL import Image

    demo = Path(__file__).resolve().parent.parent / "demos" / "bevdet_encoder.py"
    spec = importlib.util.spec_from_file_location("bevdet_encoder_demo", demo)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    plan = ttmodels.plan("resnet18")
    cams = ["A", "B"]
    previews = [Image.new("RGB", (44, 16), (200, 10, 10))] * 2
    neck = torch.zeros(2, 8, 4, 11)
    with_plan, without = tmp_path / "with.png", tmp_path / "without.png"
    mod.save_figure(with_plan, cams, previews, neck, "t", plan=plan)
    mod.save_figure(without, cams, previews, neck, "t")
    with Image.open(with_plan) as a, Image.open(without) as b:
        assert a.size[0] == b.size[0] and a.size[1] > b.size[1] + 400
        colours = {"#%02x%02x%02x" % c for _, c in a.convert("RGB").getcolors(1 << 24)}
    assert LAYOUT_COLOURS["height_sharded"] in colours and "#4c72b0" in colours


def test_readme_image_is_the_commands_picture_and_small():
    from pathlib import Path

    from PIL import Image

    root = Path(__file__).resolve().parent.parent
    rel = "docs/img/plan_resnet50_b16.png"
    assert rel in (root / "README.md").read_text()
    png = root / rel
    assert png.stat().st_size < 200_000
    # same canvas as the command draws today for resnet50 batch 16 (regenerate it when the
    # plan or the picture's layout changes: ttmodels plan resnet50 --batch 16 --plot <it>)
    w, h = figure_size(plot_data(ttmodels.plan("resnet50", batch_size=16)))
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (round(w * 100), round(h * 100))


def test_cli_verify_plot_overlays_ttnn_figures(tmp_path, capsys, monkeypatch):
    """ttmodels verify --plot on the mock device: ttnn's peak_total per layer on the plan."""
    from pathlib import Path

    from PIL import Image

    from ttmodels.planning import plan_plot

    spec = Path(__file__).resolve().parent / "specs" / "field_report" / "residual_shards.yaml"
    drawn = []
    real = plan_plot.plot_plan
    monkeypatch.setattr(plan_plot, "plot_plan",
                        lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    png = tmp_path / "verify.png"
    assert cli.main(["verify", str(spec), "--format", "json", "--plot", str(png)]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert f"wrote {png}" in out.err
    (data,) = drawn
    layers = [e for e in report["layers"] if e["kind"] == "layer"]
    assert [(m.name, m.peak_total, m.bad) for m in data.verify if m.adapter is None] == \
        [(e["name"], e["ttnn_peak_total"], False) for e in layers]
    adapters = [e["name"] for e in report["layers"] if e["kind"] == "adapter"]
    assert adapters and [m.adapter for m in data.verify if m.adapter] == adapters
    assert data.bank == report["l1_bank_bytes"] and data.budget == report["plan_budget"]
    w, h = figure_size(data)
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (round(w * 100), round(h * 100))


def test_cli_verify_bad_plot_path_fails_before_verifying(tmp_path, capsys, monkeypatch):
    import ttmodels.tools.verify as verify_mod

    ran = []
    monkeypatch.setattr(verify_mod, "verify", lambda *a, **k: ran.append(a))
    assert cli.main(["verify", "resnet18", "--plot", str(tmp_path / "nope" / "v.png")]) == 2
    err = capsys.readouterr().err
    assert ran == [] and err.count("\n") == 1 and "does not exist" in err
