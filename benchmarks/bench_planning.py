#!/usr/bin/env python
"""Planning time against depth: load + plan a spec of N residual blocks (3x3 conv, relu'd 3x3
conv, add) for N = 250, 1000 and 4000. Planning is meant to be linear in the number of layers,
so the per-layer time should stay flat as N grows (it grew with N while ``Graph.node`` was a
linear scan).

    python benchmarks/bench_planning.py [--blocks 250 1000 4000]

Not a test: it prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def deep_spec(blocks: int) -> dict:
    return {
        "name": f"deep{blocks}",
        "inputs": {"x": {"channels": 32, "size": [16, 16]}},
        "blocks": {"res": {"layers": [
            {"name": "conv1", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "act": "relu"},
            {"name": "conv2", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1},
            {"name": "add", "op": "add", "in": ["conv2", "x"], "act": "relu"},
        ]}},
        "layers": [{"name": "body", "block": "res", "repeat": blocks}],
        "outputs": {"y": "body"},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[250, 1000, 4000])
    args = ap.parse_args()
    from ttmodels.planning.planner import plan_graph
    from ttmodels.language.spec import load_graph

    base = None
    for n in args.blocks:
        t0 = time.perf_counter()
        g = load_graph(deep_spec(n))
        t1 = time.perf_counter()
        plan_graph(g)
        t2 = time.perf_counter()
        per = (t2 - t0) / len(g.nodes) * 1e6
        base = base or per
        print(f"{n:>6} blocks ({len(g.nodes):>6} layers): load {t1 - t0:6.2f} s, plan "
              f"{t2 - t1:6.2f} s, {per:7.1f} us/layer ({per / base:.2f}x the first row's)")


if __name__ == "__main__":
    main()
