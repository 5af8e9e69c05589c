"""The op registry: every op of the spec language, one package each (``ttmodels/ops/<op>/``),
each registering its ``OpDef`` (``ops/base.py``: spec fields and types, attrs and shape inference,
parameter schema, float32 torch reference, planning hook, layout rules, layer class, sim ops).

The spec compiler, the reference, weights, the planner, rules, layers and the sim look ops up here;
``tests/test_ops_registry.py`` walks ``REGISTRY`` and fails when an op lacks a piece. The tuples
below are derived from the registry (families share their planning, layer and rule code):

* ``BINARY``: tensor (op) tensor-or-constant, numpy broadcasting of the second operand
  (binary_ng); ``activation`` fused.
* ``UNARY``: the activations of ``ttmodels.ops.activations`` as standalone ops, plus ``identity``
  (ttnn's eltwise unary ops: no dtype argument, memory config kept).
"""
from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY, Field, OpDef, OpInput, Parsed, get, register, window_out

# Registration order is the docs' (and the error messages') order of ops: these first, then any
# other op package of this folder, by name. So a new op is its package: nothing here to edit.
_FIRST = ("conv2d", "conv_transpose2d", "binary", "unary", "pool", "linear", "upsample", "concat",
          "pad", "batch_norm", "slice", "split", "layer_norm", "layer_scale", "softmax", "reshape")
_FOUND = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name not in _FIRST)
for _name in _FIRST + tuple(_FOUND):
    importlib.import_module(f"{__name__}.{_name}")

from .unary import unary_activation  # noqa: E402

OPS: tuple[str, ...] = tuple(REGISTRY)


def family(name: str) -> tuple[str, ...]:
    return tuple(op for op, d in REGISTRY.items() if d.family == name)


BINARY = family("binary")
UNARY = family("unary")
POOLS = family("pool")

#: spec fields of each op (besides the common ``name, op, in, when, repeat, first, layout,
#: precision, doc``), in docs order
SPEC_FIELDS: dict[str, tuple[str, ...]] = {op: d.field_names for op, d in REGISTRY.items()}

#: ops whose layer holds parameters loaded from the weights (key prefix ``Node.weights``)
PARAMETRIC = tuple(op for op, d in REGISTRY.items() if d.parametric)

__all__ = ["REGISTRY", "OpDef", "Field", "Parsed", "OpInput", "get", "register",
           "window_out", "OPS", "BINARY", "UNARY", "POOLS", "SPEC_FIELDS", "PARAMETRIC",
           "family", "unary_activation"]
