"""What ttnn allocates inside each step of a plan's real run on the mock device, next to
``plan_alloc.op_events``' row for it (the way `op_events`' rows were measured, issue 33):

    python scripts/measure_op_events.py SPEC [--batch N] [--input-size H W] [--profile P]
        [--only NAME ...]

Per step: ttnn's L1 buffer allocations and frees in order (bytes per bank, from the timeline of
``verify(..., diagnostics=False)``), then the model's events for the layer. Plans with the rule
table alone (``oracle=False``), as the tests do."""
import argparse

from ttmodels.language.spec import load_graph
from ttmodels.planning import l1_timeline
from ttmodels.planning import plan_alloc as PA
from ttmodels.planning.planner import plan_graph
from ttmodels.tools.verify import verify


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input-size", type=int, nargs=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--profile")
    a = ap.parse_args()
    g = load_graph(a.spec, batch_size=a.batch,
                   input_size=tuple(a.input_size) if a.input_size else None, profile=a.profile)
    plan = plan_graph(g, oracle=False)
    seen = []
    real_read = l1_timeline.read
    l1_timeline.read = lambda graph: seen.append(real_read(graph)) or seen[-1]
    rep = verify(None, plan=plan, diagnostics=False)
    l1_timeline.read = real_read
    print(f"completed: {rep.completed}")
    layers = {pl.name: pl for pl in plan.layers}
    for st in seen[-1].steps:
        if a.only and st.name not in a.only:
            continue
        print(f"{st.kind} {st.name}")
        print("  ttnn :", [(w, s) for w, _, s in st.l1_events])
        if st.kind == "layer" and st.name in layers:
            print("  model:", [e[:3] if e[0] != PA.PROGRAM else e for e in
                              PA.op_events(layers[st.name], plan.graph, plan.l1_banks)])


if __name__ == "__main__":
    main()
