"""The op vocabulary of the spec language: every op name, its family and its spec fields, in one
place (graph, spec, rules, planner, layers and reference read these tuples; ``tests/test_ops.py``
walks them and fails when an op lacks a planning hook, a layer, a sim function or a reference).

Families share their planning, layer and rule code:

* ``BINARY``: tensor (op) tensor-or-constant, numpy broadcasting of the second operand
  (binary_ng); ``activation`` fused.
* ``UNARY``: the activations of ``ttmodels.activations`` as standalone ops, plus ``identity``
  (ttnn's eltwise unary ops: no dtype argument, memory config kept).
"""
from __future__ import annotations

from .activations import ACTIVATIONS, NAMES as ACTIVATION_NAMES

BINARY = ("add", "multiply", "subtract")
UNARY = ACTIVATION_NAMES + ("identity",)
POOLS = ("max_pool2d", "avg_pool2d", "global_avg_pool", "adaptive_avg_pool2d")

_CONV_FIELDS = ("out", "kernel", "stride", "padding", "dilation", "groups", "bias", "act", "bn",
                "lowering", "weights", "in_channels")
# torch.nn.ConvTranspose2d's arguments (no BatchNorm folding, no lowering choice: ttnn 0.81.1's
# conv_transpose2d has no linear path of its own to choose)
_CONV_TRANSPOSE_FIELDS = ("out", "kernel", "stride", "padding", "output_padding", "dilation",
                          "groups", "bias", "act", "weights", "in_channels")

#: spec fields of each op (besides the common ``name, op, in, when, repeat, first, layout,
#: precision, doc``), in docs order
SPEC_FIELDS: dict[str, tuple[str, ...]] = {
    "conv2d": _CONV_FIELDS,
    "conv_transpose2d": _CONV_TRANSPOSE_FIELDS,
    **{op: ("act",) for op in BINARY},
    **{op: ((ACTIVATIONS[op].param,) if op in ACTIVATIONS and ACTIVATIONS[op].param else ())
       for op in UNARY},
    "max_pool2d": ("kernel", "stride", "padding", "dilation", "ceil_mode"),
    "avg_pool2d": ("kernel", "stride", "padding", "ceil_mode", "count_include_pad"),
    "global_avg_pool": (),
    "adaptive_avg_pool2d": ("size",),
    "linear": ("out", "bias", "act", "weights", "in_features"),
    "upsample": ("scale", "size_of", "mode", "align_corners"),
    "concat": (),
    "pad": ("padding", "value"),
    "batch_norm": ("weights", "act"),
    "slice": ("channels",),
    "split": ("channels",),
}

OPS: tuple[str, ...] = tuple(SPEC_FIELDS)

#: ops whose layer holds parameters loaded from the weights (key prefix ``Node.weights``)
PARAMETRIC = ("conv2d", "conv_transpose2d", "linear", "batch_norm")


def unary_activation(op: str, attrs: dict) -> str | None:
    """The canonical activation a standalone unary op applies (None for identity)."""
    if op == "identity":
        return None
    d = ACTIVATIONS[op]
    if d.param is None:
        return d.name
    return f"{d.name}({float(attrs.get(d.param, d.default))!r})"
