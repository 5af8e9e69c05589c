#!/usr/bin/env python3
"""Import CNNs with `ttmodels import` and check each one (issues 24 and 34): torchvision's
classifiers, timm's classifiers and segmentation models (torchvision's three, their `out` head;
segmentation_models_pytorch's Unet, FPN, Linknet, DeepLabV3Plus on resnet18), random init.

    python scripts/import_coverage.py                         # torchvision section, 224x224
    python scripts/import_coverage.py --section timm --size 128
    python scripts/import_coverage.py resnet18 timm:dla34 smp:Unet --size 96
    python scripts/import_coverage.py --json coverage.json --markdown coverage.md
    python scripts/import_coverage.py --section timm --size 96 --results timm.jsonl  # resumable

`--results FILE` appends each row as it completes (one JSON line, with the commit it ran on) and
reuses the rows already there for the same model, size and batch, so a run that is stopped
loses nothing and a second run picks up where it stopped (`--rerun-failed` runs the rows that
did not pass again, `--rerun` all). `--import-only` stops each row after the import (seconds a
model: a quick classification of import failures).

A name is a torchvision classifier (`resnet18`), `timm:<model>`, `tvseg:<builder>` or
`smp:<architecture>`.

Per model, each in its own process (tt-metal holds one mock system per process, and a ttnn
crash then costs one row):

1. import: `ttmodels.import_module` on a synthetic batch (no spec when a node is unsupported:
   the row names the kinds);
2. plan: `ttmodels.plan` of the imported spec;
3. verify: `ttmodels verify`'s real run on the mock n150, exit 0 = every step accepted with the
   planned memory config;
4. PCC with BatchNorm-calibrated random weights (`load_state_dict("random", graph)`, loaded into
   the torchvision module itself, so both sides hold the same weights): the float32 profile
   against the module (>= 0.9999, the import's own self-check) and the default profile
   (>= 0.99), logits, sim backend.

A model counts as imported when step 1 succeeds, verified when 1-3 do, passing when all do.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

MODELS = [                       # cheap ones first: a long run reports them early
    "resnet18", "mobilenet_v3_small", "mobilenet_v2", "mobilenet_v3_large",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
    "convnext_tiny", "vgg11_bn",
    "squeezenet1_0", "squeezenet1_1",
    "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "regnet_x_400mf", "regnet_y_400mf", "regnet_x_800mf", "regnet_y_800mf",
    "efficientnet_b0", "efficientnet_b1", "resnet34", "googlenet", "resnet50",
    "efficientnet_b2", "efficientnet_b3", "densenet121",
    "resnext50_32x4d", "wide_resnet50_2", "resnet101", "resnet152",
    "resnext101_32x8d", "resnext101_64x4d", "wide_resnet101_2",
]
# timm classifiers across families (issue 34: at least 40), small variants first
TIMM = [f"timm:{n}" for n in (
    "resnet18", "resnet26d", "resnet50d", "resnet10t", "seresnext26d_32x4d", "ecaresnet26t",
    "skresnet18", "resnetrs50", "resnest14d", "res2net50_14w_8s", "dla34", "dla46_c", "dpn68",
    "densenet121", "vgg11", "regnetx_002", "regnety_002", "efficientnet_b0", "efficientnet_b3",
    "efficientnet_lite0", "efficientnetv2_rw_t", "tf_efficientnet_b0", "tinynet_a",
    "mobilenetv2_100", "mobilenetv3_large_100", "mobilenetv3_small_100",
    "mobilenetv4_conv_small", "fbnetc_100", "mnasnet_100", "semnasnet_075", "spnasnet_100",
    "hardcorenas_a", "lcnet_050", "mixnet_s", "rexnet_100", "ghostnet_100", "ghostnetv2_100",
    "repghostnet_050", "repvgg_a0", "mobileone_s0", "ese_vovnet19b_dw", "cspresnet50",
    "cspdarknet53", "cs3darknet_s", "darknet53", "selecsls42b", "gernet_s", "hrnet_w18_small",
    "convnext_atto", "convnextv2_atto", "hgnetv2_b0", "xception41", "inception_v3")]
SEGMENTATION = ["tvseg:fcn_resnet50", "tvseg:deeplabv3_mobilenet_v3_large",
                "tvseg:lraspp_mobilenet_v3_large",
                "smp:Unet", "smp:FPN", "smp:Linknet", "smp:DeepLabV3Plus"]
SECTIONS = {"torchvision": MODELS, "timm": TIMM, "segmentation": SEGMENTATION}
PCC_F32, PCC_DEFAULT = 0.9999, 0.99


def build_module(name: str):
    """The random-init module a coverage name means (no download)."""
    import torch
    kind, _, arch = name.rpartition(":")
    if kind == "timm":
        import timm
        return timm.create_model(arch, pretrained=False)
    if kind == "tvseg":
        import torchvision.models.segmentation as seg

        class Out(torch.nn.Module):          # the model's `out` head (its forward is a dict)
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return Out(getattr(seg, arch)(weights=None, weights_backbone=None))
    if kind == "smp":
        import segmentation_models_pytorch as smp
        return getattr(smp, arch)("resnet18", encoder_weights=None)
    import torchvision
    return getattr(torchvision.models, arch)()


def one(name: str, size: int, batch: int, do_verify: bool, import_only: bool = False,
        default_pcc: bool = True, run_pcc: bool = True) -> dict:
    """Every step for one model; the row as a dict (a step that fails ends the row)."""
    import warnings
    warnings.filterwarnings("ignore")
    from ttmodels.backends import mock_device
    mock_device.prepare("n150")
    import torch

    import ttmodels
    from ttmodels.tools import importer
    from ttmodels.weights.reference import pcc
    from ttmodels.language.spec import load_graph
    from ttmodels.weights import synthetic_images

    torch.manual_seed(0)
    row: dict = {"model": name, "size": size, "batch": batch}
    t0 = time.time()
    module = build_module(name).eval()
    x = synthetic_images(batch, 3, size, size, seed=1)
    try:
        text = importer.import_module(module, x, name=name, check=False)
    except importer.UnsupportedError as e:
        kinds = sorted({u.kind for u in e.unsupported})
        row.update(stage="import", error="unsupported: " + ", ".join(kinds),
                   detail=str(e).splitlines()[:8])
        return row
    except Exception as e:        # noqa: BLE001 (the row says what)
        row.update(stage="import", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return row
    row["layers"] = text.layers
    row["blocks"] = len(text.blocks)
    row["t_import"] = round(time.time() - t0, 1)
    if import_only:
        row["stage"] = "imported"
        return row
    ignore = list(text.ignored_prefixes) or None

    t = time.time()
    try:
        plan = ttmodels.plan(text, batch_size=batch, input_size=(size, size))
        row["adapters"] = len(plan.adapters)
    except Exception as e:        # noqa: BLE001
        row.update(stage="plan", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return row
    row["t_plan"] = round(time.time() - t, 1)

    if do_verify:
        from ttmodels.tools.verify import verify
        t = time.time()
        try:
            rep = verify(text, batch_size=batch, input_size=(size, size), diagnostics=False)
            row["verify_ok"] = bool(rep.ok and (rep.real or rep.fits))
            if not row["verify_ok"]:
                bad = [s for s in rep.steps if not getattr(s, "accepted", True) or
                       not getattr(s, "memory_match", True)]
                row["verify_error"] = (f"{getattr(bad[0], 'name', '?')}: "
                                       f"{str(getattr(bad[0], 'error', '') or 'memory config differs')[:200]}"
                                       if bad else "did not reach the end")
        except Exception as e:    # noqa: BLE001
            row["verify_ok"] = False
            row["verify_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        row["t_verify"] = round(time.time() - t, 1)
    if not run_pcc:                # --no-pcc: import, plan and verify only
        row["stage"] = "verified" if row.get("verify_ok", True) else "verify"
        return row

    t = time.time()
    graph = load_graph(text, batch_size=batch, input_size=(size, size))
    # BN calibrated on 4 synthetic images (the BEV tests' count; 8 at 224 by default: time)
    from ttmodels.weights import random_state_dict
    sd = random_state_dict(graph, seed=0, calibration_batch=4)   # torchvision's keys
    # into the module's own tensors (MNASNet's load_state_dict wants its version metadata)
    msd = module.state_dict()
    unexpected = [k for k in sd if k not in msd]
    missing = [k for k in msd if k not in sd and not k.endswith("num_batches_tracked")
               and not any(k.startswith(p) for p in (ignore or []))]
    if missing or unexpected:
        row.update(stage="weights", error=f"keys: missing {missing[:3]}, unexpected {unexpected[:3]}")
        return row
    with torch.no_grad():
        for k, v in sd.items():
            msd[k].copy_(v)
    module.eval()
    tr = importer.trace(module, x)
    try:
        res = importer.check_spec(text, module, tr, x)
    except Exception as e:        # noqa: BLE001 (e.g. the float32 profile does not plan)
        row.update(stage="float32", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return row
    row["pcc_float32"], row["max_abs_float32"] = res.pcc, res.max_abs
    if res.first_bad:
        row["first_bad"] = res.first_bad
    if not default_pcc:            # --no-default-pcc: issue 34's bar is float32 + verify
        row["t_pcc"] = round(time.time() - t, 1)
        ok = row["pcc_float32"] >= PCC_F32
        row["stage"] = "done" if ok and row.get("verify_ok", True) else (
            "verify" if not row.get("verify_ok", True) else "pcc")
        return row
    with torch.no_grad():
        ref = module(x)
    try:
        with ttmodels.build(text, weights=module, backend="sim", batch_size=batch,
                            input_size=(size, size), ignore=ignore) as m:
            out = m(x)
    except Exception as e:        # noqa: BLE001
        row.update(stage="default", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return row
    row["pcc_default"] = float(pcc(ref.reshape(out.shape), out))
    row["t_pcc"] = round(time.time() - t, 1)
    ok = row["pcc_float32"] >= PCC_F32 and row["pcc_default"] >= PCC_DEFAULT
    row["stage"] = "done" if ok and row.get("verify_ok", True) else (
        "verify" if not row.get("verify_ok", True) else "pcc")
    return row


def run_children(names, size, batch, do_verify, timeout, import_only=False, default_pcc=True,
                 pcc=True):
    """Rows of ``names``, several models per child process (its imports cost ~10-60 s); a
    child that crashes or hangs costs its current model's row, the next child goes on."""
    todo = list(names)
    while todo:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--many", ",".join(todo),
               "--size", str(size), "--batch", str(batch)] \
            + ([] if do_verify else ["--no-verify"]) \
            + (["--import-only"] if import_only else []) \
            + ([] if default_pcc else ["--no-default-pcc"]) + ([] if pcc else ["--no-pcc"])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=REPO)
        t = time.time()
        for line in p.stdout:
            if line.startswith("{"):
                row = json.loads(line)
                row["t_total"] = round(time.time() - t, 1)
                t = time.time()
                todo.remove(row["model"])
                yield row
        p.wait()
        if todo and p.returncode is not None:
            tail = (p.stderr.read().strip().splitlines() or ["no output"])[-1]
            yield {"model": todo.pop(0), "stage": "crash",
                   "error": f"exit {p.returncode}: {tail[:300]}"}


def verdict(r: dict) -> str:
    if r.get("stage") == "done":
        return "ok"
    if r.get("stage") == "imported":
        return "imports (import-only run)"
    if r.get("stage") == "verified":
        return "imports, plans, verifies (PCC not run)"
    if r.get("stage") in ("import", "plan", "weights", "timeout", "crash", "float32", "default",
                          "not run"):
        return f"{r['stage']}: {r.get('error', '')}"
    if r.get("verify_ok") is False:
        return f"verify: {r.get('verify_error', '')}"
    bits = []
    if r.get("pcc_float32", 1) < PCC_F32:
        bits.append(f"float32 PCC {r['pcc_float32']:.6f} < {PCC_F32}"
                    + (f" (first layer {r['first_bad']})" if r.get("first_bad") else ""))
    if r.get("pcc_default", 1) < PCC_DEFAULT:
        bits.append(f"default PCC {r['pcc_default']:.4f} < {PCC_DEFAULT}")
    return "; ".join(bits) or r.get("stage", "?")


def markdown(rows: list[dict]) -> str:
    imported = sum(1 for r in rows if r.get("stage") not in ("import", "crash", "timeout",
                                                               "not run"))
    verified = sum(1 for r in rows if r.get("verify_ok"))
    passing = sum(1 for r in rows if r.get("stage") == "done")
    out = [f"imported {imported} / verified {verified} / total {len(rows)} "
           f"({passing} also at both PCCs)", "",
           "| model | layers | blocks | verify | PCC float32 | PCC default | result |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        v = {True: "ok", False: "no", None: ""}[r.get("verify_ok")]
        f32 = f"{r['pcc_float32']:.6f}" if "pcc_float32" in r else ""
        dft = f"{r['pcc_default']:.4f}" if "pcc_default" in r else ""
        out.append(f"| {r['model']} | {r.get('layers', '')} | {r.get('blocks', '')} | {v} | {f32} "
                   f"| {dft} | {verdict(r)} |")
    return "\n".join(out)


def cached_rows(path: Path, size: int, batch: int, import_only: bool) -> dict[str, dict]:
    """The last row per model in ``path`` at this size and batch (a full run's rows serve an
    import-only run too, not the other way round)."""
    rows: dict[str, dict] = {}
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:         # a line cut by a stopped run
            continue
        if (r.get("size"), r.get("batch")) != (size, batch):
            continue
        if r.get("import_only") and not import_only:
            continue
        rows[r["model"]] = r
    return rows


def git_commit() -> str:
    """The commit the rows ran on (+ "-dirty" with uncommitted changes), for mixed tables."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout
    head = git("rev-parse", "--short", "HEAD").strip() or "?"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no").strip()
                   else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="model names (default: the section's list)")
    ap.add_argument("--section", choices=(*SECTIONS, "all"), default="torchvision",
                    help="the list to run when no names are given (default: %(default)s)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--import-only", action="store_true", help="stop each row after the import")
    ap.add_argument("--no-pcc", action="store_true",
                    help="import, plan and verify only (the PCCs cost most of a row's time)")
    ap.add_argument("--no-default-pcc", action="store_true",
                    help="skip the default profile's PCC (about half the sim time); a row passes "
                    "on verify and the float32 PCC")
    ap.add_argument("--results", help="JSON-lines file: rows are appended as they complete and "
                    "rows already there (same model, size, batch) are reused")
    ap.add_argument("--rerun-failed", action="store_true",
                    help="with --results: run again the rows that did not pass")
    ap.add_argument("--rerun", action="store_true", help="with --results: run every row again")
    ap.add_argument("--many", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.many:
        commit = git_commit()     # the code this process loaded (later commits do not change it)
        for name in a.many.split(","):
            try:
                row = one(name, a.size, a.batch, not a.no_verify, a.import_only,
                          not a.no_default_pcc, not a.no_pcc)
            except Exception as e:      # noqa: BLE001 (one row says what; the others go on)
                row = {"model": name, "stage": "crash",
                       "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            row["commit"] = commit
            print(json.dumps(row), flush=True)
        return 0
    names = a.models or (sum(SECTIONS.values(), []) if a.section == "all" else
                         SECTIONS[a.section])
    done = {} if a.rerun or not a.results else cached_rows(Path(a.results), a.size, a.batch,
                                                             a.import_only)
    if a.rerun_failed:
        done = {k: r for k, r in done.items() if r.get("stage") in ("done", "imported")}
    for name in names:
        if name in done:
            print(f"{name:22} {verdict(done[name])}  [cached, {done[name].get('commit', '?')}]",
                  flush=True)
    new = {}
    for r in run_children([n for n in names if n not in done], a.size, a.batch,
                          not a.no_verify, None, a.import_only, not a.no_default_pcc,
                          not a.no_pcc):
        name = r["model"]
        r.setdefault("commit", git_commit())   # a crash row: the parent's view
        r.update(import_only=a.import_only, size=a.size, batch=a.batch)
        new[name] = r
        print(f"{name:22} {verdict(r)}  [{r.get('t_total', '?')} s]", flush=True)
        if a.results:
            with open(a.results, "a") as f:
                f.write(json.dumps(r) + "\n")
        if a.json:
            Path(a.json).write_text(json.dumps([new.get(n) or done[n] for n in names
                                                if n in new or n in done], indent=1))
    rows = [new.get(n) or done[n] for n in names]
    md = markdown(rows)
    print(md)
    if a.markdown:
        Path(a.markdown).write_text(md + "\n")
    return 0 if all(r.get("stage") == "done" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
