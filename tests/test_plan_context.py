"""Each op plans itself (``ops/<op>/plan.py``: ``plan(ctx, node)``), and the planner gives it
everything ``plan_context.PlanContext`` promises."""
from __future__ import annotations

import importlib
import inspect

from ttmodels import ops
from ttmodels.planning.plan_context import _MEMBERS
from ttmodels.planning.planner import _Planner
from ttmodels.language.spec import load_graph


def test_every_op_plans_in_its_own_package():
    for op, d in ops.REGISTRY.items():
        fn = d.plan
        assert inspect.isfunction(fn) and fn.__name__ == "plan", op
        # its package's plan module holds it (channel_shuffle's names the reshape family's)
        assert importlib.import_module(f"{d.package}.plan").plan is fn, op
        assert list(inspect.signature(fn).parameters) == ["ctx", "node"], op


def test_the_planner_is_a_plan_context():
    pl = _Planner(load_graph("resnet18"), "wormhole_b0", True)
    members = set(_MEMBERS)                     # PlanContext's fields and methods
    assert members >= {"layouts", "adapt", "rc", "requested_memory", "op_budget"}
    missing = [m for m in sorted(members) if not hasattr(pl, m)]
    assert not missing, missing


def test_an_op_sees_only_the_plan_context():
    """What an op's plan gets is the planner through a view: PlanContext's members read (and
    written) through, the planner's own walk and remedies refused."""
    import pytest
    from ttmodels.planning.plan_context import PlanningView
    pl = _Planner(load_graph("resnet18"), "wormhole_b0", True)
    view = pl.view
    assert isinstance(view, PlanningView)
    assert view.grid == pl.grid and view.layouts is pl.layouts
    for own in ("run", "seed", "layers", "plan_live", "spill_sets"):
        assert hasattr(pl, own), own            # the planner has it ...
        with pytest.raises(AttributeError, match="not part of PlanContext"):
            getattr(view, own)                  # ... an op may not reach it
    with pytest.raises(AttributeError):
        view.layers = []
