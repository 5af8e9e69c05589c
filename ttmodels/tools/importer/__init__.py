"""``ttmodels import``: a PyTorch module -> the spec a person would write (issue 24).

    text = ttmodels.import_module(torchvision.models.resnet18(), torch.randn(1, 3, 224, 224))

Three steps, each a plain function in its own module (this package re-exports the public names):

1. **trace** (``trace``, ``tracing.py``): torch.fx on the example input; every fx node goes
   through one table row of its kind (``tables.py``: ``MODULE_OPS`` for leaf modules by class
   name, ``FUNCTION_OPS`` for functions, ``METHOD_OPS`` for tensor methods). A row turns the node
   into a spec layer, an alias (Dropout, a flatten of a 1x1 map), or says why it cannot
   (``Unsupported``). BatchNorm after a conv is folded into the conv's ``bn:``, an activation
   into ``act:`` where ttnn fuses it (``ttmodels.ops.activations``). Layer names are module paths,
   so ``module.state_dict()`` loads.
2. **emit** (``emit_spec``, ``emit.py``): module classes with several instances become blocks
   (``blocks.py``: what differs between instances becomes a parameter, a layer only some have
   gets ``when:``; ``library.py``: the library's blocks where a class matches one), chains of
   equal instances ``repeat``; every layer carries a comment with its module path and source
   line. The blocked spec must expand to exactly the flat layer list (checked, ``_same_graph``).
3. **check** (``check_spec``, ``selfcheck.py``): the spec built in the float32 profile on the
   sim, compared with the module's own output (PCC, max abs error) and, below ``PCC_MIN``, layer
   by layer against the module's intermediate values to name the first layer that differs.

``import_module`` and the ``ttmodels import`` command (``run_import``) are in ``entry.py``; the
intermediate form (``Layer``, ``Traced``, ``Unsupported``, the errors) in ``intermediate.py``.
Enrolling an op (when the spec language gets one) is one row in a table in ``tables.py``.
"""
from __future__ import annotations

from .emit import emit_spec
from .entry import import_module, resolve_module_ref, run_import
from .intermediate import (PCC_MIN, ImportedSpec, ImportError_, Layer, Traced, Unsupported,
                           UnsupportedError, format_unsupported)
from .selfcheck import CheckResult, check_spec
from .tables import FUNCTION_OPS, METHOD_OPS, MODULE_OPS
from .tracing import trace

__all__ = ["import_module", "ImportError_", "UnsupportedError", "ImportedSpec", "trace",
           "emit_spec", "check_spec", "resolve_module_ref", "MODULE_OPS", "FUNCTION_OPS",
           "METHOD_OPS", "PCC_MIN", "run_import", "format_unsupported", "Layer",
           "Traced", "Unsupported", "CheckResult"]
