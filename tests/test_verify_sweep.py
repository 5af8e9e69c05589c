"""scripts/verify_sweep.py's bookkeeping (no mock device: each configuration's run is replaced):
the order (batch by batch), resuming from `--out`, `--fresh`, and the exit status that says a
planned, confirmed configuration failed the real run."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "verify_sweep.py"


@pytest.fixture()
def sweep(monkeypatch):
    spec = importlib.util.spec_from_file_location("verify_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def fake_run(model, batch):
        calls.append((model, batch))
        ok = not (model == "bad")
        return {"model": model, "batch": batch, "plan": "ok", "steps": 3, "confirmed": 3,
                "ok": ok, "first_rejected": None if ok else ["x", "Out of Memory"],
                "seconds": 0, "commit": "test"}
    monkeypatch.setattr(mod, "run", fake_run)
    mod.calls = calls
    return mod


def test_configurations_run_batch_by_batch(sweep):
    assert sweep.parse(["a:1,8", "b:2,1"]) == [("a", 1), ("b", 1), ("b", 2), ("a", 8)]


def test_out_resumes_and_fresh_reruns(sweep, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    out.write_text(json.dumps({"model": "a", "batch": 1, "plan": "ok", "steps": 3,
                               "confirmed": 3, "ok": True, "seconds": 5}) + "\n")
    assert sweep.main(["--out", str(out), "a:1,2", "b:1"]) == 0
    assert sweep.calls == [("b", 1), ("a", 2)]            # (a, 1) came from the file
    assert len(out.read_text().splitlines()) == 3
    assert "3 configurations: 3 ran to the end" in capsys.readouterr().out
    sweep.calls.clear()
    assert sweep.main(["--out", str(out), "a:1", "--fresh"]) == 0
    assert sweep.calls == [("a", 1)]


def test_a_confirmed_plan_that_fails_the_real_run_fails_the_sweep(sweep, tmp_path):
    assert sweep.main(["--out", str(tmp_path / "r.jsonl"), "bad:4"]) == 1
    table = sweep.table([json.loads(x) for x in (tmp_path / "r.jsonl").read_text().split("\n")
                         if x])
    assert "| bad |  |  | 4 (confirmed) |" in table


def test_help_prints_the_usage_and_runs_nothing(sweep, capsys):
    # `--help` was taken for a model name (a refused row)
    assert sweep.main(["--help"]) == 0
    assert "python scripts/verify_sweep.py" in capsys.readouterr().out
    assert sweep.calls == []


def test_out_may_follow_the_configurations(sweep, tmp_path):
    # `... a:1 --out F`: F is the file, not a configuration named "--out"
    out = tmp_path / "rows.jsonl"
    assert sweep.main(["a:1", "--out", str(out), "--fresh"]) == 0
    assert sweep.calls == [("a", 1)]
    assert [json.loads(x)["model"] for x in out.read_text().splitlines()] == ["a"]
    assert sweep.main(["a:1", "--out"]) == 2
