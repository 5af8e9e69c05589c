"""Issue 21, item 3: specs written the way a user would, from the docs, for architectures the
project does not ship (tests/specs/user/: timm resnet26d, regnet_x, mnasnet, efficientnet_b2,
mobilenetv3_large, an HRNet-style two-branch stage, a VGG-UNet, an FPN with a PANet path, SSD-style
heads, GhostNet, DenseNet). Each plans with every rule satisfied and runs on the mock Wormhole
n150 (``ttmodels verify``) with every step accepted by ttnn 0.81.1 as planned, within the L1 bank."""
from pathlib import Path

import pytest

from ttmodels.planning.planner import plan_graph

from ttmodels.planning.plan_checks import check_plan, edge_mismatches
from ttmodels.language.spec import load_graph
from ttmodels.tools.verify import verify

USER = Path(__file__).resolve().parent / "specs" / "user"
SPECS = sorted(p.name for p in USER.glob("*.yaml"))


def test_the_corpus_has_ten_architectures_or_more():
    assert len(SPECS) >= 10


@pytest.mark.parametrize("spec", SPECS)
def test_user_spec_plans_and_is_accepted_by_ttnn_as_planned(spec):
    plan = plan_graph(load_graph(USER / spec))
    assert check_plan(plan) == [] and edge_mismatches(plan) == []
    report = verify(None, plan=plan)
    bad = [(s.name, s.error or f"{s.planned_memory} -> {s.ttnn_memory}")
           for s in report.steps if not s.ok]
    over = [(s.name, s.ttnn_peak_total) for s in report.steps
            if s.ttnn_peak_total > report.l1_bank_bytes]
    assert len(report.steps) >= len(plan.layers) and not bad and not over, (bad, over)
