"""Every step of every shipped model and every test spec: ``rules.py`` against ttnn itself.

Each model is planned with the rule table (adapters on, so the table accepts every step: a
planner that leaves a rule broken raises) and the planner's ttnn oracle on (``ttnn_oracle``,
the installed ttnn on a mock n150). A step agrees when ttnn accepts it and gives the output
(memory config, tile layout, dtype) the table predicts; it contradicts the table otherwise.
Steps whose planned input ttnn cannot even create are not judged (none so far).

``python scripts/rules_vs_ttnn_models.py`` runs them all (shipped models at batch 1, every
loadable spec under tests/specs/, a few of the shipped batches the README quotes) and prints
the agreement; tests/test_rules_vs_ttnn.py runs a CI subset.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "tests" / "specs"


def shipped() -> list[tuple[str, str, int, tuple[int, int] | None]]:
    """(id, spec, batch, input size): every shipped config at batch 1, plus the batches the
    README and the sweep quote for the models TT publishes."""
    out = [(p.stem, p.stem, 1, None) for p in sorted((REPO / "ttmodels" / "configs").glob("*.yaml"))]
    out += [("resnet50_b16", "resnet50", 16, None), ("mobilenet_v2_b10", "mobilenet_v2", 10, None),
            ("bevdet_r50_encoder_b6", "bevdet_r50_encoder", 6, (256, 704))]
    return out


def test_specs() -> list[tuple[str, str, int, None]]:
    """(id, path, 1, None) for every spec file under tests/specs/ (the ones that do not load,
    on purpose, are skipped by ``run``)."""
    return [(str(p.relative_to(SPECS)), str(p), 1, None) for p in sorted(SPECS.rglob("*.yaml"))]


# (plan id, step) -> why the table and ttnn 0.81.1 still differ there (docs/layouts.md, "ttnn in
# the planning loop"); all in plans made without adapters, which the planner never runs
KNOWN = {
    ("mobilenet_v2_b10 (adapters off)", "avgpool"): "the global pool of a sharded map runs as "
        "pool2d at batch 10 (block shards), not the reduce the table predicts: the batch-"
        "dependent path of issue 21 class 4, condition unknown",
    ("decoder_csp.yaml (adapters off)", "csp"): "ttnn.slice accepts an L1 height-sharded input; "
        "slice.memory refuses it (stricter; tests/test_rules_vs_ttnn.py KNOWN_DIFFERENCES)",
    **{(f"{p} (adapters off)", s): "channel concat of height shards on different grids: ttnn "
       "accepts, concat.sharded refuses (stricter; as the corpus' plan/backbone/cat)"
       for p, s in (("ttnn_classes/upsample_concat_ttperf.yaml", "cat"),
                    ("user/hrnet_stage.yaml", "head.cat"), ("user/vgg_unet.yaml", "cat1"),
                    ("user/vgg_unet.yaml", "cat2"), ("user/vgg_unet.yaml", "cat3"))},
    **{("user/densenet.yaml (adapters off)", s): "batch_norm (multiply + add with TILE "
       "constants) of a ROW_MAJOR input: ttnn's output is TILE, the table says the input's "
       "layout (the planner always tilizes a batch_norm input first)"
       for s in ("features.denseblock1.denselayer2.norm1", "features.denseblock1.denselayer3.norm1",
                 "features.transition1.norm")},
    ("user/ghostnet.yaml (adapters off)", "logits"): "linear of a block-sharded input on a "
        "one-row grid (5x1): ttnn's automatic program config takes it, "
        "linear.sharded_needs_program_config refuses every block-sharded input (stricter)",
    ("user/resnet26d.yaml (adapters off)", "layer4.0.downsample.1"): "1x1 conv of a 16-row "
        "ROW_MAJOR map in 8-row block shards: ttnn accepts, conv2d.mm_block_row_major refuses "
        "(stricter; 7-row shards of a 49-row map are refused by ttnn too)",
}


@dataclass
class ModelOutcome:
    id: str
    steps: int = 0
    agree: int = 0
    unjudged: int = 0
    disagreements: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)      # disagreements listed in KNOWN
    skipped: str | None = None      # the spec does not load / plan (on purpose)


def run(models, *, adapters: bool = True, progress=None) -> list[ModelOutcome]:
    """Each model planned (``adapters``: off, each op at ttnn's defaults, so the rules reject
    steps too) with the oracle on; per step the rules' verdict (``check_plan``'s) against
    ttnn's (``ttnn_oracle.contradiction``: rules accept and ttnn rejects, rules reject and
    ttnn accepts, or both accept and ttnn's output is not the table's)."""
    from ttmodels.tools import ttnn_oracle as O
    from ttmodels.errors import Error
    from ttmodels.planning.planner import plan_graph
    from ttmodels.language.spec import load_graph

    oracle = O.get(True)
    assert oracle is not None, O.why_off(True)
    out = []
    for mid, spec, batch, size in models:
        if progress is not None:
            print(mid, file=progress, flush=True)
        o = ModelOutcome(mid if adapters else f"{mid} (adapters off)")
        try:
            g = load_graph(spec, batch_size=batch, input_size=size)
            plan = plan_graph(g, oracle=oracle, adapters=adapters)
        except Error as e:
            o.skipped = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            out.append(o)
            continue
        steps = O.plan_steps(plan)
        answers = oracle.ask(steps)
        for s, a in zip(steps, answers):
            o.steps += 1
            if a is None or not a.judged:
                o.unjudged += 1
                continue
            why = O.contradiction(s, a)
            if why is None:
                o.agree += 1
            else:
                text = f"{o.id}: {getattr(s, '_plan_kind', s.kind)} {s.name} ({s.op}): {why}"
                (o.known if (o.id, s.name) in KNOWN else o.disagreements).append(text)
        out.append(o)
    return out


def summary(outs: list[ModelOutcome]) -> str:
    lines = []
    for o in outs:
        if o.skipped:
            lines.append(f"{o.id}: skipped ({o.skipped})")
        else:
            lines.append(f"{o.id}: {o.agree}/{o.steps} steps agree"
                         + (f", {o.unjudged} unjudged" if o.unjudged else "")
                         + (f", {len(o.known)} known differences" if o.known else ""))
            lines += [f"  DISAGREE {d}" for d in o.disagreements]
            lines += [f"  known    {d}" for d in o.known]
    steps = sum(o.steps for o in outs)
    agree = sum(o.agree for o in outs)
    unjudged = sum(o.unjudged for o in outs)
    known = sum(len(o.known) for o in outs)
    steps -= unjudged
    planned = sum(1 for o in outs if not o.skipped)
    lines.append(f"{agree}/{steps} judged steps agree ({100 * agree / max(steps, 1):.1f} %) over "
                 f"{planned} plans ({len(outs) - planned} skipped; {known} known differences; "
                 f"{unjudged} steps unjudged: their planned input cannot exist)")
    return "\n".join(lines)
