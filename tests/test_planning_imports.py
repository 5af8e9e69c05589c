"""What the planning core imports from the layers above it (issue 32): ``planning/`` is pure plan
data and rules, below ``backends``, ``runtime``, ``tools`` and ``weights``. Every import counts,
the lazy ones inside functions too (``test_import_graph.import_graph``).

Today one module reaches up: ``planning/ttnn_oracle.py`` (ttnn in the planning loop) imports the
mock device, the runtime's layers, the compare tool and the weight cache. Issue 32 asks for the
planner to take an oracle through an interface, with the ttnn-backed one living above; until
then ``ORACLE_REACHES_UP`` is the whole list, and nothing may join it."""
from __future__ import annotations

from collections import deque

from test_import_graph import import_graph

ABOVE = tuple(f"ttmodels.{p}" for p in ("backends", "runtime", "tools", "weights"))
ORACLE = "ttmodels.planning.ttnn_oracle"

ORACLE_REACHES_UP = {
    (ORACLE, "ttmodels.backends"),
    (ORACLE, "ttmodels.backends.common"),
    (ORACLE, "ttmodels.backends.mock_device"),
    (ORACLE, "ttmodels.runtime.layers"),
    (ORACLE, "ttmodels.tools.ttnn_compare"),
    (ORACLE, "ttmodels.weights.cache"),
    (ORACLE, "ttmodels.weights.reference"),
}


def _is_above(mod: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in ABOVE)


def imports_from_above(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(planning module, module above it) for every direct import."""
    return {(m, d) for m, deps in graph.items() if m.startswith("ttmodels.planning")
            for d in deps if _is_above(d)}


def reached_above(graph: dict[str, set[str]], skip: str) -> dict[str, list[str]]:
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


def test_planning_imports_from_above_only_what_the_oracle_does_today():
    found = imports_from_above(import_graph())
    new = sorted(found - ORACLE_REACHES_UP)
    assert not new, "planning/ imports from the layers above it:\n" + \
        "\n".join(f"{m} -> {d}" for m, d in new)


def test_the_planning_core_reaches_nothing_above_it_but_through_the_oracle():
    found = reached_above(import_graph(), skip=ORACLE)
    assert not found, "the planning core reaches above it:\n" + \
        "\n".join(" -> ".join(p) for p in found.values())
