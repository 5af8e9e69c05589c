"""BEVDet-R50 image encoder: ttmodels (sim backend) against an independent torch reference
(tests/bevdet_reference.py: torchvision resnet50 trunk + BEVDet's CustomFPN), the planned shapes,
BEVDet checkpoint loading, and BEVDet's test-time image preprocessing (ttmodels.tools.bevdet)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bevdet_reference import BEVDetEncoderReference, bevdet_keys, load_into, pcc  # noqa: E402

SPEC = "bevdet_r50_encoder"
PCC_MIN = 0.99
# Small enough for 2 shared CPU cores, large enough that C5 is not 1x1 (4x11) and the FPN's
# nearest upsample + add sees a real 2x grid.
SMALL_BATCH, SMALL_SIZE = 2, (128, 352)
FULL_BATCH, FULL_SIZE = 6, (256, 704)
EXTRA_KEYS = ("img_view_transformer.depth_net.weight", "img_view_transformer.depth_net.bias",
              "img_bev_encoder_backbone.layers.0.0.conv1.weight", "pts_bbox_head.x")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _graph(batch, size):
    import ttmodels
    return ttmodels.load_graph(SPEC, batch_size=batch, input_size=size)


def _outputs_by_role(graph, outputs: dict) -> dict:
    """{"c4", "c5", "neck"} -> tensor, by channel count (1024 / 2048 / 512), checking that the spec
    declares exactly these three outputs and the neck is the first (what ``model(x)`` returns)."""
    roles = {1024: "c4", 2048: "c5", 512: "neck"}
    names = list(graph.outputs)
    assert len(names) == 3, f"{SPEC} should output neck, C4 and C5; it outputs {names}"
    assert graph.shape_of(names[0]).c == 512, f"first output {names[0]} is not the 512-ch neck"
    got = {}
    for name in names:
        role = roles[graph.shape_of(name).c]
        assert role not in got, f"two outputs with {graph.shape_of(name).c} channels"
        got[role] = outputs[name]
    return got


def _random_weights(graph, seed=0):
    from ttmodels.weights import random_state_dict
    return random_state_dict(graph, seed=seed)


def _reference(state_dict):
    return load_into(BEVDetEncoderReference(), state_dict)


def _compare_with_reference(batch, size, seed=0):
    """ttmodels' seeded, BN-calibrated random weights (``weights="random"``) set in the reference
    module, handed to ttmodels as an nn.Module; both run the same held-out input."""
    import torch

    import ttmodels
    from ttmodels.weights import synthetic_images

    graph = _graph(batch, size)
    ref = _reference(_random_weights(graph, seed=seed))
    x = synthetic_images(batch, 3, *size, seed=1000 + seed)  # not the calibration images
    with torch.no_grad():
        c4, c5, neck = ref(x)
    t0 = time.perf_counter()
    model = ttmodels.build(SPEC, weights=ref, backend="sim", batch_size=batch, input_size=size,
                           cache=False)
    try:
        got = _outputs_by_role(graph, model.run(x))
    finally:
        model.close()
    seconds = time.perf_counter() - t0
    want = {"c4": c4, "c5": c5, "neck": neck}
    result = {}
    for role, expected in want.items():
        assert tuple(got[role].shape) == tuple(expected.shape), (role, got[role].shape, expected.shape)
        assert bool(torch.isfinite(got[role]).all()), f"{role}: non-finite values"
        result[role] = pcc(got[role], expected)
    print(f"\nbatch {batch} at {size}: PCC " + ", ".join(f"{k} {v:.5f}" for k, v in result.items())
          + f" (sim build+run {seconds:.1f} s)")
    return result


# ---------------------------------------------------------------------------------------------
# (a) sim vs the torch reference
# ---------------------------------------------------------------------------------------------

def test_reference_keys_match_spec():
    """The spec's state-dict keys and shapes are exactly BEVDet's (the reference's), minus the
    num_batches_tracked entries ttmodels accepts and ignores."""
    from ttmodels.weights.reference import expected_parameters, optional_keys

    graph = _graph(1, (64, 64))
    ref = BEVDetEncoderReference()
    ref_shapes = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    expected = expected_parameters(graph)
    tracked = {k for k in ref_shapes if k.endswith("num_batches_tracked")}
    assert set(expected) == set(ref_shapes) - tracked
    assert tracked <= optional_keys(graph)
    bad = {k: (s, ref_shapes[k]) for k, s in expected.items() if tuple(s) != ref_shapes[k]}
    assert not bad


def test_spec_float32_semantics_match_reference():
    """ttmodels' own float32 execution of the spec (ttmodels.weights.reference, no TTNN formats) equals
    the torch module: same graph, same key semantics, same FPN upsample/add order."""
    import torch

    from ttmodels.weights.reference import ReferenceModel
    from ttmodels.weights import synthetic_images

    graph = _graph(1, (64, 96))
    ref = _reference(_random_weights(graph))
    x = synthetic_images(1, 3, 64, 96, seed=9)
    with torch.no_grad():
        want = dict(zip(("c4", "c5", "neck"), ref(x)))
        out = ReferenceModel(graph, ref.state_dict()).run({next(iter(graph.inputs)): x},
                                                            return_all=True)
    got = _outputs_by_role(graph, {n: out[n] for n in graph.outputs})
    for role in want:
        assert torch.allclose(got[role], want[role], rtol=1e-4, atol=1e-4), role


def test_sim_matches_reference_small():
    result = _compare_with_reference(SMALL_BATCH, SMALL_SIZE)
    assert min(result.values()) >= PCC_MIN, result


@pytest.mark.slow
def test_sim_matches_reference_full_size():
    result = _compare_with_reference(FULL_BATCH, FULL_SIZE)
    assert min(result.values()) >= PCC_MIN, result


def test_pcc_helper_can_fail():
    import torch
    a = torch.arange(100, dtype=torch.float32)
    assert pcc(a, 3 * a + 1) == pytest.approx(1.0)
    assert pcc(a, -a) == pytest.approx(-1.0)
    assert abs(pcc(a, torch.randn(100, generator=torch.Generator().manual_seed(0)))) < 0.5


# ---------------------------------------------------------------------------------------------
# (b) shapes from the plan, without running anything
# ---------------------------------------------------------------------------------------------

def test_graph_shapes_full_size():
    g = _graph(6, (256, 704))
    (inp,) = g.inputs.values()
    assert inp.nchw == (6, 3, 256, 704)
    assert g.shape_of(g.outputs[0]).nchw == (6, 512, 16, 44)
    shapes = {g.shape_of(n).c: g.shape_of(n).nchw for n in g.outputs}
    assert shapes == {512: (6, 512, 16, 44), 1024: (6, 1024, 16, 44), 2048: (6, 2048, 8, 22)}


def test_plan_shapes_full_size():
    import ttmodels

    plan = ttmodels.plan(SPEC, batch_size=6, input_size=(256, 704))
    g = plan.graph
    (inp,) = g.inputs.values()
    assert inp.nchw == (6, 3, 256, 704)
    shapes = {g.shape_of(n).c: g.shape_of(n).nchw for n in g.outputs}
    assert g.shape_of(g.outputs[0]).nchw == (6, 512, 16, 44)
    assert shapes == {512: (6, 512, 16, 44), 1024: (6, 1024, 16, 44), 2048: (6, 2048, 8, 22)}
    assert {layer.name for layer in plan.layers} >= {n.name for n in g.nodes}


# ---------------------------------------------------------------------------------------------
# (c) BEVDet checkpoints
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bevdet_checkpoint(tmp_path_factory):
    """A BEVDet-style .pth: {"state_dict": encoder keys + other heads' keys, "meta": {...}}."""
    import torch

    graph = _graph(1, (64, 64))
    enc = _random_weights(graph, seed=3)
    sd = dict(enc)
    for k in bevdet_keys():
        if k.endswith("num_batches_tracked"):
            sd[k] = torch.tensor(1234)        # int64 like a trained checkpoint's
    g = torch.Generator().manual_seed(7)
    for k in EXTRA_KEYS:
        sd[k] = torch.randn(8, 4, generator=g)
    path = tmp_path_factory.mktemp("ckpt") / "bevdet-r50.pth"
    torch.save({"state_dict": sd, "meta": {"epoch": 24, "iter": 123, "mmdet3d_version": "1.0.0rc4",
                                           "CLASSES": ["car", "truck"]}}, path)
    return path, enc, sd, graph


def test_checkpoint_load_ignores_and_counts_other_keys(bevdet_checkpoint):
    import torch

    from ttmodels.weights import load_state_dict

    path, enc, saved, graph = bevdet_checkpoint
    loaded = load_state_dict(path, graph, select_prefix="auto")
    assert set(loaded) == set(enc)
    for k, v in enc.items():
        assert torch.equal(loaded[k], v), k
    assert sorted(loaded.report.ignored) == sorted(EXTRA_KEYS)
    assert "img_backbone" in loaded.report.ignored_reason


def test_checkpoint_strict_without_prefix_filter_names_extra_keys(bevdet_checkpoint):
    import ttmodels
    from ttmodels.weights import load_state_dict

    path, _, _, graph = bevdet_checkpoint
    with pytest.raises(ttmodels.WeightsError) as e:
        load_state_dict(path, graph)
    assert "img_view_transformer.depth_net.weight" in str(e.value)


def test_build_from_checkpoint_equals_build_from_dict(bevdet_checkpoint):
    """ttmodels.build(weights=path) ignores the non-encoder keys (and says how many) and runs
    with exactly the saved parameters: same outputs as building from the in-memory dict."""
    import torch

    import ttmodels
    from ttmodels.weights import synthetic_images

    path, enc, _, _ = bevdet_checkpoint
    x = synthetic_images(1, 3, 64, 64, seed=5)
    outs = []
    for weights in (path, enc):
        m = ttmodels.build(SPEC, weights=weights, backend="sim", batch_size=1, input_size=(64, 64),
                           cache=False)
        try:
            if weights is path:
                assert f"ignored {len(EXTRA_KEYS)} keys" in m.weights_info, m.weights_info
            outs.append(m.run(x))
        finally:
            m.close()
    assert outs[0].keys() == outs[1].keys()
    for k in outs[0]:
        assert torch.equal(outs[0][k], outs[1][k]), k


def test_safetensors_round_trip(bevdet_checkpoint, tmp_path):
    import torch
    from safetensors.torch import save_file

    from ttmodels.weights import load_state_dict

    _, enc, saved, graph = bevdet_checkpoint
    path = tmp_path / "bevdet-r50.safetensors"
    save_file({k: v.contiguous() for k, v in saved.items()}, str(path))
    loaded = load_state_dict(path, graph, select_prefix="auto")
    assert set(loaded) == set(enc)
    for k, v in enc.items():
        assert torch.equal(loaded[k], v), k
    assert len(loaded.report.ignored) == len(EXTRA_KEYS)


def test_split_checkpoint_keys():
    from ttmodels.tools.bevdet import split_checkpoint_keys

    enc, other = split_checkpoint_keys(["img_backbone.conv1.weight", "img_neck.fpn_convs.0.conv.bias",
                                        *EXTRA_KEYS, "img_backbone_extra.x"])
    assert enc == ["img_backbone.conv1.weight", "img_neck.fpn_convs.0.conv.bias"]
    assert other == [*EXTRA_KEYS, "img_backbone_extra.x"]


# ---------------------------------------------------------------------------------------------
# (d) BEVDet test-time preprocessing
# ---------------------------------------------------------------------------------------------

def _bevdet_transcription(img, input_size=(256, 704), resize_test=0.0):
    """BEVDet's PrepareImageInputs (is_train=False) + mmlabNormalize, step by step, with PIL's
    default resize filter and mmcv's imnormalize semantics (BGR<->RGB swap, subtract, * 1/std)."""
    import numpy as np
    import torch

    fH, fW = input_size
    W, H = img.size
    resize = float(fW) / float(W) + resize_test
    resize_dims = (int(W * resize), int(H * resize))
    newW, newH = resize_dims
    crop_h = int((1 - np.mean((0.0, 0.0))) * newH) - fH
    crop_w = int(max(0, newW - fW) / 2)
    img = img.resize(resize_dims).crop((crop_w, crop_h, crop_w + fW, crop_h + fH))
    a = np.array(img).astype(np.float32)[..., ::-1]
    mean = np.float64(np.array([123.675, 116.28, 103.53]).reshape(1, -1))
    stdinv = 1 / np.float64(np.array([58.395, 57.12, 57.375]).reshape(1, -1))
    a = ((a - mean) * stdinv).astype(np.float32)
    return torch.tensor(a).permute(2, 0, 1).contiguous()


def _noise_image(h, w, seed=0):
    import numpy as np
    from PIL import Image
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def test_camera_order():
    from ttmodels.tools.bevdet import CAMERA_ORDER
    assert CAMERA_ORDER == ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT",
                            "CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT")


def test_eval_transform_nuscenes():
    from ttmodels.tools.bevdet import eval_transform

    t = eval_transform(900, 1600)
    assert t.resize == pytest.approx(0.44)
    assert t.resize_dims == (704, 396)
    assert t.crop == (0, 140, 704, 396)           # bottom 256 rows, full width
    t = eval_transform(900, 1600, resize_test=0.04)  # BEVDet v1 config
    assert t.resize_dims == (768, 432)
    assert t.crop == (32, 176, 736, 432)          # centred horizontally, bottom rows


def test_preprocess_matches_bevdet_steps():
    import torch

    from ttmodels.tools.bevdet import preprocess

    for (h, w), rt in (((900, 1600), 0.0), ((450, 800), 0.04), ((300, 1200), 0.0)):
        img = _noise_image(h, w, seed=h)
        got = preprocess(img, resize_test=rt)
        assert got.shape == (3, 256, 704) and got.dtype == torch.float32
        assert torch.allclose(got, _bevdet_transcription(img, resize_test=rt), atol=1e-6)


def test_preprocess_crop_position():
    """Bands in the source land where BEVDet's crop puts them: bottom rows kept, centre columns."""
    import numpy as np
    from PIL import Image

    from ttmodels.tools.bevdet import preprocess

    a = np.zeros((900, 1600, 3), dtype=np.uint8)
    a[:450] = 255                 # top half white: resized boundary at row 198, crop starts at 140
    img = Image.fromarray(a)
    y = preprocess(img, swap_rb=False)
    white = (255 - 123.675) / 58.395
    black = (0 - 123.675) / 58.395
    assert np.allclose(y[0, :55].numpy(), white, atol=1e-4)
    assert np.allclose(y[0, 62:].numpy(), black, atol=1e-4)
    b = np.zeros((900, 1600, 3), dtype=np.uint8)
    b[:, :400] = 255              # resize_test 0.04: resized col 192, crop_w 32 -> output col 160
    y = preprocess(Image.fromarray(b), resize_test=0.04, swap_rb=False)
    assert np.allclose(y[0, :, :157].numpy(), white, atol=1e-4)
    assert np.allclose(y[0, :, 164:].numpy(), black, atol=1e-4)


def test_preprocess_normalisation_and_channel_order():
    import torch
    from PIL import Image

    from ttmodels.tools.bevdet import MEAN, STD, preprocess

    img = Image.new("RGB", (320, 180), (200, 100, 50))
    y = preprocess(img, input_size=(64, 176))
    assert y.shape == (3, 64, 176)
    # BEVDet's to_rgb on a PIL (RGB) image: planes come out B, G, R, normalised by position.
    want = torch.tensor([(50 - MEAN[0]) / STD[0], (100 - MEAN[1]) / STD[1], (200 - MEAN[2]) / STD[2]])
    assert torch.allclose(y.mean(dim=(1, 2)), want, atol=1e-5)
    assert torch.allclose(y.amax(dim=(1, 2)), y.amin(dim=(1, 2)), atol=1e-5)
    y = preprocess(img, input_size=(64, 176), swap_rb=False)
    want = torch.tensor([(200 - MEAN[0]) / STD[0], (100 - MEAN[1]) / STD[1], (50 - MEAN[2]) / STD[2]])
    assert torch.allclose(y.mean(dim=(1, 2)), want, atol=1e-5)


def test_preprocess_any_mode_and_input_untouched():
    import numpy as np
    from PIL import Image

    from ttmodels.tools.bevdet import preprocess

    gray = Image.fromarray(np.full((90, 160), 77, dtype=np.uint8), mode="L")
    rgba = Image.new("RGBA", (160, 90), (10, 20, 30, 0))   # fully transparent -> white
    for im in (gray, rgba):
        before = (im.mode, im.size, im.tobytes())
        y = preprocess(im, input_size=(32, 88))
        assert y.shape == (3, 32, 88)
        assert (im.mode, im.size, im.tobytes()) == before
    y = preprocess(rgba, input_size=(32, 88), swap_rb=False)
    assert float(y[0].mean()) == pytest.approx((255 - 123.675) / 58.395, abs=1e-4)


def test_preprocess_cameras_order():
    from PIL import Image

    from ttmodels.tools.bevdet import CAMERA_ORDER, MEAN, STD, preprocess_cameras

    images = {cam: Image.new("RGB", (160, 90), (i * 40,) * 3) for i, cam in enumerate(CAMERA_ORDER)}
    shuffled = dict(reversed(list(images.items())))
    x = preprocess_cameras(shuffled, input_size=(32, 88))
    assert x.shape == (6, 3, 32, 88)
    for i in range(6):
        assert float(x[i, 1].mean()) == pytest.approx((i * 40 - MEAN[1]) / STD[1], abs=1e-4)
    with pytest.raises(ValueError, match="CAM_BACK_RIGHT"):
        preprocess_cameras({c: images[c] for c in CAMERA_ORDER[:5]})
    with pytest.raises(ValueError, match="need 6"):
        preprocess_cameras(list(images.values())[:4])
