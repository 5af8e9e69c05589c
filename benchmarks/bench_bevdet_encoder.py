#!/usr/bin/env python
"""BEVDet-R50 image encoder: ttmodels (sim backend by default) vs a float32 torch reference
(torchvision resnet50 trunk + CustomFPN, tests/bevdet_reference.py), same input, same weights,
same thread count.

    python benchmarks/bench_bevdet_encoder.py [--batch 6] [--input-size 256 704] [--runs 1]
                                              [--warmup 1] [--threads N] [--backend sim]

Latency: median of --runs timed calls in this process (after --warmup untimed ones; ttmodels' first
call prepares backend-side weights). Peak RSS: each side built and run once in its own spawned
subprocess (so neither sees the other's allocations), reported as the process's peak resident set
(VmHWM) and as the growth over the same process right after its imports.
Not a test: numbers are printed, nothing is asserted.
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
sys.path.insert(0, str(REPO / "tests"))  # bevdet_reference
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import rss_mb  # noqa: E402

SPEC = "bevdet_r50_encoder"


def _make_reference(weights_path: str):
    from bevdet_reference import BEVDetEncoderReference, load_into
    from safetensors.torch import load_file
    return load_into(BEVDetEncoderReference(), load_file(weights_path))


def _make_ttmodels(weights_path: str, backend: str, batch: int, size):
    import ttmodels
    return ttmodels.build(SPEC, weights=weights_path, backend=backend, batch_size=batch,
                          input_size=size, cache=False)


def _worker(which: str, weights_path: str, x_path: str, backend: str, batch: int, size,
            threads: int, q) -> None:
    """Spawned: import, note RSS, build, run once, report peak RSS."""
    try:
        import torch
        torch.set_num_threads(threads)
        if which == "torch":
            import torchvision  # noqa: F401  (the reference needs it; count it in the baseline)
        else:
            import ttmodels.weights  # noqa: F401
        from safetensors.torch import load_file
        x = load_file(x_path)["x"]
        base, _ = rss_mb()
        with torch.no_grad():
            if which == "torch":
                _make_reference(weights_path)(x)
            else:
                m = _make_ttmodels(weights_path, backend, batch, size)
                try:
                    m.run(x)
                finally:
                    m.close()
        _, peak = rss_mb()
        q.put((which, base, peak, None))
    except BaseException as e:  # report, don't hang the parent
        q.put((which, 0.0, 0.0, f"{type(e).__name__}: {e}"))


def _peak_rss(which, weights_path, x_path, backend, batch, size, threads):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_worker, args=(which, weights_path, x_path, backend, batch, size,
                                          threads, q))
    p.start()
    try:
        result = q.get(timeout=3600)
    finally:
        p.join()
    return result


def _median_latency(fn, runs: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=6, help="images (cameras) per call, default 6")
    ap.add_argument("--input-size", nargs=2, type=int, default=(256, 704), metavar=("H", "W"))
    ap.add_argument("--runs", type=int, default=1, help="timed calls per side (median), default 1")
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls first, default 1")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for both sides (default: torch's default)")
    ap.add_argument("--backend", default="sim", choices=("sim", "ttnn", "auto"))
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.runs < 1 or args.warmup < 0 or min(args.input_size) < 32:
        print("error: --batch/--runs must be >= 1, --warmup >= 0, --input-size >= 32",
              file=sys.stderr)
        return 2
    size = tuple(args.input_size)

    import torch
    from safetensors.torch import save_file

    import ttmodels
    from ttmodels.weights import random_state_dict, synthetic_images

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        graph = ttmodels.load_graph(SPEC, batch_size=args.batch, input_size=size)
        from ttmodels.planner import plan_graph
        plan_graph(graph)  # fail fast, before calibrating weights, if the card can't hold it
    except ttmodels.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    sd = random_state_dict(graph, seed=0)
    print(f"{SPEC}: batch {args.batch} x 3 x {size[0]} x {size[1]}, {threads} threads, "
          f"random weights (BN calibrated in {time.perf_counter() - t0:.1f} s)")
    x = synthetic_images(args.batch, 3, *size, seed=1)

    with tempfile.TemporaryDirectory(prefix="bench_bevdet_") as tmp:
        wpath = str(Path(tmp) / "weights.safetensors")
        xpath = str(Path(tmp) / "x.safetensors")
        save_file({k: v.contiguous() for k, v in sd.items()}, wpath)
        save_file({"x": x.contiguous()}, xpath)

        ref = _make_reference(wpath)
        with torch.no_grad():
            t_ref = _median_latency(lambda: ref(x), args.runs, args.warmup)
        del ref
        t0 = time.perf_counter()
        model = _make_ttmodels(wpath, args.backend, args.batch, size)
        build_s = time.perf_counter() - t0
        try:
            t_tt = _median_latency(lambda: model.run(x), args.runs, args.warmup)
            backend = model.backend_name
        finally:
            model.close()

        mem = {}
        if not args.no_memory:
            for which in ("torch", "ttmodels"):
                w, base, peak, err = _peak_rss(which, wpath, xpath, args.backend, args.batch,
                                               size, threads)
                mem[which] = (base, peak, err)

    rows = [("torch reference fp32", t_ref, mem.get("torch")),
            (f"ttmodels {backend}", t_tt, mem.get("ttmodels"))]
    print(f"\n{'':<22} {'median ms':>10} {'per image ms':>13} {'peak RSS MB':>12} "
          f"{'(+ over imports)':>17}")
    for name, t, m in rows:
        if m is None:
            rss = f"{'-':>12} {'-':>17}"
        elif m[2]:
            rss = f"{'failed':>12} {m[2][:40]}"
        else:
            rss = f"{m[1]:12.0f} {m[1] - m[0]:+17.0f}"
        print(f"{name:<22} {t * 1e3:10.1f} {t * 1e3 / args.batch:13.1f} {rss}")
    print(f"\nttmodels/{backend} latency = {t_tt / t_ref:.2f} x torch "
          f"(median of {args.runs} run(s) after {args.warmup} warm-up; ttmodels build {build_s:.1f} s)")
    if "torch" in mem and "ttmodels" in mem and not (mem["torch"][2] or mem["ttmodels"][2]):
        print(f"ttmodels/{backend} peak RSS = {mem['ttmodels'][1] / mem['torch'][1]:.2f} x torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
