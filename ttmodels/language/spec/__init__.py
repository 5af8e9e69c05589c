"""The YAML spec language -> a validated, shape-inferred ``Graph``.

Pipeline: ``registry.resolve`` (name / path / text / dict -> YMap with line numbers) ->
``_Documents`` (``extends:`` and ``imports:``, block table) -> ``_Compiler`` (params, blocks,
repeats, ``when:``, references, per-op attribute canonicalisation and shape inference, layout and
precision inheritance) -> output naming -> ``Graph``. Every defect is a ``SpecError`` naming the
file, the line and the layer; see docs/spec.md for the language.

Modules: ``schema`` (the fields a spec may hold, the limits, error helpers), ``documents``
(``extends:``/``imports:`` and the block table), ``fields`` (one layer's fields, the ``OpInput``
the ops' ``parse`` reads), ``compiler`` (``load_graph``, names, ops), ``sections`` (top-level
sections: params, precision profiles, layouts, inputs, constants, outputs), ``expansion``
(layer lists, block instances, ``repeat``, ``when:``).
"""
from __future__ import annotations

from .compiler import load_graph
from .schema import (MAX_BLOCK_DEPTH, MAX_DIM, MAX_GRAPH_NODES, MAX_GRID,  # noqa: F401  (limits)
                     MAX_REPEAT, REQUIRED)

__all__ = ["load_graph"]
