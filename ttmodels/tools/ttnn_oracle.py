"""ttnn in the planning loop: the installed ttnn, on a mock Wormhole, judges each step the planner
considers (the design of tt-mlir's optimizer, whose ``OpModel`` asks ttnn's own validation on a
mock device for every candidate layout its ``ShardSolver`` weighs).

A **step** is one ttnn call the plan would make: a layer (its op, attributes, typed plan config,
the layouts and shapes of the inputs it receives, the output the plan expects) or an adapter /
spill (``to_memory_config``, ``reshard``, ...: before and after). ``Oracle.ask(steps)`` answers,
for each, whether ttnn accepts it, the memory config, tile layout and dtype ttnn gives its output
(and whether they are the plan's), and ttnn's own per-core L1 figure for the op (its peak under a
NO_DISPATCH graph capture plus its L1 inputs, as ``ttmodels verify``'s ``ttnn op`` column).

Answers are cached on disk, one JSON file per step, under
``<TTMODELS_CACHE_DIR>/ttnn-oracle/ttnn-<version>/answers/``, keyed by a SHA-256 of the step's
full signature (op, attributes, config without the L1 estimate, input layouts and shapes, the
planned output, parameter shapes), the oracle's format and the ttnn version: a second plan of the
same model asks ttnn nothing. Misses go to a **worker process** (``worker_main``, also ``python
-m ttmodels.tools.ttnn_oracle --worker``) that opens the mock device once and answers a batch: tt-metal
reads its environment once per process and a process holds one mock system, so the planner's
own process never initialises ttnn (it may already have, for another system; ``verify`` opens
its own device). The worker belongs to one process and one caller at a time (a forked child
starts its own; threads take turns), and every answer names the step it answers (its key),
checked before it is stored.

Only what ttnn said about a step is cached. A worker that dies on a step, or an answer that is a
failure of the environment (``std::bad_alloc``, a MemoryError: stage ``environment``), is
retried once with a fresh worker; a second failure leaves the step unjudged and uncached, except
a crash signal (SIGSEGV, SIGABRT, ...) on both tries, which is ttnn crashing on the step (stage
``crash``, cached). A worker that does not answer within ``TTMODELS_TTNN_ORACLE_TIMEOUT``
seconds (default 120; a stopped or stuck worker) is killed, and the rest of the process plans
unjudged. Every answer is checked against its schema when it arrives and when it is read back;
cache files are read only when they are regular files of bounded size.

Every answer that contradicts the rule table (``rules.check`` accepts a step ttnn rejects, or
ttnn's output is not the ``rules.output_layout`` the plan expects; a conv candidate the rules
accept and ttnn refuses included) is also written to
``.../contradictions/`` (``ttmodels oracle contradictions`` lists them) and into the plan
(``plan.ttnn.contradictions``).

On/off: ``plan_graph(..., oracle=True|False)``; else the environment variable
``TTMODELS_TTNN_ORACLE`` (``0``/``off``/``false``: off; default on where ttnn 0.81.1 is
installed). Off, or without ttnn, the planner plans from the table alone and the plan says which
steps ttnn has not confirmed (``plan.ttnn``, the ``ttnn`` column of ``ttmodels plan``).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import select
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..language.graph import Precision, TensorShape, const_flat
from ..planning.layout import TensorLayout
from ..planning.oracle import NoOracle, over_bank, provide

log = logging.getLogger("ttmodels")

ENV = "TTMODELS_TTNN_ORACLE"
ORACLE_FORMAT = 1          # bump when a step's signature or an answer's meaning changes
SYSTEM = "n150"            # the default: the single-chip mock system the worker opens
L1_SMALL_SIZE = 32768      # the backend's default (ttnn_backend.DEFAULT_L1_SMALL_SIZE)
_OFF = ("0", "off", "false", "no")
TIMEOUT_ENV = "TTMODELS_TTNN_ORACLE_TIMEOUT"
DEFAULT_TIMEOUT = 120.0    # s: the worker's start, and each answer after the previous one
MAX_ENTRY = 4 << 20        # bytes: a cache file larger than this is not an answer (one is ~3 KB)
# what a failure of the machine, not of the step, says (host memory, file handles, disk): a
# device's "Out of Memory: Not enough space to allocate ... L1" is ttnn's verdict, not this
_ENVIRONMENT = ("bad_alloc", "MemoryError", "Cannot allocate memory", "Too many open files",
                "No space left on device")
# signals with which a process crashes by itself: the same one on a fresh worker is ttnn's
_CRASH_SIGNALS = tuple(getattr(signal, n) for n in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE",
                                                     "SIGILL") if hasattr(signal, n))


# ---- steps and answers ---------------------------------------------------------------------

@dataclass
class Step:
    """One ttnn call as the plan would make it (see the module docstring)."""
    kind: str                                   # "layer" | "adapter"
    op: str                                     # the layer's op, or the adapter's ttnn call
    inputs: tuple[TensorLayout, ...]
    flat: tuple[tuple[int, int, int, int], ...]  # each input's [1, 1, N*H*W, C] shape
    output: TensorLayout
    in_shapes: tuple[TensorShape | None, ...] = ()   # NHWC (None: a constant)
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: TensorShape | None = None
    precision: Precision | None = None
    config: Any = None                          # the layer's PlanConfig
    outputs: tuple[tuple[str, TensorShape, TensorLayout], ...] = ()   # a split's outputs
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)  # prepared shapes
    has_bn: bool = False
    name: str = ""                              # where it is in the plan (not in the key)

    def signature(self) -> dict[str, Any]:
        from ..planning.plan_format import _jsonable, layout_dict
        sig: dict[str, Any] = {
            "kind": self.kind, "op": self.op,
            "inputs": [layout_dict(t) for t in self.inputs], "flat": [list(f) for f in self.flat],
            "output": layout_dict(self.output)}
        if self.kind == "layer":
            cfg = self.config.as_attrs() if self.config is not None else {}
            cfg.pop("l1_parts", None)                 # the estimate, not the call
            sig.update(
                attrs=_jsonable(self.attrs), shape=list(self.shape.nhwc),
                in_shapes=[list(s.nhwc) if s is not None else None for s in self.in_shapes],
                precision=asdict(self.precision) if self.precision else None,
                config=_jsonable(cfg), has_bn=self.has_bn,
                params={k: list(v) for k, v in sorted(self.params.items())},
                outputs=[[list(s.nhwc), layout_dict(t)] for _, s, t in self.outputs])
        return sig

    def key(self, version: str, system: str = SYSTEM) -> str:
        # the system answering (its chip: n150 for Wormhole plans, p150 for Blackhole ones) is
        # part of the question: the same call may pass on one chip and fail on the other. The
        # n150's keys predate the field and name it by its absence (its answers stay valid).
        where = {} if system == SYSTEM else {"system": system}
        text = json.dumps({"format": ORACLE_FORMAT, "ttnn": version, **where,
                           "step": self.signature()}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Answer:
    """ttnn's verdict on one step."""
    accepted: bool
    error: str | None = None
    location: str | None = None       # file:line of ttnn's TT_FATAL
    stage: str = "op"                 # "op", "input" (the planned input cannot exist), "crash"
    memory: str | None = None         # ttnn's output memory config (verify.describe_key)
    layout: str | None = None         # "tile bfloat16"
    memory_match: bool = False        # ttnn's output memory config is the plan's
    layout_match: bool = False        # ... and its tile layout and dtype
    op_l1: int | None = None          # ttnn's per-core L1 peak for the op + its L1 inputs
    cached: bool = False              # from the disk cache (not stored)

    @property
    def as_planned(self) -> bool:
        return self.accepted and self.memory_match and self.layout_match

    @property
    def judged(self) -> bool:
        """False when ttnn never saw the op (its planned input could not be made, the harness
        or the environment failed): no verdict either way."""
        return self.stage not in ("input", "harness", "environment")

    @property
    def fact(self) -> bool:
        """What ttnn said about the step (cached); not a failure of our harness or of the
        machine (asked again next time)."""
        return self.stage not in ("harness", "environment")

    @property
    def status(self) -> str:
        if not self.judged:
            return "unjudged"
        if not self.accepted:
            return "rejected"
        return "confirmed" if self.as_planned else "differs"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, d: Any, *, cached: bool = False) -> Answer:
        """The answer ``d`` describes; ValueError when it is not one (a forged or damaged
        entry: a string for a bool, a refusal without its message, an L1 figure not a count)."""
        check_answer(d)
        return cls(**d, cached=cached)


STAGES = ("op", "input", "crash", "harness", "environment")
_STR_OR_NONE = ("location", "memory", "layout")


def check_answer(d: Any) -> None:
    """Raise ValueError unless ``d`` is an answer's dict (``Answer.to_dict``) in every field."""
    if not isinstance(d, dict):
        raise ValueError(f"an answer is a JSON object, not {type(d).__name__}")
    names = {f.name for f in fields(Answer)} - {"cached"}
    if set(d) != names:
        raise ValueError(f"answer fields {sorted(d)} are not {sorted(names)}")
    for k in ("accepted", "memory_match", "layout_match"):
        if type(d[k]) is not bool:
            raise ValueError(f"{k} is {d[k]!r}, not true or false")
    if d["stage"] not in STAGES:
        raise ValueError(f"stage {d['stage']!r} is not one of {', '.join(STAGES)}")
    for k in _STR_OR_NONE:
        if d[k] is not None and not isinstance(d[k], str):
            raise ValueError(f"{k} is {d[k]!r}, not a string")
    if d["accepted"]:
        if d["error"] is not None:
            raise ValueError("an accepted step carries an error")
    elif not isinstance(d["error"], str):
        raise ValueError(f"a refused step's error is {d['error']!r}, not its message")
    v = d["op_l1"]
    if v is not None and (type(v) is not int or v < 0):
        raise ValueError(f"op_l1 is {v!r}, not a byte count")


def _environmental(a: Answer) -> Answer:
    """``a``, restaged as ``environment`` when its error is the machine's (not cached)."""
    if not a.accepted and a.error and any(m in a.error for m in _ENVIRONMENT):
        return replace(a, stage="environment")
    return a


# ---- on / off ------------------------------------------------------------------------------

def why_off(explicit: bool | None = None) -> str | None:
    """None when the oracle can run, else why not (shown in the plan)."""
    if explicit is False:
        return "off (oracle=False)"
    if explicit is None and os.environ.get(ENV, "").strip().lower() in _OFF:
        return f"off ({ENV}={os.environ[ENV]})"
    import importlib.util
    if importlib.util.find_spec("ttnn") is None:
        return "off (ttnn is not installed)"
    from ..backends import mock_device
    try:
        v = mock_device.ttnn_version()
    except Exception as e:                 # pragma: no cover - a broken install
        return f"off ({e})"
    if v not in mock_device.TESTED_TTNN_VERSIONS:
        return f"off (ttnn {v}: the mock device was tested with " \
               f"{', '.join(mock_device.TESTED_TTNN_VERSIONS)} only)"
    _, problem = cache_base()
    if problem is not None:
        _warn_once(f"ttnn oracle off: {problem}")
        return f"off ({problem})"
    return None


def cache_base() -> tuple[Path | None, str | None]:
    """(``<TTMODELS_CACHE_DIR>/ttnn-oracle``, None), or (None, why that cannot hold the cache:
    an unknown ``~user``, a NUL, a regular file where a folder must be)."""
    from ..weights.cache import default_cache_dir
    try:
        base = default_cache_dir() / "ttnn-oracle"
    except (RuntimeError, ValueError) as e:      # RuntimeError: expanduser of ~nosuchuser
        return None, f"the cache directory {os.environ.get('TTMODELS_CACHE_DIR')!r} cannot " \
                     f"be used ({e})"
    problem = _dir_problem(base)
    if problem is not None:
        return None, f"the cache directory cannot be used: {problem}"
    return base, None


def _dir_problem(d: Path) -> str | None:
    """Why ``d`` cannot be (or be made) a folder, None when it can."""
    if "\0" in str(d):
        return f"{str(d)!r} contains a NUL character"
    try:
        for p in (d, *d.parents):
            if p.is_dir():
                return None
            if p.exists() or p.is_symlink():
                return f"{p} is not a directory"
    except OSError as e:                      # a name too long, a loop of symlinks, ...
        return f"{d}: {e.strerror or e}"
    return None


_WARNED: set[str] = set()


def _warn_once(msg: str, what: str | None = None) -> None:
    """Log ``msg`` the first time ``what`` (default: the message) happens in this process."""
    what = what or msg
    if what not in _WARNED:
        _WARNED.add(what)
        log.warning("%s", msg)


_SHARED: Oracle | None = None


def get(explicit: bool | None = None, system: str = SYSTEM) -> Oracle | None:
    """The process's oracle (one worker, one in-memory table) asking a mock ``system``
    ("n150", "p150"), or None when it is off."""
    global _SHARED
    if why_off(explicit) is not None:
        return None
    if _SHARED is None or _SHARED.root != _root() or _SHARED.system != system:
        if _SHARED is not None:
            _SHARED.close()
        else:
            import atexit
            atexit.register(_close_shared)       # the worker ends with the process
        _SHARED = Oracle(system=system)
    return _SHARED


def _close_shared() -> None:
    if _SHARED is not None:
        _SHARED.close()


def _root() -> Path:
    from ..backends.mock_device import ttnn_version
    base, problem = cache_base()
    if base is None:
        raise OSError(problem)
    return base / f"ttnn-{ttnn_version()}"


def _timeout() -> float:
    """Seconds the worker may take to start, and to give each answer."""
    try:
        t = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return t if 0 < t < float("inf") else DEFAULT_TIMEOUT


class _WorkerLost(Exception):
    """The worker died, answered out of step, or failed for the environment on one step."""

    def __init__(self, why: str, code: int | None = None):
        super().__init__(why)
        self.code = code


class _Timeout(Exception):
    pass


# ---- the oracle ----------------------------------------------------------------------------

class Oracle:
    """Answers steps from memory, then the disk cache, then a worker process (batched).
    ``queries`` counts the steps ttnn was asked (cache misses), ``hits`` the cached answers.
    The planner's ``planning.oracle.StepOracle``."""
    asks = True

    def __init__(self, root: Path | None = None, system: str = SYSTEM):
        from ..backends.mock_device import ttnn_version
        self.version = ttnn_version()
        self.system = system        # the mock chip the worker opens (part of every key)
        self.root = Path(root) if root is not None else _root()
        self.memory: dict[str, Answer] = {}
        self.queries = 0
        self.hits = 0
        self.seconds = 0.0          # time spent waiting for the worker
        self.failure: str | None = None   # the worker could not start: answers unavailable
        self.asked_at: dict[str, int] = {}   # key -> ``queries`` just after ttnn was asked it
        self._proc: subprocess.Popen | None = None
        self._pid = os.getpid()      # the process the worker (and the lock) belong to
        self._lock = threading.RLock()

    @property
    def grid(self) -> tuple[int, int]:
        """The worker grid of the chip the worker opens."""
        from ..arch import get as arch_get
        from ..runtime.mesh import DEVICES
        return arch_get(DEVICES[self.system].arch).grid

    def _own(self) -> threading.RLock:
        """This process's lock; in a forked child, forget the parent's worker (its pipe is the
        parent's: a child writing to it would take the parent's answers) and its lock."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._lock = threading.RLock()
            self._proc = None
        return self._lock

    # -- cache --
    def _path(self, key: str) -> Path:
        return self.root / "answers" / key[:2] / f"{key}.json"

    def _load(self, key: str) -> Answer | None:
        p = self._path(key)
        try:
            d = read_entry(p)
            if d is None:
                return None
            if d.get("format") != ORACLE_FORMAT or d.get("key") != key:
                raise ValueError("stale entry")
            return Answer.from_dict(d.get("answer"), cached=True)
        except Exception as e:     # corrupt, forged or stale: ask again
            log.warning("ttnn oracle: dropping cache entry %s (%s)", p, e)
            try:
                p.unlink()
            except OSError:
                pass
            return None

    def _store(self, key: str, step: Step, ans: Answer) -> None:
        _write_json(self._path(key), {"format": ORACLE_FORMAT, "key": key, "ttnn": self.version,
                                      "step": step.signature(), "answer": ans.to_dict()})

    # -- asking --
    def ask(self, steps: list[Step]) -> list[Answer | None]:
        """One answer per step (None: ttnn could not be asked; ``failure`` says why)."""
        with self._own():
            return self._ask(steps)

    def _ask(self, steps: list[Step]) -> list[Answer | None]:
        keys = [s.key(self.version, self.system) for s in steps]
        out: list[Answer | None] = [None] * len(steps)
        todo: dict[str, int] = {}
        for i, k in enumerate(keys):
            a = self.memory.get(k)
            if a is None:
                a = self._load(k)
                if a is not None:
                    self.memory[k] = a
            if a is not None:
                self.hits += 1
                out[i] = a
            elif k not in todo:
                todo[k] = i
        fresh: dict[str, Answer] = {}
        if todo and self.failure is None:
            t0 = time.perf_counter()
            batch = [steps[i] for i in todo.values()]
            _announce(len(batch))
            answers = self._run_batch(batch)
            self.seconds += time.perf_counter() - t0
            for (k, i), a in zip(todo.items(), answers):
                if a is None:
                    continue
                try:
                    a = Answer.from_dict(a.to_dict())      # the worker's answer, checked
                except Exception as e:
                    log.warning("ttnn oracle: dropping a malformed answer on %s (%s)",
                                steps[i].name or k, e)
                    continue
                self.queries += 1
                self.asked_at[k] = self.queries
                fresh[k] = a
                if a.fact:           # only what ttnn said about the step is kept
                    self.memory[k] = a
                    self._store(k, steps[i], a)
        for i, k in enumerate(keys):
            if out[i] is None:
                out[i] = self.memory.get(k) or fresh.get(k)
        return out

    def _worker_argv(self) -> list[str]:
        # -c, not -m: ``import ttmodels`` imports this module, and runpy would warn that the
        # module it is about to run as __main__ is imported already
        return [sys.executable, "-c", "import sys; from ttmodels.tools.ttnn_oracle import "
                "worker_main; sys.exit(worker_main(*sys.argv[1:]))", self.system]

    def _start(self) -> None:
        log_dir = self.root
        log_dir.mkdir(parents=True, exist_ok=True)
        err = open(log_dir / "worker.log", "ab")
        env = dict(os.environ)
        env[ENV] = "0"                        # the worker plans nothing itself
        self._proc = subprocess.Popen(self._worker_argv(), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=err, env=env)
        err.close()
        os.set_blocking(self._proc.stdin.fileno(), False)   # a stopped worker blocks no write
        try:
            hello = self._receive(time.monotonic() + _timeout())
        except _Timeout:
            self._kill()
            raise RuntimeError(f"the worker did not start within {_timeout():g} s ({TIMEOUT_ENV})")
        except _WorkerLost:
            hello = None
        if not (isinstance(hello, tuple) and hello and hello[0] == "ready"):
            why = hello[1] if isinstance(hello, tuple) and len(hello) > 1 else \
                "the worker exited (see worker.log in the oracle's cache directory)"
            self._kill()
            raise RuntimeError(why)

    def _send(self, obj, deadline: float) -> None:
        data = memoryview(_frame(obj))
        fd = self._proc.stdin.fileno()
        while data:
            if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
                raise _Timeout
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
            except OSError as e:              # EPIPE: the worker is gone
                raise _WorkerLost(f"the worker's pipe closed ({e.strerror})") from e

    def _receive(self, deadline: float):
        """The worker's next frame; _Timeout past ``deadline``, _WorkerLost at its end."""
        fd = self._proc.stdout.fileno()

        def exact(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    raise _Timeout
                chunk = os.read(fd, n - len(buf))
                if not chunk:
                    raise _WorkerLost("the worker's pipe closed")
                buf += chunk
            return bytes(buf)
        n, = struct.unpack("<Q", exact(8))
        try:
            return pickle.loads(exact(n))
        except (_Timeout, _WorkerLost):
            raise
        except Exception as e:
            raise _WorkerLost(f"an unreadable reply ({type(e).__name__})") from e

    def _run_batch(self, batch: list[Step]) -> list[Answer | None]:
        """Each step's answer, in order; None where ttnn could not be asked. A step the worker
        fails on (dies, answers another step, fails for the environment) is retried once on a
        fresh worker, then left unjudged (a crash signal both times: ttnn crashed on it)."""
        keys = [s.key(self.version, self.system) for s in batch]
        answers: list[Answer | None] = [None] * len(batch)
        lost: list[_WorkerLost] = []          # the failures on step ``i``
        i = 0
        while i < len(batch) and self.failure is None:
            if self._proc is None:
                try:
                    self._start()
                except Exception as e:
                    self.failure = f"ttnn could not be asked: {e}"
                    log.warning("ttnn oracle: %s", self.failure)
                    break
            try:
                self._send([(k, s) for k, s in zip(keys[i:], batch[i:])],
                           time.monotonic() + _timeout())
                while i < len(batch):
                    reply = self._receive(time.monotonic() + _timeout())
                    if not (isinstance(reply, tuple) and len(reply) == 2 and
                            isinstance(reply[1], Answer)):
                        raise _WorkerLost("a reply that is not (key, answer)")
                    k, a = reply
                    if k != keys[i]:
                        raise _WorkerLost("the worker answered another step than the one asked")
                    a = _environmental(a)
                    if a.stage == "environment":
                        raise _WorkerLost(a.error)
                    answers[i], lost = a, []
                    i += 1
            except _Timeout:
                self._kill()
                self.failure = (f"ttnn did not answer within {_timeout():g} s (the worker was "
                                f"stopped or stuck; killed; {TIMEOUT_ENV} sets the bound)")
                log.warning("ttnn oracle: %s; the rest of the plan is unjudged", self.failure)
            except _WorkerLost as e:
                e.code = self._kill()
                lost.append(e)
                if len(lost) >= 2:           # twice on a fresh worker: say so, move on
                    answers[i] = _lost_answer(lost)
                    lost = []
                    i += 1
        return answers

    def _kill(self) -> int | None:
        """End the worker (it may be dead, stopped or stuck); its exit code."""
        p, self._proc = self._proc, None
        if p is None:
            return None
        try:
            p.kill()
        except OSError:
            pass
        try:
            return p.wait(timeout=30)
        except Exception:
            return None
        finally:
            for f in (p.stdin, p.stdout):
                try:
                    f.close()
                except Exception:
                    pass

    def close(self) -> None:
        if self._pid != os.getpid():       # a forked child: the worker is the parent's
            self._proc = None
            return
        p, self._proc = self._proc, None
        if p is None:
            return
        try:
            p.stdin.close()
            p.wait(timeout=30)
        except BaseException:   # a stuck worker, or a second Ctrl-C while it shuts down
            try:
                p.kill()
                p.wait(timeout=5)
            except BaseException:
                pass

    def __del__(self):   # pragma: no cover - interpreter shutdown order
        try:
            self.close()
        except Exception:
            pass

    # -- contradictions --
    def record_contradiction(self, key: str, entry: dict[str, Any]) -> None:
        _write_json(self.root / "contradictions" / f"{key}.json", entry)

    # -- the planner's interface (planning.oracle.StepOracle) --
    def mark(self) -> tuple[int, int]:
        return self.queries, self.hits

    def judge_layer(self, g, layer, flat) -> Answer | None:
        return self.ask([layer_step(g, layer, flat, _param_shapes(g))])[0]

    def judge_adapter(self, g, move, flat) -> Answer | None:
        return self.ask([move_step(move, flat)])[0]

    def judge_candidate(self, g, layer, flat) -> Answer | None:
        step = layer_step(g, layer, flat, _param_shapes(g))
        ans = self.ask([step])[0]
        if ans is not None and ans.judged and not ans.as_planned:
            record(self, g.name, step, ans, "candidate")    # the rules' view, if other
        return ans

    def confirm(self, plan, rejected: list[str], since) -> None:
        confirm(plan, self, None, rejected, since)


class Off(NoOracle):
    """The oracle when it is off (``why_off``): asks nothing, every step unconfirmed."""

    def __init__(self, why: str):
        self.why = why

    def confirm(self, plan, rejected: list[str], since) -> None:
        confirm(plan, None, self.why, rejected, since)


def resolve(explicit: bool | None, arch: str) -> Oracle | Off:
    """The process's oracle for ``plan_graph(oracle=explicit)`` of a plan for ``arch`` (asking
    that arch's single-chip mock system), or ``Off`` with the reason."""
    from ..runtime.mesh import chip_system
    off = why_off(explicit)
    return Off(off) if off else get(explicit, system=chip_system(arch))


provide(resolve)


def _lost_answer(lost: list[_WorkerLost]) -> Answer:
    """The answer for a step the worker failed on twice: ttnn's crash when it crashed by itself
    both times (the same on a fresh worker), else unjudged (not cached)."""
    def sig(e):
        return -e.code if e.code is not None and e.code < 0 else None

    def said(e):
        s = sig(e)
        if s is not None:
            try:
                name = signal.Signals(s).name
            except ValueError:
                name = f"signal {s}"
            return f"{e} (worker killed by {name})"
        return f"{e} (worker exit {e.code})" if e.code is not None else str(e)
    if all(sig(e) in _CRASH_SIGNALS for e in lost):
        return Answer(False, f"ttnn crashed on this step ({said(lost[-1])}, twice)",
                      stage="crash")
    return Answer(False, f"not judged: {'; then '.join(said(e) for e in lost)}",
                  stage="environment")


_ANNOUNCED = [False]


def _announce(n: int) -> None:
    """Say once per process why a first plan takes a while (seconds to a minute for a big net):
    on a terminal to the user, else to the log."""
    msg = (f"ttmodels: asking ttnn on a mock Wormhole about {n} plan step(s) not asked before "
           f"(answers are cached; {ENV}=0 plans from the rule table alone)")
    if _ANNOUNCED[0]:
        log.info(msg)
        return
    _ANNOUNCED[0] = True
    if sys.stderr.isatty():
        print(msg, file=sys.stderr, flush=True)
    else:
        log.info(msg)


def _write_json(path: Path, obj) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))
        os.replace(tmp, path)
    except OSError as e:       # a cache must never break a plan; nor fill the log, once a step
        _warn_once(f"ttnn oracle: cannot write its cache ({e.strerror or e}, e.g. {path}); "
                   f"its answers are not kept", f"write {e.strerror or e}")


def read_entry(path: Path, limit: int = MAX_ENTRY) -> Any:
    """The JSON in cache file ``path`` (None when there is none). Only a regular file is read,
    and at most ``limit`` bytes of it: a FIFO would block, /dev/zero never end (ValueError)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return json.loads(data)


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack("<Q", len(data)) + data


def _write_frame(f, obj) -> None:
    f.write(_frame(obj))
    f.flush()


def _read_frame(f):
    head = f.read(8)
    if len(head) < 8:
        return None
    n, = struct.unpack("<Q", head)
    data = f.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


# ---- the plan's steps ----------------------------------------------------------------------

def plan_steps(plan, *, params: bool = True) -> list[Step]:
    """Every adapter, layer and spill of ``plan`` as a Step, in the executor's order
    (reallocations are not asked: ``ttnn.reallocate`` has no layout to judge)."""
    g = plan.graph
    flat = {n: s.flat for n, s in g.inputs.items()}
    flat.update({n: const_flat(c.shape) for n, c in g.constants.items()})
    for layer in plan.layers:
        for t in layer.node.tensors:
            flat[t] = g.shape_of(t).flat
    params = _param_shapes(g) if params else {}
    out: list[Step] = []
    spills: dict[str, list] = {}
    for sp in plan.spills:
        spills.setdefault(sp.after, []).append(sp)
    for layer in plan.layers:
        for a in plan.adapters_into(layer.name):
            out.append(move_step(a, flat))
        out.append(layer_step(g, layer, flat, params))
        for sp in spills.get(layer.name, ()):
            out.append(move_step(sp, flat))
    return out


def move_step(move, flat) -> Step:
    """An adapter (``plans.Adapter``) or a spill (``liveness.Spill``) as the Step ttnn is
    asked about: the same while planning (``judge_adapter``) as in ``confirm``."""
    if move.kind == "spill":
        return adapter_step("to_memory_config", move.before, move.to, flat[move.tensor],
                            f"{move.tensor} after {move.after}", kind="spill")
    return adapter_step(move.kind, move.before, move.after, flat[move.src], move.edge)


def adapter_step(op: str, before: TensorLayout, after: TensorLayout, flat, name: str,
                 kind: str = "adapter") -> Step:
    s = Step("adapter", op, (before,), (tuple(flat),), after, name=name)
    s._plan_kind = kind      # "adapter" | "spill": how the plan lists it
    return s


def layer_step(g, layer, flat, params) -> Step:
    node = layer.node
    in_shapes = tuple(None if s in g.constants else g.shape_of(s) for s in node.inputs)
    outs = tuple((t, node.outputs[t], lay) for t, lay in layer.outputs.items()) \
        if layer.outputs else ()
    return Step("layer", node.op, tuple(layer.inputs), tuple(tuple(flat[s]) for s in node.inputs),
                layer.output, in_shapes, dict(node.attrs), node.shape, node.precision,
                layer.config, outs, dict(params.get(node.name, {})), bool(node.bn),
                name=node.name)


_PARAMS: dict[int, tuple[Any, dict]] = {}


def _param_shapes(g) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each node's prepared parameter shapes (what the layer is built with), per graph."""
    hit = _PARAMS.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    from dataclasses import replace

    from .. import ops
    from ..weights.reference import expected_parameters
    # graphs built in code may name no weights keys: the layer's own name stands in
    nodes = [replace(n, weights=n.weights or n.name)
             if ops.get(n.op).prepared_shapes is not None else n for n in g.nodes]
    exp = expected_parameters(replace(g, nodes=nodes))
    out = {}
    for n in nodes:
        f = ops.get(n.op).prepared_shapes
        if f is not None:
            out[n.name] = {k: tuple(int(v) for v in s) for k, s in f(n, exp).items()}
    if len(_PARAMS) > 64:
        _PARAMS.clear()
    _PARAMS[id(g)] = (g, out)
    return out


# ---- the plan's record ---------------------------------------------------------------------

@dataclass
class StepVerdict:
    kind: str             # "layer" | "adapter" | "spill"
    name: str
    op: str
    status: str           # "confirmed" | "differs" | "rejected" | "over the bank" | "unconfirmed"
    error: str | None = None
    ttnn_memory: str | None = None
    ttnn_layout: str | None = None
    ttnn_l1: int | None = None
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TtnnRecord:
    """What ttnn said about a plan (``Plan.ttnn``): the oracle's state, every step's verdict,
    the queries it cost, and each contradiction with the rule table."""
    oracle: str                              # "on (ttnn 0.81.1, mock n150)" or "off (...)"
    steps: list[StepVerdict] = field(default_factory=list)
    asked: int = 0                           # steps ttnn was asked while planning (cache misses)
    cached: int = 0                          # answers from the cache
    contradictions: list[str] = field(default_factory=list)
    candidates_rejected: list[str] = field(default_factory=list)   # conv candidates ttnn refused

    @property
    def unconfirmed(self) -> list[StepVerdict]:
        return [s for s in self.steps if s.status != "confirmed"]

    def to_dict(self) -> dict[str, Any]:
        return {"oracle": self.oracle, "asked": self.asked, "cached": self.cached,
                "confirmed": len(self.steps) - len(self.unconfirmed),
                "total": len(self.steps),
                "not_confirmed": [f"{s.kind} {s.name}" for s in self.unconfirmed],
                "steps": [s.to_dict() for s in self.steps],
                "contradictions": list(self.contradictions),
                "candidates_rejected": list(self.candidates_rejected)}

    def layer_status(self, name: str) -> str:
        for s in self.steps:
            if s.kind == "layer" and s.name == name:
                return s.status
        return "unconfirmed"


def rules_output(step: Step) -> tuple[bool, list[str]]:
    """(rules accept the step, their violations) as ``plan_checks.check_plan`` runs them."""
    from ..planning import rules as R
    from ..ops import get as _op
    if step.kind == "adapter":
        vs = R.check(step.op, list(step.inputs), {"dtype": step.output.dtype,
                                                  "layout": step.output.layout},
                     step.output.memory, shapes=list(step.flat))
    else:
        from ..language.graph import Node
        attrs = step.config.as_attrs()
        attrs.setdefault("dtype", step.output.dtype)
        node = Node("n", step.op, [], step.attrs, step.shape)
        vs = R.check(_op(node.op).rule_op(node), list(step.inputs), attrs, None,
                     shapes=list(step.flat))
    return not vs, [str(v) for v in vs]


def contradiction(step: Step, ans: Answer, grid: tuple[int, int] | None = None) -> str | None:
    """How ttnn's answer contradicts the table on this step, or None (``grid``: the chip's
    worker grid, what ops that choose their own cores spread over; None: Wormhole's)."""
    if not ans.judged:
        return None
    ok, vs = rules_output(step)
    if ok and not ans.accepted:
        return f"rules accept, ttnn rejects: {ans.error}" + \
            (f" ({ans.location})" if ans.location else "")
    if not ok and ans.accepted:
        return f"rules reject ({'; '.join(vs)}), ttnn accepts"
    if ok and ans.accepted:
        from .ttnn_compare import describe_key, planned_memory_key
        table = table_output(step, grid)
        said = describe_key(planned_memory_key(table.memory))
        if (said, f"{table.layout} {table.dtype}") != (ans.memory, ans.layout):
            return (f"output: the table says {said} {table.layout} {table.dtype}, ttnn gives "
                    f"{ans.memory} {ans.layout}")
    return None


def table_output(step: Step, grid: tuple[int, int] | None = None) -> TensorLayout:
    """What ``rules.output_layout`` says the step produces (an adapter: its planned output; a
    plan made without adapters may expect other than the table, e.g. a conv whose config
    assumes a reshard that is not made)."""
    if step.kind == "adapter" or step.outputs:
        return step.output
    from ..planning import rules as R
    from ..language.graph import Node
    from ..ops import get as _op
    attrs = {**step.attrs, **step.config.as_attrs(), "out_shape": step.shape.flat}
    attrs.setdefault("dtype", step.output.dtype)
    if grid is not None:
        attrs.setdefault("device_grid", tuple(grid))
    try:
        return R.output_layout(_op(step.op).rule_op(Node("n", step.op, [], step.attrs, step.shape)),
                               list(step.inputs), attrs, step.config.memory_config,
                               list(step.flat))
    except Exception:          # an op the table has no output function for: the plan's
        return step.output


def record(oracle: Oracle, model: str, step: Step, ans: Answer, kind: str,
           grid: tuple[int, int] | None = None) -> str | None:
    """How ``ans`` contradicts the table on ``step`` (None: it does not), written to the
    cache's ``contradictions/`` when it does. ``kind``: the step's (a conv ``candidate`` too);
    ``grid``: the plan's worker grid (None: the oracle's chip's)."""
    why_not = contradiction(step, ans, grid if grid is not None else oracle.grid)
    if why_not:
        oracle.record_contradiction(step.key(oracle.version, oracle.system), {
            "ttnn": oracle.version, "model": model, "step": step.name, "kind": kind,
            "op": step.op, "contradiction": why_not, "signature": step.signature(),
            "answer": ans.to_dict()})
    return why_not


def confirm(plan, oracle: Oracle | None, why: str | None = None,
            rejected_candidates: list[str] | None = None,
            since: tuple[int, int] | None = None) -> None:
    """Ask ``oracle`` about every step of ``plan`` (one batch) and record it as ``plan.ttnn``;
    without an oracle every step is unconfirmed, and ``why`` says why."""
    steps = plan_steps(plan, params=oracle is not None)

    def pk(s):
        return getattr(s, "_plan_kind", s.kind)
    if oracle is None:
        plan.ttnn = TtnnRecord(why or "off", [StepVerdict(pk(s), s.name, s.op, "unconfirmed")
                                              for s in steps])
        return
    q0 = since[0] if since is not None else oracle.queries
    answers = oracle.ask(steps)
    rec = TtnnRecord(f"on (ttnn {oracle.version}, mock {oracle.system})" if oracle.failure is None
                     else f"unavailable ({oracle.failure})",
                     candidates_rejected=list(rejected_candidates or ()))
    seen: set[str] = set()
    for s, a in zip(steps, answers):
        if a is None:
            rec.steps.append(StepVerdict(pk(s), s.name, s.op, "unconfirmed"))
            continue
        # each answered step counts once: asked (ttnn was asked it while this plan was made, a
        # conv candidate's question included) or from the cache (disk, or this process's memory)
        k = s.key(oracle.version, oracle.system)
        if oracle.asked_at.get(k, 0) > q0 and k not in seen:
            rec.asked += 1
        else:
            rec.cached += 1
        seen.add(k)
        status, error = a.status, a.error
        if status == "confirmed" and over_bank(a, plan.l1_bank_bytes):
            # ttnn accepts the call but sizes it over the bank: the real run is out of memory
            status = "over the bank"
            error = f"ttnn sizes it at {a.op_l1:,} B per core, over the " \
                    f"{plan.l1_bank_bytes:,} B bank"
        rec.steps.append(StepVerdict(pk(s), s.name, s.op, status, error, a.memory, a.layout,
                                     a.op_l1, a.cached))
        why_not = record(oracle, plan.graph.name, s, a, pk(s), plan.grid)
        if why_not:
            rec.contradictions.append(f"{pk(s)} {s.name} ({s.op}): {why_not}")
    plan.ttnn = rec


def list_contradictions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded contradiction of the table with ttnn (the oracle's cache: ``root`` is
    its ``ttnn-oracle`` folder, every ttnn version's, or one version's folder)."""
    if root is None:
        root, problem = cache_base()
        if root is None:
            return []
    base = Path(root)
    pattern = "contradictions/*.json" if base.name.startswith("ttnn-") and \
        base.name != "ttnn-oracle" else "ttnn-*/contradictions/*.json"
    out = []
    for p in sorted(base.glob(pattern)):
        try:
            d = read_entry(p)
        except (OSError, ValueError):
            continue
        if isinstance(d, dict):           # a forged list or number is no contradiction
            out.append(d)
    return out


def count_answers(root: Path) -> int:
    """The answers cached under one ttnn version's folder ``root`` (regular files only)."""
    n = 0
    for p in Path(root).glob("answers/*/*.json"):
        try:
            n += stat.S_ISREG(p.stat().st_mode)
        except OSError:
            continue
    return n


@dataclass(frozen=True)
class Cleared:
    removed: int                 # answer and contradiction files removed
    failed: tuple[str, ...]      # "path: why" of each the cache kept


def clear(root: Path | None = None) -> Cleared:
    """Delete the oracle's cache (answers, contradictions, the worker's log) under ``root``
    (the ``ttnn-oracle`` folder; a symlink to one is followed: its entries are deleted, the
    link kept). Says what was removed and what could not be."""
    if root is None:
        root, problem = cache_base()
        if root is None:
            return Cleared(0, (problem,))
    base = Path(root)
    if not base.is_dir():
        return Cleared(0, ())
    removed, failed = 0, []
    dirs = []
    for here, subdirs, files in os.walk(base, topdown=False):
        for name in files:
            p = os.path.join(here, name)
            try:
                os.unlink(p)
            except OSError as e:
                failed.append(f"{p}: {e.strerror or e}")
                continue
            removed += name.endswith(".json")
        dirs += [os.path.join(here, d) for d in subdirs]
    for d in dirs:                       # deepest first (os.walk bottom-up)
        try:
            if os.path.islink(d):
                os.unlink(d)
            else:
                os.rmdir(d)
        except OSError:
            pass                         # a folder still holding what could not be removed
    if not base.is_symlink():
        try:
            base.rmdir()
        except OSError:
            pass
    return Cleared(removed, tuple(failed))


# ---- the worker ----------------------------------------------------------------------------

def _answer(step: Step, tt, dev, be) -> Answer:
    """Run ``step`` through the project's own layer / adapter code on the mock device under a
    NO_DISPATCH graph capture (ttnn validates, computes output specs and L1; nothing runs)."""
    import torch

    from ..backends import common
    from ..language.graph import Node
    from ..runtime.layers import AdapterLayer, make_layer
    from ..planning.plans import Adapter, PlannedLayer
    from .ttnn_compare import (_layout_str, _ttnn_layout_str, describe_key, l1_bytes_per_core,
                         planned_memory_key, split_error, ttnn_memory_key)

    mode = tt.graph.RunMode.NO_DISPATCH
    tt.graph.begin_graph_capture(mode)
    try:
        try:
            xs = [tt.from_torch(torch.zeros(list(f)), dtype=common.data_type(tt, t.dtype),
                                layout=common.layout(tt, t.layout), device=dev,
                                memory_config=common.memory_config(tt, t.memory))
                  for t, f in zip(step.inputs, step.flat)]
        except Exception as e:
            msg, loc = split_error(e)
            return Answer(False, msg, loc, stage="input")
        try:
            if step.kind == "adapter":
                ad = Adapter("x", "y", 0, step.op, step.inputs[0], step.output, "oracle")
                layer = AdapterLayer(ad, be)
                call = lambda: layer(xs[0])      # noqa: E731
            else:
                node = Node("n", step.op, [f"i{k}" for k in range(len(xs))], dict(step.attrs),
                            step.shape, precision=step.precision,
                            weights="n" if step.params else None,
                            bn="n.bn" if step.has_bn else None,
                            outputs={t: s for t, s, _ in step.outputs})
                pl = PlannedLayer(node, list(step.inputs), step.output, 0, step.config,
                                  outputs={t: lay for t, _, lay in step.outputs})
                params = {k: torch.zeros(list(v)) for k, v in step.params.items()} or None
                layer = make_layer(pl, params, be, input_shapes=list(step.in_shapes))
                layer.precompute()
                call = lambda: layer(xs)         # noqa: E731
        except Exception as e:           # the layer's own checks, or weight preparation
            msg, loc = split_error(e)
            return Answer(False, msg, loc)
        ins = sum(l1_bytes_per_core(tt, x) for x in xs)
        tt.graph.begin_graph_capture(mode)
        out, err = None, None
        try:
            out = call()
        except Exception as e:
            err = e
        finally:
            inner = tt.graph.end_graph_capture()
        try:
            peak = int(tt.graph.extract_resource_usage_per_core(inner).peak_total) + ins
        except Exception:
            peak = None
        if err is not None:
            msg, loc = split_error(err)
            return Answer(False, msg, loc, op_l1=peak)
        if isinstance(out, tuple):
            pairs = list(zip(out, [lay for _, _, lay in step.outputs]))
        else:
            pairs = [(out, step.output)]
        first = pairs[0][0]
        return Answer(
            True, memory=describe_key(ttnn_memory_key(first.memory_config())),
            layout=_ttnn_layout_str(first),
            memory_match=all(ttnn_memory_key(o.memory_config()) == planned_memory_key(e.memory)
                             for o, e in pairs),
            layout_match=all(_ttnn_layout_str(o) == _layout_str(e) for o, e in pairs),
            op_l1=peak)
    finally:
        tt.graph.end_graph_capture()


def _known_crash(step: Step) -> str | None:
    from .ttnn_compare import KNOWN_CRASH
    if step.kind == "layer" and step.op == "upsample" and \
            step.attrs.get("mode") == "bilinear" and step.inputs and \
            step.inputs[0].layout == "tile" and step.inputs[0].memory.memory_layout == "height_sharded":
        return KNOWN_CRASH
    return None


def worker_main(system: str = SYSTEM) -> int:
    """``python -m ttmodels.tools.ttnn_oracle --worker [SYSTEM]``: frames of [Step] on stdin, one Answer frame
    per step on stdout. Anything else written to stdout (tt-metal's logger) goes to stderr."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    try:
        from ..backends import mock_device
        from ..backends import Backend
        mock_device.prepare(system)
        tt, dev = mock_device.open_device(system, l1_small_size=L1_SMALL_SIZE)
        be = Backend("ttnn-mock", tt, dev, {"l1_small_size": L1_SMALL_SIZE})
    except Exception as e:
        _write_frame(proto, ("failed", f"{type(e).__name__}: {e}"))
        return 1
    _write_frame(proto, ("ready",))
    try:
        while True:
            batch = _read_frame(inp)
            if batch is None:
                break
            for key, step in batch:          # each answer names the step it answers
                crash = _known_crash(step)
                if crash is not None:
                    a = Answer(False, crash, stage="crash")
                else:
                    try:
                        a = _answer(step, tt, dev, be)
                    except Exception as e:       # the harness itself: say so, do not die
                        a = Answer(False, f"{type(e).__name__}: {e}", stage="harness")
                    a = _environmental(a)        # std::bad_alloc is no verdict on the step
                _write_frame(proto, (key, a))
    finally:
        try:
            tt.close_device(dev)
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"] and len(sys.argv) <= 3:
        # the module's own classes (not __main__'s) go over the pipe
        from .ttnn_oracle import worker_main as _main
        sys.exit(_main(*sys.argv[2:]))
    print("usage: python -m ttmodels.tools.ttnn_oracle --worker [SYSTEM] (started by the planner)",
          file=sys.stderr)
    sys.exit(2)
