"""The ttnn oracle's worker and disk cache cannot be poisoned and never hang (issue 35: items
1, 2, 4, 5, 6, 9, 10, 11, 23). The worker here is tests/oracle_fake_worker.py, which speaks the
real worker's pipe protocol and marks each answer with the step it judged; the caches are this
test's own folders (tests/conftest.py points TTMODELS_CACHE_DIR at a temporary one too)."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ttmodels.language.spec import load_graph
from ttmodels.tools import ttnn_oracle as O
from ttmodels.planning.planner import plan_graph

from test_ttnn_oracle import SMALL    # the same small spec the scripted oracle plans

FAKE = str(Path(__file__).resolve().parent / "oracle_fake_worker.py")


class Faked(O.Oracle):
    """The real oracle (pipe, retries, timeouts, cache) with the fake worker."""

    def __init__(self, root, mode, state):
        super().__init__(root)
        self.mode, self.state = mode, Path(state)
        self.state.mkdir(parents=True, exist_ok=True)

    def _worker_argv(self):
        return [sys.executable, FAKE, self.mode, str(self.state)]

    def starts(self) -> list[int]:
        return [int(p.name.split("-")[1]) for p in self.state.glob("start-*")]


@pytest.fixture(autouse=True)
def _fake_env(monkeypatch):
    from ttmodels.backends.mock_device import ttnn_version
    monkeypatch.setenv("FAKE_ORACLE_VERSION", ttnn_version())
    monkeypatch.setattr(O, "_WARNED", set())        # "once" is per process: per test here


def steps_of(batch: int) -> list[O.Step]:
    plan = plan_graph(load_graph(SMALL, batch_size=batch), oracle=False)
    return O.plan_steps(plan, params=False)


def stored(root: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in root.glob("answers/*/*.json")}


def wrong_answers(root: Path) -> list[str]:
    """Keys whose stored answer the worker gave for another step."""
    return [k for k, d in stored(root).items() if d["answer"]["memory"] != k[:16]]


def _in_time(fn, seconds: float):
    """fn() run in a thread; fails (without waiting for it) when it takes longer."""
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("out", fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still waiting after {seconds} s"
    return box["out"]


@contextlib.contextmanager
def faked(tmp_path: Path, mode: str):
    """A scripted oracle over a fresh cache, closed and its workers killed after the test."""
    o = Faked(tmp_path / "cache", mode, tmp_path / "state")
    try:
        yield o
    finally:
        o.close()
        _kill_all(o)


def _kill_all(o: Faked) -> None:
    for pid in o.starts():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _wait_children(pids: list[int], seconds: float) -> list[int | str]:
    """Each forked child's exit code; one still running after ``seconds`` is killed ("hung")."""
    codes: dict[int, int | str] = {}
    end = time.monotonic() + seconds
    while len(codes) < len(pids) and time.monotonic() < end:
        for p in pids:
            if p not in codes:
                done, status = os.waitpid(p, os.WNOHANG)
                if done:
                    codes[p] = os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    for p in pids:
        if p not in codes:
            os.kill(p, signal.SIGKILL)
            os.waitpid(p, 0)
            codes[p] = "hung"
    return [codes[p] for p in pids]


# ---- item 1: one process and one caller at a time; answers name their step ---------------

def test_forked_children_never_use_the_parents_worker(tmp_path):
    with faked(tmp_path, "echo") as o:
        assert all(a.accepted for a in o.ask(steps_of(1)))      # the parent's worker runs
        work = [steps_of(b) for b in (2, 3, 4, 5)]
        go = time.time() + 1.0
        kids = []
        for steps in work:
            pid = os.fork()
            if pid == 0:                 # a child: ask at the same moment as its siblings
                code = 1
                try:
                    time.sleep(max(0.0, go - time.time()))
                    answers = o.ask(steps)
                    code = 0 if all(a is not None for a in answers) else 3
                finally:
                    os._exit(code)
            kids.append(pid)
        codes = _wait_children(kids, 60)
        assert codes == [0] * 4
        assert wrong_answers(o.root) == []
        assert len(stored(o.root)) == sum(len({s.key(o.version) for s in w})
                                          for w in [steps_of(1)] + work)
        # each child started its own worker; the parent's still answers the parent
        assert len(o.starts()) == 5
        again = steps_of(6)
        assert [a.memory for a in o.ask(again)] == [s.key(o.version)[:16] for s in again]


def test_threads_take_turns_on_the_worker(tmp_path):
    o = Faked(tmp_path / "cache", "echo", tmp_path / "state")
    work = [steps_of(b) for b in (1, 2, 3, 4)]
    got: dict[int, list] = {}
    barrier = threading.Barrier(len(work))

    def run(n):
        barrier.wait()
        got[n] = o.ask(work[n])
    try:
        threads = [threading.Thread(target=run, args=(n,)) for n in range(len(work))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for n, steps in enumerate(work):
            assert [a.memory for a in got[n]] == [s.key(o.version)[:16] for s in steps]
        assert wrong_answers(o.root) == []
    finally:
        o.close()
        _kill_all(o)


def test_an_answer_naming_another_step_is_never_stored(tmp_path):
    with faked(tmp_path, "wrongkey") as o:
        answers = o.ask(steps_of(1)[:2])
        assert stored(o.root) == {}
        assert all(a is not None and a.status == "unjudged" and not a.fact for a in answers)
        assert "another step" in answers[0].error


# ---- item 2: only what ttnn said about the step is cached ---------------------------------

def test_a_worker_killed_from_outside_is_retried_not_cached_as_a_crash(tmp_path):
    with faked(tmp_path, "kill9") as o:
        steps = steps_of(1)
        answers = o.ask(steps)
        assert [a.status for a in answers] == ["confirmed"] * len(steps)
        assert wrong_answers(o.root) == [] and len(stored(o.root)) == len(steps)
        assert len(o.starts()) == 2                  # one fresh worker after the kill


def test_a_step_whose_worker_is_killed_twice_stays_unjudged_and_uncached(tmp_path):
    with faked(tmp_path, "kill9-always") as o:
        step = steps_of(1)[:1]
        a, = o.ask(step)
        assert a.status == "unjudged" and "SIGKILL" in a.error
        assert stored(o.root) == {}
        assert len(o.starts()) == 2                  # retried once, then given up
        o.mode = "echo"                              # the next plan asks again
        a, = o.ask(step)
        assert a.status == "confirmed" and len(stored(o.root)) == 1


def test_ttnn_crashing_on_a_step_twice_is_cached_as_its_crash(tmp_path):
    with faked(tmp_path, "segv-always") as o:
        a, = o.ask(steps_of(1)[:1])
        assert a.status == "rejected" and a.stage == "crash" and "SIGSEGV" in a.error
        assert [d["answer"]["stage"] for d in stored(o.root).values()] == ["crash"]


@pytest.mark.parametrize("mode, cached", [("badalloc", True), ("badalloc-always", False)])
def test_bad_alloc_is_no_verdict_on_the_step(tmp_path, mode, cached):
    with faked(tmp_path, mode) as o:
        a, = o.ask(steps_of(1)[:1])
        if cached:          # transient: the fresh worker's answer is the step's
            assert a.status == "confirmed" and len(stored(o.root)) == 1
        else:
            assert a.status == "unjudged" and "bad_alloc" in a.error
            assert stored(o.root) == {}


def test_the_worker_side_restages_host_failures():
    a = O._environmental(O.Answer(False, "std::bad_alloc", stage="input"))
    assert a.stage == "environment" and not a.judged and not a.fact
    oom = O.Answer(False, "Out of Memory: Not enough space to allocate 1 B L1 buffer")
    assert O._environmental(oom).stage == "op"       # ttnn's L1 verdict stays a fact


# ---- item 4: every answer checked against its schema --------------------------------------

GOOD = O.Answer(True, memory="m", layout="tile bfloat16", memory_match=True, layout_match=True,
                op_l1=10).to_dict()


@pytest.mark.parametrize("forged", [
    {"accepted": "false"}, {"accepted": None}, {"accepted": False, "error": None},
    {"op_l1": "lots"}, {"op_l1": True}, {"op_l1": -1}, {"stage": "bogus"},
    {"memory_match": 1}, {"location": 5}, {"extra": 1}, "list"])
def test_a_forged_cache_entry_is_dropped_and_asked_again(tmp_path, forged):
    with faked(tmp_path, "echo") as o:
        step = steps_of(1)[:1]
        o.ask(step)
        (path,) = o.root.glob("answers/*/*.json")
        d = json.loads(path.read_text())
        d["answer"] = [GOOD] if forged == "list" else {**GOOD, **forged}
        path.write_text(json.dumps(d))
        fresh = Faked(o.root, "echo", tmp_path / "state")
        a, = fresh.ask(step)
        assert fresh.queries == 1 and a.accepted is True and not a.cached
        assert json.loads(path.read_text())["answer"] == a.to_dict()        # rewritten


def test_a_malformed_answer_from_the_worker_is_not_stored(tmp_path):
    with faked(tmp_path, "garbage") as o:
        a, = o.ask(steps_of(1)[:1])
        assert a is None and stored(o.root) == {}


def test_a_conv_candidate_ttnn_refuses_and_the_rules_accept_is_a_contradiction(tmp_path):
    from ttmodels.planning.layout import HEIGHT

    class Scripted(O.Oracle):
        def _run_batch(self, batch):
            return [O.Answer(False, "Scripted refusal", "x.cpp:1")
                    if s.op == "conv2d" and s.attrs["kernel"] == (3, 3)
                    and s.config.shard_layout == HEIGHT else
                    O.Answer(True, memory="m", layout="l", memory_match=True, layout_match=True)
                    for s in batch]
    root = tmp_path / "ttnn-oracle" / "ttnn-x"
    plan = plan_graph(load_graph(SMALL), oracle=Scripted(root))
    assert plan.layer("c1").config.shard_layout != HEIGHT
    found = O.list_contradictions(tmp_path / "ttnn-oracle")
    assert {(c["kind"], c["step"]) for c in found if c["kind"] == "candidate"} == {
        ("candidate", "c1")}
    assert "rules accept, ttnn rejects: Scripted refusal" in \
        next(c for c in found if c["kind"] == "candidate")["contradiction"]


# ---- item 5: a stopped worker is not waited for -------------------------------------------

def test_a_stopped_worker_is_killed_after_the_bound_and_the_plan_goes_on(tmp_path, monkeypatch,
                                                                        caplog):
    monkeypatch.setenv(O.TIMEOUT_ENV, "2")
    with faked(tmp_path, "stop") as o:
        t0 = time.monotonic()
        answers = _in_time(lambda: o.ask(steps_of(1)), 60)
        assert time.monotonic() - t0 < 30
        assert answers == [None] * len(answers)
        assert "did not answer within 2 s" in o.failure
        (pid,) = o.starts()
        with pytest.raises(ProcessLookupError):      # killed and reaped
            os.kill(pid, 0)
        assert _in_time(lambda: o.ask(steps_of(2)), 10) == [None] * len(steps_of(2))
        assert sum("did not answer" in r.getMessage() for r in caplog.records) == 1
        plan = plan_graph(load_graph(SMALL), oracle=o)
        assert plan.ttnn.oracle.startswith("unavailable (ttnn did not answer")


# ---- item 6: only regular files of bounded size are read ----------------------------------

def test_cache_files_that_are_not_regular_files_are_skipped(tmp_path):
    o = Faked(tmp_path / "ttnn-oracle" / "ttnn-x", "echo", tmp_path / "state")
    try:
        steps = steps_of(1)[:3]
        o.ask(steps)
        paths = sorted(o.root.glob("answers/*/*.json"))
        os.unlink(paths[0])
        os.mkfifo(paths[0])
        os.unlink(paths[1])
        os.symlink("/dev/zero", paths[1])
        paths[2].write_text(" " * (O.MAX_ENTRY + 1))
        fresh = Faked(o.root, "echo", tmp_path / "state")
        answers = _in_time(lambda: fresh.ask(steps), 30)
        assert fresh.queries == 3 and all(a.accepted for a in answers)
        contra = o.root / "contradictions"
        contra.mkdir()
        os.mkfifo(contra / "a.json")
        os.symlink("/dev/zero", contra / "b.json")
        (contra / "c.json").write_text(json.dumps({"step": "c"}))
        found = _in_time(lambda: O.list_contradictions(o.root.parent), 30)
        assert found == [{"step": "c"}]
    finally:
        o.close()
        _kill_all(o)


# ---- items 9, 10, 23: the cache folder, the commands, the summary -------------------------

@pytest.mark.parametrize("where", ["~nosuchuser/x", "file"])
def test_an_unusable_cache_dir_turns_the_oracle_off_and_says_so_once(tmp_path, monkeypatch,
                                                                     caplog, capsys, where):
    from ttmodels.tools.cli import main
    if where == "file":
        where = str(tmp_path / "plain")
        Path(where).write_text("not a folder")
    monkeypatch.setenv("TTMODELS_CACHE_DIR", where)
    p1 = plan_graph(load_graph(SMALL), oracle=True)
    p2 = plan_graph(load_graph(SMALL), oracle=True)
    for p in (p1, p2):
        assert p.ttnn.oracle.startswith("off (") and "cannot be used" in p.ttnn.oracle
    warned = [r for r in caplog.records if "ttnn oracle" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert main(["oracle", "info"]) == 0
    assert "ttnn oracle: off (" in capsys.readouterr().out
    for action in ("contradictions", "clear"):
        assert main(["oracle", action]) == 2
        assert "cannot be used" in capsys.readouterr().err


def _cli(monkeypatch, cache, *argv):
    from ttmodels.tools.cli import main
    monkeypatch.setenv("TTMODELS_CACHE_DIR", str(cache))
    return main(["oracle", *argv])


def test_oracle_commands_tell_the_truth(tmp_path, monkeypatch, capsys):
    from ttmodels.backends.mock_device import ttnn_version
    base = tmp_path / "cache" / "ttnn-oracle"
    mine, other = base / f"ttnn-{ttnn_version()}", base / "ttnn-0.0.0"
    for root, n in ((mine, 2), (other, 5)):
        for i in range(n):
            p = root / "answers" / "ab" / f"ab{i}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("{}")
    (mine / "contradictions").mkdir()
    (mine / "contradictions" / "x.json").write_text(json.dumps([1, 2]))     # not an entry
    (mine / "contradictions" / "y.json").write_text(json.dumps({"step": "y", "kind": "layer"}))
    assert _cli(monkeypatch, tmp_path / "cache", "info") == 0
    assert ": 2 answer(s), 1 contradiction(s)" in capsys.readouterr().out
    assert _cli(monkeypatch, tmp_path / "cache", "contradictions") == 0
    assert "1 contradiction(s)" in capsys.readouterr().out
    # clear through a symlinked folder removes the entries it counts
    real = tmp_path / "elsewhere"
    base.rename(real)
    base.symlink_to(real)
    assert _cli(monkeypatch, tmp_path / "cache", "clear") == 0
    assert "removed 9 " in capsys.readouterr().out
    assert list(real.rglob("*.json")) == [] and base.is_symlink()
    # a file it cannot remove (a read-only folder) is reported, not counted
    p = mine / "answers" / "ab" / "ab0.json"
    p.parent.mkdir(parents=True)
    p.write_text("{}")
    real_unlink = os.unlink

    def refuse(path, *a, **k):
        if str(path).endswith(".json"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_unlink(path, *a, **k)
    monkeypatch.setattr(os, "unlink", refuse)
    assert _cli(monkeypatch, tmp_path / "cache", "clear") == 1
    out, err = capsys.readouterr()
    assert "removed 0 " in out and "could not be removed" in err and "Permission denied" in err
    assert p.exists()


def test_asked_plus_cached_never_exceeds_the_steps(tmp_path):
    from ttmodels.planning.layout import HEIGHT

    class Scripted(O.Oracle):
        def _run_batch(self, batch):
            return [O.Answer(False, "Scripted refusal", "x.cpp:1")
                    if s.op == "conv2d" and s.attrs["kernel"] == (3, 3)
                    and s.config.shard_layout == HEIGHT else
                    O.Answer(True, memory="m", layout="l", memory_match=True, layout_match=True)
                    for s in batch]
    o = Scripted(tmp_path)
    rec = plan_graph(load_graph(SMALL), oracle=o).ttnn
    assert o.queries > len({s.name for s in rec.steps if s.kind == "layer"}) - 2
    assert rec.asked + rec.cached == len(rec.steps)
    assert rec.asked <= o.queries
    rec2 = plan_graph(load_graph(SMALL), oracle=o).ttnn       # all from memory now
    assert (rec2.asked, rec2.cached) == (0, len(rec2.steps))


# ---- item 11: a Ctrl-C while the worker shuts down -----------------------------------------

SHUTDOWN = r"""
import sys, time
sys.path.insert(0, {tests!r})
from test_ttnn_oracle_worker import Faked, steps_of
from ttmodels.tools import ttnn_oracle as O
o = Faked({root!r}, "slowexit", {state!r})
O._SHARED = o
import atexit
atexit.register(O._close_shared)
o.ask(steps_of(1)[:1])
print("exiting", flush=True)
"""


def test_a_ctrl_c_while_the_worker_shuts_down_prints_no_traceback(tmp_path):
    from ttmodels.backends.mock_device import ttnn_version
    code = SHUTDOWN.format(tests=str(Path(__file__).parent), root=str(tmp_path / "cache"),
                           state=str(tmp_path / "state"))
    env = {**os.environ, "FAKE_ORACLE_VERSION": ttnn_version()}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert p.stdout.readline().strip() == "exiting"
        time.sleep(1.0)                 # in the exit handler, waiting for the worker
        p.send_signal(signal.SIGINT)
        # past the worker's 30 s: on a loaded machine the signal can land before the exit
        # handler waits, which then waits the worker out (still no traceback to show)
        _, err = p.communicate(timeout=45)
    finally:
        p.kill()
        for f in (tmp_path / "state").glob("start-*"):
            try:
                os.kill(int(f.name.split("-")[1]), signal.SIGKILL)
            except OSError:
                pass
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_a_cache_it_cannot_write_is_said_once(tmp_path, caplog):
    root = tmp_path / "ro"
    root.mkdir()
    (root / "answers").write_text("a file where the answers' folder goes")
    o = Faked(root, "echo", tmp_path / "state")
    try:
        answers = o.ask(steps_of(1) + steps_of(2))
        assert all(a.accepted for a in answers)
        said = [r.getMessage() for r in caplog.records if "cannot write" in r.getMessage()]
        assert len(said) == 1 and "answers are not kept" in said[0]
    finally:
        o.close()
        _kill_all(o)
