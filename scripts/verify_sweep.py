#!/usr/bin/env python3
"""Plan and run every shipped model at many batches for real on the mock device, one row each.

    python scripts/verify_sweep.py                      # every shipped model at 1, 2, 4, 8, 16, 32
    python scripts/verify_sweep.py resnet50:1,16,20 mobilenet_v2:10
    python scripts/verify_sweep.py --out sweep.jsonl    # also append each row (JSON) to a file
    python scripts/verify_sweep.py --out sweep.jsonl --fresh  # re-run rows the file already has
    python scripts/verify_sweep.py --table sweep.jsonl  # the README's table from such a file

Each configuration runs in its own process (tt-metal holds one mock system per process): it is
planned with ttnn asked (the oracle), then, if it plans, run by `ttmodels verify` on that plan.
A row says whether `plan` made a plan (or the reason it refuses: no remedy fits, ttnn sizes it
over the bank), how many steps ttnn confirmed, whether the real run reached the end, and, when
it did not, the first step ttnn rejected and why. The promise it measures (issue 33): every
configuration either runs for real or `plan` refuses it with the reason; none that `plan` calls
placed and confirmed fails the real run (exit 1 if one does).
Detection and segmentation models run at their spec's (native) input size.

The full sweep is hours on a shared machine, so `--out` also resumes: a configuration whose row
the file already has is not run again (its row counts in the summary), and a stopped sweep
continues where it stopped. Each row records the commit it ran on. Configurations run batch by
batch (every model at 1, then every model at 2, ...), so a partial sweep covers every model.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BATCHES = (1, 2, 4, 8, 16, 32)
SIZES = {"bevdet_r50_encoder": (256, 704)}
ALLOCATOR = ("Out of Memory", "clash with L1 buffers")
TIMEOUT_S = 3600  # one configuration; a hung child must not stop the sweep


def commit() -> str:
    """The commit the rows are made on (with '+' when the work tree differs from it)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain", "-uno") else "")


def shipped() -> list[str]:
    sys.path.insert(0, str(REPO))
    import ttmodels
    return list(ttmodels.list_models())


def parse(args: list[str]) -> list[tuple[str, int]]:
    """The configurations to run, batch by batch (smallest first), models in the given order."""
    if not args:
        want = {m: BATCHES for m in shipped()}
    else:
        want = {}
        for a in args:
            model, _, batches = a.partition(":")
            want[model] = tuple(int(b) for b in batches.split(",")) if batches else (1,)
    order = sorted({b for bs in want.values() for b in bs})
    return [(m, b) for b in order for m, bs in want.items() if b in bs]


def one(model: str, batch: int) -> dict:
    """Plan and run one configuration in this process (the child's side)."""
    import os
    # ttnn's answers come slowly on a loaded machine: an oracle that times out leaves the rest
    # of the plan unconfirmed (the row's `oracle` says so), so the sweep waits longer than 120 s
    os.environ.setdefault("TTMODELS_TTNN_ORACLE_TIMEOUT", "900")
    from ttmodels.backends import mock_device
    mock_device.prepare("n150")
    from ttmodels.errors import LayoutError, SpecError
    from ttmodels.language.spec import load_graph
    from ttmodels.planning.planner import plan_graph
    from ttmodels.tools.verify import verify
    size = SIZES.get(model)
    row: dict = {"model": model, "batch": batch, "input_size": list(size) if size else None}
    try:
        g = load_graph(model, batch_size=batch, input_size=size)
        plan = plan_graph(g)
    except (LayoutError, SpecError) as e:
        row.update(plan="refused", reason=str(e)[:300])
        return row
    rec = plan.ttnn
    row.update(plan="ok", oracle=rec.oracle, steps=len(rec.steps),
               confirmed=len(rec.steps) - len(rec.unconfirmed),
               not_confirmed=[f"{s.name}: {s.status}" for s in rec.unconfirmed][:5])
    rep = verify(model, batch_size=batch, input_size=size, plan=plan, diagnostics=False)
    bad = [s for s in rep.steps if not s.ok]
    row.update(completed=rep.completed, ok=rep.ok,
               first_rejected=[bad[0].name, (bad[0].error or "not as planned")[:160]]
               if bad else None,
               allocator_failure=any(any(k in (s.error or "") for k in ALLOCATOR) for s in bad))
    return row


def run(model: str, batch: int) -> dict:
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, __file__, "--one", model, str(batch)],
                           capture_output=True, text=True, cwd=REPO, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"model": model, "batch": batch, "plan": "crashed", "commit": commit(),
                "reason": f"no answer in {TIMEOUT_S} s", "seconds": round(time.time() - t0)}
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    try:
        row = json.loads(last)
    except ValueError:
        err = p.stderr.strip().splitlines()
        row = {"model": model, "batch": batch, "plan": "crashed",
               "reason": (err[-1] if err else f"exit {p.returncode}")[:300]}
    row["seconds"] = round(time.time() - t0)
    row["commit"] = commit()
    return row


def verdict(row: dict) -> str:
    if row.get("plan") != "ok":
        return f"{row.get('plan')}: {row.get('reason', '')}"
    conf = f"{row['confirmed']}/{row['steps']} confirmed"
    if row.get("ok"):
        return f"runs to the end ({conf})"
    name, err = row.get("first_rejected") or ("?", "did not complete")
    return f"FAILS at {name}: {err} ({conf})"


def broken(row: dict) -> bool:
    """Planned, every step placed and confirmed by ttnn, and still not run to the end."""
    return row.get("plan") == "ok" and not row.get("ok") and row["confirmed"] == row["steps"]


def table(rows: list[dict]) -> str:
    """The README's table: per model, the batches that run, that plan refuses, that fail."""
    by: dict[str, dict[str, list[str]]] = {}
    for r in sorted(rows, key=lambda r: (r["model"], r["batch"])):
        d = by.setdefault(r["model"], {"runs": [], "refused": [], "fails": []})
        b = str(r["batch"])
        if r.get("plan") != "ok":
            d["refused"].append(b)
        elif r.get("ok"):
            d["runs"].append(b)
        else:
            d["fails"].append(b + ("" if not broken(r) else " (confirmed)"))
    out = ["| model | runs to the end | plan refuses | planned, fails the real run |",
           "|---|---|---|---|"]
    for m, d in by.items():
        out.append(f"| {m} | {', '.join(d['runs'])} | {', '.join(d['refused'])} | "
                   f"{', '.join(d['fails'])} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv[:1] == ["--one"]:
        print(json.dumps(one(argv[1], int(argv[2]))))
        return 0
    if argv[:1] == ["--table"]:
        last = {}
        for x in Path(argv[1]).read_text().splitlines():
            if x.strip():
                r = json.loads(x)
                last[(r["model"], r["batch"])] = r
        print(table(list(last.values())))
        return 0
    out = None
    if "--out" in argv:             # anywhere among the configurations, not only first
        i = argv.index("--out")
        if i + 1 >= len(argv):
            print("error: --out needs a file", file=sys.stderr)
            return 2
        out, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    fresh = "--fresh" in argv
    argv = [a for a in argv if a != "--fresh"]
    done: dict[tuple[str, int], dict] = {}
    if out is not None and out.exists() and not fresh:
        for x in out.read_text().splitlines():
            if x.strip():
                r = json.loads(x)
                done[(r["model"], r["batch"])] = r  # the last row of a configuration wins
    rows = []
    for model, b in parse(argv):
        if (model, b) in done:
            rows.append(done[(model, b)])
            continue
        row = run(model, b)
        rows.append(row)
        if out is not None:
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
        print(f"{model:24s} {b:3d}  {row['seconds']:4d} s  {verdict(row)}", flush=True)
    planned = [r for r in rows if r.get("plan") == "ok"]
    ran = [r for r in planned if r.get("ok")]
    bad = [r for r in rows if broken(r)]
    print(f"\n{len(rows)} configurations: {len(ran)} ran to the end; "
          f"{len(rows) - len(planned)} refused by plan; {len(planned) - len(ran)} planned but "
          f"failed the real run, {len(bad)} of them with every step confirmed")
    print(table(rows))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
