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
same model asks ttnn nothing. Misses go to a **worker process** (``python -m
ttmodels.planning.ttnn_oracle --worker``) that opens the mock device once and answers a batch: tt-metal
reads its environment once per process and a process holds one mock system, so the planner's
own process never initialises ttnn (it may already have, for another system; ``verify`` opens
its own device). A worker that dies on a step (a segfault inside ttnn) is restarted for the
rest; the step counts as rejected.

Every answer that contradicts the rule table (``rules.check`` accepts a step ttnn rejects, or
ttnn's output is not the ``rules.output_layout`` the plan expects) is also written to
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
import struct
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..language.graph import Precision, TensorShape, const_flat
from .layout import TensorLayout

log = logging.getLogger("ttmodels")

ENV = "TTMODELS_TTNN_ORACLE"
ORACLE_FORMAT = 1          # bump when a step's signature or an answer's meaning changes
SYSTEM = "n150"
L1_SMALL_SIZE = 32768      # the backend's default (ttnn_backend.DEFAULT_L1_SMALL_SIZE)
_OFF = ("0", "off", "false", "no")


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
        from .plan_format import _jsonable, layout_dict
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

    def key(self, version: str) -> str:
        text = json.dumps({"format": ORACLE_FORMAT, "ttnn": version, "step": self.signature()},
                          sort_keys=True, default=str)
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
        """False when ttnn never saw the op (its planned input could not be made, or the
        harness failed): no verdict either way."""
        return self.stage not in ("input", "harness")

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
    return None


_SHARED: Oracle | None = None


def get(explicit: bool | None = None) -> Oracle | None:
    """The process's oracle (one worker, one in-memory table), or None when it is off."""
    global _SHARED
    if why_off(explicit) is not None:
        return None
    if _SHARED is None or _SHARED.root != _root():
        if _SHARED is not None:
            _SHARED.close()
        else:
            import atexit
            atexit.register(_close_shared)       # the worker ends with the process
        _SHARED = Oracle()
    return _SHARED


def _close_shared() -> None:
    if _SHARED is not None:
        _SHARED.close()


def _root() -> Path:
    from ..weights.cache import default_cache_dir
    from ..backends.mock_device import ttnn_version
    return default_cache_dir() / "ttnn-oracle" / f"ttnn-{ttnn_version()}"


# ---- the oracle ----------------------------------------------------------------------------

class Oracle:
    """Answers steps from memory, then the disk cache, then a worker process (batched).
    ``queries`` counts the steps ttnn was asked (cache misses), ``hits`` the cached answers."""

    def __init__(self, root: Path | None = None):
        from ..backends.mock_device import ttnn_version
        self.version = ttnn_version()
        self.root = Path(root) if root is not None else _root()
        self.memory: dict[str, Answer] = {}
        self.queries = 0
        self.hits = 0
        self.seconds = 0.0          # time spent waiting for the worker
        self.failure: str | None = None   # the worker could not start: answers unavailable
        self._proc: subprocess.Popen | None = None

    # -- cache --
    def _path(self, key: str) -> Path:
        return self.root / "answers" / key[:2] / f"{key}.json"

    def _load(self, key: str) -> Answer | None:
        p = self._path(key)
        try:
            d = json.loads(p.read_text())
            if d.get("format") != ORACLE_FORMAT or d.get("key") != key:
                raise ValueError("stale entry")
            return Answer(**d["answer"], cached=True)
        except FileNotFoundError:
            return None
        except Exception as e:     # corrupt or stale: ask again
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
        keys = [s.key(self.version) for s in steps]
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
        if todo and self.failure is None:
            import time
            t0 = time.perf_counter()
            batch = [steps[i] for i in todo.values()]
            _announce(len(batch))
            answers = self._run_batch(batch)
            self.seconds += time.perf_counter() - t0
            for (k, i), a in zip(todo.items(), answers):
                if a is None:
                    continue
                self.queries += 1
                self.memory[k] = a
                self._store(k, steps[i], a)
        for i, k in enumerate(keys):
            if out[i] is None:
                out[i] = self.memory.get(k)
        return out

    def _start(self) -> None:
        log_dir = self.root
        log_dir.mkdir(parents=True, exist_ok=True)
        err = open(log_dir / "worker.log", "ab")
        env = dict(os.environ)
        env[ENV] = "0"                        # the worker plans nothing itself
        self._proc = subprocess.Popen([sys.executable, "-m", "ttmodels.planning.ttnn_oracle", "--worker"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                      env=env)
        err.close()
        hello = _read_frame(self._proc.stdout)
        if not (isinstance(hello, tuple) and hello and hello[0] == "ready"):
            why = hello[1] if isinstance(hello, tuple) and len(hello) > 1 else \
                "the worker exited (see worker.log in the oracle's cache directory)"
            self.close()
            raise RuntimeError(why)

    def _run_batch(self, batch: list[Step]) -> list[Answer | None]:
        answers: list[Answer | None] = []
        rest = list(batch)
        while rest and self.failure is None:
            if self._proc is None:
                try:
                    self._start()
                except Exception as e:
                    self.failure = f"ttnn could not be asked: {e}"
                    log.warning("ttnn oracle: %s", self.failure)
                    break
            try:
                _write_frame(self._proc.stdin, rest)
                while rest:
                    a = _read_frame(self._proc.stdout)
                    if a is None:
                        raise EOFError
                    answers.append(a)
                    rest.pop(0)
            except (EOFError, BrokenPipeError, OSError):
                code = self._proc.wait()
                self._proc = None
                answers.append(Answer(False, f"ttnn crashed on this step (worker exit {code})",
                                      stage="crash"))
                rest.pop(0)
        return answers + [None] * len(rest)

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is not None:
            try:
                p.stdin.close()
                p.wait(timeout=30)
            except Exception:
                p.kill()

    def __del__(self):   # pragma: no cover - interpreter shutdown order
        try:
            self.close()
        except Exception:
            pass

    # -- contradictions --
    def record_contradiction(self, key: str, entry: dict[str, Any]) -> None:
        _write_json(self.root / "contradictions" / f"{key}.json", entry)


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
    except OSError as e:       # a cache must never break a plan
        log.warning("ttnn oracle: cannot write %s (%s)", path, e)


def _write_frame(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)) + data)
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
            out.append(adapter_step(a.kind, a.before, a.after, flat[a.src], a.edge))
        out.append(layer_step(g, layer, flat, params))
        for sp in spills.get(layer.name, ()):
            out.append(adapter_step("to_memory_config", sp.before, sp.to, flat[sp.tensor],
                                    f"{sp.tensor} after {sp.after}", kind="spill"))
    return out


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
    from . import rules as R
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


def contradiction(step: Step, ans: Answer) -> str | None:
    """How ttnn's answer contradicts the table on this step, or None."""
    if not ans.judged:
        return None
    ok, vs = rules_output(step)
    if ok and not ans.accepted:
        return f"rules accept, ttnn rejects: {ans.error}" + \
            (f" ({ans.location})" if ans.location else "")
    if not ok and ans.accepted:
        return f"rules reject ({'; '.join(vs)}), ttnn accepts"
    if ok and ans.accepted:
        from ..tools.ttnn_compare import describe_key, planned_memory_key
        table = table_output(step)
        said = describe_key(planned_memory_key(table.memory))
        if (said, f"{table.layout} {table.dtype}") != (ans.memory, ans.layout):
            return (f"output: the table says {said} {table.layout} {table.dtype}, ttnn gives "
                    f"{ans.memory} {ans.layout}")
    return None


def table_output(step: Step) -> TensorLayout:
    """What ``rules.output_layout`` says the step produces (an adapter: its planned output; a
    plan made without adapters may expect other than the table, e.g. a conv whose config
    assumes a reshard that is not made)."""
    if step.kind == "adapter" or step.outputs:
        return step.output
    from . import rules as R
    from ..language.graph import Node
    from ..ops import get as _op
    attrs = {**step.attrs, **step.config.as_attrs(), "out_shape": step.shape.flat}
    attrs.setdefault("dtype", step.output.dtype)
    try:
        return R.output_layout(_op(step.op).rule_op(Node("n", step.op, [], step.attrs, step.shape)),
                               list(step.inputs), attrs, step.config.memory_config,
                               list(step.flat))
    except Exception:          # an op the table has no output function for: the plan's
        return step.output


def over_bank(ans: Answer | None, bank: int) -> bool:
    """ttnn's own per-core figure for the step (op + its L1 inputs) exceeds ``bank``."""
    l1 = getattr(ans, "op_l1", None)
    return isinstance(l1, int) and not isinstance(l1, bool) and l1 > bank


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
    q0, h0 = since if since is not None else (oracle.queries, oracle.hits)
    answers = oracle.ask(steps)
    rec = TtnnRecord(f"on (ttnn {oracle.version}, mock {SYSTEM})" if oracle.failure is None
                     else f"unavailable ({oracle.failure})",
                     candidates_rejected=list(rejected_candidates or ()))
    for s, a in zip(steps, answers):
        if a is None:
            rec.steps.append(StepVerdict(pk(s), s.name, s.op, "unconfirmed"))
            continue
        status, error = a.status, a.error
        if status == "confirmed" and over_bank(a, plan.l1_bank_bytes):
            # ttnn accepts the call but sizes it over the bank: the real run is out of memory
            status = "over the bank"
            error = f"ttnn sizes it at {a.op_l1:,} B per core, over the " \
                    f"{plan.l1_bank_bytes:,} B bank"
        rec.steps.append(StepVerdict(pk(s), s.name, s.op, status, error, a.memory, a.layout,
                                     a.op_l1, a.cached))
        why_not = contradiction(s, a)
        if why_not:
            text = f"{pk(s)} {s.name} ({s.op}): {why_not}"
            rec.contradictions.append(text)
            oracle.record_contradiction(s.key(oracle.version), {
                "ttnn": oracle.version, "model": plan.graph.name, "step": s.name,
                "kind": pk(s), "op": s.op, "contradiction": why_not,
                "signature": s.signature(), "answer": a.to_dict()})
    rec.asked, rec.cached = oracle.queries - q0, oracle.hits - h0
    plan.ttnn = rec


def list_contradictions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded contradiction of the table with ttnn (the oracle's cache)."""
    from ..weights.cache import default_cache_dir
    base = Path(root) if root is not None else default_cache_dir() / "ttnn-oracle"
    out = []
    for p in sorted(base.glob("ttnn-*/contradictions/*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out


def clear(root: Path | None = None) -> int:
    """Delete the oracle's cache (answers and contradictions); returns the files removed."""
    import shutil
    from ..weights.cache import default_cache_dir
    base = Path(root) if root is not None else default_cache_dir() / "ttnn-oracle"
    n = sum(1 for _ in base.rglob("*.json")) if base.is_dir() else 0
    shutil.rmtree(base, ignore_errors=True)
    return n


# ---- the worker ----------------------------------------------------------------------------

def _answer(step: Step, tt, dev, be) -> Answer:
    """Run ``step`` through the project's own layer / adapter code on the mock device under a
    NO_DISPATCH graph capture (ttnn validates, computes output specs and L1; nothing runs)."""
    import torch

    from ..backends import common
    from ..language.graph import Node
    from ..runtime.layers import AdapterLayer, make_layer
    from .plans import Adapter, PlannedLayer
    from ..tools.ttnn_compare import (_layout_str, _ttnn_layout_str, describe_key, l1_bytes_per_core,
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
    from ..tools.ttnn_compare import KNOWN_CRASH
    if step.kind == "layer" and step.op == "upsample" and \
            step.attrs.get("mode") == "bilinear" and step.inputs and \
            step.inputs[0].layout == "tile" and step.inputs[0].memory.memory_layout == "height_sharded":
        return KNOWN_CRASH
    return None


def worker_main() -> int:
    """``python -m ttmodels.planning.ttnn_oracle --worker``: frames of [Step] on stdin, one Answer frame
    per step on stdout. Anything else written to stdout (tt-metal's logger) goes to stderr."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    try:
        from ..backends import mock_device
        from ..backends import Backend
        mock_device.prepare(SYSTEM)
        tt, dev = mock_device.open_device(SYSTEM, l1_small_size=L1_SMALL_SIZE)
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
            for step in batch:
                crash = _known_crash(step)
                if crash is not None:
                    a = Answer(False, crash, stage="crash")
                else:
                    try:
                        a = _answer(step, tt, dev, be)
                    except Exception as e:       # the harness itself: say so, do not die
                        a = Answer(False, f"{type(e).__name__}: {e}", stage="harness")
                _write_frame(proto, a)
    finally:
        try:
            tt.close_device(dev)
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        # the module's own classes (not __main__'s) go over the pipe
        from .ttnn_oracle import worker_main as _main
        sys.exit(_main())
    print("usage: python -m ttmodels.planning.ttnn_oracle --worker (started by the planner)",
          file=sys.stderr)
    sys.exit(2)
