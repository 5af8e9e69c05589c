"""A stand-in for the ttnn oracle's worker (``python -m ttmodels.tools.ttnn_oracle --worker``)
that speaks its pipe protocol but judges nothing: tests/test_ttnn_oracle_worker.py runs the
oracle's real process handling (fork, threads, deaths, stops, bad replies) against it in
milliseconds instead of a mock device's seconds.

``python oracle_fake_worker.py MODE STATE_DIR``: each start writes ``STATE_DIR/start-<pid>``.
Every answer it gives says which step it judged: ``memory`` is the first 16 hex digits of the
key of the step it was given (computed from the step itself), so a test can tell an answer
stored under another step's key.

MODE: ``echo`` (accept every step); ``stop`` (SIGSTOP itself at the first batch); ``kill9`` /
``segv`` (die by that signal on the first step, on the first start only); ``kill9-always`` /
``segv-always`` (on every start); ``badalloc`` / ``badalloc-always`` (answer "std::bad_alloc",
as a transient host allocation failure does); ``wrongkey`` (echo another key); ``garbage`` (an
answer whose ``accepted`` is the string "false"); ``slowexit`` (at the end of its input, wait
30 s before exiting)."""
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ttmodels.tools import ttnn_oracle as O  # noqa: E402


def main() -> int:
    mode, state = sys.argv[1], Path(sys.argv[2])
    starts = len(list(state.glob("start-*")))
    (state / f"start-{os.getpid()}").write_text(str(os.getppid()))
    first = starts == 0
    version = os.environ["FAKE_ORACLE_VERSION"]
    out = os.fdopen(os.dup(1), "wb")
    inp = sys.stdin.buffer
    O._write_frame(out, ("ready",))
    while True:
        batch = O._read_frame(inp)
        if batch is None:
            if mode == "slowexit":
                time.sleep(30)
            return 0
        if mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        for item in batch:
            # (key, step) since answers name their step; a bare step before
            key, step = item if isinstance(item, tuple) else (None, item)
            truth = step.key(version)
            sig = {"kill9": signal.SIGKILL, "segv": signal.SIGSEGV}.get(mode.split("-")[0])
            if sig is not None and (first or mode.endswith("-always")):
                os.kill(os.getpid(), sig)
            a = O.Answer(True, memory=truth[:16], layout="tile bfloat16", memory_match=True,
                         layout_match=True, op_l1=1000)
            if mode.startswith("badalloc") and (first or mode.endswith("-always")):
                a = O.Answer(False, "std::bad_alloc", stage="input")
            if mode == "garbage":
                a.accepted = "false"
            if mode == "wrongkey":
                key = "0" * 64
            time.sleep(0.001)
            O._write_frame(out, (key, a) if key is not None else a)


if __name__ == "__main__":
    sys.exit(main())
