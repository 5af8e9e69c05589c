"""A picture of a Plan: L1 per core of every layer, its output layout, the adapters and spills.

Two halves, kept apart so the numbers can be tested without pixels:

* ``plot_data(plan, verify_records=None) -> PlotData``: pure data, built only from the ``Plan``
  (and optionally ``ttmodels verify``'s per-layer records), the same objects the plan table and
  JSON print. Per layer in execution order: the stacked L1 bytes per core (the op's circular
  buffers, its halo buffer, its inputs, its output, the other tensors alive in L1 at that
  moment), the output's layout kind and grid, the adapters/spills on its incoming edges, its
  stage; plus the L1 bank size and the planner's budget.
* ``draw_plan(fig, data, slot=None)`` draws that into a matplotlib figure (or one gridspec slot
  of it, so a demo can put the strip under its own panels); ``plot_plan(plan, path, ...)`` writes
  one PNG. matplotlib is imported lazily, and ``plot_plan`` draws on a bare ``Figure`` (Agg
canvas) so it never switches pyplot's backend; ``import ttmodels`` stays light.

Where the L1 parts come from: ``PlannedLayer.config.l1_parts`` (``l1.py``'s estimate, the
parts summing to the table's "L1 B/core"). A conv lowered to ``ttnn.linear`` carries one lumped
figure (``{"matmul": n}``, ``matmul_solver._l1_estimate``: in0 shard + CBs + output shard); it
is split here by the shards the layer holds. Liveness (``PlannedLayer.live_l1`` and
``live_tensors``) and the bank size (``Plan.l1_bank_bytes``) are read when the plan has them and
count as absent otherwise.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

from .l1 import PART_CLASSES, classify_part, layer_parts  # noqa: F401 (re-exported)
from .plan_format import layer_note, run_notes

# Stack order, bottom to top, with legend labels and colours.
PARTS = PART_CLASSES + ("live", "carried")
PART_LABELS = {
    "cb": "op circular buffers",
    "halo": "op halo buffer (conv/pool)",
    "inputs": "op inputs",
    "outputs": "op output",
    "live": "other live L1 tensors",
    "carried": "previous program's CBs (held until this one starts)",
}
PART_COLOURS = {"cb": "#4c72b0", "halo": "#8fb3de", "inputs": "#55a868", "outputs": "#dd8452",
                "live": "#8c8c8c", "carried": "#c44e52"}

# Output layout kinds of the colour strip (what the table's "memory"/"buffer" columns say).
LAYOUT_KINDS = ("dram_interleaved", "l1_interleaved", "height_sharded", "width_sharded",
                "block_sharded")
LAYOUT_LABELS = {"dram_interleaved": "interleaved DRAM", "l1_interleaved": "interleaved L1",
                 "height_sharded": "height sharded", "width_sharded": "width sharded",
                 "block_sharded": "block sharded"}
LAYOUT_COLOURS = {"dram_interleaved": "#7f7f7f", "l1_interleaved": "#bcbd22",
                  "height_sharded": "#1f77b4", "width_sharded": "#9467bd",
                  "block_sharded": "#2ca02c"}

DPI = 100
SPILL = "spill"
# How a layer runs when it is not the plain L1 op (plan_format.layer_note), drawn as rows of the
# edge strip next to the adapters.
RUNS_AS = ("dram-sliced", "in place", "frees its input", "as linear")
REALLOCATE = "reallocate"


def runs_as(config) -> tuple[str, ...]:
    """How a layer runs when it is not the plain L1 op (a ``PlanConfig``): RUNS_AS keys."""
    return tuple(key for key, _ in run_notes(config))


# ---- the data model ------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerBar:
    """One layer's column of the picture. Bytes are per core."""
    index: int
    name: str
    op: str
    stage: str
    estimate: int                      # PlannedLayer.l1_bytes_per_core (the table's L1 B/core)
    cb: int
    halo: int
    inputs: int
    outputs: int
    live: int                          # other tensors alive in L1 while this layer runs
    live_tensors: tuple[tuple[str, int], ...]
    layout_kind: str                   # one of LAYOUT_KINDS
    grid: tuple[int, int] | None       # shard grid (x, y) of the output, None if interleaved
    num_cores: int | None
    note: str                          # plan_format.layer_note: dram-sliced, in place, as linear
    runs_as: tuple[str, ...] = ()      # the same as row keys: RUNS_AS
    # the previous program's CBs that ttnn still holds while this layer allocates, beyond the
    # layer's own peak (liveness.StepL1)
    carried: int = 0

    @property
    def op_total(self) -> int:
        return self.cb + self.halo + self.inputs + self.outputs

    @property
    def total(self) -> int:
        """The bar's height: the live L1 figure when the plan has liveness, else the estimate."""
        return self.op_total + self.live + self.carried

    def part(self, name: str) -> int:
        return getattr(self, name)


@dataclass(frozen=True)
class EdgeMark:
    """An adapter (or spill) on an edge into layer ``index``."""
    index: int                         # x position: the consumer layer
    src: str
    dst: str
    operand: int
    kind: str                          # the adapter kind, or "spill"
    call: str                          # Adapter.kind as planned (the ttnn call)
    reason: str


@dataclass(frozen=True)
class VerifyMark:
    """One ``ttmodels verify`` record drawn on its layer."""
    index: int
    name: str
    peak_total: int | None
    accepted: bool
    memory_match: bool
    error: str | None
    adapter: str | None = None         # the adapter's edge when the record is an adapter's
    layout_match: bool = True          # tile layout and dtype as planned (when the record says)

    @property
    def bad(self) -> bool:
        return not self.accepted or not self.memory_match or not self.layout_match


@dataclass(frozen=True)
class Stage:
    name: str
    start: int                         # first layer index
    stop: int                          # one past the last

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PlotData:
    title: str
    subtitle: str
    layers: tuple[LayerBar, ...]
    edges: tuple[EdgeMark, ...]
    stages: tuple[Stage, ...]
    budget: int | None                 # Plan.l1_budget: what the planner plans against
    bank: int | None                   # Plan.l1_bank_bytes: ttnn's L1 bank per core
    verify: tuple[VerifyMark, ...] = ()
    verify_unplaced: tuple[str, ...] = ()   # records naming no layer (e.g. adapters)
    # estimated device µs per layer (planning/estimate.py): its own program(s), and the steps
    # the executor runs right before it (adapters, reallocations) or after it (spills)
    device_us: tuple[float, ...] = ()
    edge_us: tuple[float, ...] = ()

    @property
    def edge_kinds(self) -> tuple[str, ...]:
        seen = {e.kind for e in self.edges}
        return tuple(sorted(seen, key=lambda k: (k == SPILL, k)))

    @property
    def strip_rows(self) -> tuple[str, ...]:
        """Rows of the strip under the bars, bottom up: how layers run, then adapter kinds."""
        notes = [r for r in RUNS_AS if any(r in b.runs_as for b in self.layers)]
        return tuple(notes) + self.edge_kinds


def layer_live(layer) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Bytes/core of the other tensors alive in L1 while ``layer`` runs, and their names.

    ``live_l1`` (the layer's L1 including every other live tensor) wins when present, so the bar
    tops at the figure the table prints; else the sum of ``live_tensors``; else 0 (a plan without
    liveness)."""
    tensors = getattr(layer, "live_tensors", None) or {}
    named = tuple(sorted(((str(k), int(v)) for k, v in tensors.items()), key=lambda kv: -kv[1]))
    live_l1 = getattr(layer, "live_l1", None)
    if live_l1 is not None:
        return max(int(live_l1) - int(layer.l1_bytes_per_core), 0), named
    return sum(v for _, v in named), named


def layout_kind(memory) -> str:
    if memory.sharded:
        return memory.memory_layout
    return f"{memory.buffer}_interleaved"


def is_spill(adapter) -> bool:
    return adapter.kind == SPILL or str(adapter.reason).startswith("spill:")


def stage_of(node) -> str:
    """The stage a layer belongs to: its block instance without the repeat index
    ("layer2.3" -> "layer2", "img_backbone.layer3.5" -> "img_backbone.layer3"), else its name."""
    key = node.block or node.name
    kept = []
    for part in key.split("."):
        if part.isdigit():
            break
        kept.append(part)
    return ".".join(kept) or key


def stages(names_stages: Iterable[str]) -> tuple[Stage, ...]:
    out: list[Stage] = []
    for i, s in enumerate(names_stages):
        if out and out[-1].name == s:
            out[-1] = Stage(s, out[-1].start, i + 1)
        else:
            out.append(Stage(s, i, i + 1))
    return tuple(out)


def _field(rec, key: str, default=None):
    if isinstance(rec, dict):
        return rec.get(key, default)
    return getattr(rec, key, default)


def _title(plan) -> str:
    g = plan.graph
    shapes = list(g.inputs.values())
    shape = ""
    if shapes:
        s = shapes[0]
        shape = f" batch {s.n}, {s.h}x{s.w}"
    return f"{g.name}{shape} on {plan.arch} (grid {plan.grid[0]}x{plan.grid[1]}): L1 per core"


def plot_data(plan, verify_records=None, *, title: str | None = None,
              l1_bank_bytes: int | None = None) -> PlotData:
    """The picture's numbers, from ``plan`` (and ``ttmodels verify`` records, if given).

    ``l1_bank_bytes`` (e.g. the verify report's, read from ttnn) overrides the plan's own."""

    index = {pl.name: i for i, pl in enumerate(plan.layers)}
    bars = []
    for i, pl in enumerate(plan.layers):
        parts = layer_parts(pl)
        live, named = layer_live(pl)
        others = sum(v for _, v in named)
        carried = max(live - others, 0)
        live -= carried
        m = pl.output.memory
        bars.append(LayerBar(
            index=i, name=pl.name, op=pl.node.op, stage=stage_of(pl.node),
            estimate=int(pl.l1_bytes_per_core), live=live, live_tensors=named,
            layout_kind=layout_kind(m), grid=tuple(m.grid) if m.sharded and m.grid else None,
            num_cores=m.num_cores if m.sharded else None, note=layer_note(pl),
            runs_as=runs_as(pl.config), carried=carried, **parts))
    edges = tuple(EdgeMark(index[a.dst], a.src, a.dst, a.index,
                           SPILL if is_spill(a) else a.kind, a.kind, a.reason)
                  for a in plan.adapters if a.dst in index)
    # liveness.Spill: drawn on the layer it makes room for (it runs after ``sp.after``)
    edges += tuple(EdgeMark(index[sp.for_layer], sp.tensor, sp.for_layer, -1, SPILL,
                            "to_memory_config", sp.reason)
                   for sp in getattr(plan, "spills", ()) if sp.for_layer in index)
    # plan_alloc's reallocations: drawn on the layer they run before
    edges += tuple(EdgeMark(index[r.before], r.tensor, r.before, -1, REALLOCATE, REALLOCATE,
                            r.reason)
                   for r in getattr(plan, "reallocations", ()) if r.before in index)
    # an adapter's record (named by its edge, "src -> dst[i]") is drawn on its consumer, a
    # reallocation's ("t before layer") on its layer
    edge_dst = {a.edge: a.dst for a in plan.adapters if a.dst in index}
    edge_dst.update({f"{r.tensor} before {r.before}": r.before
                     for r in getattr(plan, "reallocations", ()) if r.before in index})
    marks, unplaced = [], []
    for rec in verify_records or ():
        name = _field(rec, "name")
        edge = name if name in edge_dst else _field(rec, "edge")
        if name not in index and edge not in edge_dst:
            unplaced.append(str(name))
            continue
        peak = _field(rec, "ttnn_peak_total")
        at = index[name] if name in index else index[edge_dst[edge]]
        marks.append(VerifyMark(at, str(name), int(peak) if peak is not None else None,
                                bool(_field(rec, "accepted", True)),
                                bool(_field(rec, "memory_match", True)), _field(rec, "error"),
                                adapter=None if name in index else edge,
                                layout_match=bool(_field(rec, "layout_match", True))))
    budget = getattr(plan, "l1_budget", None)
    bank = l1_bank_bytes or getattr(plan, "l1_bank_bytes", None)
    t = _title(plan)
    peak = max(bars, key=lambda b: b.total) if bars else None
    limit = min(x for x in (budget, bank) if x) if (budget or bank) else None
    sub = [f"{len(bars)} layers, {len(edges)} adapters"]
    n_spill = sum(e.kind == SPILL for e in edges)
    if n_spill:
        sub.append(f"{n_spill} spill{'s' if n_spill != 1 else ''}")
    if not any(hasattr(pl, "live_l1") for pl in plan.layers):
        sub.append("no liveness figures in this plan (other live tensors not counted)")
    if peak is not None:
        what = "bank" if limit == bank else "budget"
        s = f"highest {peak.total:,} B/core at {peak.name}"
        if limit:
            s += f" ({100 * peak.total / limit:.0f} % of the {what})"
            over = sum(b.total > limit for b in bars)
            if over:
                s += f"; {over} layer{'s' if over != 1 else ''} over the {what}"
        sub.append(s)
    layer_marks = [m for m in marks if m.adapter is None]
    if layer_marks:
        ok = sum(not m.bad for m in layer_marks)
        sub.append(f"ttnn: {ok}/{len(layer_marks)} layers accepted as planned")
    bad_adapters = sum(m.bad for m in marks if m.adapter is not None)
    if bad_adapters:
        sub.append(f"{bad_adapters} adapter{'s' if bad_adapters != 1 else ''} rejected")
    own, around = layer_times(plan, index)
    if own:
        est = sum(own) + sum(around)
        sub.append(f"estimated {est:,.0f} µs on the device")
    return PlotData(title or t, "; ".join(sub), tuple(bars), edges,
                    stages(b.stage for b in bars), int(budget) if budget else None,
                    int(bank) if bank else None, tuple(marks), tuple(unplaced),
                    tuple(own), tuple(around))


def layer_times(plan, index: dict[str, int]) -> tuple[list[float], list[float]]:
    """Per layer: its own estimated µs, and its adapters', reallocations' and spills' µs
    (``Plan.estimate``); empty lists for a plan the estimate cannot read (a hand-made one)."""
    try:
        steps = plan.estimate.steps
    except Exception:   # a partial plan (tests draw hand-made ones): no time row
        return [], []
    own, around = [0.0] * len(index), [0.0] * len(index)
    last = 0
    for st in steps:
        if st.kind == "layer" and st.name in index:
            last = index[st.name]
            own[last] += st.us
        elif st.kind == "spill":
            around[last] += st.us
    # adapters and reallocations run before their layer: the next layer step
    pending = 0.0
    for st in steps:
        if st.kind in ("adapter", "reallocate"):
            pending += st.us
        elif st.kind == "layer" and st.name in index:
            around[index[st.name]] += pending
            pending = 0.0
    return own, around


# ---- the output path -----------------------------------------------------------------------

def check_plot_path(path, what: str = "--plot") -> str:
    """Refuse, before any planning, a path the PNG cannot be written to.

    Policy: the file name must end in ``.png`` (any case); the figure is always a PNG, and
    matplotlib would otherwise pick another format from the extension. The directory must exist
    and be writable; an existing file must be writable and not a directory. Errors are one
    line starting with ``what`` and the path."""
    from ..errors import Error

    p = os.fspath(path)
    if not p.lower().endswith(".png"):
        raise Error(f"{what} {p}: the plot is a PNG; give a file name ending in .png")
    if os.path.isdir(p):
        raise Error(f"{what} {p}: is a directory; give a file name ending in .png")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise Error(f"{what} {p}: directory {os.path.dirname(p) or '.'} does not exist")
    if os.path.exists(p) and not os.access(p, os.W_OK):
        raise Error(f"{what} {p}: file is not writable")
    if not os.path.exists(p) and not os.access(parent, os.W_OK | os.X_OK):
        raise Error(f"{what} {p}: directory {os.path.dirname(p) or '.'} is not writable")
    return p


# ---- drawing -------------------------------------------------------------------------------

FONT = 6.5           # layer tick labels (pt)
STAGE_FONT = 7.5
RIGHT_IN = 2.9       # legend column (inches)
LEFT_IN = 0.85


def figure_size(data: PlotData) -> tuple[float, float]:
    """(width, height) in inches of the standalone figure: grows with the layer count up to a
    cap (labels are then thinned), tall enough for the longest layer label."""
    n = max(len(data.layers), 1)
    m = margins(data)
    width = min(max(m["left"] + m["right"] + 0.15 * n, 10.0), 28.0)
    return round(width, 2), round(5.6 + 1.4 * bool(data.device_us) + label_margin(data), 2)


def margins(data: PlotData) -> dict[str, float]:
    """Inches the drawing needs outside its axes: row labels on the left, the legends on the
    right, the layer names below, the title above. A figure embedding the strip (``draw_plan``
    with a ``slot``) leaves this much room around the slot."""
    left = LEFT_IN + max((len(r) for r in data.strip_rows), default=0) * 6.5 * 0.6 / 72
    return {"left": left, "right": RIGHT_IN, "bottom": label_margin(data), "top": 0.85}


def label_margin(data: PlotData) -> float:
    longest = max((len(tick_label(b)) for b in data.layers), default=4)
    return 0.25 + longest * FONT * 0.62 / 72


def tick_label(bar: LayerBar) -> str:
    """A layer's name without the dotted prefix it shares with its stage, which the stage band
    shows ("layer1.0.conv1" under "layer1" -> "0.conv1", "img_neck.up0" under
    "img_neck.level0" -> "up0")."""
    name, stage = bar.name.split("."), bar.stage.split(".")
    k = 0
    while k < min(len(name) - 1, len(stage)) and name[k] == stage[k]:
        k += 1
    return ".".join(name[k:])


def thin_ticks(data: PlotData, capacity: int) -> list[int]:
    """Which layers get a name under the axis when not all fit: every k-th layer, with the first
    layer of each stage and the flagged layers (adapters, verify errors) taking precedence."""
    n = len(data.layers)
    if n <= capacity:
        return list(range(n))
    k = -(-n // max(capacity, 1))
    flagged = sorted({m.index for m in data.verify if m.bad} | {e.index for e in data.edges})
    order = [s.start for s in data.stages] + flagged + list(range(0, n, k))
    chosen: list[int] = []
    for i in order:
        if i not in chosen and all(abs(i - j) >= k for j in chosen):
            chosen.append(i)
    return sorted(chosen)


def _fmt_bytes(v, _pos=None) -> str:
    return f"{v / 1e6:.1f} MB" if v else "0"


def draw_plan(fig, data: PlotData, slot=None, *, show_title: bool = True) -> dict[str, Any]:
    """Draw ``data`` into ``fig`` (in gridspec ``slot`` if given, else the whole figure).

    Returns the axes by role: "l1" (stacked bars, lines, verify points), "edges" (adapters),
    "layout" (colour strip), "stage" (stage band, layer names)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    n = len(data.layers)
    kinds = data.edge_kinds
    if slot is None:
        w, h = fig.get_size_inches()
        m = margins(data)
        fig.subplots_adjust(left=m["left"] / w, right=1 - m["right"] / w,
                            bottom=m["bottom"] / h, top=1 - m["top"] / h)
        slot = fig.add_gridspec(1, 1)[0]
    edge_rows = max(len(data.strip_rows), 1)
    timed = bool(data.device_us)
    ratios = [7.0] + ([2.2] if timed else []) + [0.28 * edge_rows + 0.25, 0.55, 0.45]
    gs = slot.subgridspec(len(ratios), 1, height_ratios=ratios, hspace=0.0)
    ax = fig.add_subplot(gs[0])
    ax_t = fig.add_subplot(gs[1], sharex=ax) if timed else None
    ax_e = fig.add_subplot(gs[1 + timed], sharex=ax)
    ax_l = fig.add_subplot(gs[2 + timed], sharex=ax)
    ax_s = fig.add_subplot(gs[3 + timed], sharex=ax)
    xs = list(range(n))
    if ax_t is not None:
        # estimated device time per layer, beside its L1 (planning/estimate.py)
        ax_t.bar(xs, data.device_us, width=0.82, color="#55a868", linewidth=0,
                 label="the layer's program(s)")
        ax_t.bar(xs, data.edge_us, bottom=list(data.device_us), width=0.82, color="#dd8452",
                 linewidth=0, label="its adapters, reallocations, spills")
        ax_t.set_ylabel("device µs\n(estimate)", fontsize=7)
        ax_t.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
        ax_t.tick_params(axis="y", labelsize=6.5)
        ax_t.grid(axis="y", lw=0.4, alpha=0.5)
        ax_t.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=6.5, frameon=False,
                    title="estimated device time", title_fontsize=7)

    # stacked L1 bars
    bottom = [0] * n
    for part in PARTS:
        hs = [b.part(part) for b in data.layers]
        if part in ("live", "carried") and not any(hs):
            continue
        ax.bar(xs, hs, bottom=bottom, width=0.82, color=PART_COLOURS[part],
               label=PART_LABELS[part], linewidth=0)
        bottom = [a + b for a, b in zip(bottom, hs)]
    tops = [b.total for b in data.layers] or [0]
    lines = []
    if data.bank and data.budget and data.bank == data.budget:
        lines.append((data.bank, "L1 bank = planner budget", "#c44e52", "-"))
    else:
        if data.bank:
            lines.append((data.bank, "L1 bank (ttnn)", "#c44e52", "-"))
        if data.budget:
            lines.append((data.budget, "planner budget", "#c44e52" if not data.bank else "#555555",
                          "--"))
    for y, label, colour, ls in lines:
        ax.axhline(y, color=colour, ls=ls, lw=1.1, label=f"{label} {y:,} B", zorder=3)
    # verify overlay
    peaks = [m for m in data.verify if m.peak_total is not None and m.adapter is None]
    ymax = max(tops + [y for y, *_ in lines] + [m.peak_total for m in peaks]) * 1.18 or 1
    if peaks:
        ax.scatter([m.index for m in peaks], [m.peak_total for m in peaks], s=14, marker="D",
                   color="black", zorder=5, label="ttnn peak_total (verify)")
    bad = [m for m in data.verify if m.bad]
    if bad:
        for m in bad:
            for a in (ax, ax_e, ax_l):
                a.axvspan(m.index - 0.5, m.index + 0.5, color="#d62728", alpha=0.14, lw=0,
                          zorder=0)
        ax.scatter([m.index for m in bad],
                   [m.peak_total if m.peak_total is not None and m.adapter is None
                    else ymax * 0.96 for m in bad],
                   s=40, marker="X", color="#d62728", zorder=6,
                   label="ttnn rejected / memory config or layout differs")
    ax.set_ylim(0, ymax)
    ax.set_xlim(-0.6, n - 0.4)
    ax.yaxis.set_major_formatter(FuncFormatter(_fmt_bytes))
    ax.set_ylabel("L1 per core")
    ax.grid(axis="y", lw=0.4, alpha=0.5)
    ax.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    if show_title:
        import textwrap
        chars = max(int(_axis_width_pt(fig, ax) / (9.5 * 0.55)), 40)
        sub = textwrap.fill(data.subtitle, chars, break_on_hyphens=False) if data.subtitle else ""
        ax.set_title(data.title + ("\n" + sub if sub else ""), fontsize=9.5, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    leg = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7,
                    title="L1 bytes per core", title_fontsize=7.5, frameon=False)
    ax.add_artist(leg)

    # how layers run + adapters / spills on their incoming edges: one labelled row per kind
    rows = data.strip_rows
    ax_e.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    for row, kind in enumerate(rows):
        if kind in RUNS_AS:
            idx = [b.index for b in data.layers if kind in b.runs_as]
            ax_e.scatter(idx, [row] * len(idx), marker="s", s=16, color="#4c72b0", zorder=3)
            continue
        es = [e for e in data.edges if e.kind == kind]
        spill = kind == SPILL
        ax_e.scatter([e.index for e in es], [row] * len(es), marker="v" if spill else "o",
                     s=22, color="#d62728" if spill else "#333333", zorder=3)
    ax_e.set_yticks(range(len(rows)) if rows else [0])
    ax_e.set_yticklabels(rows or ["adapters: none"], fontsize=6.5)
    ax_e.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    ax_e.grid(axis="y", lw=0.3, alpha=0.5)

    # output layout strip, the grid written on each run of equal layouts where it fits
    for b in data.layers:
        patch = _rect(b.index - 0.5, 0, 1, 1, LAYOUT_COLOURS[b.layout_kind])
        patch.set_gid(f"layout:{b.name}")
        ax_l.add_patch(patch)
    runs = _runs(data.layers)
    pt_per_layer = _axis_width_pt(fig, ax_l) / max(n, 1)
    for start, stop, b in runs:
        text = f"{b.grid[0]}x{b.grid[1]}" if b.grid else ""
        if text and (stop - start) * pt_per_layer >= len(text) * 7 * 0.62 + 2:
            ax_l.text((start + stop - 1) / 2, 0.5, text, ha="center", va="center", fontsize=7,
                      color="white", fontweight="bold")
    ax_l.set_ylim(0, 1)
    ax_l.set_yticks([0.5])
    ax_l.set_yticklabels(["output\nlayout"], fontsize=6.5)
    ax_l.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    present = [k for k in LAYOUT_KINDS if any(b.layout_kind == k for b in data.layers)]
    lay_handles = [Patch(color=LAYOUT_COLOURS[k], label=_layout_legend(k, data.layers))
                   for k in present]
    if any(r in RUNS_AS for r in data.strip_rows):
        lay_handles += [Line2D([], [], ls="", marker="s", color="#4c72b0", ms=4,
                               label="how the layer runs (row)")]
    if kinds:
        lay_handles += [Line2D([], [], ls="", marker="o", color="#333333", ms=4,
                               label="adapter into the layer (row: kind)")]
        if SPILL in kinds:
            lay_handles += [Line2D([], [], ls="", marker="v", color="#d62728", ms=4,
                                   label="spill to DRAM")]
    ax.legend(handles=lay_handles, loc="lower left", bbox_to_anchor=(1.005, 0.0), fontsize=7,
              title="output layout (shard grid x*y)", title_fontsize=7.5, frameon=False)

    # stage band + thinned layer names
    for k, s in enumerate(data.stages):
        ax_s.add_patch(_rect(s.start - 0.5, 0, s.size, 1, "#e8e8e8" if k % 2 else "#d0d0d0"))
        label = _fit_stage_label(s, pt_per_layer)
        if label:
            ax_s.text(s.start - 0.5 + s.size / 2, 0.5, label, ha="center", va="center",
                      fontsize=STAGE_FONT)
        if k:
            for a in (ax, ax_e, ax_l):
                a.axvline(s.start - 0.5, color="#999999", lw=0.5, ls=":", zorder=1)
    ax_s.set_ylim(0, 1)
    ax_s.set_yticks([0.5])
    ax_s.set_yticklabels(["stage"], fontsize=6.5)
    capacity = int(_axis_width_pt(fig, ax_s) / (FONT * 1.35))
    ticks = thin_ticks(data, capacity)
    ax_s.set_xticks(ticks)
    ax_s.set_xticklabels([tick_label(data.layers[i]) for i in ticks], rotation=90,
                         fontsize=FONT)
    bad_idx = {m.index for m in bad}
    for t, i in zip(ax_s.get_xticklabels(), ticks):
        if i in bad_idx:
            t.set_color("#d62728")
    if len(ticks) < n:
        ax_s.set_xlabel(f"layers in execution order ({len(ticks)} of {n} named)", fontsize=7)
    return {"l1": ax, "edges": ax_e, "layout": ax_l, "stage": ax_s,
            **({"time": ax_t} if ax_t is not None else {})}


def _rect(x, y, w, h, colour):
    from matplotlib.patches import Rectangle
    return Rectangle((x, y), w, h, facecolor=colour, edgecolor="white", linewidth=0.3)


def _runs(layers):
    out = []
    for b in layers:
        if out and out[-1][2].layout_kind == b.layout_kind and out[-1][2].grid == b.grid:
            out[-1] = (out[-1][0], b.index + 1, out[-1][2])
        else:
            out.append((b.index, b.index + 1, b))
    return out


def _layout_legend(kind: str, layers) -> str:
    grids = []
    for b in layers:
        if b.layout_kind == kind and b.grid:
            g = f"{b.grid[0]}x{b.grid[1]}"
            if b.num_cores and b.num_cores != b.grid[0] * b.grid[1]:
                g += f" ({b.num_cores} cores)"
            if g not in grids:
                grids.append(g)
    label = LAYOUT_LABELS[kind]
    count = sum(b.layout_kind == kind for b in layers)
    label += f": {count} layer{'s' if count != 1 else ''}"
    if grids:
        shown = ", ".join(grids[:4]) + (", ..." if len(grids) > 4 else "")
        label += f"\n  grids {shown}"
    return label


def _axis_width_pt(fig, ax) -> float:
    return ax.get_position().width * fig.get_size_inches()[0] * 72


def _fit_stage_label(stage: Stage, pt_per_layer: float) -> str:
    room = stage.size * pt_per_layer - 4
    for label in (stage.name, stage.name.rsplit(".", 1)[-1]):
        if len(label) * STAGE_FONT * 0.6 <= room:
            return label
    return ""


def plot_plan(plan, path, *, verify_records=None, title: str | None = None,
              l1_bank_bytes: int | None = None, dpi: int = DPI) -> PlotData:
    """Write the plan picture to ``path`` (a .png). Returns the PlotData drawn.

    ``verify_records``: ``ttmodels verify``'s per-layer records (objects or dicts with ``name``,
    ``accepted``, ``memory_match``, ``ttnn_peak_total``, ...): ttnn's peak_total is drawn as
    points, rejected or memory-mismatched layers in red. ``l1_bank_bytes``: ttnn's bank size
    (the verify report's) when the plan does not carry it. A bad path raises ``Error`` before
    anything is drawn."""
    check_plot_path(path, "plot path")
    data = plot_data(plan, verify_records, title=title, l1_bank_bytes=l1_bank_bytes)
    # a bare Figure renders with Agg and leaves pyplot's global backend (a notebook's) alone
    from matplotlib.figure import Figure

    fig = Figure(figsize=figure_size(data))
    draw_plan(fig, data)
    fig.savefig(os.fspath(path), dpi=dpi, format="png")
    return data
