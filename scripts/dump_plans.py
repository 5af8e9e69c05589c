"""Dump the plan JSON of every shipped config, example and test spec (batch 1 and 2, each
profile) into a directory, for refactors that must keep plans identical:

    python scripts/dump_plans.py before/ ; <refactor> ; python scripts/dump_plans.py after/
    diff -r before after
"""
import sys
from pathlib import Path

import ttmodels
from ttmodels.spec import load_graph
from ttmodels.planner import plan_graph

ROOT = Path(__file__).resolve().parents[1]

# every op in one small spec (the new-op tests' shapes)
ALL_OPS = {
    "name": "all_ops", "inputs": {"x": {"channels": 16, "size": 12}},
    "layers": [
        {"name": "c", "op": "conv2d", "out": 32, "kernel": 3, "padding": 1, "bn": "bn", "act": "silu"},
        {"name": "d", "op": "conv2d", "in": "x", "out": 32, "kernel": 1, "bn": "bn2"},
        {"name": "l", "op": "conv2d", "in": "x", "out": 32, "kernel": 1, "lowering": "linear"},
        {"name": "g", "op": "conv2d", "in": "c", "out": 32, "kernel": 3, "stride": 2,
         "padding": 1, "groups": 32, "act": "relu6"},
        {"name": "p", "op": "global_avg_pool", "in": "d"},
        {"name": "t", "op": "add", "in": ["c", "d"], "act": "relu"},
        {"name": "b", "op": "multiply", "in": ["c", "p"]},
        {"name": "s2", "op": "subtract", "in": ["t", "b"]},
        {"name": "bn", "op": "batch_norm", "in": "s2", "act": "silu"},
        {"name": "s", "op": "slice", "channels": [8, 24]},
        {"name": "i", "op": "identity"},
        {"name": "h", "op": "hardswish"},
        {"name": "lr", "op": "leaky_relu", "slope": 0.2},
        {"name": "ap", "op": "adaptive_avg_pool2d", "size": [3, 3]},
        {"name": "mp", "op": "max_pool2d", "in": "c", "kernel": 3, "stride": 2, "padding": 1},
        {"name": "av", "op": "avg_pool2d", "in": "c", "kernel": 2},
        {"name": "up", "op": "upsample", "in": "mp", "scale": 2},
        {"name": "ub", "op": "upsample", "in": "mp", "scale": 2, "mode": "bilinear",
         "align_corners": True},
        {"name": "cat", "op": "concat", "in": ["up", "c"]},
        {"name": "pd", "op": "pad", "padding": 1},
        {"name": "gp", "op": "global_avg_pool"},
        {"name": "fc", "op": "linear", "out": 10},
    ],
    "outputs": ["fc", "s", "i", "h", "lr", "ap", "av", "ub", "g", "l"],
}


def specs():
    for p in sorted((ROOT / "ttmodels" / "configs").glob("*.yaml")):
        yield p.stem, p.stem
    for p in sorted((ROOT / "examples").rglob("*.yaml")) + sorted((ROOT / "tests" / "specs").rglob("*.yaml")):
        yield p.relative_to(ROOT).as_posix().replace("/", "_"), str(p)
    yield "all_ops", ALL_OPS


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, spec in specs():
        for batch in (1, 2):
            for profile in (None, "tt-perf", "tt-accuracy"):
                tag = f"{name}.b{batch}.{profile or 'default'}"
                try:
                    g = load_graph(spec, batch_size=batch, profile=profile)
                    text = plan_graph(g).to_json()
                except Exception as e:  # noqa: BLE001 - the error is part of the result
                    text = f"{type(e).__name__}: {e}"
                (out / f"{tag}.json").write_text(text)
                print(tag, file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
