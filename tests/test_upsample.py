"""Bilinear upsampling: ttnn.upsample's bilinear mode planned from any producer (issue 10, defect
1) and ``align_corners: true`` lowered to ttnn.grid_sample with a precomputed grid (issue 13):
sim semantics against torch and against ttnn's own host code / golden function, the rules, the
plans."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import ttmodels
from ttmodels.errors import LayoutError
from ttmodels.planning.layout import DRAM_INTERLEAVED, HEIGHT, INTERLEAVED, ROW_MAJOR, MemSpec, TensorLayout
from ttmodels.planning.planner import plan_graph
from ttmodels.planning.plan_checks import check_plan, edge_mismatches
from ttmodels.language.spec import load_graph

REPO = Path(__file__).resolve().parent.parent


def _spec(layout: str, mode: str = "bilinear", align: bool = False, up_layout: str | None = None,
          direct: bool = False, c: int = 32, size: int = 16) -> str:
    """input -> [conv (its output in ``layout``)] -> upsample x2 -> conv."""
    up_in = "x" if direct else "c1"
    extra = f", layout: {up_layout}" if up_layout else ""
    ac = ", align_corners: true" if align else ""
    return f"""
name: up_{layout.replace(' ', '_')}
inputs:
  x: {{channels: {c}, size: [{size}, {size}]}}
defaults:
  precision: {{activations: bfloat16, weights: bfloat16, math_fidelity: HiFi4}}
layers:
  - {{name: c1, op: conv2d, out: {c}, kernel: 3, padding: 1, layout: {layout}}}
  - {{name: up, op: upsample, in: {up_in}, scale: 2, mode: {mode}{ac}{extra}}}
  - {{name: c2, op: conv2d, out: 32, kernel: 1}}
outputs: [c2, up]
"""


PRODUCERS = ["height_sharded l1", "width_sharded l1", "block_sharded l1", "interleaved l1",
             "interleaved dram"]


def _run(spec: str, x: torch.Tensor):
    model = ttmodels.build(spec, weights="random", backend="sim", batch_size=x.shape[0], cache=False)
    try:
        return model.run(x), model
    finally:
        model.close()


# ---------------------------------------------------------------------------------------------
# issue 10, defect 1: bilinear upsample plans whatever its producer gives
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("producer", PRODUCERS)
def test_bilinear_upsample_plans_from_any_producer(producer):
    plan = plan_graph(load_graph(_spec(producer)))
    up = plan.layer("up")
    x = up.inputs[0]
    # what ttnn.upsample(mode="bilinear") needs: bfloat16 ROW_MAJOR height shards, the ones its
    # own autoshard would build (16*16 rows on 64 cores, 4 rows each, all 32 channels)
    assert (x.dtype, x.layout, x.memory.memory_layout) == ("bfloat16", ROW_MAJOR, HEIGHT)
    assert (x.memory.num_cores, x.memory.shard_shape) == (64, (4, 32))
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    # the producer's own layout was what the policy asked (the adapters moved it, not the conv)
    assert plan.layer("c1").output.memory.memory_layout == producer.split()[0]


def test_bilinear_upsample_directly_on_a_graph_input():
    plan = plan_graph(load_graph(_spec("auto", direct=True)))
    assert plan.layer("up").inputs[0].memory.memory_layout == HEIGHT
    kinds = [a.kind for a in plan.adapters_into("up")]
    assert kinds == ["interleaved_to_sharded"]        # DRAM row-major bf16 input: one move
    assert check_plan(plan) == []


@pytest.mark.parametrize("producer", ["width_sharded l1", "interleaved dram"])
def test_bilinear_upsample_runs_on_sim_like_torch(producer):
    """ttnn.upsample bilinear (half-pixel centres, align_corners=False) on the sim, fed through
    the planned adapters, equals torch's bilinear upsample of the same (bf16) tensor."""
    spec = _spec(producer, direct=True)
    x = torch.randn(1, 32, 16, 16)
    out, _ = _run(spec, x)
    xb = x.to(torch.bfloat16).float()
    want = F.interpolate(xb, scale_factor=2, mode="bilinear", align_corners=False)
    assert torch.allclose(out["up"], want, atol=2e-2, rtol=1e-2)


def test_examples_my_backbone_with_bilinear_merge_validates(tmp_path, capsys):
    """The issue's repro: examples/my_backbone with mode: bilinear on its fpn_lateral_merge."""
    from ttmodels.tools.cli import main

    dst = tmp_path / "my_backbone"
    shutil.copytree(REPO / "examples" / "my_backbone", dst)
    blocks = dst / "blocks.yaml"
    text = blocks.read_text()
    assert 'out: "${out}", index: 0}' in text
    blocks.write_text(text.replace('out: "${out}", index: 0}', 'out: "${out}", index: 0, mode: bilinear}'))
    assert main(["validate", str(dst / "backbone.yaml")]) == 0, capsys.readouterr().err
    assert "valid" in capsys.readouterr().out


def test_bilinear_rule_messages_say_what_is_wrong():
    from ttmodels.planning import rules as R
    from ttmodels.ops.upsample.sharding import bilinear_upsample_memspec
    # ttnn 0.81.1 shards an interleaved bilinear input itself (measured on the mock device,
    # tests/test_rules_vs_ttnn.py); width/block shards are refused, and the message says so
    bf16_dram = TensorLayout(DRAM_INTERLEAVED, ROW_MAJOR, "bfloat16")
    assert R.check("upsample", [bf16_dram], {"mode": "bilinear"}) == []
    ws = TensorLayout(R.sharded_memspec("width_sharded", 256, 64, num_cores=2, device_grid=(8, 8)),
                      ROW_MAJOR, "bfloat16")
    (v,) = R.check("upsample", [ws], {"mode": "bilinear"}, shapes=[(1, 1, 256, 64)])
    assert "width_sharded" in v.message and "bfloat16 input" not in v.message
    hs = TensorLayout(bilinear_upsample_memspec(256, 32), ROW_MAJOR, "float32")
    (v,) = R.check("upsample", [hs], {"mode": "bilinear"}, shapes=[(1, 1, 256, 32)])
    assert "bfloat16" in v.message and "float32" in v.message


def test_planner_layout_errors_name_file_and_line(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(_spec("auto", align=True, up_layout="height_sharded l1"))
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(spec))
    assert f"{spec}:9, layer 'up'" in str(e.value)
    assert e.value.rule == "grid_sample.output"


# ---------------------------------------------------------------------------------------------
# align_corners: ttnn.grid_sample with a precomputed grid
# ---------------------------------------------------------------------------------------------

def test_align_corners_needs_bilinear():
    with pytest.raises(ttmodels.SpecError, match="align_corners needs mode: bilinear"):
        load_graph(_spec("auto", mode="nearest", align=True))


@pytest.mark.parametrize("producer", ["height_sharded l1", "block_sharded l1", "interleaved dram"])
def test_align_corners_plans_grid_sample(producer):
    plan = plan_graph(load_graph(_spec(producer, align=True)))
    up = plan.layer("up")
    assert up.config.lowering == "grid_sample" and up.config.use_precomputed_grid
    x = up.inputs[0]
    assert x.layout == ROW_MAJOR and x.memory.memory_layout in (INTERLEAVED, HEIGHT)
    assert up.output == TensorLayout(MemSpec(INTERLEAVED, "dram"), ROW_MAJOR, "bfloat16")
    assert up.config.grid_memory == DRAM_INTERLEAVED
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


def test_align_corners_interleaved_l1_policy():
    plan = plan_graph(load_graph(_spec("auto", align=True, up_layout="interleaved l1")))
    assert plan.layer("up").output.memory == MemSpec(INTERLEAVED, "l1")


@pytest.mark.parametrize("batch,size,c", [(1, 16, 32), (2, 8, 64), (1, 8, 1)])
def test_align_corners_upsample_on_sim_matches_torch(batch, size, c):
    """The whole path (plan, adapters, grid prepared at build, grid_sample on the sim) against
    torch's align_corners=True bilinear upsample of the same bfloat16 input: the only error is
    the bfloat16 weights and the final rounding."""
    x = torch.randn(batch, c, size, size)
    out, _ = _run(_spec("auto", align=True, direct=True, c=c, size=size), x)
    xb = x.to(torch.bfloat16).float()
    want = F.interpolate(xb, scale_factor=2, mode="bilinear", align_corners=True)
    assert out["up"].shape == want.shape
    err = (out["up"] - want).abs()
    assert float(err.max()) < 0.03 and float(err.mean()) < 3e-3
    # corners are copied exactly (weights 1, 0, 0, 0)
    assert torch.equal(out["up"][..., 0, 0], xb[..., 0, 0])
    assert torch.equal(out["up"][..., -1, -1], xb[..., -1, -1])
    # and it is not the half-pixel (align_corners=False) upsample
    other = F.interpolate(xb, scale_factor=2, mode="bilinear", align_corners=False)
    assert float((out["up"] - other).abs().mean()) > 10 * float(err.mean())


def test_align_corners_grid_is_torch_sampling_lattice():
    from ttmodels.ops.upsample.layer import align_corners_grid
    g = align_corners_grid(2, 5, 9)
    assert g.shape == (2, 5, 9, 2) and g.dtype == torch.float32
    src = torch.arange(3 * 4, dtype=torch.float32).view(1, 1, 3, 4)
    want = F.interpolate(src, size=(5, 9), mode="bilinear", align_corners=True)
    got = F.grid_sample(src, g[:1], mode="bilinear", align_corners=True)
    assert torch.allclose(got, want, atol=1e-5)
    assert align_corners_grid(1, 1, 1).flatten().tolist() == [-1.0, -1.0]


# ---------------------------------------------------------------------------------------------
# the sim's grid_sample / prepare_grid_sample_grid against ttnn's own code
# ---------------------------------------------------------------------------------------------

def _ttnn():
    return pytest.importorskip("ttnn")


@pytest.mark.parametrize("align", [True, False])
def test_prepare_grid_is_bit_exact_with_ttnn(align):
    """ttnn.prepare_grid_sample_grid runs on the host (no card): the sim's is bit for bit the
    same, corner indices (int16 patterns, negative ones included) and bfloat16 weights."""
    ttnn = _ttnn()
    from ttmodels.backends import sim
    g = torch.Generator().manual_seed(0)
    grid = torch.rand(2, 9, 13, 2, generator=g) * 2.4 - 1.2          # some points outside
    shape = [2, 5, 7, 32]
    real = ttnn.to_torch(ttnn.prepare_grid_sample_grid(
        ttnn.from_torch(grid, dtype=ttnn.float32), shape, mode="bilinear", padding_mode="zeros",
        align_corners=align, output_dtype=ttnn.bfloat16))
    mine = sim.prepare_grid_sample_grid(
        sim.from_torch(grid, dtype=sim.float32), shape, mode="bilinear", padding_mode="zeros",
        align_corners=align, output_dtype=sim.bfloat16)
    assert real.dtype == torch.bfloat16 and mine.dtype == sim.bfloat16
    # the bits the sim stores (to_torch's float32 -> bfloat16 conversion would canonicalise the
    # NaN patterns that negative indices are)
    from ttmodels.ops.upsample.sim import _bf16_bits
    assert torch.equal(real.view(torch.int16), _bf16_bits(mine._data))
    assert (real[..., :2].view(torch.int16) < 0).any()                 # the test covers them


def test_sim_grid_sample_equals_ttnn_golden():
    """The sim's bilinear grid_sample on a precomputed grid equals ttnn's golden function for it
    (ttnn/operations/pool.py), bit for bit after bfloat16 rounding."""
    ttnn = _ttnn()
    from ttnn.operations.pool import _grid_sample_precomputed_reference as golden

    from ttmodels.backends import sim
    from ttmodels.ops.upsample.layer import align_corners_grid
    n, h, w, c, ho, wo = 2, 6, 5, 64, 11, 17
    x = torch.randn(n, h, w, c).to(torch.bfloat16)
    pre_host = sim.prepare_grid_sample_grid(sim.from_torch(align_corners_grid(n, ho, wo), dtype=sim.float32),
                                            [n, h, w, c], align_corners=True)
    grid_bf16 = sim.to_torch(pre_host)
    want = golden(x, grid_bf16, "bilinear", n, ho, wo, c)
    dev = sim.open_device(device_id=0)
    xt = sim.from_torch(x, dtype=sim.bfloat16, device=dev)
    gt = sim.to_device(pre_host, dev)
    y = sim.grid_sample(xt, gt, use_precomputed_grid=True, align_corners=True)
    got = sim.to_torch(y)
    assert got.shape == want.shape == (n, ho, wo, c)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_sim_grid_sample_rules():
    from ttmodels.backends import sim
    from ttmodels.ops.upsample.layer import align_corners_grid
    dev = sim.open_device(device_id=0)
    if True:
        pre = sim.to_device(sim.prepare_grid_sample_grid(
            sim.from_torch(align_corners_grid(1, 8, 8), dtype=sim.float32), [1, 4, 4, 32],
            align_corners=True), dev)
        tiled = sim.from_torch(torch.randn(1, 4, 4, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                               device=dev)
        with pytest.raises(LayoutError) as e:
            sim.grid_sample(tiled, pre, use_precomputed_grid=True)
        assert e.value.rule == "grid_sample.input"
        narrow = sim.from_torch(torch.randn(1, 4, 4, 16), dtype=sim.bfloat16, device=dev)
        with pytest.raises(LayoutError, match="multiple of 32"):
            sim.grid_sample(narrow, pre, use_precomputed_grid=True)
        ok = sim.from_torch(torch.randn(1, 4, 4, 32), dtype=sim.bfloat16, device=dev)
        f32 = sim.from_torch(torch.zeros(1, 8, 8, 6), dtype=sim.float32, device=dev)
        with pytest.raises(LayoutError, match="precomputed grid must be bfloat16") as e:
            sim.grid_sample(ok, f32, use_precomputed_grid=True)
        assert e.value.rule == "grid_sample.grid"
        y = sim.grid_sample(ok, pre, use_precomputed_grid=True)
        assert tuple(y.shape) == (1, 8, 8, 32) and y.layout == sim.ROW_MAJOR_LAYOUT
        # no memory_config: the grid's (DRAM interleaved)
        assert not y.memory_config().is_sharded()
        two = sim.from_torch(torch.randn(2, 4, 4, 32), dtype=sim.bfloat16, device=dev)
        with pytest.raises(LayoutError, match="batch size mismatch"):
            sim.grid_sample(two, pre, use_precomputed_grid=True)


def test_rules_table_documents_grid_sample():
    from ttmodels.planning import rules as R
    from ttmodels.ops.upsample.sharding import bilinear_upsample_memspec
    for rid in ("grid_sample.input", "grid_sample.grid", "grid_sample.output"):
        assert "grid_sample_device_operation.cpp" in R.RULES[rid].source
    assert bilinear_upsample_memspec(100, 48) == MemSpec(HEIGHT, "l1", (8, 8), 64, (2, 48))
    assert bilinear_upsample_memspec(10, 48).num_cores == 10


# ---------------------------------------------------------------------------------------------
# issue 33 item 4: a bilinear upsample of channels not a multiple of 32 (torchvision's
# segmentation heads: 21 classes; smp's: 1) runs channel-padded
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [21, 1])
@pytest.mark.parametrize("producer", ["height_sharded l1", "interleaved dram"])
def test_bilinear_upsample_of_odd_channels_plans_channel_padded(producer, c):
    """ttnn's bilinear kernel refuses channels % 32 (upsample_bilinear_program_factory_
    multicore.cpp:67) and a 21-channel row-major shard has a 42 B page (interleaved_to_sharded
    refuses it): the plan pads to 32 channels inside the layer and writes interleaved."""
    spec = _spec(producer, c=c, size=8).replace("out: {c}".format(c=c), f"out: {c}")
    plan = plan_graph(load_graph(spec))
    up = plan.layer("up")
    x = up.inputs[0]
    assert (x.dtype, x.layout, x.memory.memory_layout) == ("bfloat16", ROW_MAJOR, INTERLEAVED)
    assert up.config.pad_c == 32
    assert up.output.memory == MemSpec(INTERLEAVED, "dram") and up.output.layout == ROW_MAJOR
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    # the rules refuse the unpadded form that the plan used to make
    from ttmodels.planning import rules as R
    bare = {k: v for k, v in up.config.as_attrs().items() if k not in ("pad_c", "memory_config")}
    assert "upsample.channels" in {v.rule for v in R.check(
        "upsample", [x], bare, None, shapes=[plan.graph.shape_of("c1").flat])}


@pytest.mark.parametrize("c", [21, 1])
def test_channel_padded_bilinear_upsample_runs_on_sim_like_torch(c):
    spec = _spec("height_sharded l1", c=c, size=8, direct=True)
    x = torch.randn(1, c, 8, 8)
    out, _ = _run(spec, x)
    xb = x.to(torch.bfloat16).float()
    want = F.interpolate(xb, scale_factor=2, mode="bilinear", align_corners=False)
    assert out["up"].shape == want.shape
    assert torch.allclose(out["up"], want, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("producer", ["height_sharded l1", "interleaved dram"])
def test_align_corners_upsample_of_one_channel_plans_channel_padded(producer):
    """smp DeepLabV3Plus's 1-class head (UpsamplingBilinear2d: align_corners): grid_sample needs
    channels % 32, so the layer pads an interleaved input in DRAM and slices back."""
    plan = plan_graph(load_graph(_spec(producer, align=True, c=1, size=8)))
    up = plan.layer("up")
    assert up.config.lowering == "grid_sample" and up.config.pad_c == 32
    assert up.inputs[0].memory.memory_layout == INTERLEAVED
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


@pytest.mark.parametrize("producer", ["height_sharded l1", "block_sharded l1", "auto"])
def test_nearest_upsample_of_16_channels_from_tile_shards(producer):
    # timm hrnet_w18_small's fuse layers: a 1x1 conv to 16 channels, then a nearest x2. The TILE
    # shards are a tile wide; their ROW_MAJOR copy would be 16 wide, which no shard spec tiles,
    # so the planner must leave the shards first (it raised an internal adapter error)
    plan = plan_graph(load_graph(_spec(producer, mode="nearest", c=16, size=24)))
    x = plan.layer("up").inputs[0]
    assert x.layout == ROW_MAJOR
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    y, _ = _run(_spec(producer, mode="nearest", c=16, size=24), torch.randn(1, 16, 24, 24))
    assert y["up"].shape == (1, 16, 48, 48)
