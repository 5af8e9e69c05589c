"""Issue 20: L1 by address. ``l1_alloc`` models ttnn 0.81.1's L1 allocator; ``plan_alloc`` walks a
plan in the executor's order through it and picks remedies; ``verify`` runs the plan for real on
the mock device (ttnn's own allocator) and holds both models against that run.

The pure tests need no ttnn; the rest run plans for real on the mock n150 (a few seconds each
with a warm JIT cache) and fail, never skip, when the mechanism breaks."""
import re
from dataclasses import replace

import pytest

from ttmodels.planning import l1_alloc, plan_alloc
from ttmodels.errors import LayoutError
from ttmodels.planning.l1 import l1_bank_bytes, l1_region
from ttmodels.planning.planner import plan_graph
from ttmodels.language.spec import load_graph

BASE, TOP = l1_region("wormhole_b0", 32768)


# ---- the allocator model (pure) ------------------------------------------------------------

def test_region_is_the_bank_between_the_allocator_base_and_l1_small():
    assert TOP - BASE == l1_bank_bytes("wormhole_b0", 32768) == 1_360_544
    assert TOP == 1_466_368         # L1_SMALL (32 KiB) above it


def test_buffers_go_top_down_into_the_highest_block_that_holds_them():
    a = l1_alloc.L1Allocator(BASE, TOP)
    x = a.allocate(16384)
    y = a.allocate(8192)
    z = a.allocate(4001)            # rounded up to 32 B
    assert x == TOP - 16384 and y == x - 8192 and z == y - 4032
    a.free(y)                       # a hole of 8192 between x and z
    small = a.allocate(4096)        # FIRST policy: the highest block that fits, at its top
    assert small == x - 4096
    big = a.allocate(8192)          # the hole is too small now: below z
    assert big == z - 8192
    st = a.state()
    assert st.lowest == big and st.allocated == 16384 + 4096 + 4032 + 8192
    assert st.largest_free == big - BASE


def test_freeing_merges_neighbours():
    a = l1_alloc.L1Allocator(BASE, TOP)
    bufs = [a.allocate(1024) for _ in range(4)]
    for b in bufs[1:3]:
        a.free(b)
    assert a.largest_free() == TOP - BASE - 4096        # the rest below is still larger
    a.free(bufs[3])
    a.free(bufs[0])
    assert a.largest_free() == TOP - BASE and a.lowest() is None


def test_out_of_memory_names_the_largest_free_block_not_the_sum():
    a = l1_alloc.L1Allocator(BASE, BASE + 10 * 1024)
    keep = [a.allocate(1024) for _ in range(10)]
    for b in keep[::2]:
        a.free(b)                   # 5 KiB free, in 1 KiB pieces
    with pytest.raises(l1_alloc.OutOfMemory) as e:
        a.allocate(2048)
    assert e.value.state.free == 5 * 1024 and e.value.state.largest_free == 1024


def test_allocate_at_places_a_buffer_where_asked():
    a = l1_alloc.L1Allocator(BASE, TOP)
    assert a.allocate_at(BASE + 4096, 1024) == BASE + 4096
    assert a.lowest() == BASE + 4096 and a.largest_free() == TOP - BASE - 4096 - 1024
    with pytest.raises(l1_alloc.OutOfMemory):
        a.allocate_at(BASE + 4096 + 512, 1024)      # overlaps


def test_cb_clash_is_cbs_ending_above_the_lowest_buffer():
    a = l1_alloc.L1Allocator(BASE, TOP)
    a.allocate_at(BASE + 1000 * 32, 64)
    assert a.cb_clash(1000 * 32) is None
    assert a.cb_clash(1000 * 32 + 32) == BASE + 1000 * 32 + 32


# ---- the plan's address model (pure) -------------------------------------------------------

@pytest.fixture(scope="module")
def r50_b16_sums_only():
    """resnet50 at batch 16 planned by sums alone (no address remedies): what failed in the
    field report."""
    return plan_graph(load_graph("resnet50", batch_size=16), addresses=False)


def test_model_finds_the_fragmentation_that_sums_miss(r50_b16_sums_only):
    plan = r50_b16_sums_only
    assert all(st.total <= plan.l1_budget for st in plan.step_l1)       # the sums fit
    bad = plan_alloc.first_failure(plan_alloc.simulate(plan))
    assert bad is not None and bad.name == "layer1.1.relu"
    assert "out of memory" in bad.failure and bad.need == 409_600
    assert 0 < bad.short < bad.need


def test_fit_adds_remedies_that_clear_every_step(r50_b16_sums_only):
    plan = plan_graph(load_graph("resnet50", batch_size=16))
    assert plan.in_place and plan.freed_early
    assert "layer1.1.relu" in {n.layer for n in plan.in_place}
    assert plan.layer("layer1.1.relu").config.inplace
    for n in plan.freed_early:          # TT's deallocate_activation, on the input's last reader
        assert plan.layer(n.layer).config.deallocate_activation
        assert n.reason in str(plan)
    assert plan_alloc.first_failure(plan_alloc.simulate(plan)) is None
    assert plan.step_addr and all(st.ok for st in plan.step_addr)
    # each remedy names its step and its bytes, in the table and the JSON
    table = str(plan)
    for r in plan.reallocations:
        assert r.reason in table and r.moves > 0
    d = plan.to_dict()
    assert [r["tensor"] for r in d["reallocations"]] == [r.tensor for r in plan.reallocations]
    assert [n["layer"] for n in d["deallocate_activation"]] == [n.layer for n in plan.freed_early]
    assert {n["layer"] for n in d["in_place"]} == {n.layer for n in plan.in_place}
    assert len(d["steps_addr"]) == len(plan.step_addr)


def test_no_remedy_fits_is_a_layout_error_naming_the_step_request_and_block(r50_b16_sums_only):
    # the same plan on a device with a far larger L1_SMALL: its bank is 600 KB smaller
    with pytest.raises(LayoutError) as e:
        plan_alloc.fit(r50_b16_sums_only, l1_small_size=32768 + 600_000)
    msg = str(e.value)
    assert e.value.layer and "largest free block" in msg and "B per bank wanted" in msg \
        or "CB clash" in msg
    assert "--batch" in msg


def test_fit_leaves_the_callers_plan_alone(r50_b16_sums_only):
    before = [(pl.name, pl.config) for pl in r50_b16_sums_only.layers]
    plan_alloc.fit(r50_b16_sums_only)
    assert [(pl.name, pl.config) for pl in r50_b16_sums_only.layers] == before
    assert not r50_b16_sums_only.reallocations and not r50_b16_sums_only.in_place


# ---- against ttnn's allocator (real runs on the mock device) ---------------------------------

def _largest_free_in(error: str) -> int:
    return int(re.search(r"largest free block: (\d+) B", error).group(1))


@pytest.fixture(scope="module")
def real_runs(real_run):
    """(spec, kwargs pairs, addresses) -> (plan, its real-run report), shared per session."""
    def get(key):
        spec, kw, addresses = key
        return real_run(spec, addresses=addresses, **dict(kw))
    return get


def test_model_puts_every_buffer_at_ttnns_address(real_runs):
    """ttnn's own allocation order (from the run's capture) replayed through l1_alloc: every
    buffer of every step lands where ttnn put it."""
    _, r = real_runs(("resnet50", (("batch_size", 1),), True))
    assert r.real and r.completed and r.ok
    assert r.steps and all(s.model_match is True for s in r.steps)


@pytest.mark.parametrize("key", [("resnet50", (("batch_size", 1),), True),
                                 ("resnet50", (("batch_size", 16),), True)])
def test_plan_model_predicts_ttnns_largest_free_block_at_every_step(real_runs, key):
    plan, r = real_runs(key)
    assert r.completed and r.ok
    got = [(s.name, s.planned_largest_free, s.l1_largest_free) for s in r.steps
           if s.l1_largest_free is not None]
    assert len(got) == len(r.steps)
    assert [g for g in got if g[1] != g[2]] == []
    # the lowest L1 buffer while its programs ran, wherever both sides report one
    lows = [(s.name, s.planned_lowest_l1, s.lowest_l1) for s in r.steps
            if s.planned_lowest_l1 is not None and s.lowest_l1 is not None]
    assert len(lows) > len(r.steps) // 2
    assert [x for x in lows if x[1] != x[2]] == []


def test_sums_only_plan_fails_for_real_where_the_model_says(real_runs, r50_b16_sums_only):
    _, r = real_runs(("resnet50", (("batch_size", 16),), False))
    assert not r.ok
    bad = next(s for s in r.steps if not s.accepted)
    predicted = plan_alloc.first_failure(plan_alloc.simulate(r50_b16_sums_only))
    assert bad.name == predicted.name == "layer1.1.relu"
    assert "Out of Memory" in bad.error and bad.error_location.endswith("bank_manager.cpp:514")
    # ttnn's own figure for the largest free block is the model's
    assert _largest_free_in(bad.error) == predicted.need - predicted.short


@pytest.mark.parametrize("spec,kw", [("resnext50_32x4d", (("batch_size", 8),)),
                                     ("bevdet_r50_bev_encoder", (("batch_size", 2),))])
def test_cb_clash_predicted_and_remedied(real_runs, spec, kw):
    """The field report's 'circular buffers clash with L1 buffers': sums fit, the CB region
    runs into the lowest buffer. The model finds it; the remedied plan runs to the end."""
    plan0, r0 = real_runs((spec, kw, False))
    bad = next(s for s in r0.steps if not s.accepted)
    assert "clash with L1 buffers" in bad.error
    predicted = plan_alloc.first_failure(plan_alloc.simulate(plan0))
    assert predicted.name == bad.name and predicted.failure.startswith("CB clash")
    # ttnn's message: "L1 buffer allocated at A and static circular buffer region ends at E"
    low, end = (int(v) for v in re.search(r"allocated at (\d+) and static circular buffer "
                                           r"region ends at (\d+)", bad.error).groups())
    assert (predicted.cb_end, predicted.cb_end - predicted.short) == (end, low)
    plan, r = real_runs((spec, kw, True))
    remedies = plan.reallocations + plan.freed_early + plan.in_place + sorted(plan.cap_hints) + \
        sorted(plan.spill_hints)
    assert remedies and r.completed and r.ok, \
        [(s.name, s.error) for s in r.steps if not s.ok]


def test_the_address_model_rounds_buffers_as_the_plans_chip_does():
    """Two 32 B L1 buffers land 32 B apart on Wormhole and 64 B apart on Blackhole (measured on
    the mock p150: ``Arch.l1_alignment``); the plan's address model takes its chip's rounding."""
    from ttmodels.planning import plan_alloc
    for arch, step in (("wormhole_b0", 32), ("blackhole", 64)):
        a = plan_alloc.allocator(arch)
        first, second = a.allocate(32), a.allocate(32)
        assert first - second == step, arch
