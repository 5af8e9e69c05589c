"""Hardware facts in one place (issue 22 item 3)."""
from __future__ import annotations

import pytest


def test_hardware_facts_live_in_one_place():
    """issue 22 item 3: the grid, the L1 bank and the bank count are ``arch`` data; the modules
    that used to spell them out read them from there."""
    import inspect
    from ttmodels import arch
    from ttmodels.planning import l1, matmul_solver, plan_alloc, plans, rules
    w = arch.get("wormhole_b0")
    assert w is arch.DEFAULT and w.grid == arch.DEFAULT_GRID and w.cores == w.l1_banks
    assert l1.l1_bank_bytes("wormhole_b0", 32768) == w.l1_bank_no_l1_small - 32768
    assert l1.l1_region("wormhole_b0", 0) == (w.l1_base, w.l1_base + w.l1_bank_no_l1_small)
    assert plans.Plan.__dataclass_fields__["grid"].default == w.grid
    assert inspect.signature(plan_alloc.op_events).parameters["banks"].default == w.l1_banks
    assert inspect.signature(matmul_solver.solve).parameters["grid"].default == w.grid
    for mod in (rules, matmul_solver, plans, plan_alloc, l1):
        assert "(8, 8)" not in inspect.getsource(mod), mod.__name__
    with pytest.raises(Exception, match="unknown arch 'quasar'; known: blackhole, wormhole_b0"):
        arch.get("quasar")


@pytest.fixture
def chip(monkeypatch):
    """A made-up second chip, registered for the test: 13x10 cores, 130 L1 banks."""
    from ttmodels import arch
    c = arch.Arch("test_chip", grid=(13, 10), l1_bank_no_l1_small=1_500_000, l1_base=105_824,
                  l1_banks=130)
    monkeypatch.setitem(arch.ARCHS, c.name, c)
    return c


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2", "yolov8n"])
def test_a_second_chip_is_a_data_entry(chip, model):
    """A chip with another grid and L1 is one ``Arch`` entry: the planner shards over its grid
    (more than 8 columns here), sizes L1 by its bank, and the plan checks against itself. The
    figures are made up (no Blackhole has been measured here); only the mechanism is tested."""
    from ttmodels.language.spec import load_graph
    from ttmodels.planning.plan_checks import check_plan, edge_mismatches
    from ttmodels.planning.planner import plan_graph
    plan = plan_graph(load_graph(model), arch=chip.name)
    assert plan.grid == chip.grid and plan.arch == chip.name
    assert plan.l1_bank_bytes == chip.l1_bank_no_l1_small - plan.l1_small_size
    grids = [l.output.memory.grid for l in plan.layers if l.output.memory.sharded]
    assert grids and all(x <= 13 and y <= 10 for x, y in grids)
    assert any(x > 8 for x, _ in grids)
    assert check_plan(plan) == [] and edge_mismatches(plan) == []


def test_a_second_chip_spreads_interleaved_tensors_over_its_banks(chip):
    """An interleaved L1 tensor costs each bank its share of pages over the chip's banks: the
    live figures of a plan for a 130-bank chip use 130 (Wormhole's 64 would double them)."""
    from ttmodels.language.spec import load_graph
    from ttmodels.planning import liveness as lv
    from ttmodels.planning.layout import INTERLEAVED
    from ttmodels.planning.planner import plan_graph
    plan = plan_graph(load_graph("yolov8n"), arch=chip.name)   # C2f splits stay interleaved
    spilled = {sp.tensor for sp in plan.spills}
    made = {t: lay for pl in plan.layers for t, lay in pl.tensor_layouts().items()
            if lay.memory.memory_layout == INTERLEAVED and lay.memory.buffer == "l1"
            and t not in spilled}
    compared = 0
    for st in plan.step_l1:
        for t, b in st.others.items():
            if t in made:
                rc = lv.tensor_rows_c(plan.graph, t)
                assert b == lv.bank_bytes(made[t], *rc, banks=130), (st.name, t)
                compared += b != lv.bank_bytes(made[t], *rc, banks=64)
    assert compared
    live = {pl.name: pl.live_l1 for pl in plan.layers}
    lv.refresh(plan)                      # the planner's figures are the walk's
    assert live == {pl.name: pl.live_l1 for pl in plan.layers}
