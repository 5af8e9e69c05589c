"""grn's layout rules: none refuses. The composition (x*x, ``ttnn.sum`` over H*W, ``ttnn.sqrt``,
``ttnn.mean`` over C, ``divide``, broadcast multiply/add) was accepted by ttnn 0.81.1 on the mock
device for interleaved L1/DRAM and height-sharded TILE inputs in bfloat16, bfloat8_b and float32,
and for a ROW_MAJOR one (tests/rules_corpus.py ``grn_cases``). The planner gives it an
interleaved TILE input; a ROW_MAJOR one is only advised against (``grn.tile``, perf)."""
from __future__ import annotations

from ...planning.layout import TILE_LAYOUT
from ...planning.rules import CallArgs, Rule, Violation, _v, reads

RULE_LIST = (
    Rule("grn.tile", "grn",
         "ttnn 0.81.1 accepts the composition on a ROW_MAJOR input (mock device), but its "
         "reductions and binary ops tilize it at each step: the planner tilizes it once before",
         "ttnn/cpp/ttnn/operations/reduction/generic/device: the reduce kernels read TILE "
         "(0.81.1 wheel; ROW_MAJOR accepted on the mock device, tests/rules_corpus.py grn_cases)",
         kind="perf"),
)


@reads(CallArgs)
def _c_grn(inputs, args: CallArgs, output, shapes):
    return []


def advise(op, inputs, attrs, output, shapes) -> list[Violation]:
    x = inputs[0] if inputs else None
    if x is not None and x.layout != TILE_LAYOUT:
        return [_v("grn.tile", f"grn of a {x.layout} input: tilized at every step")]
    return []
