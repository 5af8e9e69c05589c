#!/usr/bin/env python3
"""Run the shipped models at many batches for real on the mock device and print one row each.

    python scripts/verify_sweep.py                      # the default sweep (a long run)
    python scripts/verify_sweep.py resnet50:1,16,20 mobilenet_v2:10

Each configuration runs `ttmodels verify` in its own process (tt-metal holds one mock system per
process). A row says whether `plan` made a plan (or its LayoutError: no remedy fits), whether
the real run reached the end, and, when it did not, the first step ttnn rejected and why. The
two promises it measures (docs/layouts.md, "L1 by address"): `verify` exits 0 only when the real
run completes (by construction: the run is the verdict), and a plan that plans runs on ttnn's
allocator (the address model and its remedies).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = {
    "resnet18": (1, 8, 32), "resnet34": (1, 8, 32), "resnet50": (1, 2, 4, 8, 12, 16, 20, 24, 32),
    "resnet101": (8,), "resnet152": (8,), "resnext50_32x4d": (1, 8, 16), "wide_resnet50_2": (1, 8, 16),
    "mobilenet_v2": (1, 10, 16), "efficientnet_b0": (1, 2, 8),
    "bevdet_r50_bev_encoder": (1, 2, 4), "bevdet_r50_encoder": (1, 6),
}
SIZES = {"bevdet_r50_encoder": ("--input-size", "256", "704")}
ALLOCATOR = ("Out of Memory", "clash with L1 buffers")


def parse(args: list[str]) -> dict[str, tuple[int, ...]]:
    if not args:
        return DEFAULT
    out = {}
    for a in args:
        model, _, batches = a.partition(":")
        out[model] = tuple(int(b) for b in batches.split(",")) if batches else (1,)
    return out


def run(model: str, batch: int) -> dict:
    cmd = [sys.executable, "-m", "ttmodels.tools.cli", "verify", model, "--batch", str(batch),
           "--format", "json", *SIZES.get(model, ())]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    row = {"model": model, "batch": batch, "rc": p.returncode, "seconds": round(time.time() - t0)}
    if p.returncode == 2:
        row["plan"] = p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else "error"
        return row
    d = json.loads(p.stdout)
    bad = [s for s in d["layers"] if not s["accepted"]]
    row.update(plan="ok", completed=d["completed"], ok=d["ok"], steps=len(d["layers"]),
               first_rejected=(bad[0]["name"], bad[0]["error"][:160]) if bad else None,
               allocator_failure=any(any(k in (s["error"] or "") for k in ALLOCATOR)
                                     for s in bad))
    return row


def main(argv: list[str]) -> int:
    rows = []
    for model, batches in parse(argv).items():
        for b in batches:
            row = run(model, b)
            rows.append(row)
            verdict = ("no plan: " + row["plan"]) if row.get("plan") != "ok" else \
                ("runs to the end" if row["ok"] else
                 f"REJECTED at {row['first_rejected'][0]}: {row['first_rejected'][1]}")
            print(f"{model:24s} {b:3d}  {row['seconds']:4d} s  {verdict}", flush=True)
    planned = [r for r in rows if r.get("plan") == "ok"]
    ran = [r for r in planned if r["ok"]]
    alloc = [r for r in planned if r.get("allocator_failure")]
    print(f"\n{len(rows)} configurations: {len(planned)} planned, {len(ran)} ran to the end on "
          f"ttnn's allocator; {len(alloc)} planned but refused by the allocator; "
          f"{len(rows) - len(planned)} refused by plan (LayoutError)")
    return 0 if not alloc else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
