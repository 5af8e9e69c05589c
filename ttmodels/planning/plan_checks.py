"""A finished plan checked against itself: every step against the rules with the layouts it
receives (``check_plan``), and every edge's producer against its consumer (``edge_mismatches``).
Both are empty for every plan ``plan_graph`` makes with adapters (tests/test_plan_sim.py holds every
registered model to it)."""
from __future__ import annotations

from . import rules as R
from ..language.graph import const_flat
from .planner import rule_op
from .plans import Plan


def check_plan(plan: Plan) -> list[tuple[str, R.Violation]]:
    """Run rules.check on every layer with the layouts it receives (after adapters) and on every
    adapter; returns (layer or edge, violation) pairs. An empty list means the card accepts it."""
    out = []
    flat = {n: s.flat for n, s in plan.graph.inputs.items()}
    flat.update({n: const_flat(c.shape) for n, c in plan.graph.constants.items()})
    # every tensor a layer produces (a split's named outputs too: ``csp1.a``)
    flat.update({t: plan.graph.shape_of(t).flat for l in plan.layers for t in l.tensor_layouts()})
    for a in plan.adapters:
        for v in R.check(a.kind, [a.before], {"dtype": a.after.dtype, "layout": a.after.layout},
                         a.after.memory, shapes=[flat[a.src]]):
            out.append((a.edge, v))
    for sp in plan.spills:
        for v in R.check("to_memory_config", [sp.before], {"dtype": sp.to.dtype,
                         "layout": sp.to.layout}, sp.to.memory, shapes=[flat[sp.tensor]]):
            out.append((f"spill {sp.tensor} after {sp.after}", v))
    for layer in plan.layers:
        attrs = layer.config.as_attrs()
        attrs.setdefault("dtype", layer.output.dtype)
        for v in R.check(rule_op(layer.node), layer.inputs, attrs, None,
                         shapes=[flat[s] for s in layer.node.inputs]):
            out.append((layer.name, v))
    return out


def edge_mismatches(plan: Plan) -> list[str]:
    """Edges where what the producer gives (after that edge's adapters, in order) is not what the
    consumer receives. Empty for every plan made with adapters=True."""
    out = []
    given = dict(plan.input_layouts)
    given.update(plan.constant_layouts)
    spills = {}
    for sp in plan.spills:
        spills.setdefault(sp.after, []).append(sp)
    for layer in plan.layers:
        given.update(layer.tensor_layouts())        # a split gives several
    for layer in plan.layers:
        for i, src in enumerate(layer.node.inputs):
            t = given[src]
            for a in plan.adapters:
                if a.dst == layer.name and a.index == i:
                    if a.before != t:
                        out.append(f"{a.edge}: adapter expects {a.before.short()}, gets {t.short()}")
                    t = a.after
            if t != layer.inputs[i]:
                out.append(f"{src} -> {layer.name}[{i}]: gives {t.short()}, "
                           f"receives {layer.inputs[i].short()}")
        for sp in spills.get(layer.name, ()):
            if given[sp.tensor] != sp.before:
                out.append(f"spill {sp.tensor} after {layer.name}: expects {sp.before.short()}, "
                           f"the tensor is {given[sp.tensor].short()}")
            given[sp.tensor] = sp.to
    return out
