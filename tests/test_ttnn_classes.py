"""Issue 21: seven classes of plans that ttnn 0.81.1 rejected (or answered with memory configs
other than the plan's) on CNNs written from the docs. Each class has a small spec in
tests/specs/ttnn_classes/ that reproduces it on the code before the fix; now each plans into
something ``ttmodels verify`` accepts step by step with the planned memory configs, runs on the
sim as planned, and the sim (rules.py) rejects the unrepaired form with the rule that says why.

ttnn runs on the mock Wormhole n150 (no card; tests/conftest.py prepares it)."""
from pathlib import Path

import pytest
import torch

import ttmodels.backends.sim as sim
from ttmodels.planning import rules as R
from ttmodels.errors import LayoutError
from ttmodels.planning.layout import (BLOCK, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, MemSpec,
                             TensorLayout)
from ttmodels.planning.planner import plan_graph
from ttmodels.planning.plan_checks import check_plan
from ttmodels.language.spec import load_graph
from ttmodels.tools.verify import verify

from test_plan_sim import run_and_compare

SPECS = Path(__file__).resolve().parent / "specs" / "ttnn_classes"

# class -> (spec, load_graph keywords)
CLASSES = {
    "1-concat-unaligned-channels": ("concat_unaligned.yaml", {}),
    "2-pool-into-1x1-conv": ("pool_into_1x1.yaml", {}),
    "3-hardswish-in-matmul": ("hardswish_1x1.yaml", {}),
    "4-global-pool-of-interleaved": ("gap_interleaved.yaml", {}),
    "5-concat-mixed-layouts": ("concat_mixed_layouts.yaml", {}),
    "6-head-at-batch-10": ("head_batch10.yaml", {"batch_size": 10}),
    "7-tt-perf-upsample-concat": ("upsample_concat_ttperf.yaml", {"profile": "tt-perf"}),
}


def _graph(key):
    spec, kw = CLASSES[key]
    return load_graph(SPECS / spec, **kw)


def _accepted_as_planned(report):
    bad = [(s.name, s.error or f"{s.planned_memory} -> {s.ttnn_memory}")
           for s in report.steps if not s.ok]
    over = [(s.name, s.ttnn_peak_total) for s in report.steps
            if s.ttnn_peak_total > report.l1_bank_bytes]
    return bad, over


@pytest.mark.parametrize("key", list(CLASSES))
def test_class_spec_is_accepted_by_ttnn_as_planned(key):
    plan = plan_graph(_graph(key))
    assert check_plan(plan) == []
    report = verify(None, plan=plan)
    bad, over = _accepted_as_planned(report)
    assert report.steps and not bad and not over, (bad, over)


def test_mobilenet_v2_at_batch_10_is_accepted_by_ttnn_as_planned():
    """TT's published MobileNetV2 batch: the classifier after the global pool was refused."""
    report = verify("mobilenet_v2", batch_size=10)
    bad, over = _accepted_as_planned(report)
    assert len(report.steps) > 70 and not bad and not over, (bad, over)


@pytest.mark.parametrize("key", [k for k in CLASSES if k != "6-head-at-batch-10"])
def test_class_spec_runs_on_sim_as_planned(key):
    g = _graph(key)
    run_and_compare(plan_graph(g))


# ---- what each fix does to the plan ------------------------------------------------------

def test_unaligned_channel_concat_is_planned_interleaved():
    plan = plan_graph(_graph("1-concat-unaligned-channels"))
    cat = plan.layer("cat")
    assert all(t.memory.memory_layout == INTERLEAVED for t in cat.inputs)
    # the same inputs height-sharded on one grid break the rule
    x = plan.layer("branch1").output
    vs = R.check("concat", [x, x], {"dim": -1}, None, shapes=[(1, 1, 784, 58)] * 2)
    assert "concat.shard_align" in {v.rule for v in vs}


def test_pool_block_shards_are_resharded_before_a_1x1_conv():
    plan = plan_graph(_graph("2-pool-into-1x1-conv"))
    pool, conv = plan.layer("pool"), plan.layer("downsample")
    assert pool.output.memory.memory_layout == BLOCK and pool.output.layout == ROW_MAJOR
    assert pool.output.memory.shard_shape[0] % 32
    assert conv.inputs[0].memory != pool.output.memory
    assert [a.kind for a in plan.adapters if a.dst == "downsample"] == ["reshard"]
    # unrepaired (adapters off) the sim refuses the conv with the rule
    bare = plan_graph(_graph("2-pool-into-1x1-conv"), adapters=False)
    assert ("downsample", "conv2d.mm_block_row_major") in {(n, v.rule) for n, v in check_plan(bare)}


def test_unfusable_activations_leave_the_matmul_config():
    plan = plan_graph(_graph("3-hardswish-in-matmul"))
    project, fc = plan.layer("project"), plan.layer("fc")
    assert project.config.lowering == "linear" and project.config.matmul["fused_activation"] is None
    assert fc.config.activation is None
    assert plan.layer("expand").node.attrs["activation"] == "hardswish"


def test_global_pool_asks_for_interleaved_l1():
    for key in ("4-global-pool-of-interleaved", "6-head-at-batch-10"):
        gap = plan_graph(_graph(key)).layer("avgpool")
        assert gap.config.memory_config == MemSpec(INTERLEAVED, "l1") == gap.output.memory


def test_global_pool_of_interleaved_input_unasked_is_width_sharded():
    """What ttnn 0.81.1 gives without a memory_config (measured: 32 cores of 1x32 for 1024
    channels): the rules' output model, used by the sim."""
    x = R.output_layout("global_avg_pool", [TensorLayout(MemSpec(INTERLEAVED, "l1"), TILE_LAYOUT,
                                                          "bfloat16")],
                        {"applied_shard_scheme": "width_sharded", "output_layout": ROW_MAJOR,
                         "dtype": "bfloat16", "device_grid": (8, 8), "out_shape": (1, 1, 1, 1024)},
                        None, [(1, 1, 49, 1024)])
    assert x.memory.memory_layout == "width_sharded" and x.memory.num_cores == 32
    assert x.memory.shard_shape == (1, 32)


def test_mixed_layout_concat_is_tilized():
    plan = plan_graph(_graph("5-concat-mixed-layouts"))
    cat = plan.layer("cat")
    assert {t.layout for t in cat.inputs} == {TILE_LAYOUT}
    assert [a.kind for a in plan.adapters if a.dst == "cat"] == ["to_layout"]


def test_tt_perf_upsample_concat_keeps_bfloat8_b_in_tile():
    plan = plan_graph(_graph("7-tt-perf-upsample-concat"))
    cat = plan.layer("cat")
    assert {(t.layout, t.dtype) for t in cat.inputs} == {(TILE_LAYOUT, "bfloat8_b")}


# ---- the sim rejects what ttnn rejects -----------------------------------------------------

@pytest.fixture(scope="module")
def dev():
    return sim.open_device(device_id=0)


def _height(shard, cores=2):
    grid = sim.CoreRangeSet([sim.CoreRange(sim.CoreCoord(0, 0), sim.CoreCoord(cores - 1, 0))])
    return sim.MemoryConfig(sim.TensorMemoryLayout.HEIGHT_SHARDED, sim.BufferType.L1,
                            sim.ShardSpec(grid, shard, sim.ShardOrientation.ROW_MAJOR))


def _tensor(dev, c, layout, mc, rows=64):
    return sim.from_torch(torch.randn(1, 1, rows, c), dtype=sim.bfloat16, layout=layout,
                          device=dev, memory_config=mc)


def test_sim_refuses_a_height_sharded_concat_of_24_channels(dev):
    rm = sim.ROW_MAJOR_LAYOUT
    a, b = _tensor(dev, 24, rm, _height([32, 24])), _tensor(dev, 24, rm, _height([32, 24]))
    with pytest.raises(LayoutError) as e:
        sim.concat([a, b], dim=-1)
    assert e.value.rule == "concat.shard_align"
    a, b = _tensor(dev, 32, rm, _height([32, 32])), _tensor(dev, 16, rm, _height([32, 16]))
    assert list(sim.concat([a, b], dim=-1).shape) == [1, 1, 64, 48]


def test_sim_refuses_a_sharded_concat_of_mixed_layouts(dev):
    a = _tensor(dev, 64, sim.ROW_MAJOR_LAYOUT, _height([32, 64]))
    b = _tensor(dev, 64, sim.TILE_LAYOUT, _height([32, 64]))
    with pytest.raises(LayoutError) as e:
        sim.concat([a, b], dim=-1)
    assert e.value.rule == "concat.same_layout"


@pytest.mark.parametrize("act,refused", [("HARDSWISH", True), ("LEAKY_RELU", True),
                                         ("SILU", False)])
def test_sim_refuses_hardswish_fused_into_a_1x1_conv_and_linear(dev, act, refused):
    x = _tensor(dev, 32, sim.TILE_LAYOUT, sim.L1_MEMORY_CONFIG)
    params = [0.1] if act == "LEAKY_RELU" else []
    fused = sim.UnaryWithParam(getattr(sim.UnaryOpType, act), *params)
    w = sim.from_torch(torch.randn(32, 32, 1, 1), dtype=sim.float32)

    def conv():
        return sim.conv2d(input_tensor=x, weight_tensor=w, device=dev, in_channels=32,
                          out_channels=32, batch_size=1, input_height=8, input_width=8,
                          kernel_size=(1, 1), conv_config=sim.Conv2dConfig(activation=fused))

    def linear():
        wl = sim.from_torch(torch.randn(32, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                            device=dev)
        return sim.linear(x, wl, activation=fused)

    for call in (conv, linear):
        if refused:
            with pytest.raises(LayoutError) as e:
                call()
            assert e.value.rule == "conv2d.mm_activation"
        else:
            call()
