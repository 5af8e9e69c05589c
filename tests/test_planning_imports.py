"""What the planning core imports from the layers above it (issue 32): ``planning/`` is pure plan
data and rules, below ``backends``, ``runtime``, ``tools`` and ``weights``. Every import counts,
the lazy ones inside functions too (``test_import_graph.import_graph``).

The planner takes its ttnn oracle through ``planning/oracle.py``'s interface; the ttnn-backed one
lives above (``tools/ttnn_oracle.py``). ``test_import_graph`` holds the direct imports; this holds
what importing the planning core drags in through its neighbours (``ops``, ``language``)."""
from __future__ import annotations

from collections import deque

from test_import_graph import import_graph

ABOVE = tuple(f"ttmodels.{p}" for p in ("backends", "runtime", "tools", "weights"))
def _is_above(mod: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in ABOVE)


def imports_from_above(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(planning module, module above it) for every direct import."""
    return {(m, d) for m, deps in graph.items() if m.startswith("ttmodels.planning")
            for d in deps if _is_above(d)}


def reached_above(graph: dict[str, set[str]], skip: str | None = None) -> dict[str, list[str]]:
    """Module above -> the import path from a planning module to it, not passing through
    ``skip``: what importing the planning core would drag in."""
    starts = sorted(m for m in graph if m.startswith("ttmodels.planning") and m != skip)
    prev: dict[str, str | None] = {m: None for m in starts}
    todo = deque(starts)
    while todo:
        v = todo.popleft()
        for w in sorted(graph[v]):
            if w != skip and w not in prev:
                prev[w] = v
                todo.append(w)
    out = {}
    for m in prev:
        if _is_above(m):
            path = [m]
            while prev[path[-1]] is not None:
                path.append(prev[path[-1]])
            out[m] = path[::-1]
    return out


def test_the_finders_see_an_upward_import_direct_and_through_a_neighbour():
    g = {"ttmodels.planning.a": {"ttmodels.ops.x"}, "ttmodels.ops.x": {"ttmodels.runtime.y"},
         "ttmodels.runtime.y": set(), "ttmodels.planning.b": {"ttmodels.weights"},
         "ttmodels.weights": set()}
    assert imports_from_above(g) == {("ttmodels.planning.b", "ttmodels.weights")}
    assert reached_above(g, skip="ttmodels.planning.b") == {
        "ttmodels.runtime.y": ["ttmodels.planning.a", "ttmodels.ops.x", "ttmodels.runtime.y"]}


def test_the_planning_core_reaches_nothing_above_it():
    found = reached_above(import_graph())
    assert not found, "the planning core reaches above it:\n" + \
        "\n".join(" -> ".join(p) for p in found.values())
