"""Dump the plan JSON of every shipped config, example and test spec (batch 1 and 2, each
profile) into a directory, for refactors that must keep plans identical:

    python scripts/dump_plans.py before/ ; <refactor> ; python scripts/dump_plans.py after/
    diff -r before after

``--goldens`` adds what issue 22's restructuring must keep: every shipped model's plan at
batch 16 (and bevdet_r50_encoder at batch 6, 256x704), and the sha256 of the sim's output bits
of every shipped model at batch 1 (seeded weights and input, one torch thread,
``<model>.sim.txt``).
"""
import argparse
import hashlib
import sys
from pathlib import Path

import ttmodels
from ttmodels.language.spec import load_graph
from ttmodels.planning.planner import plan_graph

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


def sim_digest(model: str) -> str:
    """sha256 of the sim's float32 output bits for ``model`` at batch 1 (default profile)."""
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = ttmodels.build(model, weights="random", backend="sim")
    gen = torch.Generator().manual_seed(1)
    xs = {k: torch.randn(t.n, t.c, t.h, t.w, generator=gen) for k, t in m.graph.inputs.items()}
    with torch.no_grad():
        outs = m.run(xs)
    h = hashlib.sha256()
    for k in sorted(outs):
        h.update(k.encode())
        h.update(outs[k].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def goldens(out: Path) -> None:
    for p in sorted((ROOT / "ttmodels" / "configs").glob("*.yaml")):
        runs = [(16, None)] + ([(6, (256, 704))] if p.stem == "bevdet_r50_encoder" else [])
        for batch, size in runs:
            tag = f"{p.stem}.b{batch}.golden"
            try:
                text = plan_graph(load_graph(p.stem, batch_size=batch, input_size=size)).to_json()
            except Exception as e:  # noqa: BLE001 - the error is part of the result
                text = f"{type(e).__name__}: {e}"
            (out / f"{tag}.json").write_text(text)
            print(tag, file=sys.stderr)
        (out / f"{p.stem}.sim.txt").write_text(sim_digest(p.stem) + "\n")
        print(f"{p.stem}.sim", file=sys.stderr)


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--goldens", action="store_true", help="also batch 16 plans and sim digests")
    a = ap.parse_args()
    main(a.out)
    if a.goldens:
        goldens(a.out)
