"""No import cycles in ttmodels (issue 22 item 5): every import counts, the lazy ones inside
functions too, so a cycle cannot hide behind a function-level import or a string reference."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ttmodels"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """ttmodels module -> the ttmodels modules it imports anywhere in its source (functions'
    lazy imports too; not the annotation-only ones under ``if TYPE_CHECKING:``)."""
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        tree = ast.parse(path.read_text())
        # an ``if TYPE_CHECKING:`` block never runs: annotation-only imports make no cycle
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    deps.add(sub if sub in files else target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_ttmodels_has_no_import_cycle():
    g = import_graph()
    assert "ttmodels.weights" in g and "ttmodels.ops.conv2d" in g["ttmodels.weights"]
    found = cycles(g)
    assert not found, "import cycles (each a set of modules importing each other):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


ABOVE_PLANNING = ("ttmodels.backends", "ttmodels.runtime", "ttmodels.tools", "ttmodels.weights")


def test_the_planning_core_imports_nothing_above_it():
    """planning/ takes its ttnn oracle through planning.oracle's interface (issue 32): the
    ttnn-backed one (tools/ttnn_oracle.py) reaches into backends, runtime, tools and weights."""
    g = import_graph()
    bad = sorted(f"{mod} -> {dep}" for mod, deps in g.items()
                 if mod.startswith("ttmodels.planning") for dep in deps
                 if dep.startswith(ABOVE_PLANNING))
    assert not bad, "planning/ imports from above it:\n" + "\n".join(bad)
