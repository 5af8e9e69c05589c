"""YOLOv8n / YOLOv8s (issue 23 item 5): Ultralytics' key names, the fixed DFL buffer, PCC on the
sim against a pure-torch reference (tests/yolo_reference.py), the real run on the mock device,
the host-side decoding and NMS (ttmodels/tools/yolo.py) and the detection demo.

256x256, below the shipped 640, to keep CI short; at 640 the default profile's PCCs are lower
(0.9965-0.998 for yolov8n; README) but above 0.99, and the real run passes too. The default
profile keeps weights in bfloat16: with bfloat8_b weights (profile ``bfp8_weights``) yolov8n is
at 0.9875-0.991 at 640. Weights: seeded random with calibrated BatchNorm."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

import ttmodels
from ttmodels.errors import WeightsError
from ttmodels.weights.reference import expected_parameters, optional_keys, pcc
from ttmodels.language.spec import load_graph
from ttmodels.weights import load_state_dict, synthetic_images

from yolo_reference import YOLOv8

REPO = Path(__file__).resolve().parent.parent
SIZE = 256
OUTPUTS = ("box_p3", "cls_p3", "box_p4", "cls_p4", "box_p5", "cls_p5")
# Ultralytics' published parameter counts (model summaries: 3,157,200 / 11,166,560; DFL's 16
# fixed weights included, BatchNorm running statistics not)
PARAMS = {"yolov8n": 3_157_200, "yolov8s": 11_166_560}


@pytest.fixture(scope="module")
def setups():
    cache = {}

    def get(name):
        if name not in cache:
            graph = load_graph(name, input_size=(SIZE, SIZE))
            sd = load_state_dict("random", graph, seed=0)
            ref = YOLOv8(name).eval()
            ref.load_state_dict(sd, strict=False)        # + the DFL buffer, which it makes itself
            x = synthetic_images(1, 3, SIZE, SIZE, seed=123)
            with torch.no_grad():
                out = ref(x)
            cache[name] = (graph, ref, x, out)
        return cache[name]
    return get


@pytest.mark.parametrize("name", list(PARAMS))
def test_keys_are_ultralytics_and_the_parameter_count_is_published(name):
    graph = load_graph(name, input_size=(SIZE, SIZE))
    expected = expected_parameters(graph)
    ref_sd = YOLOv8(name).state_dict()
    # every key of the reference but the fixed DFL buffer (and BN's num_batches_tracked) is a
    # spec key with the same shape, and nothing else is
    extra = set(ref_sd) - set(expected) - optional_keys(graph)
    assert extra == {"model.22.dfl.conv.weight"}
    assert {k: tuple(ref_sd[k].shape) for k in expected} == {k: tuple(s) for k, s in
                                                             expected.items()}
    n = sum(math.prod(s) for k, s in expected.items() if "running_" not in k) + 16
    assert n == PARAMS[name]
    shapes = {o: list(graph.shape_of(o).nhwc) for o in graph.outputs}
    assert list(shapes) == list(OUTPUTS)
    s = SIZE // 8
    assert shapes["box_p3"] == [1, s, s, 64] and shapes["cls_p5"] == [1, s // 4, s // 4, 80]


def test_an_ultralytics_state_dict_loads_as_it_is(setups):
    """The checkpoint's DFL buffer is dropped by the spec's own ignore_weights: no ignore= needed;
    a spec without it names the option that drops it."""
    graph, ref, _, _ = setups("yolov8n")
    sd = ref.state_dict()
    assert "model.22.dfl.conv.weight" in sd and "model.0.bn.num_batches_tracked" in sd
    loaded = load_state_dict(sd, graph)
    assert set(loaded) == set(expected_parameters(graph))
    assert loaded.report.ignored == ["model.22.dfl.conv.weight"]
    assert "ignore_weights" in loaded.report.ignored_reason
    # and a state dict without the buffer loads too (ignore_weights is never required)
    del sd["model.22.dfl.conv.weight"]
    assert set(load_state_dict(sd, graph)) == set(loaded)

    bare = load_graph({"extends": "yolov8n", "ignore_weights": []}, input_size=(SIZE, SIZE))
    assert bare.ignore_weights == ()
    with pytest.raises(WeightsError) as e:
        load_state_dict(ref.state_dict(), bare)
    msg = str(e.value)
    assert e.value.unexpected == ["model.22.dfl.conv.weight"] and not e.value.missing
    assert "ignore=['model.22.dfl.']" in msg and "--ignore model.22.dfl." in msg
    assert set(load_state_dict(ref.state_dict(), bare, ignore=["model.22.dfl."])) == set(loaded)


def test_ignore_weights_errors_name_the_file_and_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\ninputs: {x: {channels: 3, size: 32}}\n"
                 "ignore_weights: [model.22.dfl., 3]\n"
                 "layers:\n  - {name: c, op: conv2d, out: 8, kernel: 1}\n")
    with pytest.raises(ttmodels.SpecError) as e:
        load_graph(p)
    assert e.value.line == 3 and "bad.yaml" in str(e.value) and "key prefixes" in str(e.value)


def _sim(name, weights, x, profile=None):
    with ttmodels.build(name, weights=weights, backend="sim", input_size=(SIZE, SIZE),
                        profile=profile) as m:
        return m.run(x)


@pytest.mark.parametrize("name,profile", [("yolov8n", None), ("yolov8n", "float32"),
                                          ("yolov8s", None)])
def test_sim_matches_the_torch_reference(setups, name, profile):
    graph, ref, x, want = setups(name)
    # the reference's own state dict (Ultralytics' keys, DFL buffer included), as a user has it
    got = _sim(name, ref.state_dict(), x, profile)
    assert list(got) == list(OUTPUTS)
    pccs = {k: pcc(want[k], got[k]) for k in OUTPUTS}
    for k in OUTPUTS:
        assert tuple(got[k].shape) == tuple(want[k].shape)
    print(name, profile or "default", " ".join(f"{k} {v:.5f}" for k, v in pccs.items()))
    if profile == "float32" or name == "yolov8s":
        # float32 everywhere; the fused SiLU is still the card's bfloat16 SFPU form. yolov8s'
        # default is its resolved precision: auto, float32 in every conv (configs/yolov8s.yaml)
        assert min(pccs.values()) > 0.999
    else:
        assert min(pccs.values()) >= 0.99
        # the default formats really apply: not a float32 run in disguise (float32: > 0.99999;
        # the default's HiFi3 reaches 0.9996 here)
        assert max(pccs.values()) < 0.9998


@pytest.mark.parametrize("name", list(PARAMS))
def test_plans_at_the_shipped_640(name, capsys):
    from ttmodels.tools.cli import main as cli_main
    assert cli_main(["plan", name]) == 0
    out = capsys.readouterr().out
    assert "model.22.cv3.2.2" in out or "cls_p5" in out
    assert "every step placed" in out


def test_yolov8n_runs_for_real_on_the_mock_device(real_run):
    _, r = real_run("yolov8n", input_size=(SIZE, SIZE))
    rejected = [(s.name, s.error) for s in r.steps if not s.accepted]
    assert not rejected, rejected
    assert all(s.memory_match and s.layout_match for s in r.steps)
    assert {s.op for s in r.layers} >= {"conv2d", "split", "concat", "max_pool2d", "upsample", "add"}
    assert r.ok and r.real


# ---- host-side decoding and NMS -----------------------------------------------------------------

def _one_hot_box(ltrb, reg_max=16):
    """DFL logits whose softmax puts (all but e-40 of) its mass on the given bins."""
    t = torch.full((4, reg_max), -50.0)
    for side, d in enumerate(ltrb):
        t[side, d] = 50.0
    return t.reshape(-1)


def _hand_made(nc=3):
    """Three boxes on a 64x64 input: two of class 1 that overlap (P3 cell (3, 2) and P4 cell
    (1, 1)), one of class 2 where the first is."""
    out = {}
    for lvl, s in (("p3", 8), ("p4", 4), ("p5", 2)):
        out[f"box_{lvl}"] = torch.zeros(1, 64, s, s)
        out[f"cls_{lvl}"] = torch.full((1, nc, s, s), -20.0)
    # P3 (stride 8), cell x=3, y=2: centre (28, 20); l,t,r,b = 2,1,3,4 cells
    out["box_p3"][0, :, 2, 3] = _one_hot_box((2, 1, 3, 4))
    out["cls_p3"][0, 1, 2, 3] = 3.0                       # sigmoid 0.9526
    # P4 (stride 16), cell (1, 1): centre (24, 24); l,t,r,b = 1,1,2,2 cells -> (8, 8, 56, 56)
    out["box_p4"][0, :, 1, 1] = _one_hot_box((1, 1, 2, 2))
    out["cls_p4"][0, 1, 1, 1] = 1.0                       # 0.7311: suppressed by the first
    out["cls_p4"][0, 2, 1, 1] = 0.5                       # not its best class
    # P5 (stride 32), cell (0, 1): centre (16, 48); 0,1,1,0 cells -> (16, 16, 48, 48)
    out["box_p5"][0, :, 1, 0] = _one_hot_box((0, 1, 1, 0))
    out["cls_p5"][0, 2, 1, 0] = 2.0                       # 0.8808, class 2
    return out


def test_decode_gives_the_hand_made_boxes():
    from ttmodels.tools import yolo
    boxes, scores = yolo.decode(_hand_made())
    assert boxes.shape == (1, 64 + 16 + 4, 4) and scores.shape == (1, 84, 3)
    torch.testing.assert_close(boxes[0, 2 * 8 + 3], torch.tensor([12.0, 12.0, 52.0, 52.0]))
    torch.testing.assert_close(boxes[0, 64 + 1 * 4 + 1], torch.tensor([8.0, 8.0, 56.0, 56.0]))
    torch.testing.assert_close(boxes[0, 80 + 2], torch.tensor([16.0, 16.0, 48.0, 48.0]))
    assert float(scores[0, 19, 1]) == pytest.approx(1 / (1 + math.exp(-3.0)), rel=1e-6)
    # an empty cell: all bins equal -> the mean bin (7.5 cells) on each side
    torch.testing.assert_close(boxes[0, 0], torch.tensor([-56.0, -56.0, 64.0, 64.0]))

    dets = yolo.nms(boxes, scores, conf=0.25, iou=0.45)
    d = dets[0]
    assert len(d) == 2                          # the P4 box overlaps the P3 one by IoU 0.69
    assert d.classes.tolist() == [1, 2]
    torch.testing.assert_close(d.boxes, torch.tensor([[12.0, 12.0, 52.0, 52.0],
                                                      [16.0, 16.0, 48.0, 48.0]]))
    # a stricter IoU keeps it; a higher threshold drops it
    assert len(yolo.nms(boxes, scores, conf=0.25, iou=0.75)[0]) == 3
    assert len(yolo.nms(boxes, scores, conf=0.9, iou=0.45)[0]) == 1


def test_decode_agrees_with_a_direct_dfl_conv():
    """The DFL as Ultralytics' fixed conv would compute it (arange weights over softmaxed bins)."""
    from ttmodels.tools import yolo
    g = torch.Generator().manual_seed(0)
    box = torch.randn(2, 64, 10, generator=g) * 3
    want = torch.nn.functional.conv2d(
        box.view(2, 4, 16, 10).transpose(2, 1).softmax(1),
        torch.arange(16, dtype=torch.float32).view(1, 16, 1, 1)).view(2, 4, 10)
    torch.testing.assert_close(yolo.dfl_distances(box), want)


def test_letterbox_maps_boxes_back_to_the_image():
    from PIL import Image

    from ttmodels.tools import yolo
    im = Image.new("RGB", (200, 100), (10, 20, 30))
    x, lb = yolo.letterbox(im, 64)
    assert x.shape == (3, 64, 64) and lb.scale == pytest.approx(0.32) and lb.pad == (0, 16)
    assert float(x[0, 0, 0]) == pytest.approx(114 / 255) and float(x[0, 32, 32]) == pytest.approx(10 / 255)
    d = yolo.Detections(torch.tensor([[0.0, 16.0, 32.0, 48.0]]), torch.tensor([0.9]),
                        torch.tensor([0]))
    torch.testing.assert_close(lb.to_original(d).boxes, torch.tensor([[0.0, 0.0, 100.0, 100.0]]))


def _demo():
    spec = importlib.util.spec_from_file_location("demo_detect", REPO / "demos" / "detect.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_detect_demo_writes_a_png_of_the_input_size(tmp_path, capsys):
    from PIL import Image
    src = tmp_path / "in.jpg"
    Image.new("RGB", (120, 90), (200, 100, 50)).save(src)
    out = tmp_path / "det.png"
    assert _demo().main(["--image", str(src), "--size", "64", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "random weights" in text and f"wrote {out}" in text
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size == (120, 90)
        im.load()


def test_detect_demo_refuses_bad_arguments(tmp_path, capsys):
    demo = _demo()
    assert demo.main(["--size", "100"]) == 2
    assert demo.main(["--out", str(tmp_path / "x.jpg")]) == 2
    assert demo.main(["--image", str(tmp_path / "missing.jpg"), "--out",
                      str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("error: ") for e in err)
