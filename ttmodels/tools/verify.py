"""``ttmodels verify``: run a plan through the installed ttnn on a mock device and compare.

Every adapter and every layer runs through the ttnn backend's own code (``layers/``, the
``Executor`` with its real deallocation points) on a mock Wormhole (``mock_device``) **for
real**: in ttnn's normal run mode, so its allocator gives every buffer an address, programs
place their circular buffers and ttnn checks them against the L1 buffers as on a card; the mock
executes no kernel (outputs hold no values). A graph capture (``RunMode.NORMAL``: it records,
it does not mock) around the run and around each step gives the per-step figures. The run is
the verdict: ``ok`` only when it reaches the end with every step as planned. ``real=False``
runs under NO_DISPATCH capture instead (allocation mocked, sums only: the old check). Per step
we keep:

* whether ttnn accepted it, or its error (first line, and the ``file:line`` of the ``TT_FATAL``);
* the allocator after it (``ttnn.device.get_memory_view``: allocated, free and the largest free
  block per bank), where its programs' CBs end and the lowest L1 buffer they had to stay below,
  and whether ``l1_alloc``'s model, replaying ttnn's own allocation order, put every buffer at
  ttnn's address (``model_match``);
* the memory config ttnn gave the output against the plan's (and dtype / tile layout);
* ttnn's per-core figures: ``peak_*`` over the step from the whole run's timeline
  (``l1_timeline``: every tensor alive at that moment counted; this is what must fit the bank),
  and ``op_peak_total``, the step's own allocations and circular buffers plus its L1 inputs (what
  the planner's per-layer ``l1_bytes_per_core`` estimates).

A rejected step is replaced by a stand-in tensor with the planned output layout, so the rest of
the graph is still checked. Tensors hold no values (nothing is computed).

With ``mesh`` ("n300", "t3000") the plan is made for each chip's share of the batch and runs on
the mock system's ttnn MeshDevice, data parallel as on a card: weights replicated, the input
split on the batch dimension; each op is called once on the mesh and ttnn creates its program
and output on every chip (``chips`` per step counts the output's device tensors).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import DeviceError
from ..planning.layout import MemSpec, TensorLayout  # noqa: F401
# how ttnn's objects compare with the plan's (shared with the planner's ttnn oracle)
from .ttnn_compare import (KNOWN_CRASH, _cores_of, _layout_str, _ttnn_layout_str,  # noqa: F401
                           describe_key, known_crash, l1_bytes_per_core, planned_memory_key,
                           split_error, ttnn_memory_key)



@dataclass
class StepCheck:
    """One adapter or layer as ttnn saw it (see the module docstring)."""
    kind: str                       # "layer" | "adapter" | "spill" | "reallocate"
    name: str                       # layer name, adapter edge "src -> dst[i]", "t after layer"
    op: str                         # the layer's op, or the adapter's ttnn call
    accepted: bool = True
    error: str | None = None
    error_location: str | None = None
    planned_memory: str = ""
    ttnn_memory: str | None = None
    memory_match: bool = False
    planned_layout: str = ""        # "tile bfloat16"
    ttnn_layout: str | None = None
    layout_match: bool = False
    ttnn_shape: list[int] | None = None
    l1_estimate: int | None = None  # planner: the op's own bytes/core (layers only)
    live_estimate: int | None = None  # planner: bytes/core with every live tensor (every step)
    ttnn_peak_cb: int = 0
    ttnn_peak_l1: int = 0
    ttnn_peak_total: int = 0
    ttnn_op_peak_total: int = 0
    chips: int | None = None        # device tensors of the output (mesh runs: every chip's)
    expected_chips: int = 1
    # the real run (addresses): the allocator after the step, per bank
    l1_allocated: int | None = None
    l1_free: int | None = None
    l1_largest_free: int | None = None
    cb_end: int | None = None           # where its programs' own CBs end (address)
    lowest_l1: int | None = None        # the lowest L1 buffer alive while they were placed
    model_match: bool | None = None     # l1_alloc put each of its buffers at ttnn's address
    # the plan's address model (plan_alloc) for the same step
    planned_largest_free: int | None = None
    planned_lowest_l1: int | None = None
    cb_end_planned: int | None = None   # the plan's CB end where ttnn's capture shows none

    @property
    def ok(self) -> bool:
        return self.accepted and self.memory_match and self.layout_match and \
            (self.chips is None or self.chips == self.expected_chips)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class VerifyReport:
    model: str
    ttnn_version: str
    device: str
    l1_bank_bytes: int
    batch_size: int
    input_size: tuple[int, int] | None
    adapters: bool
    plan_budget: int
    steps: list[StepCheck] = field(default_factory=list)
    peak_total: int = 0             # ttnn's extract_resource_usage_per_core over the whole run
    timeline_peak_total: int = 0    # the same from l1_timeline (equal when the reading is right)
    mesh: dict | None = None        # data parallel: mesh name/shape/chips and the per-chip batch
    real: bool = True               # ttnn's normal run mode (addresses), not a NO_DISPATCH capture
    l1_small_size: int = 32768
    completed: bool = True          # the run reached the end (every planned step ran)
    planned_steps: int = 0          # how many steps the plan has
    estimate: Any = None            # the plan's estimated device time (planning/estimate.py)
    system: str = "n150"            # the system the plan is for (mesh.DEVICES) and its arch
    arch: str = "wormhole_b0"

    @property
    def layers(self) -> list[StepCheck]:
        return [s for s in self.steps if s.kind == "layer"]

    @property
    def ok(self) -> bool:
        return self.completed and all(s.ok for s in self.steps)

    @property
    def fits(self) -> bool:
        return all(s.ttnn_peak_total <= self.l1_bank_bytes for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "ttnn_version": self.ttnn_version, "device": self.device,
                "system": self.system, "arch": self.arch,
                "l1_bank_bytes": self.l1_bank_bytes, "batch_size": self.batch_size,
                "input_size": list(self.input_size) if self.input_size else None,
                "adapters": self.adapters, "plan_budget": self.plan_budget,
                "peak_total": self.peak_total, "ok": self.ok, "fits": self.fits,
                "real_run": self.real, "completed": self.completed,
                "steps_run": len(self.steps), "steps_planned": self.planned_steps,
                **({"mesh": self.mesh} if self.mesh else {}),
                **({"estimate": self.estimate.to_dict()} if self.estimate else {}),
                "layers": [s.to_dict() for s in self.steps]}

    def to_json(self) -> str:
        import json
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        return report_table(self)


# ---- the run --------------------------------------------------------------------------------

def verify(spec, *, batch_size: int = 1, input_size=None, profile: str | None = None,
           adapters: bool = True, system: str | None = None, l1_small_size: int | None = None,
           plan=None, mesh=None, device=None, real: bool = True,
           diagnostics: bool = True) -> VerifyReport:
    """Plan ``spec`` (or take ``plan``) and run it on the mock ``system`` ("n150" unless
    ``mesh`` or the plan names another; every name in ``ttmodels.runtime.mesh.DEVICES``: a
    multi-chip one runs data parallel) under ttnn; see module.
    ``real=False``: under NO_DISPATCH capture (allocation mocked) instead of for real.
    ``diagnostics`` (real runs): also run the plan once under NO_DISPATCH capture first, for
    ttnn's per-step CB and L1 sums (``ttnn_peak_*``, ``ttnn_op_peak_total``): under a NORMAL
    capture only conv and pool programs report their circular buffers.
    ``mesh`` ("n300", "t3000"; its mock system) runs data parallel, ``batch_size`` being the
    whole batch. ``device``: an already open ``(ttnn, device)`` from
    ``mock_device.open_device`` (opened with ``l1_small_size``), reused and left open (many
    checks in one process)."""
    from ..backends import mock_device
    from ..backends.ttnn_backend import DEFAULT_L1_SMALL_SIZE
    from ..runtime.builder import make_plan

    if plan is None:
        plan = make_plan(spec, batch_size=batch_size, input_size=input_size, profile=profile,
                         mesh=mesh, adapters=adapters, device=system)
    m = plan.mesh
    system = plan.system
    l1_small = DEFAULT_L1_SMALL_SIZE if l1_small_size is None else int(l1_small_size)
    def both(tt, dev):
        kw = dict(system=system, adapters=adapters, version=mock_device.ttnn_version(),
                  bank=mock_device.l1_bank_bytes(tt, dev), l1_small_size=l1_small)
        if not real:
            return _run(tt, dev, plan, real=False, **kw)
        sums = _run(tt, dev, plan, real=False, **kw) if diagnostics else None
        report = _run(tt, dev, plan, real=True, **kw)
        report.estimate = plan.estimate
        if sums is not None:
            _take_sums(report, sums)
        return report

    if device is not None:
        return both(*device)
    if m is None:
        tt, dev = mock_device.open_device(system, l1_small_size=l1_small)
    else:
        tt, dev = mock_device.open_mesh_device(m, l1_small_size=l1_small)
    try:
        return both(tt, dev)
    finally:
        if m is None:
            tt.close_device(dev)
        else:
            tt.close_mesh_device(dev)


def _take_sums(report: VerifyReport, sums: VerifyReport) -> None:
    """The NO_DISPATCH pass's per-step L1 sums into the real run's report (the diagnostics:
    every program's CBs are in that capture); steps only the real run has keep their own."""
    by = {(s.kind, s.name): s for s in sums.steps}
    for c in report.steps:
        d = by.get((c.kind, c.name))
        if d is not None:
            c.ttnn_peak_cb, c.ttnn_peak_l1 = d.ttnn_peak_cb, d.ttnn_peak_l1
            c.ttnn_peak_total, c.ttnn_op_peak_total = d.ttnn_peak_total, d.ttnn_op_peak_total
    report.peak_total, report.timeline_peak_total = sums.peak_total, sums.timeline_peak_total


def _zero_params(graph) -> dict[str, dict[str, Any]]:
    """Parameters of the right shapes: verification needs no values (nothing is computed)."""
    import torch

    from ..weights import prepared_shapes
    return {n: {k: torch.zeros(s) for k, s in d.items()} for n, d in prepared_shapes(graph).items()}


class _KnownCrash(Exception):
    """A step ``known_crash`` keeps away from ttnn."""


class _Stopped(Exception):
    """The real run cannot go on (a rejected step left nothing to stand in for its output)."""


def memory_view(tt, dev) -> tuple[int, int, int] | None:
    """(allocated, free, largest free block) per L1 bank, from ttnn's allocator."""
    try:
        mv = tt.device.get_memory_view(dev, tt.BufferType.L1)
    except Exception:          # a mesh device without a per-chip view
        return None
    return (int(mv.total_bytes_allocated_per_bank), int(mv.total_bytes_free_per_bank),
            int(mv.largest_contiguous_bytes_free_per_bank))


def _run(tt, dev, plan, *, system, adapters, version, bank, l1_small_size,
         real: bool = True) -> VerifyReport:
    import gc

    import torch

    from ..planning import l1_timeline
    from ..backends import Backend
    from ..backends import common
    from ..runtime.executor import Executor

    from ..planning.plan_format import mesh_dict

    g = plan.graph
    s0 = next(iter(g.inputs.values()))
    chips = plan.num_chips
    where = f"mock {system} ({plan.arch}" + (f", {chips} chips)" if plan.mesh else ")")
    report = VerifyReport(g.name, version, where, bank, plan.batch_size, (s0.h, s0.w), adapters,
                          plan.l1_budget, mesh=mesh_dict(plan) if plan.mesh else None, real=real,
                          l1_small_size=l1_small_size, system=plan.system, arch=plan.arch)
    report.planned_steps = len(getattr(plan, "step_l1", ())) or len(plan.layers)
    mode = tt.graph.RunMode.NORMAL if real else tt.graph.RunMode.NO_DISPATCH
    before = memory_view(tt, dev) if real else None
    be = Backend("ttnn-mock", tt, dev, {"l1_small_size": l1_small_size}, mesh=plan.mesh)
    checks: dict[tuple[str, str], StepCheck] = {}
    inner_input_bytes: dict[tuple[str, str], int] = {}
    inner_peaks: dict[tuple[str, str], Any] = {}

    def standin(flat, t: TensorLayout):
        x = torch.zeros([int(v) for v in flat])
        for mem in (t.memory, MemSpec()):
            try:
                return tt.from_torch(x, dtype=common.data_type(tt, t.dtype),
                                     layout=common.layout(tt, t.layout), device=dev,
                                     memory_config=common.memory_config(tt, mem),
                                     **common.replicated(be))
            except Exception:
                continue
        raise DeviceError(f"could not make a stand-in tensor {list(flat)} {t.short()}")

    def hook(kind, obj, inputs, call):
        if kind == "spill":
            check = StepCheck("spill", f"{obj.tensor} after {obj.after}", "to_memory_config")
            expected, ins = obj.to, [inputs]
            flat = list(inputs.shape)
        elif kind == "reallocate":
            check = StepCheck("reallocate", f"{obj.tensor} before {obj.before}", "reallocate")
            expected, ins = obj.layout, [inputs]
            flat = list(inputs.shape)
        elif kind == "adapter":
            a = obj.adapter
            check = StepCheck("adapter", a.edge, a.kind)
            expected, ins = a.after, [inputs]
            flat = list(inputs.shape)
        else:
            check = StepCheck("layer", obj.name, obj.node.op, l1_estimate=obj.l1_bytes_per_core,
                              live_estimate=getattr(obj, "live_l1", None))
            expected, ins = obj.output, list(inputs)
            flat = list(obj.node.shape.flat)
        check.planned_memory = describe_key(planned_memory_key(expected.memory))
        check.planned_layout = _layout_str(expected)
        key = (check.kind, check.name)
        checks[key] = check
        inner_input_bytes[key] = sum(l1_bytes_per_core(tt, t) for t in ins)
        tt.graph.track_function_start(f"{l1_timeline.MARKER}{check.kind}::{check.name}")
        tt.graph.begin_graph_capture(mode)
        out, err = None, None
        crash = known_crash(kind, obj)
        try:
            if crash is not None:
                raise _KnownCrash(crash)
            out = call()
        except Exception as e:     # ttnn's TT_FATAL/TT_THROW, or ttmodels' own layer checks
            err = e
        finally:
            inner = tt.graph.end_graph_capture()
            tt.graph.track_function_end()
        inner_peaks[key] = tt.graph.extract_resource_usage_per_core(inner)
        multi = kind == "layer" and bool(obj.outputs)     # a split: one tensor per output
        if real:
            view = memory_view(tt, dev)
            if view is not None:
                check.l1_allocated, check.l1_free, check.l1_largest_free = view
        if err is not None:
            check.accepted = False
            check.error, check.error_location = split_error(err)
            try:
                if multi:
                    return tuple(standin(g.shape_of(t).flat, lay) for t, lay in obj.outputs.items())
                return standin(flat, expected)
            except DeviceError as e:
                raise _Stopped(str(e)) from None
        outs = list(zip(out, obj.outputs.values())) if multi else [(out, expected)]
        first = outs[0][0]
        got = ttnn_memory_key(first.memory_config())
        check.ttnn_memory = describe_key(got)
        check.memory_match = all(ttnn_memory_key(o.memory_config()) == planned_memory_key(e.memory)
                                 for o, e in outs)
        check.ttnn_layout = _ttnn_layout_str(first)
        check.layout_match = all(_ttnn_layout_str(o) == _layout_str(e) for o, e in outs)
        check.ttnn_shape = [int(v) for v in first.shape]
        if plan.mesh is not None:
            check.chips, check.expected_chips = len(tt.get_device_tensors(out)), chips
        return out

    if real:
        # a cached program keeps its CB layout and is not placed again, so the capture would
        # show no CBs for it: every program is made anew (the JIT build cache still holds)
        dev.disable_and_clear_program_cache()
    tt.graph.begin_graph_capture(mode)
    ex = outs = None
    try:
        ex = Executor(plan, _zero_params(g), be)
        ex.step_hook = hook
        # The whole batch: on a mesh the executor splits it over the chips.
        outs = ex.run({name: torch.zeros((s.n * chips,) + tuple(s.nchw[1:]))
                       for name, s in g.inputs.items()})
    except _Stopped:
        report.completed = False
    finally:
        outer = tt.graph.end_graph_capture()
        # a real run leaves the device as it found it (many checks share one device): the
        # outputs, the weights and whatever a stopped run still held go with their tensors
        ex = outs = None
        gc.collect()
        if real:
            dev.enable_program_cache()
    timeline = l1_timeline.read(outer)
    report.peak_total = int(tt.graph.extract_resource_usage_per_core(outer).peak_total)
    report.timeline_peak_total = timeline.peak.total
    for step in timeline.steps:
        key = (step.kind, step.name)
        c = checks[key]
        c.ttnn_peak_cb, c.ttnn_peak_l1, c.ttnn_peak_total = step.peak.cb, step.peak.l1, \
            step.peak.total
        c.cb_end, c.lowest_l1 = step.cb_end, step.lowest_l1
        ins = inner_input_bytes[key]
        c.ttnn_op_peak_total = int(inner_peaks[key].peak_total) + ins
    # the planner's figure for every step (adapters and spills too: liveness.step_figures)
    planned = {(st.kind, st.name): st.total for st in getattr(plan, "step_l1", ())}
    for key, c in checks.items():
        if key in planned:
            c.live_estimate = planned[key]
    report.steps = list(checks.values())
    if real:
        _hold_model_against(report, timeline, plan, tt, dev, before)
    return report


def _hold_model_against(report: VerifyReport, timeline, plan, tt, dev, before) -> None:
    """Replay ttnn's own L1 allocation order through ``l1_alloc``'s model: every buffer must
    land at ttnn's address (``model_match``); and put the plan's address model
    (``plan_alloc``) next to the run."""
    from ..planning import l1_alloc, plan_alloc
    from ..planning.l1 import l1_region
    checks = {(c.kind, c.name): c for c in report.steps}
    for st in plan_alloc.simulate(plan, l1_small_size=report.l1_small_size):
        c = checks.get((st.kind, st.name))
        if c is not None:
            c.planned_largest_free, c.planned_lowest_l1 = st.largest_free, st.lowest
            if c.cb_end is None and st.cb_end > l1_region(getattr(plan, "arch", "wormhole_b0"),
                                                          report.l1_small_size)[0]:
                c.cb_end_planned = st.cb_end
    base, top = l1_region(getattr(plan, "arch", "wormhole_b0"), report.l1_small_size)
    if top - base != report.l1_bank_bytes or (before is not None and before[0]):
        # another device option, or buffers alive before the run (a shared device): the
        # capture does not hold the whole allocator state, so addresses are not compared
        return
    model = plan_alloc.allocator(getattr(plan, "arch", "wormhole_b0"), report.l1_small_size)
    match: dict[int, bool] = {}
    for what, addr, size, step in timeline.l1_events:
        if what == "free":
            model.free(addr)
            continue
        try:
            got = model.allocate(size)
        except l1_alloc.OutOfMemory:
            got = None
        if step is not None:
            match[step] = match.get(step, True) and got == addr
        if got != addr:                 # follow ttnn from here on
            if got is not None:
                model.free(got)
            try:
                model.allocate_at(addr, size)
            except l1_alloc.OutOfMemory:
                return
    for i, st in enumerate(timeline.steps):
        c = checks.get((st.kind, st.name))
        if c is not None:
            c.model_match = match.get(i, True)


# ---- rendering ------------------------------------------------------------------------------

def _kb(v: int | None) -> str:
    return "" if v is None else f"{v:,}"


def _clearance(s: StepCheck) -> str:
    """Bytes between the step's CB region end and the lowest L1 buffer (negative: a clash)."""
    if s.cb_end is None or s.lowest_l1 is None:
        return ""
    return f"{s.lowest_l1 - s.cb_end:,}"


def report_table(r: VerifyReport) -> str:
    head = ("step", "op", "ttnn", "memory (plan)", "memory (ttnn)", "op est", "ttnn op",
            "live est", "ttnn live", "largest free", "CB room", "model", "")
    rows = [head]
    for s in r.steps:
        name = s.name if s.kind == "layer" else f"  {s.name}"
        verdict = "ok" if s.accepted else "REJECTED"
        mem = "=" if s.memory_match else (s.ttnn_memory or "-")
        if s.accepted and not s.layout_match:
            mem += f" ({s.ttnn_layout} vs {s.planned_layout})"
        flag = "OVER BANK" if s.ttnn_peak_total > r.l1_bank_bytes else ""
        model = {None: "", True: "=", False: "differs"}[s.model_match]
        rows.append((name, s.op, verdict, s.planned_memory, mem,
                     f"{s.l1_estimate:,}" if s.l1_estimate is not None else "",
                     f"{s.ttnn_op_peak_total:,}",
                     f"{s.live_estimate:,}" if s.live_estimate is not None else "",
                     f"{s.ttnn_peak_total:,}", _kb(s.l1_largest_free), _clearance(s), model,
                     flag))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    per_chip = f" = {r.mesh['per_chip_batch']} per chip" if r.mesh else ""
    how = "run for real" if r.real else "NO_DISPATCH capture (allocation mocked)"
    lines = [f"verify {r.model} (batch {r.batch_size}{per_chip}, {r.input_size[0]}x{r.input_size[1]}"
             f"{'' if r.adapters else ', adapters disabled'}) on {r.device}, ttnn "
             f"{r.ttnn_version}, {how}: L1 bank {r.l1_bank_bytes:,} B/core, plan budget "
             f"{r.plan_budget:,}, ttnn peak {r.peak_total:,}"]
    for i, row in enumerate(rows):
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    for s in r.steps:
        if not s.accepted:
            lines.append(f"{s.kind} {s.name}: {s.error}"
                         + (f" ({s.error_location})" if s.error_location else ""))
    wrong_chips = [s for s in r.steps if s.chips is not None and s.chips != s.expected_chips]
    for s in wrong_chips:
        lines.append(f"{s.kind} {s.name}: output on {s.chips} chip(s), expected {s.expected_chips}")
    bad = [s for s in r.steps if not s.ok]
    over = [s for s in r.steps if s.ttnn_peak_total > r.l1_bank_bytes]
    lines.append(f"{len(r.steps) - len(bad)}/{len(r.steps)} steps accepted with the planned "
                 f"memory config; {len(over)} over the L1 bank")
    if r.real:
        lines.append("the real run " + ("reached the end" if r.completed and not bad else
                                        "stopped: it could not go on" if not r.completed else
                                        "did not run every step as planned"))
    if r.estimate is not None:
        from ..planning.plan_format import estimate_line
        lines.append(estimate_line(r.estimate))
    return "\n".join(lines)
