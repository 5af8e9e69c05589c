"""The shipped models, the custom-backbone example and the field-report graphs, judged by the
installed ttnn 0.81.1 on a mock Wormhole n150 (no card; ``ttmodels.tools.verify``).

For each: every step (layer and adapter) is accepted by ttnn, and every output memory config,
dtype and tile layout ttnn produces is exactly the plan's. L1: the planner's per-layer estimate
against ttnn's own figure for the step (``ttnn_op_peak_total``) is within 10 %, or the layer's
kind is one of the explained gaps listed in one place, ``ttmodels.planning.l1.KNOWN_ESTIMATE_GAPS``
(docs/layouts.md has the measured table).

Each model runs once per session (module-scoped cache); the whole module is ~2-3 minutes on two
cores. These tests fail, never skip, when the mechanism breaks: ttnn is a pinned dependency."""
from pathlib import Path

import pytest

from ttmodels.planning import l1 as l1m

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "specs" / "field_report"

MODELS = {
    "resnet50-b1": ("resnet50", {"batch_size": 1}),
    "resnet50-b2": ("resnet50", {"batch_size": 2}),
    "resnet50-b16": ("resnet50", {"batch_size": 16}),
    # issue 20: the field report's CB clash (resnext/wide at 8) and what else the address model
    # remedies; resnet50 at 32 on one chip is not here: its DRAM-sliced convs fail inside a slice
    # on ttnn's allocator, which the address model does not see yet (docs/layouts.md)
    "resnext50_32x4d-b8": ("resnext50_32x4d", {"batch_size": 8}),
    # runs only with address remedies: in place, reallocations, a reorder, a blocking
    "resnet50-b20": ("resnet50", {"batch_size": 20}),
    "bevdet-b6-256x704": ("bevdet_r50_encoder", {"batch_size": 6, "input_size": (256, 704)}),
    "my_backbone": (REPO / "examples" / "my_backbone" / "backbone.yaml", {}),
    # block-sharded 1x1 convs whose input channels do not fill the channel cores: conv2d
    # reshards them itself (ops/conv2d/sharding.py conv_reshards_input)
    "mobilenet_v2-b1": ("mobilenet_v2", {"batch_size": 1}),
    "efficientnet_b0-b1": ("efficientnet_b0", {"batch_size": 1}),
    # the op-vocabulary models (grouped convs; wide bottlenecks)
    "resnext50_32x4d-b1": ("resnext50_32x4d", {"batch_size": 1}),
    "wide_resnet50_2-b1": ("wide_resnet50_2", {"batch_size": 1}),
    "field-conv-multiply": (FIELD / "conv_multiply.yaml", {}),
    "field-conv-maxpool": (FIELD / "conv_maxpool.yaml", {}),
    "field-residual-shards": (FIELD / "residual_shards.yaml", {}),
    # issue 11: conv_transpose2d (learned upsample, UNet decoder) and split (CSP block)
    "decoder-csp-b2": (REPO / "tests" / "specs" / "decoder_csp.yaml", {"batch_size": 2}),
}
# the issue asks the L1 comparison for these
L1_MODELS = ("resnet50-b1", "resnet50-b16", "bevdet-b6-256x704")


@pytest.fixture(scope="module")
def reports(real_run):
    """key -> (plan, its verify report): each model planned and run for real once per session
    (conftest.real_run, shared with tests/test_l1_alloc.py)."""
    def get(key):
        spec, kw = MODELS[key]
        return real_run(spec, **kw)
    return get


@pytest.mark.parametrize("key", list(MODELS))
def test_every_step_accepted_with_the_planned_memory_config(reports, key):
    _, r = reports(key)
    assert r.ttnn_version == "0.81.1" and r.steps
    rejected = [(s.name, s.error, s.error_location) for s in r.steps if not s.accepted]
    assert not rejected, rejected
    memory = [(s.name, s.planned_memory, s.ttnn_memory) for s in r.steps if not s.memory_match]
    assert not memory, memory
    layout = [(s.name, s.planned_layout, s.ttnn_layout) for s in r.steps if not s.layout_match]
    assert not layout, layout
    assert r.ok


@pytest.mark.parametrize("key", L1_MODELS)
def test_l1_estimates_within_10_percent_or_explained(reports, key):
    plan, r = reports(key)
    assert r.layers
    unexplained = []
    for s in r.layers:
        assert s.ttnn_op_peak_total > 0, s.name
        err = (s.l1_estimate - s.ttnn_op_peak_total) / s.ttnn_op_peak_total
        if abs(err) <= 0.10:
            continue
        gap = l1m.KNOWN_ESTIMATE_GAPS.get(l1m.estimate_kind(plan.layer(s.name)))
        if gap is None:
            unexplained.append((s.name, s.op, s.l1_estimate, s.ttnn_op_peak_total, round(err, 2)))
        else:
            # an explained gap still has to stay in the band the explanation gives
            lo, hi = gap.band
            if not lo <= 1 + err <= hi:
                unexplained.append((s.name, s.op, s.l1_estimate, s.ttnn_op_peak_total,
                                    round(err, 2), f"outside {gap.band}"))
    assert not unexplained, unexplained


def test_conv_transpose_and_split_l1_estimates_within_10_percent(reports):
    """The estimates of the two issue-11 ops against ttnn's own figures (the spec's concat and
    pool layers have older, looser estimates; the L1_MODELS test holds those models)."""
    plan, r = reports("decoder-csp-b2")
    mine = [s for s in r.layers if s.op in ("conv_transpose2d", "split")]
    assert {s.op for s in mine} == {"conv_transpose2d", "split"} and len(mine) == 3
    for s in mine:
        err = (s.l1_estimate - s.ttnn_op_peak_total) / s.ttnn_op_peak_total
        assert abs(err) <= 0.10, (s.name, s.l1_estimate, s.ttnn_op_peak_total)
    split = plan.layer("csp")
    assert set(split.outputs) == {"csp.a", "csp.b"}
    # csp.a waits in L1 while the conv on csp.b runs: liveness counts it
    assert "csp.a" in plan.layer("m").live_tensors


# ---- issue 15: plans fit L1 by ttnn's own accounting --------------------------------------------
LIVE_MODELS = ("resnet50-b16", "bevdet-b6-256x704", "my_backbone",
               "resnext50_32x4d-b1", "wide_resnet50_2-b1", "mobilenet_v2-b1")
# efficientnet_b0 fits by far (peak 0.5 MB); five steps after its squeeze-and-excitation
# multiply are 14-21 % under ttnn's figure (docs/layouts.md, "Liveness-aware L1")
FIT_MODELS = LIVE_MODELS + ("efficientnet_b0-b1",)


@pytest.mark.parametrize("key", FIT_MODELS)
def test_every_step_fits_the_l1_bank_by_ttnn_accounting(reports, key):
    """ttnn's per-core peak (every live buffer and circular buffer of the whole run's timeline,
    l1_timeline) is within the L1 bank at every step: what a card's allocator must satisfy."""
    plan, r = reports(key)
    assert r.l1_bank_bytes == plan.l1_budget == 1_360_544
    over = [(s.name, s.ttnn_peak_total) for s in r.steps if s.ttnn_peak_total > r.l1_bank_bytes]
    assert not over, over
    assert r.fits and r.peak_total == r.timeline_peak_total
    # the plan's live figure is what it planned against: never above the bank either
    assert all(l.live_l1 <= plan.l1_budget for l in plan.layers)
    assert all(st.total <= plan.l1_budget for st in plan.step_l1)


@pytest.mark.parametrize("key", LIVE_MODELS)
def test_live_l1_within_10_percent_of_ttnn_at_every_step(reports, key):
    """The plan's per-step live L1 (liveness.step_figures: the op, every other live tensor, and
    the previous program's CBs that ttnn still holds) against ttnn's timeline figure for the
    step, for every layer, adapter and spill."""
    plan, r = reports(key)
    # (a chain of adapters on one edge is one verify step: its last adapter's figure; the
    # address model's reallocations are steps of their own that liveness does not list)
    steps = [s for s in r.steps if s.kind != "reallocate"]
    assert len({(st.kind, st.name) for st in plan.step_l1}) == len(steps)
    off = []
    for s in steps:
        assert s.live_estimate is not None, (s.kind, s.name)
        err = (s.live_estimate - s.ttnn_peak_total) / s.ttnn_peak_total
        if abs(err) > 0.10:
            off.append((s.kind, s.name, s.live_estimate, s.ttnn_peak_total, round(err, 3)))
    assert not off, off


def test_carried_cbs_are_what_ttnn_counts(reports):
    """The previous program's circular buffers count while a step allocates: bevdet at batch 6
    has steps whose live figure only that carry explains (without it they would be >10 % low),
    and the planner's figure for them matches ttnn's."""
    plan, r = reports("bevdet-b6-256x704")
    ttnn = {(s.kind, s.name): s.ttnn_peak_total for s in r.steps}
    carried = [st for st in plan.step_l1 if st.carried and
               st.total - (st.first + st.carry - st.own) < 0.9 * ttnn[(st.kind, st.name)]]
    assert carried
    for st in carried:
        assert abs(st.total - ttnn[(st.kind, st.name)]) <= 0.10 * ttnn[(st.kind, st.name)], st
