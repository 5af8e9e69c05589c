"""The planner never fails a model ttnn can run (issue 33): no internal error, and a fallback
that fits for every op. Each spec is the smallest that showed the failure in an imported model."""
import pytest

from ttmodels.errors import LayoutError
from ttmodels.language.spec import load_graph
from ttmodels.planning import rules as R
from ttmodels.planning.layout import HEIGHT
from ttmodels.planning.planner import plan_graph

F32 = {"activations": "float32", "weights": "float32", "math_fidelity": "HiFi4",
       "fp32_accum": True}

# googlenet's inception4e.branch4: a row-major max pool (block shards of 528 channels) into a
# 1x1 conv that wants height shards of tile-padded (544) channels, which no reshard of a
# row-major tensor of 528 channels holds
POOL_INTO_1X1 = {"name": "pool_1x1", "inputs": {"x": {"channels": 528, "size": [14, 14]}},
                 "layers": [{"name": "mp", "op": "max_pool2d", "kernel": 3, "stride": 1,
                             "padding": 1, "ceil_mode": True},
                            {"name": "c1", "op": "conv2d", "out": 128, "kernel": 1,
                             "act": "relu"}]}

# efficientnet_b2 float32's features.6.1 (mnasnet1_3 float32 alike): a 1x1 expansion to 1,248
# float32 channels whose weights (1 MB) fill a height-sharded conv's L1; its smaller-block
# fallbacks put width shards on fewer cores than shards
WIDE_EXPAND = {"name": "wide_expand", "inputs": {"x": {"channels": 720, "size": [7, 7]}},
               "defaults": {"precision": F32},
               "layers": [{"name": "c0", "op": "conv2d", "out": 208, "kernel": 1},
                          {"name": "expand", "op": "conv2d", "out": 1248, "kernel": 1,
                           "act": "silu", "bias": True},
                          {"name": "dw", "op": "conv2d", "out": 1248, "kernel": 5,
                           "padding": 2, "groups": 1248},
                          {"name": "pw", "op": "conv2d", "out": 208, "kernel": 1},
                          {"name": "add", "op": "add", "in": ["pw", "c0"]}]}

# shufflenet_v2_x1_0 float32's conv5.0: 464 -> 1,024 channels at 7x7 (in1_cb 1.97 MB on every
# core of any conv2d layout)
SHUFFLE_CONV5 = {"name": "shuffle_conv5", "inputs": {"x": {"channels": 464, "size": [7, 7]}},
                 "defaults": {"precision": F32},
                 "layers": [{"name": "c", "op": "conv2d", "out": 1024, "kernel": 1, "bias": True,
                             "act": "relu"}]}


def _every_sharded_tensor_is_valid(plan):
    for layer in plan.layers:
        for t, lay in layer.tensor_layouts().items():
            assert not R.tensor_checks(lay, plan.graph.shape_of(t).flat, t), (t, lay)
    for a in plan.adapters:
        assert not R.tensor_checks(a.after, plan.graph.shape_of(a.src).flat, a.edge)


@pytest.mark.parametrize("spec", [POOL_INTO_1X1, WIDE_EXPAND], ids=lambda s: s["name"])
def test_plans_without_an_internal_error(spec):
    plan = plan_graph(load_graph(spec), oracle=False)
    _every_sharded_tensor_is_valid(plan)


def test_a_row_major_pool_reaches_a_tile_padded_conv_interleaved():
    plan = plan_graph(load_graph(POOL_INTO_1X1), oracle=False)
    (a,) = [a for a in plan.adapters if a.dst == "c1"]
    assert a.kind == "sharded_to_interleaved" and a.after.layout == "row_major"


@pytest.mark.parametrize("spec, layer", [(WIDE_EXPAND, "expand"), (SHUFFLE_CONV5, "c")],
                         ids=["wide_expand", "shuffle_conv5"])
def test_a_1x1_conv_no_conv2d_layout_fits_runs_as_linear(spec, layer):
    plan = plan_graph(load_graph(spec), oracle=False)
    assert plan.layer(layer).config.lowering == "linear"
    assert plan.layer(layer).l1_bytes_per_core <= plan.l1_bank_bytes


# timm selecsls42b's features.0: the block's first conv (after the stem) is height-sharded on
# 56 cores of an 8x7 grid, the two 3x3 branches on 49 of the same extent: ttnn refuses the
# concat ("Sharded tensors must have the same grid": it compares CoreRangeSets)
SLS = {"name": "sls", "inputs": {"x": {"channels": 3, "size": [224, 224]}},
       "layers": [{"name": "stem", "op": "conv2d", "out": 32, "kernel": 3, "stride": 2,
                   "padding": 1, "act": "relu"},
                  {"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "stride": 2,
                   "padding": 1, "act": "relu"},
                  {"name": "c2", "op": "conv2d", "out": 64, "kernel": 1, "act": "relu"},
                  {"name": "c3", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                   "act": "relu"},
                  {"name": "c4", "op": "conv2d", "out": 64, "kernel": 1, "act": "relu"},
                  {"name": "c5", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                   "act": "relu"},
                  {"name": "cat", "op": "concat", "in": ["c1", "c3", "c5"]}]}


def test_a_concat_never_gets_sharded_inputs_on_different_core_sets():
    plan = plan_graph(load_graph(SLS), oracle=False)
    ins = plan.layer("cat").inputs
    assert all(t.memory.sharded for t in ins)
    assert len({(t.memory.grid, t.memory.num_cores, t.memory.orientation) for t in ins}) == 1


def test_the_concat_rule_compares_core_sets_not_extents():
    from ttmodels.ops.concat.rules import ConcatArgs
    from ttmodels.planning.layout import HEIGHT, TILE_LAYOUT, MemSpec, TensorLayout
    a = TensorLayout(MemSpec(HEIGHT, "l1", (8, 7), 56, (64, 64)), TILE_LAYOUT, "bfloat16")
    b = TensorLayout(MemSpec(HEIGHT, "l1", (8, 7), 49, (64, 32)), TILE_LAYOUT, "bfloat16")
    vs = R.check("concat", [a, b], ConcatArgs(dim=-1), None,
                 shapes=[(1, 1, 3136, 64), (1, 1, 3136, 32)])
    assert [v.rule for v in vs] == ["concat.sharded"]


# googlenet float32: ttnn 0.81.1's pool2d reads bfloat16 only and writes bfloat16 / bfloat8_b /
# bfloat4_b only (a float32 window pool therefore runs as slices and binaries)
F32_POOL = {"name": "f32_pool", "inputs": {"x": {"channels": 32, "size": [56, 56]}},
            "defaults": {"precision": F32},
            "layers": [{"name": "c1", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1,
                        "act": "relu"},
                       {"name": "mp", "op": "max_pool2d", "kernel": 3, "stride": 2,
                        "padding": 1},
                       {"name": "c2", "op": "conv2d", "out": 64, "kernel": 1}]}


def test_a_float32_max_pool_stays_float32():
    """pool2d would read and write bfloat16 only: a float32 max pool runs exactly instead
    (ops/pool/exact_window.py; tests/test_pool_exact_window.py), with no typecast."""
    plan = plan_graph(load_graph(F32_POOL), oracle=False)
    assert plan.layer("c1").output.dtype == "float32"
    mp = plan.layer("mp")
    assert mp.config.exact and mp.inputs[0].dtype == "float32" == mp.output.dtype
    assert "typecast" not in [a.kind for a in plan.adapters if a.dst == "mp"]


# efficientnet_b2 float32's features.7.1 squeeze-excite: a row-major float32 1x1 map (there the
# global pool's output; here the graph input) into the 1x1 fc1, which conv2d tilizes (two float32 copies of one tile row); height
# shards, as the model's L1 pressure made the planner choose there
F32_SE = {"name": "f32_se", "inputs": {"x": {"channels": 2112, "size": [1, 1]}},
          "defaults": {"precision": F32},
          "layers": [{"name": "fc1", "op": "conv2d", "out": 88, "kernel": 1, "bias": True,
                      "act": "silu", "layout": "height_sharded"}]}


def test_a_float32_row_major_input_tilizes_to_float32_tiles():
    """ttnn sizes fc1 at 1,114,368 B per core (the oracle) and its tilized copies at 270,336 B
    (the real run's CB clash); the estimate said 979,200 with 135,168 B copies."""
    fc1 = plan_graph(load_graph(F32_SE), oracle=False, addresses=False).layer("fc1")
    assert fc1.config.l1_parts["tilized_input"] == 270_336
    # ttnn's 1,114,368 less the 8,448 B L1 input the model's fc1 had (here it is in DRAM)
    assert fc1.l1_bytes_per_core == 1_114_368 - 8_448
    # by address: its CBs end where ttnn's did (929,120) and run into the second copy, as in
    # the real run; the planner refuses what the height shards the spec asks for cannot hold
    with pytest.raises(LayoutError, match="CB clash: its circular buffers end at 929,120"):
        plan_graph(load_graph(F32_SE), oracle=False)


def test_a_float32_global_pool_reads_and_writes_float32():
    """inception_v3 float32's avgpool (8x8, 2048 channels) ran as pool2d and was refused a
    float32 output (generic_pools.cpp:154); it now runs as ttnn.mean, float32 throughout
    (ops/pool/exact_global.py, tests/test_pool_exact_global.py)."""
    spec = {"name": "f32_gap", "inputs": {"x": {"channels": 2048, "size": [8, 8]}},
            "defaults": {"precision": F32},
            "layers": [{"name": "gap", "op": "global_avg_pool"}]}
    gap = plan_graph(load_graph(spec), oracle=False).layer("gap")
    assert gap.config.lowering == "mean"
    assert gap.inputs[0].dtype == "float32" and gap.output.dtype == "float32"


def test_a_matmul_conv_ttnn_sizes_over_its_estimate_carries_ttnns_figure(tmp_path):
    """timm dpn68 float32's features.conv4_12.c1x1_a (a 1x1 conv whose estimate is one
    ``matmul`` figure): ttnn sized it 86,016 B over the estimate and its CBs ran into an L1
    buffer in the real run; the plan now carries ttnn's figure, the excess as CBs, as for every
    other op (``planner.with_ttnn_figure``)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_plan_ttnn_figures import Scripted, _estimate
    from ttmodels.planning import liveness as lv
    spec = {"name": "mm", "inputs": {"x": {"channels": 672, "size": [14, 14]}},
            "defaults": {"precision": F32},
            "layers": [{"name": "c1", "op": "conv2d", "out": 512, "kernel": 1}]}

    def op_l1(step):
        return _estimate(step) + 86_016 if step.kind == "layer" else 1000

    base = plan_graph(load_graph(spec), oracle=False).layer("c1")
    assert "matmul" in base.config.l1_parts
    plan = plan_graph(load_graph(spec), oracle=Scripted(tmp_path, op_l1))
    c1 = plan.layer("c1")
    assert c1.l1_bytes_per_core == base.l1_bytes_per_core + 86_016
    assert lv.layer_cbs(c1) - lv.layer_cbs(base) == 86_016


# efficientnet_b0 at batch 16: features.2.0.block.2.avgpool, the SE block's global pool over
# the DRAM output of a DRAM-sliced depthwise conv (16x56x56x96). ttnn 0.81.1's pool2d slices a
# DRAM input by output rows, and a whole-map window has one: "DRAM Auto slice could not find
# valid slice configuration" (the real run; ttnn's verdict "rejected")
SE_POOL_FROM_DRAM = {"name": "se_pool_dram", "batch": 16,
                     "inputs": {"x": {"channels": 96, "size": [56, 56]}},
                     "layers": [{"name": "dw", "op": "conv2d", "out": 96, "kernel": 3,
                                 "padding": 1, "groups": 96, "layout": "interleaved dram"},
                                {"name": "gap", "op": "global_avg_pool"}]}


def test_a_global_pool_reads_a_dram_input_from_l1_height_shards():
    plan = plan_graph(load_graph(SE_POOL_FROM_DRAM), oracle=False)
    assert plan.layer("dw").output.memory.buffer == "dram"
    (a,) = [a for a in plan.adapters if a.dst == "gap"]
    mem = a.after.memory
    assert a.kind == "interleaved_to_sharded" and mem.buffer == "l1"
    assert mem.memory_layout == HEIGHT and mem.num_cores <= 64
    # whole tile rows on every core, none empty: the rows are the shards exactly
    assert mem.shard_shape[0] % 32 == 0 and mem.shard_shape[0] * mem.num_cores == 16 * 56 * 56
    assert plan.layer("gap").inputs[0].memory == mem
    assert plan.layer("gap").l1_bytes_per_core <= plan.l1_bank_bytes
    _every_sharded_tensor_is_valid(plan)


def test_a_layer_ttnn_rejects_is_refused_with_ttnns_reason(tmp_path):
    """``plan`` never returns a plan with a step ttnn rejected (issue 33): the layer ttnn
    refuses (here scripted: the global pool, as ttnn did efficientnet_b0's at batch 16 before
    the pool read from L1) is refused, naming the layer and ttnn's own message."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_plan_ttnn_figures import Scripted
    from ttmodels.tools import ttnn_oracle as O
    why = "DRAM Auto slice could not find valid slice configuration."

    class RejectsThePool(Scripted):
        def _run_batch(self, batch):
            return [O.Answer(False, error=why) if s.kind == "layer" and s.op ==
                    "global_avg_pool" else a for s, a in zip(batch, super()._run_batch(batch))]

    o = RejectsThePool(tmp_path, lambda s: 1000)
    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(SE_POOL_FROM_DRAM), oracle=o)
    assert e.value.layer == "gap" and why in str(e.value)


def test_the_se_pool_over_a_dram_map_runs_for_real(real_run):
    """The real run on the mock n150 (ttnn's own allocator and validation): the pool from L1
    shards runs where the pool from DRAM was "DRAM Auto slice could not find valid slice
    configuration"."""
    plan, report = real_run(SE_POOL_FROM_DRAM)
    assert plan.layer("dw").output.memory.buffer == "dram"
    assert report.real and report.completed, report
    bad = [(s.name, s.error) for s in report.steps if not s.ok]
    assert not bad and {s.name for s in report.steps} >= {"dw", "gap"}


def test_a_conv_whose_every_candidate_ttnn_rejects_is_refused(tmp_path):
    """Before, the table's first candidate was kept and the plan returned with the step
    rejected; now ``plan`` refuses the conv with ttnn's message."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_plan_ttnn_figures import SMALL, Scripted
    from ttmodels.tools import ttnn_oracle as O

    class RejectsEvery3x3(Scripted):
        def _run_batch(self, batch):
            return [O.Answer(False, error="Scripted: no 3x3") if s.kind == "layer" and
                    s.op == "conv2d" and s.attrs["kernel"] == (3, 3) else a
                    for s, a in zip(batch, super()._run_batch(batch))]

    with pytest.raises(LayoutError) as e:
        plan_graph(load_graph(SMALL), oracle=RejectsEvery3x3(tmp_path, lambda s: 1000))
    assert e.value.layer == "c1"
    assert "ttnn rejects conv2d as planned: Scripted: no 3x3" in str(e.value)
