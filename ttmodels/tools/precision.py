"""``precision: auto``: the cheapest precision per layer that keeps the model's outputs at a PCC
target (docs/spec.md, "Precision planning").

1. **Measure** (``precision_errors.local_errors``): one float32 reference run and one sim run in
   which every layer reads the reference values of its inputs; each auto layer is also run at
   every candidate precision (fidelity LoFi..HiFi4, weights bfloat8_b / bfloat16, fp32_accum where
   a fused activation reads the Dest; float32 activations at HiFi4 with fp32_accum, bfloat16 or
   float32 weights) on those inputs: its local error per candidate.
2. **Cost** (``plan.estimate``): the graph planned with every auto layer at each (fidelity,
   weights) pair; a candidate's cost is its layer's estimated µs there. ``fp32_accum`` is not in
   the estimate (its halved Dest changes only the subblocking, which the estimate does not see):
   it is taken only where it lowers the error at the same cost.
3. **Assign** (``greedy``): every layer starts at its cheapest candidate; while the predicted
   output error ``gain * sum(local errors)`` exceeds the budget (``1 / pcc^2 - 1``), the upgrade
   with the most error removed per µs added is taken.
4. **Confirm**: one full sim run at the assignment against the reference (the lowest PCC over
   the outputs). A miss re-fits ``gain`` to what was measured and raises the layers again (the
   largest errors per µs first); a pass with room to spare re-fits it downward once for a
   cheaper assignment, confirmed the same way. The cheapest confirmed assignment wins.
   float32 activations enter only when the layers' own activations cannot meet the target: the
   same steps then run again with them among the candidates.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field

from ..errors import Error
from ..language.graph import AUTO_OPS, Graph, Precision
from .precision_errors import (FIDELITIES, FLOAT32_WEIGHTS, WEIGHT_DTYPES, candidates,
                               local_errors, nmse_of_pcc, with_precisions)

log = logging.getLogger("ttmodels")

ROUNDS = 6                  # confirmation runs at most
MARGIN = 0.8                # aim the prediction at this share of the budget


@dataclass(frozen=True)
class Option:
    precision: Precision
    us: float
    err: float


@dataclass
class Resolution:
    """The resolver's answer: per auto layer its precision, the confirmed PCC of each output,
    the estimated device µs of the auto layers at the choice and at the most precise candidate."""
    choices: dict[str, Precision]
    target: float
    pcc: dict[str, float]
    us: float
    us_max: float
    rounds: int
    met: bool
    log: list[str] = field(default_factory=list)

    @property
    def min_pcc(self) -> float:
        return min(self.pcc.values())

    def summary(self) -> str:
        n = len(self.choices)
        by = {}
        for p in self.choices.values():
            k = (f"{p.math_fidelity}/{p.weights}{'/float32 activations' if p.activations == 'float32' else ''}"
                 f"{'/fp32_accum' if p.fp32_accum else ''}")
            by[k] = by.get(k, 0) + 1
        mix = ", ".join(f"{v} {k}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
        return (f"{n} layers: {mix}; lowest output PCC {self.min_pcc:.4f} (target "
                f"{self.target}){'' if self.met else ' NOT MET'}; estimated {self.us:,.1f} µs for "
                f"these layers (all HiFi4/bfloat16: {self.us_max:,.1f} µs); {self.rounds} "
                f"confirmation run(s)")


def frontier(opts: list[Option]) -> list[Option]:
    """The options no other is at most as costly and strictly more accurate than, cheapest
    first (each next one costs more or equal and is more accurate)."""
    out: list[Option] = []
    for o in sorted(opts, key=lambda o: (o.us, o.err, o.precision.fp32_accum)):
        if not out or o.err < out[-1].err:
            out.append(o)
    return out


def greedy(fronts: dict[str, list[Option]], budget: float, gain: float,
           start: dict[str, int] | None = None) -> dict[str, int]:
    """Index into each layer's frontier: from ``start`` (default the cheapest), take the upgrade
    that removes the most error per µs until ``gain * sum(err) <= budget`` or none is left."""
    at = dict(start) if start else {k: 0 for k in fronts}
    total = sum(fronts[k][i].err for k, i in at.items())
    while gain * total > budget:
        best, best_ratio = None, -1.0
        for k, i in at.items():
            f = fronts[k]
            if i + 1 >= len(f):
                continue
            d_err = f[i].err - f[i + 1].err
            d_us = max(f[i + 1].us - f[i].us, 1e-3 * max(f[i].us, 1e-3))
            r = d_err / d_us
            if r > best_ratio:
                best, best_ratio = k, r
        if best is None:
            break
        total -= fronts[best][at[best]].err - fronts[best][at[best] + 1].err
        at[best] += 1
    return at


def _key(p: Precision) -> tuple[str, str, str]:
    return (p.math_fidelity, p.weights, p.activations)


def _costs(graph: Graph, names: list[str], arch: str) -> dict[tuple[str, str, str], dict[str, float]]:
    """(fidelity, weights, activations) -> auto layer -> estimated µs, each planned once: every
    fidelity x weights at the layers' activations, and float32 activations (HiFi4, fp32_accum)
    with each of ``FLOAT32_WEIGHTS``. With float32 a layer's consumers read twice the bytes and
    its non-matmul consumers follow it in float32 (``float32_followers``): what that adds to those
    consumers' estimate is counted as the layer's."""
    from ..planning.planner import plan_graph
    out = {}
    act = {n.name: n.precision.activations for n in graph.nodes if n.name in names}
    nodes = {n.name: n for n in graph.nodes if n.name in names}
    base = None
    for f in FIDELITIES:
        for w in WEIGHT_DTYPES:
            g = with_precisions(graph, {n: dataclasses.replace(
                p.precision, math_fidelity=f, weights=w, fp32_accum=False)
                for n, p in nodes.items()})
            us = plan_graph(g, arch=arch, oracle=False).estimate.layer_us()
            for a in set(act.values()):
                out[(f, w, a)] = {n: us.get(n, 0.0) for n in names}
            if (f, w) == ("HiFi4", "bfloat16"):
                base = us
    f32 = [n for n, a in act.items() if a == "bfloat16"]
    for w in FLOAT32_WEIGHTS if f32 else ():
        g = with_precisions(graph, {n: dataclasses.replace(
            nodes[n].precision, math_fidelity="HiFi4", weights=w, activations="float32",
            fp32_accum=True) for n in f32})
        us = plan_graph(g, arch=arch, oracle=False).estimate.layer_us()
        row = {}
        for n in f32:
            extra = sum(max(0.0, us.get(c.name, 0.0) - base.get(c.name, 0.0))
                        for c in graph.consumers(n) if c.name not in nodes)
            row[n] = us.get(n, 0.0) + extra
        out[("HiFi4", w, "float32")] = row
    return out


def output_pccs(plan, params, ref, backend) -> dict[str, float]:
    """Each graph output's PCC against the reference, from one full sim run."""
    from ..runtime.executor import Executor, to_torch_nchw
    from ..weights.reference import pcc
    g = plan.graph
    (name, _), = g.inputs.items()
    got = Executor(plan, params, backend, keep_params=True).run({name: ref[name]})
    return {o: float(pcc(ref[o], to_torch_nchw(backend, got[o], g.shape_of(o))))
            for o in g.outputs}


def resolve_graph(graph: Graph, state_dict, x, *, target: float | None = None,
                  arch: str = "wormhole_b0", progress=None) -> Resolution:
    """Resolve the auto layers of ``graph`` (``Node.auto``) on input ``x`` (NCHW) with the
    spec-keyed ``state_dict``. ``target``: the outputs' PCC (default: the spec's, else 0.99)."""
    from ..backends import open_backend
    from ..planning.planner import plan_graph
    from ..weights import prepare_parameters
    from ..weights.reference import ReferenceModel

    say = progress or (lambda s: None)
    auto = [n for n in graph.nodes if n.auto is not None and n.op in AUTO_OPS]
    if not auto:
        raise Error(f"'{graph.name}': no layer is under 'precision: auto' (a conv2d, linear or "
                    f"conv_transpose2d whose precision, its block's, a profile's or the spec's "
                    f"defaults say auto)")
    if len(graph.inputs) != 1:
        raise Error(f"precision planning supports single-input graphs; '{graph.name}' has "
                    f"{list(graph.inputs)}")
    target = target if target is not None else max(n.auto.pcc for n in auto)
    names = [n.name for n in auto]
    nodes = {n.name: n for n in auto}
    (iname, _), = graph.inputs.items()
    say("reference run (torch float32)")
    ref = ReferenceModel(graph, state_dict).run({iname: x}, return_all=True)
    params = prepare_parameters(graph, state_dict)

    say(f"cost of each precision "
        f"({len(FIDELITIES) * len(WEIGHT_DTYPES) + len(FLOAT32_WEIGHTS)} plans)")
    costs = _costs(graph, names, arch)
    # the measuring plan: the auto layers at the most precise candidate at their own activations
    # (fp32_accum where it counts), whose matmul blocking every other candidate can run; a
    # float32-activation candidate is measured on the same (bfloat16) inputs: the rounding of
    # its inputs is its producer's error
    top = {n: max((p for p in candidates(nodes[n])
                   if p.activations == nodes[n].precision.activations), key=_rank)
           for n in names}
    be = open_backend("sim")
    try:
        say(f"local errors of {len(names)} layers x their candidates (one teacher-forced sim run)")
        mplan = plan_graph(with_precisions(graph, top), arch=arch, oracle=False)
        errs = local_errors(mplan, params, ref, be, variants=candidates)
        opts = {n: [Option(p, costs[_key(p)][n], e) for p, e in errs.by_precision[n].items()]
                for n in names}
        us_max = sum(costs[("HiFi4", "bfloat16", nodes[n].precision.activations)][n]
                     for n in names)
        budget = nmse_of_pcc(target)
        lines: list[str] = []

        def confirm(chosen):
            g2 = with_precisions(graph, chosen)
            return output_pccs(plan_graph(g2, arch=arch, oracle=False), params, ref, be)

        # the layers' own activations first; float32 activations only when those cannot hold
        # the target (they double the bytes moved and the L1 the tensors take)
        own = {n: frontier([o for o in v if o.precision.activations ==
                            nodes[n].precision.activations]) for n, v in opts.items()}
        best = assign(own, budget, target, us_max, confirm, lines, say)
        if not best.met and any(len(v) > len(own[n]) for n, v in opts.items()):
            say("not met at the layers' own activations: float32 activations may be chosen too")
            more = assign({n: frontier(v) for n, v in opts.items()}, budget, target, us_max,
                          confirm, lines, say, first=best.rounds + 1)
            if more.met or more.min_pcc > best.min_pcc:
                best = more
        best.log = lines
        return best
    finally:
        be.close()


def assign(fronts: dict[str, list[Option]], budget: float, target: float, us_max: float,
           confirm, lines: list[str], say, first: int = 1) -> Resolution:
    """Greedy assignments on ``fronts``, each confirmed by ``confirm(chosen) -> output PCCs``:
    a miss re-fits the gain and raises the layers, a pass with room to spare tries cheaper once;
    the cheapest confirmed assignment, else the last one tried (not met)."""
    gain, best, start = 1.0, None, None
    for r in range(first, first + ROUNDS):
        at = greedy(fronts, MARGIN * budget, gain, start)
        chosen = {n: fronts[n][i].precision for n, i in at.items()}
        predicted = sum(fronts[n][i].err for n, i in at.items())
        us = sum(fronts[n][i].us for n, i in at.items())
        pccs = confirm(chosen)
        low = min(pccs.values())
        met = low >= target
        line = (f"round {r}: gain {gain:.3g}, predicted sum {predicted:.3g}, {us:,.1f} µs: "
                f"lowest PCC {low:.5f} ({min(pccs, key=pccs.get)}){' met' if met else ''}")
        lines.append(line)
        say(line)
        if met and (best is None or us < best.us):
            best = Resolution(chosen, target, pccs, us, us_max, r, True, list(lines))
        all_top = all(i == len(fronts[n]) - 1 for n, i in at.items())
        measured = nmse_of_pcc(low)
        fitted = measured / predicted if predicted > 0 else gain
        if met:
            if all(i == 0 for i in at.values()) or measured > 0.5 * budget or \
                    (best is not None and best.rounds < r):
                break           # close to the target, or cheaper did not hold: done
            gain, start = max(fitted, 1e-6), None       # room to spare: try cheaper
            continue
        if all_top or best is not None:
            break               # nothing left to raise, or the cheaper try missed
        gain = max(fitted * 1.2, gain * 1.5)
        start = at
    if best is None:
        best = Resolution(chosen, target, pccs, us, us_max, r, False, list(lines))
    best.rounds = r
    return best


def _rank(p: Precision) -> tuple:
    return (FIDELITIES.index(p.math_fidelity), WEIGHT_DTYPES.index(p.weights)
            if p.weights in WEIGHT_DTYPES else 2, p.fp32_accum)


def _text(p: Precision) -> str:
    """A resolved precision as the spec writes it (activations only where not bfloat16)."""
    extra = (", activations: float32" if p.activations == "float32" else "") + \
        (", fp32_accum: true" if p.fp32_accum else "")
    return f"{{math_fidelity: {p.math_fidelity}, weights: {p.weights}{extra}}}"


# ---- the spec text --------------------------------------------------------------------------

SECTION = "resolved_precision"


def section_text(res: Resolution, how: str, by: str = "ttmodels precision") -> str:
    """The ``resolved_precision:`` section for ``res``, with the measured PCC in its comment."""
    pcc = ", ".join(f"{k} {v:.4f}" for k, v in res.pcc.items())
    lines = [f"# precision: auto, resolved by `{by}` ({how}): target PCC "
             f"{res.target}, measured {pcc}{'' if res.met else ' (TARGET NOT MET)'};",
             f"# estimated {res.us:,.1f} µs for these layers (all HiFi4 / bfloat16 weights: "
             f"{res.us_max:,.1f} µs). Where HiFi2 or LoFi stays, its measured PCC above is why.",
             f"{SECTION}:"]
    for name, p in res.choices.items():
        lines.append(f"  {name}: {_text(p)}")
    return "\n".join(lines) + "\n"


def write_section(text: str, section: str) -> str:
    """``text`` (a spec) with its ``resolved_precision:`` section (and the comment lines right
    above it) replaced by ``section``, or ``section`` appended."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if re.match(rf"{SECTION}\s*:", l)), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
            end += 1
        top = start                 # the section's own comment: from its first line
        while top > 0 and lines[top - 1].startswith("#"):
            top -= 1
            if lines[top].startswith("# precision: auto, resolved"):
                start = top
                break
        lines[start:end] = []
    body = "".join(lines)
    if body and not body.endswith("\n"):
        body += "\n"
    return body + section


def run_precision(spec, *, weights="random", batch_size=1, input_size=None, profile=None,
                  target=None, input_npy=None, seed=0, output=None, ignore=None,
                  device=None) -> int:
    """``ttmodels precision SPEC``: resolve and print; with ``output`` write the spec with its
    ``resolved_precision:`` section (the user's file is never touched). Exit 0 when the target
    is met, 1 when not, 2 for bad input."""
    import sys
    from pathlib import Path

    from ..language.registry import resolve as resolve_spec
    from ..language.spec import load_graph
    from ..runtime.mesh import resolve_target
    from ..weights import load_state_dict, synthetic_images
    from .compare import read_input, unwritable

    if output is not None:
        problem = unwritable(output)
        if problem:
            print(f"error: -o {output}: {problem}", file=sys.stderr)
            return 2
    x = None
    if input_npy is not None:
        x = read_input(input_npy, batch_size)
        if input_size is None:
            input_size = tuple(x.shape[-2:])
    graph = load_graph(spec, batch_size=batch_size, input_size=input_size, profile=profile)
    (iname, s), = graph.inputs.items() if len(graph.inputs) == 1 else ((None, None),)
    if x is None:
        x = synthetic_images(s.n, s.c, s.h, s.w, seed=seed)
    sd = load_state_dict(weights, graph, ignore=ignore)
    res = resolve_graph(graph, sd, x, target=target, arch=resolve_target(device).arch,
                        progress=lambda m: print(m, file=sys.stderr))
    print(res.summary())
    if output is not None:
        data, source, base = resolve_spec(spec)
        src = Path(base) / Path(source).name if isinstance(source, str) and base else None
        if src is None or not src.is_file():
            print(f"error: -o: '{spec}' is not a spec file whose text can be rewritten",
                  file=sys.stderr)
            return 2
        w = "random weights" if isinstance(weights, str) and weights == "random" else \
            f"weights {weights if isinstance(weights, str) else type(weights).__name__}"
        how = (f"{w}, {'input ' + str(input_npy) if input_npy else f'seeded synthetic images (seed {seed})'}"
               f" at {s.h}x{s.w}, batch {s.n}")
        Path(output).write_text(write_section(src.read_text(), section_text(res, how)))
        print(f"wrote {output}")
    return 0 if res.met else 1


def resolve_text(text: str, weights, x, *, ignore=None, how: str = "") -> tuple[str, Resolution]:
    """A spec's YAML ``text`` with its auto precision resolved on input ``x`` (NCHW; its batch
    and size are the graph's) with ``weights`` (any ``load_state_dict`` source, e.g. the module
    an import came from): the text with its ``resolved_precision:`` section, and the result."""
    from ..language.spec import load_graph
    from ..weights import load_state_dict
    n, _, h, w = x.shape
    graph = load_graph(text, batch_size=n, input_size=(h, w))
    sd = load_state_dict(weights, graph, ignore=ignore)
    res = resolve_graph(graph, sd, x)
    how = how or f"the input it was imported on, {h}x{w}, batch {n}"
    return write_section(text, section_text(res, how, by="ttmodels import")), res
