#!/usr/bin/env python
"""Where the sim's time goes, per op kind, next to torch's own time for the same kind of layer.
Not a test: it prints the tables of docs/sim.md ("Where the time goes").

    python benchmarks/profile_sim.py [--models mobilenet_v2,efficientnet_b0,resnet50]
                                     [--profiles default,tt-perf] [--runs 5] [--threads 1]

Sim side: every step the executor runs (layer, adapter, spill) is timed (CPU time of the
process) and filed under its op kind (conv 1x1 / depthwise / kxk / grouped, linear, eltwise,
pool, adapter); inside a step the time is split, exclusively, into the torch kernel torch itself
also runs (conv, matmul and its bias, pool), the output rounding to the tensor's format
(``quantize``), the math-fidelity truncation of operands, the activation and the rest (rule
checks, memory configs, reshapes, copies, Python). Torch side: forward hooks on torchvision's leaf
modules, filed by the same kinds (BatchNorm and activations separately: the sim folds or fuses
them); "rest" is the forward's time outside leaf modules (residual adds, SE multiplies).
Batch 1, 224x224, the same BN-calibrated random weights on both sides (seed 0); medians over
``--runs`` forward passes after one warm-up.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import REPO, Case, images, torch_model, weights_file  # noqa: E402

PARTS = ("kernel", "rounding", "fidelity", "activation", "rest")


class Timer:
    """Exclusive CPU time per (kind, part): a part's time is not counted again in the part or
    step it runs inside."""

    def __init__(self):
        self.acc = defaultdict(float)           # (kind, part) -> seconds
        self.count = defaultdict(int)           # kind -> steps
        self.stack: list[list] = []             # [kind, part, start, child seconds]

    def enter(self, kind, part):
        self.stack.append([kind, part, time.process_time(), 0.0])

    def leave(self):
        kind, part, t0, child = self.stack.pop()
        dt = time.process_time() - t0
        self.acc[(kind, part)] += dt - child
        if self.stack:
            self.stack[-1][3] += dt
        return dt

    def wrap(self, fn, part):
        def timed(*a, **k):
            if not self.stack:                  # outside a sim step (e.g. torch's forward)
                return fn(*a, **k)
            self.enter(self.stack[-1][0], part)
            try:
                return fn(*a, **k)
            finally:
                self.leave()
        return timed


def conv_kind(in_c: int, groups: int, kernel, stride=(1, 1), padding=(0, 0, 0, 0)) -> str:
    if groups > 1:
        return "conv depthwise" if groups == in_c else "conv grouped"
    if tuple(kernel) == (1, 1):
        return "conv 1x1" if tuple(stride) == (1, 1) and not any(padding) else "conv 1x1 strided"
    return "conv kxk"


def step_kind(kind: str, obj) -> str:
    if kind == "adapter":
        return "adapter"
    if kind == "spill":
        return "spill"
    node = obj.node
    if node.op == "conv2d":
        a = node.attrs
        return conv_kind(int(a["in_channels"]), int(a.get("groups", 1)), a["kernel"],
                         a.get("stride", (1, 1)), a.get("padding", (0, 0, 0, 0)))
    if node.op in ("add", "multiply", "subtract"):
        return "eltwise binary"
    if node.op in ("relu", "relu6", "sigmoid", "silu", "hardsigmoid", "hardswish", "gelu",
                   "tanh", "leaky_relu", "identity"):
        return "eltwise unary"
    if "pool" in node.op:
        return "pool"
    return node.op


def instrument_sim(timer: Timer):
    """Wrap the sim's kernels, rounding, truncation and activation functions (module globals)."""
    import torch.nn.functional as F

    import importlib
    import importlib.util

    from ttmodels import ops as registry
    from ttmodels.backends.sim import numerics, onednn, tensor
    patched = []

    def patch(mod, name, part):
        orig = getattr(mod, name)
        setattr(mod, name, timer.wrap(orig, part))
        patched.append((mod, name, orig))

    # the shared numerics and each op's sim module (ttmodels/ops/<op>/sim.py) hold their own
    # bindings of these names
    sims = [importlib.import_module(f"{pkg}.sim")
            for pkg in dict.fromkeys(d.package for d in registry.REGISTRY.values())
            if importlib.util.find_spec(f"{pkg}.sim") is not None]
    for mod in [numerics, *sims]:
        for name, part in (("quantize", "rounding"), ("quantize_", "rounding"), ("_truncate", "fidelity"),
                           ("_apply_unary", "activation"), ("_matmul_bias", "kernel")):
            if name in vars(mod):
                patch(mod, name, part)
    for name in ("quantize", "quantize_"):
        patch(tensor, name, "rounding")
    import ttmodels.ops.activations as A
    patch(A, "sim_apply", "activation")
    patch(onednn, "conv", "kernel")
    # F is shared with torch's own forward: the wrapper passes through outside a sim step
    for name in ("conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"):
        patch(F, name, "kernel")
    return patched


def unpatch(patched):
    for mod, name, orig in reversed(patched):
        setattr(mod, name, orig)


def profile_sim(model, x, runs: int):
    timer = Timer()
    ex = model.executor
    orig_call = ex._call

    def call(what, layer, fn, step=None):
        kind = step_kind(step[0], step[1]) if step is not None else "other"

        def timed():
            timer.count[kind] += 1
            timer.enter(kind, "rest")
            try:
                return fn()
            finally:
                timer.leave()
        return orig_call(what, layer, timed, step)

    patched = instrument_sim(timer)
    ex._call = call
    try:
        totals = []
        for _ in range(runs):
            t0 = time.process_time()
            model(x)
            totals.append(time.process_time() - t0)
    finally:
        ex._call = orig_call
        unpatch(patched)
    per_run = {k: v / runs for k, v in timer.acc.items()}
    counts = {k: v // runs for k, v in timer.count.items()}
    return statistics.median(totals), per_run, counts


def torch_kind(m) -> str | None:
    import torch.nn as nn
    if isinstance(m, nn.Conv2d):
        return conv_kind(m.in_channels, m.groups, m.kernel_size, m.stride,
                         (m.padding[0], m.padding[0], m.padding[1], m.padding[1])
                         if not isinstance(m.padding, str) else (1,))
    if isinstance(m, nn.Linear):
        return "linear"
    if isinstance(m, nn.BatchNorm2d):
        return "batch norm (sim: folded)"
    if isinstance(m, (nn.ReLU, nn.ReLU6, nn.SiLU, nn.Sigmoid, nn.Hardswish, nn.Hardsigmoid,
                      nn.GELU, nn.Tanh)):
        return "activation (sim: fused)"
    if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
        return "pool"
    if isinstance(m, nn.Dropout):
        return None
    return None


def profile_torch(ref, x, runs: int):
    import torch
    acc, count, starts = defaultdict(float), defaultdict(int), {}
    hooks = []
    for m in ref.modules():
        kind = torch_kind(m)
        if kind is None:
            continue

        def pre(mod, args, kind=kind):
            starts[id(mod)] = time.process_time()

        def post(mod, args, out, kind=kind):
            acc[kind] += time.process_time() - starts.pop(id(mod))
            count[kind] += 1
        hooks += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    totals = []
    try:
        with torch.no_grad():
            for _ in range(runs):
                t0 = time.process_time()
                ref(x)
                totals.append(time.process_time() - t0)
    finally:
        for h in hooks:
            h.remove()
    total = statistics.median(totals)
    per_run = {k: v / runs for k, v in acc.items()}
    per_run["rest (adds, SE, flatten)"] = max(sum(totals) / runs - sum(per_run.values()), 0.0)
    return total, per_run, {k: v // runs for k, v in count.items()}


def report(name: str, sim_total, sim_parts, sim_counts, t_total, t_parts, t_counts) -> None:
    print(f"\n{name}: sim {sim_total * 1e3:.1f} ms, torch {t_total * 1e3:.1f} ms "
          f"(CPU time per forward), ratio {sim_total / t_total:.2f}")
    kinds = sorted({k for k, _ in sim_parts} | set(t_parts),
                   key=lambda k: -(sum(sim_parts.get((k, p), 0.0) for p in PARTS)
                                   + t_parts.get(k, 0.0)))
    print(f"{'op kind':<26}{'n sim':>6}{'n torch':>8}{'torch ms':>9}{'sim ms':>8}"
          + "".join(f"{p:>11}" for p in PARTS))
    col = defaultdict(float)
    for k in kinds:
        parts = [sim_parts.get((k, p), 0.0) for p in PARTS]
        for p, v in zip(PARTS, parts):
            col[p] += v
        print(f"{k:<26}{sim_counts.get(k, 0):6d}{t_counts.get(k, 0):8d}"
              f"{t_parts.get(k, 0.0) * 1e3:9.1f}{sum(parts) * 1e3:8.1f}"
              + "".join(f"{v * 1e3:11.1f}" for v in parts))
    steps = sum(col.values())
    print(f"{'all steps':<26}{sum(sim_counts.values()):6d}{sum(t_counts.values()):8d}"
          f"{sum(t_parts.values()) * 1e3:9.1f}{steps * 1e3:8.1f}"
          + "".join(f"{col[p] * 1e3:11.1f}" for p in PARTS))
    print(f"{'outside steps (input, output)':<48}{(sim_total - steps) * 1e3:8.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,efficientnet_b0,resnet50")
    ap.add_argument("--profiles", default="default,tt-perf")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH",
                          str(REPO / "ttmodels" / "data" / "wormhole_n150_mock_cluster.yaml"))
    import torch

    import ttmodels
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(f"profile_sim | torch {torch.__version__}, {args.threads} thread(s) | load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    with tempfile.TemporaryDirectory(prefix="profile_sim_") as tmp:
        for spec in (s.strip() for s in args.models.split(",") if s.strip()):
            from safetensors.torch import load_file
            for prof in (p.strip() for p in args.profiles.split(",") if p.strip()):
                case = Case(spec, spec, 1, (224, 224), None if prof == "default" else prof)
                sd = load_file(weights_file(spec, tmp))
                x = images(case)
                ref = torch_model(case, sd)
                sim = ttmodels.build(spec, weights=sd, backend="sim", batch_size=1,
                                     input_size=(224, 224), profile=case.profile, cache=False)
                del sd
                with torch.no_grad():
                    sim(x), ref(x)
                    s = profile_sim(sim, x, args.runs)
                    t = profile_torch(ref, x, args.runs)
                sim.close()
                report(f"{spec} ({prof})", *s, *t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
