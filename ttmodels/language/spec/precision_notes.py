"""What a layer's precision really computes at, and the warning when its name says more.

A compute kernel's Dest register is 16 bits wide unless ``fp32_dest_acc_en`` (the precision's
``fp32_accum``) is set, and a 16-bit Dest holds bfloat16 (tt-isa-documentation, Wormhole
``MVMUL``: without ``Fp32_enabled`` every product is added into Dest with ``RoundToBF16``). So a
layer with float32 activations and no ``fp32_accum`` keeps float32 only in L1: each sum is
rounded to bfloat16 before the packer writes it out, and the SFPU's fused activation reads that
bfloat16 value. Such a layer computes at bfloat16 precision, which a spec saying ``float32`` hides.
"""
from __future__ import annotations

import logging

from ..graph import Graph, Precision

log = logging.getLogger("ttmodels")


def effective_activations(p: Precision) -> str:
    """The precision a layer's sums really have: float32 activations without fp32_accum pass
    through a 16-bit (bfloat16) Dest."""
    if p.activations == "float32" and not p.fp32_accum:
        return "bfloat16"
    return p.activations


def float32_without_accum(graph: Graph) -> list[str]:
    """Names of the layers whose float32 activations really compute at bfloat16."""
    return [n.name for n in graph.nodes if effective_activations(n.precision) != n.precision.activations]


def warn_precision(graph: Graph) -> None:
    """One warning per graph naming the layers whose float32 is bfloat16 in fact."""
    names = float32_without_accum(graph)
    if not names:
        return
    first = next(n for n in graph.nodes if n.name == names[0])
    where = str(first.loc) if first.loc is not None else graph.source
    more = f" and {len(names) - 1} more" if len(names) > 1 else ""
    log.warning("layer %s (%s)%s: float32 activations without fp32_accum compute at bfloat16 "
                "precision (a 16-bit Dest rounds every sum to bfloat16); add 'fp32_accum: true' "
                "to the precision for float32", names[0], where, more)


_WARNED: set[str] = set()


def warn_unresolved_auto(graph: Graph) -> None:
    """One warning per graph when layers under ``precision: auto`` have no resolved choice: they
    run at HiFi4 with bfloat16 weights until ``ttmodels precision`` writes one."""
    todo = [n for n in graph.nodes if n.auto is not None and not n.auto.resolved]
    if not todo:
        return
    where = todo[0].auto.loc or graph.source
    if str(where) in _WARNED:           # once per declaration and process, not per load
        return
    _WARNED.add(str(where))
    log.warning("%s: 'precision: auto' is not resolved for %d layer(s) (first: %s): they run at "
                "HiFi4 with bfloat16 weights; `ttmodels precision SPEC --weights W -o OUT.yaml` "
                "picks the cheapest precision per layer that holds PCC %.4g", where, len(todo),
                todo[0].name, todo[0].auto.pcc)
