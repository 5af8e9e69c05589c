#!/usr/bin/env python
"""ResNet50: ttmodels' sim backend vs torchvision float32 on the CPU, same input, same weights,
same thread count, in one process; plus build times with and without the prepared-weight cache.

    python benchmarks/bench_resnet50.py [--batch 1] [--runs 7] [--threads N] [--profile tt-perf]

Latency: median of --runs calls of each, alternated (sim, torch, sim, ...) so machine load hits
both alike. Peak RSS: each side built and run once in its own spawned subprocess.
Cold build: spec -> plan -> random weights (BN calibration) -> folded, prepared layers, with an
empty weight cache; warm build: the same with the cache filled by the cold build.
Not a test: it prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import peak_rss_worker, rss_mb  # noqa: E402


def _make(which: str, batch: int, profile, sd_path: str):
    from safetensors.torch import load_file
    sd = load_file(sd_path)
    if which == "torch":
        import torchvision
        m = torchvision.models.resnet50()
        m.load_state_dict(sd)
        return m.eval()
    import ttmodels
    return ttmodels.build("resnet50", weights=sd, backend="sim", batch_size=batch,
                          profile=profile, cache=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--profile", default=None, help="precision profile (default or tt-perf)")
    args = ap.parse_args(argv)

    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    cache_dir = tempfile.mkdtemp(prefix="ttmodels-bench-cache-")
    os.environ["TTMODELS_CACHE_DIR"] = cache_dir

    import ttmodels
    from safetensors.torch import save_file

    from ttmodels.spec import load_graph
    from ttmodels.weights import load_state_dict, synthetic_images

    t0 = time.perf_counter()
    cold = ttmodels.build("resnet50", weights="random", backend="sim", batch_size=args.batch,
                          profile=args.profile)
    cold_s = time.perf_counter() - t0
    cold.close()
    t0 = time.perf_counter()
    sim = ttmodels.build("resnet50", weights="random", backend="sim", batch_size=args.batch,
                         profile=args.profile)
    warm_s = time.perf_counter() - t0

    graph = load_graph("resnet50", batch_size=args.batch)
    sd = load_state_dict("random", graph)
    sd_path = os.path.join(cache_dir, "bench-weights.safetensors")
    save_file({k: v.contiguous() for k, v in sd.items()}, sd_path)
    ref = _make("torch", args.batch, None, sd_path)
    x = synthetic_images(args.batch, 3, 224, 224, seed=7)

    times = {"sim": [], "torch": []}
    with torch.no_grad():
        sim(x), ref(x)  # warm-up: first sim call prepares device-side weights
        for _ in range(args.runs):
            for name, fn in (("sim", sim), ("torch", ref)):
                t0 = time.perf_counter()
                fn(x)
                times[name].append(time.perf_counter() - t0)
    sim.close()
    med = {k: statistics.median(v) for k, v in times.items()}

    ctx = mp.get_context("spawn")
    rss = {}
    for which in ("sim", "torch"):
        q = ctx.Queue()
        p = ctx.Process(target=peak_rss_worker,
                        args=(_make, (which, args.batch, args.profile, sd_path), x, q))
        p.start()
        rss[which] = q.get(timeout=600)
        p.join()

    print(f"ResNet50, batch {args.batch}, 224x224, {threads} torch threads, "
          f"profile {args.profile or 'default'}")
    print(f"{'':24}{'sim':>12}{'torch fp32':>12}{'ratio':>9}")
    print(f"{'median latency (ms)':24}{med['sim'] * 1e3:12.1f}{med['torch'] * 1e3:12.1f}"
          f"{med['sim'] / med['torch']:9.2f}")
    print(f"{'peak RSS (MB)':24}{rss['sim']['peak']:12.0f}{rss['torch']['peak']:12.0f}"
          f"{rss['sim']['peak'] / rss['torch']['peak']:9.2f}")
    print(f"{'  growth after import':24}{rss['sim']['growth']:12.0f}{rss['torch']['growth']:12.0f}"
          f"{rss['sim']['growth'] / max(rss['torch']['growth'], 1):9.2f}")
    print(f"build: cold {cold_s:.2f} s (empty weight cache), warm {warm_s:.2f} s (cached)")
    print(f"latency target (sim within 1.5x of torch): "
          f"{'met' if med['sim'] <= 1.5 * med['torch'] else 'NOT met'}; "
          f"warm build under 1 s: {'met' if warm_s < 1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
