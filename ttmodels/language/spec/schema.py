"""What a spec may hold (its fields, the limits) and how a defect is reported (``SpecError`` naming
the file, the line and the layer).
"""
from __future__ import annotations

import difflib
import re

from .._yaml import YList, YMap
from ...errors import SpecError
from ...ops import SPEC_FIELDS


MAX_GRAPH_NODES = 100_000
MAX_REPEAT = 10_000
MAX_BLOCK_DEPTH = 32        # block instances inside block instances (docs/spec.md "Limits")
MAX_GRID = 8                # Wormhole's compute grid is 8x8 cores
MAX_DIM = 1 << 20           # sanity bound on any size / channel count
REQUIRED = "required"       # block parameter default meaning "must be given"

_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")

TOP_FIELDS = ("name", "doc", "extends", "imports", "params", "inputs", "constants", "defaults",
              "profiles", "blocks", "layers", "outputs", "ignore_weights", "batch",
              "resolved_precision")
IMPORTED_FIELDS = ("name", "doc", "imports", "blocks")
BLOCK_FIELDS = ("doc", "params", "inputs", "layers", "outputs")
INPUT_FIELDS = ("channels", "size", "divisible_by", "doc")
CONSTANT_FIELDS = ("shape", "value", "weights", "dtype", "doc")
DEFAULT_FIELDS = ("layout", "precision")
PRECISION_FIELDS = ("weights", "activations", "math_fidelity", "fp32_accum", "auto")
LAYOUT_FIELDS = ("kind", "buffer", "grid")

# Fields every layer may have; ``first`` may override all but the structural ones.
REPEAT = ("repeat", "repeat_start", "repeat_name")
COMMON = ("name", "op", "in", "when", *REPEAT, "first", "layout", "precision", "doc")
STRUCTURAL = ("name", "op", "block", "when", *REPEAT, "first", "doc")
INSTANCE = ("name", "block", "in", "when", *REPEAT, "first", "layout", "precision", "scope",
            "doc")
REPEAT_NAME = "{name}.{i}"      # nn.Sequential's numbering: name.0, name.1, ...
OP_FIELDS = SPEC_FIELDS            # ttmodels/ops/: each op's module declares its fields
_MISSING = object()


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------

def _suggest(word, choices) -> str:
    choices = [c for c in choices if isinstance(c, str)]
    near = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.5)
    return f" (did you mean '{near[0]}'?)" if near else ""


def _where(m, key=None) -> tuple[str, int | None]:
    if isinstance(m, YMap):
        return m.file, (m.line_of(key) if key is not None else m.line)
    if isinstance(m, YList):
        return m.file, (m.line_of(key) if isinstance(key, int) else m.line)
    return "<spec>", None


def _err(msg: str, m=None, key=None, layer: str | None = None, chain=()) -> SpecError:
    file, line = _where(m, key)
    if chain:
        msg = f"{msg} [{'; '.join(chain)}]"
    return SpecError(msg, file=file, line=line, layer=layer)


def _check_keys(m: YMap, allowed, what: str, layer=None, chain=()) -> None:
    for k in m:
        if k not in allowed:
            raise _err(f"unknown field '{k}' in {what}{_suggest(k, allowed)}; allowed: "
                       f"{', '.join(a for a in allowed if a != 'doc')}", m, k, layer, chain)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _as_name(v):
    """A name field's value: ``name: "${i}"`` is the name "0", as ``"${i}.conv"`` is "0.conv"
    (a lone placeholder keeps its value's type; names are strings, and torch's are often digits).
    """
    return str(v) if _is_int(v) and v >= 0 else v


def _typename(v) -> str:
    return {YMap: "mapping", YList: "list", type(None): "null"}.get(type(v), type(v).__name__)
