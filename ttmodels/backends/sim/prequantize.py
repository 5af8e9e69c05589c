"""Conv weights cached already rounded to their TTNN format, for a fast warm build on the sim.

A sim build rounds every conv weight to its weights dtype (bfloat8_b by default) as ttnn's
prepared weight matrix holds it (``ops/conv2d/sim.py quantized_conv_weight``); on a warm build that rounding was
most of the build. The builder therefore hands ``cache.cached_prepare`` a ``postprocess`` that
stores the rounded values (same names and shapes as the BN-folded weights; as bfloat16, which
holds every value of the 16-bit and block-float formats exactly, unless the weights are float32), and
marks the node dicts of those convs (``PrequantizedParams``) so that the Conv2d layer tells the
sim (``ops.mark_prequantized``) to skip the rounding. The values are the same bit for bit:
rounding a rounded weight changes nothing.

The marking is recomputed from the plan on every build; the cache key covers it (the tag carries
a hash of the node -> dtype map, and the graph fingerprint each node's weights precision).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ...planning.plans import Plan

# Bump when quantized_conv_weight (ops/conv2d/sim.py)'s output changes (part of the cache key).
VERSION = 1


@dataclass(frozen=True)
class WeightFormat:
    """How a conv's weight is rounded: its TTNN weights dtype name and its groups."""
    dtype: str
    groups: int = 1


class PrequantizedParams(dict):
    """A conv node's parameters whose ``weight`` already holds the values of ``weights_dtype``
    (a TTNN dtype name) as the sim prepares them; ``bias`` is left as it was."""

    def __init__(self, params, weights_dtype: str):
        super().__init__(params)
        self.weights_dtype = weights_dtype


def conv_weight_formats(plan: "Plan") -> dict[str, WeightFormat]:
    """Node name -> weight format of every conv2d the sim prepares with ``prepare_conv_weights``
    (the ``linear`` lowering and other ops take their weights through ``from_torch``)."""
    out = {}
    for pl in plan.layers:
        if pl.node.op != "conv2d" or (pl.config.lowering or "conv2d") != "conv2d":
            continue
        out[pl.name] = WeightFormat(pl.config.weights_dtype or pl.node.precision.weights,
                                    int(pl.node.attrs.get("groups", 1)))
    return out


def tag(formats: dict[str, WeightFormat]) -> str:
    """The cache key's postprocess tag: the version and the node -> format map."""
    blob = json.dumps({k: [f.dtype, f.groups] for k, f in formats.items()}, sort_keys=True)
    return f"sim-prequantized-v{VERSION}:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def postprocess(formats: dict[str, WeightFormat]) -> Callable[[dict], dict]:
    """``cached_prepare``'s postprocess: each listed conv's ``weight`` replaced by its rounded
    values (a new tensor; names and shapes unchanged; bfloat16 unless the format is float32)."""
    def run(params: dict) -> dict:
        import torch

        from .. import sim
        from ..common import data_type
        from ...ops.conv2d.sim import quantized_conv_weight
        for node, f in formats.items():
            p = params.get(node)
            if p is not None and p.get("weight") is not None:
                w = p["weight"].float()
                q = quantized_conv_weight(w, f.groups, data_type(sim, f.dtype)).contiguous()
                # bfloat16 holds every bfloat16/bfloat8_b/bfloat4_b value exactly (at most 8
                # significant bits, float32's exponent range): half the bytes to read and check
                p["weight"] = q if f.dtype == "float32" else q.to(torch.bfloat16)
        return params
    return run


def mark(params: dict, formats: dict[str, WeightFormat]) -> None:
    """Wrap the listed nodes' dicts in ``PrequantizedParams`` (in place)."""
    for node, f in formats.items():
        if node in params:
            params[node] = PrequantizedParams(params[node], f.dtype)
