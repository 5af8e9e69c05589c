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
