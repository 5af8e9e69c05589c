"""Regressions for issue 10: what a new user and an adversarial tester broke.

Each test failed on the code before its fix."""
from __future__ import annotations

import pytest

from ttmodels.errors import LayoutError, SpecError
from ttmodels.planner import plan_graph
from ttmodels.spec import load_graph


def _deep(blocks: int) -> dict:
    return {"name": "deep", "inputs": {"x": {"channels": 32, "size": [16, 16]}},
            "blocks": {"res": {"layers": [
                {"name": "conv1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1,
                 "act": "relu"},
                {"name": "add", "op": "add", "in": ["conv1", "x"]}]}},
            "layers": [{"name": "body", "block": "res", "repeat": blocks}],
            "outputs": {"y": "body"}}


class _CountingList(list):
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


# ---- defect 5: planning is linear in the number of layers ------------------------------------
def test_planning_walks_the_node_list_a_bounded_number_of_times():
    """Node and consumer lookups are indexed: planning walks ``graph.nodes`` a fixed number of
    times whatever the depth (a scan per lookup made planning quadratic)."""
    walks = []
    for blocks in (20, 80):
        g = load_graph(_deep(blocks))
        _CountingList.walks = 0
        g.nodes = _CountingList(g.nodes)
        plan_graph(g)
        walks.append(_CountingList.walks)
    assert walks[0] == walks[1] and walks[0] <= 4, walks


# ---- defect 6: huge inputs: bounded slice search, error quoting the slice size ---------------
def _one_conv(hw: int, c_in: int = 16) -> dict:
    return {"name": "one", "inputs": {"x": {"channels": c_in, "size": [hw, hw]}},
            "layers": [{"name": "c", "op": "conv2d", "out": 64, "kernel": 3, "padding": 1}],
            "outputs": {"y": "c"}}


def _count_slice_candidates(monkeypatch):
    from ttmodels import planner
    calls = []
    real = planner._Planner.slice_candidate

    def counted(self, *a, **k):
        calls.append(a[2])
        return real(self, *a, **k)
    monkeypatch.setattr(planner._Planner, "slice_candidate", counted)
    return calls


def test_huge_input_fails_fast_quoting_the_slice_size(monkeypatch):
    calls = _count_slice_candidates(monkeypatch)
    g = load_graph("resnet50", input_size=(20000, 20000))
    with pytest.raises(LayoutError) as e:
        plan_graph(g)
    msg = str(e.value)
    assert e.value.layer == "conv1"
    # one probe per slicing direction: the finest slicing does not fit, so nothing coarser will
    assert len(calls) <= 4, len(calls)
    assert "10000 height slices of 1 output row it still needs" in msg, msg
    assert "313 width slices of 32 output columns" in msg, msg


def test_bounded_slice_search_finds_the_fewest_slices(monkeypatch):
    """Past the one-by-one range the search doubles and bisects; it still returns the smallest
    slice count that fits (checked against trying every count)."""
    from ttmodels import planner
    g = load_graph(_one_conv(4096))
    pl = planner._Planner(g, "wormhole_b0", True)
    pl.seed()
    x, node = pl.layouts["x"], g.nodes[0]
    calls = _count_slice_candidates(monkeypatch)
    sl = plan_graph(g).layers[0].config["slice"]
    assert sl["num_slices"] > planner._Planner.LINEAR_SLICES
    assert len(calls) < sl["num_slices"] - 2, len(calls)
    monkeypatch.undo()
    fits = [k for k in range(2, sl["num_slices"] + 1)
            if pl.slice_candidate(node, x, sl["type"], k) is not None]
    assert fits[0] == sl["num_slices"], fits
