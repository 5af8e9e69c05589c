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
    with pytest.raises(Exception, match="unknown arch 'blackhole'; known: wormhole_b0"):
        arch.get("blackhole")
