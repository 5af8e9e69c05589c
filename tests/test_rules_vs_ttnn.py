"""ttnn is the ground truth of the rules table: rules.check's verdict against ttnn 0.81.1's own
acceptance on a mock Wormhole n150, for a generated corpus of single-op cases
(tests/rules_corpus.py), for every planner test's graph planned with adapters disabled, and
for every step of the test specs of issue 21's classes and the field report, with adapters and
without (tests/rules_models.py through the planner's ttnn oracle; every shipped model and every
test spec: scripts/rules_vs_ttnn_models.py).

Any disagreement fails unless it is listed in KNOWN_DIFFERENCES below (the one list of known
differences; docs/layouts.md explains each). A listed case that now agrees fails too, so the
list never goes stale. Run ``python tests/rules_corpus.py --plans`` for the full table.
"""
import pytest

import rules_corpus as C

# case id -> why rules.check and ttnn 0.81.1 differ there (docs/layouts.md, "Known differences")
KNOWN_DIFFERENCES = {
    # the planner test "backbone" planned with adapters off, since the conv output specs follow
    # ttnn (49/61-core grids): its channel concat gets height shards of unequal grids, which
    # ttnn 0.81.1 accepts and concat.sharded refuses (stricter; with adapters the planner
    # reshards them onto one grid)
    "plan/backbone/cat": "channel concat of height shards on different grids: accepted by ttnn, "
                         "refused by concat.sharded",
    # ttnn accepts, the table refuses (stricter; the planner never produces these inputs)
    "concat/w2+dram/row_major": "row-major width/block-sharded first input next to an interleaved "
                                "one: accepted by ttnn, refused by concat.mixed",
    "concat/w4+dram/row_major": "as above",
    "concat/b2x2+dram/row_major": "as above",
    "concat/b2x4+dram/row_major": "as above",
    "global_avg_pool/hdram/tile/None/row_major-bfloat16": "a DRAM height-sharded input to a "
        "global average pool is accepted (max/avg pool with a 2x2 window refuse it); "
        "tensor.shard_l1 refuses it for every pool",
    "global_avg_pool/hdram/row_major/None/row_major-bfloat16": "as above",
    "adaptive_avg_pool2d/1x1/hdram/tile": "as global_avg_pool: a DRAM height-sharded input to "
        "a 1x1 adaptive average pool is accepted (4x4 refuses it); tensor.shard_l1 refuses it",
    "adaptive_avg_pool2d/1x1/hdram/row_major": "as above",
    **{f"slice/{m}/{lay}/{r}": "ttnn.slice accepts an L1 height-sharded input (TILE or row-major); "
       "slice.memory refuses it (stricter; the planner moves a sharded input to interleaved first)"
       for m in ("h2", "h8", "h20")
       for lay, rs in (("tile", ("0-32", "32-64")), ("row_major", ("0-16", "8-40"))) for r in rs},
    **{f"split/{m}/{lay}/{r}": "as slice: ttnn.slice accepts an L1 height-sharded input; "
       "slice.memory refuses it (the planner moves a sharded split input to interleaved first)"
       for m in ("h2", "h8", "h20")
       for lay, rs in (("tile", ("32-32",)), ("row_major", ("32-32", "8-56"))) for r in rs},
    **{f"conv_transpose2d/{k}/dram": "a DRAM input: ttnn 0.81.1 takes conv_transpose2d's DRAM "
       "path (its output DRAM interleaved, not the planned shards); conv_transpose2d.l1_path "
       "refuses it (the planner moves the input to L1 first)"
       for k in ("2x2s2", "3x3s2p1op1", "3x3s2p3")},
    **{f"conv_transpose2d/3x3s2p3/{m}": "padding over dilation * (kernel - 1): ttnn's host-side "
       "validation accepts it (its unsigned halo pads wrap and the full-input equality check "
       "still holds modulo 2^32); conv_transpose2d.real_padding refuses it (stricter: what the "
       "halo reads on a card is unknown)" for m in ("l1", "h2", "h8", "h20", "w2")},
    # ttnn runs it but does not do what was asked
    "global_avg_pool/h8/tile/None/tile-bfloat8_b": "a whole-map avg_pool2d of a sharded input "
        "returns bfloat16 whatever dtype is asked; the table has no rule for it (it would make "
        "the tt-perf profile's head unplannable)",
    "global_avg_pool/h8/row_major/None/tile-bfloat8_b": "as above",
}


@pytest.fixture(scope="module")
def device():
    from ttmodels.backends import mock_device
    tt, dev = mock_device.open_device("n150", l1_small_size=32768)
    yield tt, dev
    tt.close_device(dev)


def _check(outcomes):
    unexpected = [o.describe() for o in outcomes
                  if not o.agree and getattr(o, "case", o).id not in KNOWN_DIFFERENCES]
    stale = [o.describe() for o in outcomes
             if o.agree and getattr(o, "case", o).id in KNOWN_DIFFERENCES]
    assert not unexpected, "rules.check disagrees with ttnn 0.81.1:\n" + "\n".join(unexpected)
    assert not stale, "listed as known differences but now agree:\n" + "\n".join(stale)


def test_corpus_is_generated_and_covers_every_op():
    cases = C.cases()
    assert len(cases) >= 200
    from ttmodels.planning import rules as R
    assert {c.op for c in cases} == set(R.GRAPH_OPS) | set(R.ADAPTER_OPS)
    ids = {c.id for c in cases}
    # the field report: a height-sharded conv output times an interleaved per-channel constant
    assert "multiply/field-report/conv-h56*const-l1" in ids
    # both verdicts occur, on every op family
    for op in ("conv2d", "add", "relu", "max_pool2d", "upsample", "concat", "pad", "reshard"):
        verdicts = {not c.rule_violations() for c in cases if c.op == op}
        assert verdicts == {True, False}, op
    assert {k for k in KNOWN_DIFFERENCES if not k.startswith("plan/")} <= ids


def test_rules_agree_with_ttnn_on_the_corpus(device):
    tt, dev = device
    _check(C.run_corpus(tt, dev))


def test_planner_graphs_without_adapters_agree_with_ttnn(device):
    tt, dev = device
    outs = C.run_planner_graphs(tt, dev)
    assert len(outs) >= 50
    # the no-adapter plans do hit rejections, and the rules see each of them (small_mm/c1: the
    # 1x1 conv the spec lowers to linear reads the graph's row-major input untilized, rule
    # linear.tile; it needs the spec to ask for linear, as ``lowering: auto`` is the estimate's
    # choice and picks conv2d there, which takes a row-major input)
    rejected = {o.id for o in outs if not o.accepted}
    assert {"plan/backbone/fc", "plan/backbone/add", "plan/small_head/fc",
            "plan/small_mm/c1"} <= rejected
    _check(outs)


# ---- every step of real plans (tests/rules_models.py; the whole: scripts/rules_vs_ttnn_models.py)

# the CI subset: the specs of issue 21's seven classes and the field report, planned as the
# planner plans them and with adapters off (then the rules reject steps too)
CI_SPECS = ("ttnn_classes/", "field_report/", "decoder_csp.yaml", "rules_vs_ttnn/")
NO_ADAPTERS = ("field_report/", "rules_vs_ttnn/")


def test_rules_agree_with_ttnn_at_every_step_of_the_test_specs():
    import rules_models as M
    models = [m for m in M.test_specs() if m[0].startswith(CI_SPECS)]
    assert len(models) == 12
    outs = M.run(models) + M.run([m for m in models if m[0].startswith(NO_ADAPTERS)],
                                 adapters=False)
    assert not [o.id for o in outs if o.skipped]
    assert sum(o.steps for o in outs) >= 60
    bad = [d for o in outs for d in o.disagreements]
    assert not bad, "rules.py disagrees with ttnn 0.81.1:\n" + "\n".join(bad)
    assert sum(o.unjudged for o in outs) == 0


def test_the_activation_tables_fusion_columns_are_ttnns(device):
    """docs/spec.md's "fuses in conv2d / matmul / binary" (activations.py): a 1x1 conv (ttnn's
    matmul path) refuses exactly the activations the table says matmul does not fuse; a 3x3 conv
    and binary_ng accept every fused form (hardswish there is dropped silently: no error to
    see, the table's "no" rests on the kernel defines, tests/test_sfpu.py)."""
    import torch

    from ttmodels.ops import activations as A
    tt, dev = device

    def refused(fn) -> bool:
        tt.graph.begin_graph_capture(tt.graph.RunMode.NO_DISPATCH)
        try:
            fn()
            return False
        except Exception as e:
            assert "Unsupported UnaryOpType for fused activation" in str(e), str(e)[:300]
            return True
        finally:
            tt.graph.end_graph_capture()

    def x():
        return tt.from_torch(torch.zeros(1, 1, 64, 32), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT,
                             device=dev, memory_config=tt.L1_MEMORY_CONFIG)

    def conv(k, fused):
        w = tt.from_torch(torch.zeros(32, 32, k, k), dtype=tt.float32)
        tt.conv2d(input_tensor=x(), weight_tensor=w, device=dev, in_channels=32, out_channels=32,
                  batch_size=1, input_height=8, input_width=8, kernel_size=(k, k),
                  stride=(1, 1), padding=(k // 2, k // 2),
                  conv_config=tt.Conv2dConfig(activation=fused,
                                              shard_layout=tt.TensorMemoryLayout.HEIGHT_SHARDED))

    for name, d in A.ACTIVATIONS.items():
        fused = A.unary_with_param(tt, A.parse(name))          # parameters at their defaults
        assert refused(lambda: conv(1, fused)) == (not d.fuses_matmul), name
        if d.fuses_conv:
            assert not refused(lambda: conv(3, fused)), name
        if d.fuses_binary:
            assert not refused(lambda: tt.add(x(), x(), activations=[fused])), name


def test_a_1x1_conv_takes_a_width_sharded_input_only_with_width_shard_layout():
    """Found by the planner's ttnn oracle (mobilenet_v2, resnext50_32x4d, wide_resnet50_2 planned
    without adapters, scripts/rules_vs_ttnn_models.py): ttnn 0.81.1 refuses a 1x1 conv whose
    width-sharded input meets shard_layout BLOCK ('MatmulMultiCoreReuseMultiCastProgramConfig:
    Unsupported memory layout', matmul_device_operation.cpp:1737), which the table accepted
    (rule conv2d.mm_width_shard_layout; ttnn's side: the test above, adapters off)."""
    import rules_models as M

    from ttmodels.planning import rules as R
    from ttmodels.planning.planner import plan_graph
    from ttmodels.planning.plan_checks import check_plan
    from ttmodels.language.spec import load_graph
    g = load_graph(str(M.SPECS / "rules_vs_ttnn" / "mm_width_input.yaml"))
    raw = plan_graph(g, adapters=False, oracle=False)
    squeeze = raw.layer("squeeze")
    assert squeeze.inputs[0].memory.memory_layout == "width_sharded"
    assert squeeze.config.shard_layout == "block_sharded"
    assert [(n, v.rule) for n, v in check_plan(raw)] == [("squeeze",
                                                          "conv2d.mm_width_shard_layout")]
    # the same input with shard_layout WIDTH, or a 3x3 conv, is accepted (measured)
    attrs = dict(squeeze.config.as_attrs(), shard_layout="width_sharded")
    assert not R.check("conv2d", squeeze.inputs, attrs)
    attrs = dict(squeeze.config.as_attrs(), is_mm_conv=False)
    assert not R.check("conv2d", squeeze.inputs, attrs)
    # with adapters the planner reshards the input first
    plan = plan_graph(g, oracle=False)
    assert [a.kind for a in plan.adapters_into("squeeze")] == ["reshard"]
    assert check_plan(plan) == []


def test_a_dram_sliced_pool_outputs_dram_interleaved_by_the_table_too():
    """Found by the planner's ttnn oracle (bevdet_r50_encoder at batch 6, whose stem max pool
    runs DRAM-sliced, scripts/rules_vs_ttnn_models.py): ttnn gives the sliced pool's output DRAM
    interleaved, as the planner planned it, but rules.output_layout said height shards (rule
    pool2d.slice_input had no output function)."""
    from ttmodels.planning import rules as R
    from ttmodels.language.graph import TensorShape
    from ttmodels.planning.layout import INTERLEAVED, MemSpec, TensorLayout
    from ttmodels.planning.plan_config import SliceConfig
    from ttmodels.ops.pool import PoolPlan
    dram = MemSpec(INTERLEAVED, "dram")
    x = TensorLayout(dram, "row_major", "bfloat16")
    s_in, s_out = TensorShape(6, 128, 352, 64), TensorShape(6, 64, 176, 64)
    cfg = PoolPlan(applied_shard_scheme=None, shard_scheme="height_sharded",
                   output_layout="row_major", dtype="bfloat16", kernel=(3, 3),
                   input_memory=dram, out_shape=s_out.flat, slice=SliceConfig("height", 4))
    attrs = {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1), "dilation": (1, 1),
             "ceil_mode": False, **cfg.as_attrs()}
    out = R.output_layout("max_pool2d", [x], attrs, None, [s_in.flat])
    assert out == TensorLayout(dram, "row_major", "bfloat16")
    unsliced = dict(attrs)
    del unsliced["slice"]
    assert R.output_layout("max_pool2d", [x], unsliced, None, [s_in.flat]).memory.sharded


@pytest.mark.parametrize("rows", [64, 784])
@pytest.mark.parametrize("layouts,channels", [
    (("tile", "row_major"), (64, 32)), (("row_major", "tile"), (64, 32)),
    (("tile", "tile", "row_major"), (64, 32, 32)), (("tile", "tile"), (64, 32)),
    (("tile", "row_major"), (64, 16)), (("row_major", "tile"), (64, 16)),
    (("tile", "row_major"), (48, 32))])
def test_a_concat_of_interleaved_tile_and_row_major_inputs_is_judged_as_ttnn_does(
        device, layouts, channels, rows):
    """Interleaved concat inputs may mix TILE and ROW_MAJOR; ttnn's wrapper then tilizes (first
    TILE, all tile aligned) or untilizes (else), and refuses to untilize a TILE input whose
    channels pad a tile. DeepLabV3's ASPP concat (784 rows: four convs and a bilinear upsample)
    came out ROW_MAJOR where the plan said TILE; verify caught it."""
    import torch
    from ttmodels.backends import common
    from ttmodels.planning import rules as R
    from ttmodels.planning.layout import INTERLEAVED, MemSpec, TensorLayout
    from ttmodels.tools.verify import split_error
    tt, dev = device
    ins = [TensorLayout(MemSpec(INTERLEAVED, "l1"), lay, "bfloat16") for lay in layouts]
    shapes = [(1, 1, rows, c) for c in channels]
    xs = [tt.from_torch(torch.zeros(s), dtype=tt.bfloat16, layout=common.layout(tt, t.layout),
                        device=dev, memory_config=tt.L1_MEMORY_CONFIG) for t, s in zip(ins, shapes)]
    refused = R.check("concat", ins, {"dim": -1}, None, shapes=shapes)
    try:
        got = tt.concat(xs, dim=-1)
    except Exception as e:
        assert refused, split_error(e)
        return
    assert not refused, refused
    want = R.output_layout("concat", ins, {"dim": -1}, None, shapes)
    assert str(got.layout).split(".")[-1].lower() == want.layout
