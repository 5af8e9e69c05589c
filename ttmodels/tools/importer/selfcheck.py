"""The self-check: the blocked spec is the flat one (``_same_graph``); the spec computes what the
module computes (``check_spec``, PCC against ``PCC_MIN``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .intermediate import PCC_MIN, Traced


def _graph_key(g) -> list:
    # an add of two equal shapes is the same either way round (the library's
    # inverted_residual adds [conv, x], torchvision x + conv)
    def ins(n):
        if n.op == "add" and not any(i in g.constants for i in n.inputs) and \
                len({str(g.shape_of(i)) for i in n.inputs}) == 1:
            return tuple(sorted(n.inputs))
        return tuple(n.inputs)
    return [(n.name, n.op, ins(n), repr(sorted(n.attrs.items())), n.weights, n.bn,
             tuple(n.outputs)) for n in g.nodes]


def _same_graph(text: str, flat: str, batch: int, size) -> str | None:
    """None when ``text`` expands to exactly the layers of ``flat``; else the first difference."""
    from ...language.spec import load_graph
    a = _graph_key(load_graph(text, batch_size=batch, input_size=size))
    b = _graph_key(load_graph(flat, batch_size=batch, input_size=size))
    for x, y in zip(a, b):
        if x != y:
            return f"{x} != {y}"
    return None if len(a) == len(b) else f"{len(a)} layers != {len(b)}"


def _module_values(gm, x, wanted: set[str]) -> dict:
    """The values of the fx nodes in ``wanted`` on input ``x`` (copies: in-place ops later in
    the module would change them)."""
    import torch
    import torch.fx as fx
    got = {}

    class Rec(fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if n.name in wanted and isinstance(v, torch.Tensor):
                got[n.name] = v.detach().clone()
            return v

    flags = [(m, m.training) for m in gm.modules()]
    gm.eval()                    # shares the user's submodules: their flags are put back
    try:
        with torch.no_grad():
            Rec(gm).run(x)
    finally:
        for m, f in flags:
            m.training = f
    return got


@dataclass
class CheckResult:
    pcc: float
    max_abs: float
    first_bad: str | None = None     # the first layer below PCC_MIN, with its PCC
    rows: list = field(default_factory=list)
    bfloat16_pools: tuple[str, ...] = ()   # pools the float32 profile runs in bfloat16

    def summary(self) -> str:
        s = f"float32-profile sim vs the module: PCC {self.pcc:.6f}, max abs error {self.max_abs:.3g}"
        if self.first_bad:
            s += f"; first layer below {PCC_MIN}: {self.first_bad}"
        if self.bfloat16_pools and self.pcc < PCC_MIN:
            n = len(self.bfloat16_pools)
            s += (f"; {n} pool{'s' if n > 1 else ''} ({', '.join(self.bfloat16_pools[:3])}"
                  f"{', ...' if n > 3 else ''}) run{'' if n > 1 else 's'} in bfloat16, not "
                  "float32: ttnn 0.81.1's pool2d reads and writes bfloat16 only, so each rounds "
                  "its input to 8 mantissa bits (a limit of ttnn, not of the import)")
        return s


def bfloat16_pools(plan) -> tuple[str, ...]:
    """The layers whose float32 input the plan typecasts to bfloat16 because pool2d reads no
    float32 (``ops/pool/plan.py``): where a float32 profile is not float32."""
    return tuple(dict.fromkeys(a.dst for a in plan.adapters if a.kind == "typecast"
                               and a.before.dtype == "float32" and "pool2d" in a.reason))


def _pcc(a, b) -> float:
    from ...weights.reference import pcc
    a, b = a.double().flatten(), b.double().flatten()
    if a.numel() and float((a - b).abs().max()) <= 1e-6 * max(1.0, float(a.abs().max())):
        return 1.0
    return float(pcc(a, b))


def check_spec(text: str, module, tr: Traced, example_input, *, per_layer: bool | None = None
               ) -> CheckResult:
    """Build ``text`` in the float32 profile on the sim with the module's weights, run it on
    ``example_input`` and compare with the module (its output; per layer when the output is
    below ``PCC_MIN`` or ``per_layer``)."""
    from ...backends import open_backend
    from ...planning.planner import plan_graph
    from ...runtime.executor import Executor, to_torch_nchw
    from ...language.spec import load_graph
    from ...weights import load_state_dict, prepare_parameters

    n, c, h, w = tr.input_shape
    graph = load_graph(text, batch_size=n, input_size=(h, w), profile="float32")
    sd = load_state_dict(module, graph, ignore=list(tr.unused_prefixes) or None)
    by_fx = {l.name: l.fx for l in tr.layers if not l.outputs}
    wanted = set(by_fx.values()) | set(tr.output_fx)
    ref = _module_values(tr.gm, example_input, wanted)
    plan = plan_graph(graph)
    be = open_backend("sim")
    try:
        ex = Executor(plan, prepare_parameters(graph, sd), be)
        got = ex.run({tr.input_name: example_input}, keep_all=True)
        outs = []
        alias = dict(zip(tr.outputs, tr.output_names))     # named outputs rename their layer
        for t, fxn in zip(tr.outputs, tr.output_fx):
            t = alias.get(t, t)
            o = to_torch_nchw(be, got[t], graph.shape_of(t))
            r = ref[fxn].reshape(o.shape)
            outs.append((_pcc(r, o), float((r - o).abs().max())))
        res = CheckResult(min(p for p, _ in outs), max(m for _, m in outs),
                          bfloat16_pools=bfloat16_pools(plan))
        if per_layer or (per_layer is None and res.pcc < PCC_MIN):
            for node in graph.nodes:
                fxn = by_fx.get(node.name)
                if fxn is None or fxn not in ref or node.name not in got:
                    continue
                o = to_torch_nchw(be, got[node.name], graph.shape_of(node.name))
                r = ref[fxn].reshape(o.shape)
                p = _pcc(r, o)
                res.rows.append((node.name, p, float((r - o).abs().max())))
                if p < PCC_MIN and res.first_bad is None:
                    lay = next(l for l in tr.layers if l.name == node.name)
                    res.first_bad = (f"'{node.name}' ({' '.join(lay.parts)}, {lay.source}): "
                                     f"PCC {p:.6f}")
        return res
    finally:
        be.close()
