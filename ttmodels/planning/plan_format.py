"""Rendering of a Plan: a fixed-width table for people and a JSON-able dict for tools."""
from __future__ import annotations

from typing import Any

from .layout import MemSpec, TensorLayout


def _mem_dict(m: MemSpec) -> dict[str, Any]:
    return {"memory_layout": m.memory_layout, "buffer": m.buffer,
            "grid": list(m.grid) if m.grid else None, "num_cores": m.num_cores,
            "shard_shape": list(m.shard_shape) if m.shard_shape else None,
            "orientation": m.orientation}


def layout_dict(t: TensorLayout) -> dict[str, Any]:
    return {"memory": _mem_dict(t.memory), "layout": t.layout, "dtype": t.dtype}


def _jsonable(v: Any) -> Any:
    if isinstance(v, MemSpec):
        return _mem_dict(v)
    if isinstance(v, TensorLayout):
        return layout_dict(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def mesh_dict(plan) -> dict[str, Any]:
    return {**plan.mesh.to_dict(), "batch_size": plan.batch_size,
            "per_chip_batch": plan.per_chip_batch}


def mesh_line(plan) -> str:
    if plan.mesh is None:
        return ""
    return (f"mesh {plan.mesh.describe()}: batch {plan.batch_size} = {plan.per_chip_batch} per "
            f"chip x {plan.num_chips}, data parallel; the layouts below are each chip's")


def plan_to_dict(plan) -> dict[str, Any]:
    est = plan.estimate
    d = _plan_dict(plan, est.layer_us())
    # the estimated device time (planning/estimate.py): total, samples/s, per op, other steps
    d["estimate"] = est.to_dict()
    if plan.choices:    # why the estimate picked each conv's layout (and the runner-up's µs)
        d["choices"] = dict(plan.choices)
    if getattr(plan, "ttnn", None) is not None:
        # ttnn's verdicts (ttnn_oracle): which steps it confirmed, which not, contradictions
        d["ttnn"] = plan.ttnn.to_dict()
    if plan.mesh is not None:   # single-chip plans keep their JSON exactly as before
        d = {"mesh": mesh_dict(plan), **d}
    return d


def _plan_dict(plan, layer_us: dict[str, float]) -> dict[str, Any]:
    return {
        "model": plan.graph.name, "system": plan.system, "arch": plan.arch,
        "grid": list(plan.grid),
        "l1_budget": plan.l1_budget, "l1_bank_bytes": plan.l1_bank_bytes,
        "l1_small_size": plan.l1_small_size,
        "inputs": {k: layout_dict(v) for k, v in plan.input_layouts.items()},
        "constants": {k: layout_dict(v) for k, v in plan.constant_layouts.items()},
        "layers": [{
            "name": l.name, "op": l.node.op, "inputs": list(l.node.inputs),
            "shape_nhwc": list(l.node.shape.nhwc),
            "input_layouts": [layout_dict(t) for t in l.inputs],
            "output": layout_dict(l.output), "l1_bytes_per_core": l.l1_bytes_per_core,
            "live_l1_bytes_per_core": l.live_l1, "live_tensors": dict(l.live_tensors),
            "config": _jsonable(l.config.as_attrs()),
            "device_us": round(layer_us.get(l.name, 0.0), 3),
        } for l in plan.layers],
        "adapters": [{
            "edge": a.edge, "src": a.src, "dst": a.dst, "index": a.index, "kind": a.kind,
            "before": layout_dict(a.before), "after": layout_dict(a.after), "reason": a.reason,
        } for a in plan.adapters],
        "spills": [{
            "tensor": sp.tensor, "after": sp.after, "kind": sp.kind, "before": layout_dict(sp.before),
            "to": layout_dict(sp.to), "frees": sp.frees, "for_layer": sp.for_layer,
            "reason": sp.reason,
        } for sp in plan.spills],
        "reordered": [{"layer": r.layer, "before": r.before, "reason": r.reason}
                      for r in plan.reordered],
        "blockings": [{"layer": b.layer, "how": b.how, "cbs": b.cbs,
                       "for_layer": b.for_layer, "reason": b.reason} for b in plan.blockings],
        # address remedies (plan_alloc.fit): tensors moved by ttnn.reallocate, binary ops in place
        "reallocations": [{"tensor": r.tensor, "before": r.before, "moves": r.moves,
                           "for_step": r.for_step, "reason": r.reason}
                          for r in plan.reallocations],
        "in_place": [{"layer": n.layer, "saves": n.saves, "reason": n.reason}
                     for n in plan.in_place],
        "deallocate_activation": [{"layer": n.layer, "tensor": n.tensor, "reason": n.reason}
                                  for n in plan.freed_early],
        # every executor step by address (plan_alloc: ttnn's allocator model), right after its op
        "steps_addr": [{"kind": st.kind, "name": st.name, "l1_allocated": st.allocated,
                        "largest_free_block": st.largest_free, "lowest_l1_address": st.lowest,
                        "cb_end": st.cb_end, "failure": st.failure}
                       for st in plan.step_addr],
        # every executor step (adapters, layers, spills) with the L1 ttnn's timeline counts
        "steps_l1": [{"kind": st.kind, "name": st.name, "live_l1_bytes_per_core": st.total,
                      "own": st.own, "cbs": st.cbs, "carried_cbs": st.carry,
                      "live_tensors": dict(st.others)} for st in plan.step_l1],
    }


def run_notes(config) -> list[tuple[str, str]]:
    """How a layer runs when it is not the plain L1 op (a ``PlanConfig``): ``(key, text)`` for
    each way; the plan table shows the texts, the plot's edge strip the keys
    (``plan_plot.RUNS_AS``)."""
    notes = []
    if config.slice:
        notes.append(("dram-sliced",
                      f"dram-sliced {config.slice.type} x{config.slice.num_slices}"))
    if config.inplace:
        notes.append(("in place", "in place (output_tensor=a)"))
    if getattr(config, "deallocate_activation", False):
        notes.append(("frees its input", "frees its input (deallocate_activation)"))
    if config.lowering == "linear":
        notes.append(("as linear", "as linear"))
    return notes


def layer_note(layer) -> str:
    """How a layer runs when it is not the plain L1 op: DRAM slices, in-place output."""
    return ", ".join(text for _, text in run_notes(layer.config))


def plan_table(plan) -> str:
    head = ("layer", "op", "out NHWC", "memory", "buffer", "grid", "shard", "layout", "dtype",
            "L1 B/core", "live L1", "ttnn", "ttnn L1", "device µs", "note")
    rows = [head]
    est = plan.estimate
    layer_us = est.layer_us()
    step_us = {(s.kind, s.name): s.us for s in est.steps}
    rec = getattr(plan, "ttnn", None)
    status = {("layer", s.name): s for s in rec.steps} if rec is not None else {}
    for l in plan.layers:
        m = l.output.memory
        rows.append((l.name, l.node.op, "x".join(map(str, l.node.shape.nhwc)), m.memory_layout,
                     m.buffer, f"{m.grid[0]}x{m.grid[1]}" if m.grid else "-",
                     f"{m.shard_shape[0]}x{m.shard_shape[1]}" if m.shard_shape else "-",
                     l.output.layout, l.output.dtype, f"{l.l1_bytes_per_core:,}",
                     f"{l.live_l1:,}" if l.live_l1 is not None else "-",
                     _TTNN_MARK.get(getattr(status.get(("layer", l.name)), "status", None), "-"),
                     _ttnn_l1(status.get(("layer", l.name))),
                     f"{layer_us.get(l.name, 0.0):,.1f}", layer_note(l)))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = [f"plan {plan.graph.name} on {plan.system}, {plan.arch} (grid {plan.grid[0]}x{plan.grid[1]}, "
             f"L1 bank {plan.l1_bank_bytes:,} B/core with l1_small_size {plan.l1_small_size:,}; "
             "live L1 = the op + every other tensor alive in L1 while it runs, and the "
             "previous program's CBs while it allocates)"]
    if plan.mesh is not None:
        lines.append(mesh_line(plan))
    for i, r in enumerate(rows):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if plan.adapters:
        lines.append("")
        lines.append(f"adapters ({len(plan.adapters)}):")
        for a in plan.adapters:
            mark = ""
            if rec is not None:
                st = next((s for s in rec.steps if s.kind == "adapter" and s.name == a.edge), None)
                mark = f"  [ttnn: {_TTNN_MARK.get(getattr(st, 'status', None), '-')}]"
            us = step_us.get(("adapter", a.edge))
            lines.append(f"  {a.edge}: {a.kind}  {a.before.short()} -> {a.after.short()}  "
                         f"({a.reason}){mark}" + (f"  [{us:,.1f} µs]" if us is not None else ""))
    else:
        lines.append("")
        lines.append("adapters: none")
    # the remedies, each a note with its reason
    for title, notes in (("execution order ({} moved)", plan.reordered),
                         ("blockings ({})", plan.blockings),
                         ("in place ({})", plan.in_place),
                         ("inputs freed by their conv ({})", plan.freed_early),
                         ("reallocations ({})", plan.reallocations)):
        if notes:
            lines += ["", title.format(len(notes)) + ":"] + [f"  {n.reason}" for n in notes]
    if plan.step_addr:
        tight = min(plan.step_addr, key=lambda st: st.largest_free)
        lines.append("")
        lines.append(f"addresses (ttnn's L1 allocator, modelled): every step placed; the "
                     f"tightest is {tight.name} with a {tight.largest_free:,} B largest free "
                     "block after it")
    if rec is not None:
        lines += [""] + ttnn_lines(rec)
    if plan.spills:
        lines.append("")
        lines.append(f"spills ({len(plan.spills)}):")
        for sp in plan.spills:
            lines.append(f"  {sp.tensor} after {sp.after}: to_memory_config  {sp.before.short()} "
                         f"-> {sp.to.short()}  ({sp.reason})")
    moved = {k: v for k, v in plan.choices.items()
             if v.startswith(("by the estimate", "lowering auto"))}
    if moved:   # the convs whose layout the estimate changed (JSON "choices" has every conv's)
        lines += ["", f"chosen by the estimate ({len(moved)}):"] + \
            [f"  {k}: {v}" for k, v in moved.items()]
    lines += ["", estimate_line(est)]
    return "\n".join(lines)


def estimate_line(est) -> str:
    """The table's total line: the estimated device time and samples/s, the costliest ops."""
    top = ", ".join(f"{op} {us:,.0f}" for op, us in list(est.by_op.items())[:4])
    return (f"estimate: {est.device_us:,.0f} µs on the device for {est.samples} "
            f"sample{'s' if est.samples != 1 else ''} = "
            f"{est.fps:,.0f} samples/s ({top} µs; model and calibration: docs/estimate.md)")


def _ttnn_l1(st) -> str:
    v = getattr(st, "ttnn_l1", None)
    return f"{v:,}" if v is not None else "-"


# the ttnn column: what ttnn (ttnn_oracle, on a mock device) said about the step
_TTNN_MARK = {"confirmed": "ok", "rejected": "REJECTED", "differs": "differs",
              "over the bank": "OVER BANK", "unjudged": "?", "unconfirmed": "-"}


def ttnn_lines(rec) -> list[str]:
    """The plan's ttnn summary: the oracle's state, what is not confirmed, contradictions."""
    n, bad = len(rec.steps), rec.unconfirmed
    out = [f"ttnn: {rec.oracle}; {n - len(bad)}/{n} steps confirmed as planned"
           + (f" ({rec.asked} asked, {rec.cached} from the cache)" if rec.oracle.startswith("on")
              else "")]
    if bad and len(bad) < n:
        out += [f"  not confirmed: {s.kind} {s.name} ({s.op}): {s.status}"
                + (f": {s.error}" if s.error else f": ttnn gives {s.ttnn_memory} {s.ttnn_layout}"
                   if s.status == "differs" else "") for s in bad]
    elif bad:
        out.append("  no step is confirmed by ttnn (the table alone planned it)")
    if rec.contradictions:
        out.append(f"ttnn contradicts the rule table ({len(rec.contradictions)}):")
        out += [f"  {c}" for c in rec.contradictions]
    if rec.candidates_rejected:
        out.append(f"conv candidates ttnn refused ({len(rec.candidates_rejected)}):")
        out += [f"  {c}" for c in rec.candidates_rejected]
    return out
