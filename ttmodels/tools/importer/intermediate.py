"""The importer's intermediate form: traced layers, unsupported nodes, the errors and the result."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ...errors import Error


PCC_MIN = 0.9999


class ImportError_(Error):
    """The module cannot be imported as it is (a self-check failure, a bad module reference)."""


class UnsupportedError(ImportError_):
    """Nodes the spec language has no op for, all of them, grouped by kind."""

    def __init__(self, unsupported: list["Unsupported"]):
        self.unsupported = unsupported
        super().__init__(format_unsupported(unsupported))


class ImportedSpec(str):
    """The spec's YAML text, with the self-check's figures (``pcc``, ``max_abs``, ``report``)."""
    pcc: float | None = None
    max_abs: float | None = None
    report: str = ""
    layers: int = 0
    blocks: tuple[str, ...] = ()      # the blocks it uses (its own and the library's)
    ignored_prefixes: tuple[str, ...] = ()
    check_failed: str = ""            # why the self-check did not run (the float32 profile)


# ---------------------------------------------------------------------------------------------
# the intermediate form
# ---------------------------------------------------------------------------------------------

@dataclass
class Layer:
    name: str                     # full name (module path, or owner path + function name)
    op: str
    fields: dict                  # spec fields (all of them, defaults included)
    inputs: list[str]             # tensor names
    stack: list[tuple[str, str]]  # enclosing (module path, class qualname), outermost first
    parts: list[str]              # what it was made of ("Conv2d", "+ BatchNorm2d bn1", ...)
    source: str                   # "file:line" of the call
    fx: str                       # the fx node whose value is this layer's output
    fx_node: Any = None
    outputs: list[str] | None = None   # split: named outputs (full tensor names)
    in_channels: int | None = None     # of the first input


@dataclass
class Unsupported:
    kind: str                     # "call_module Flatten", "function view", ...
    where: str                    # module path
    source: str
    reason: str
    fx: str


@dataclass
class Traced:
    layers: list[Layer]
    input_name: str
    input_shape: tuple[int, ...]  # NCHW
    outputs: list[str]            # tensor names of the module's outputs (or the partial output)
    output_fx: list[str]
    unsupported: list[Unsupported]
    module_class: str
    unused_prefixes: tuple[str, ...] = ()
    partial_stop: Unsupported | None = None
    gm: Any = None
    output_names: tuple[str, ...] = ()   # a dict's keys (tuple: out0, out1, ...); () = one value
    constants: dict = field(default_factory=dict)   # learned scalars: state-dict key -> shape


class _Skip(Exception):
    """A table row's verdict: this node cannot be expressed in the spec language."""


def _unsupported(reason: str):
    raise _Skip(reason)


@dataclass
class _Val:
    """What an fx node's value is to the importer."""
    kind: str                     # "tensor", "shape", "tuple", "const", "bad"
    tensor: str | None = None     # tensor name
    items: list | None = None     # tuple / list elements (_Val)
    const: Any = None
    layer: Layer | None = None    # the layer producing it (when a layer output)
    shape: tuple | None = None    # torch shape (NCHW)


def format_unsupported(bad: list[Unsupported]) -> str:
    groups: dict[str, list[Unsupported]] = defaultdict(list)
    for u in bad:
        groups[u.kind].append(u)
    lines = [f"{len(bad)} node(s) the spec language has no op for, in {len(groups)} kind(s) "
             "(no spec written; --partial writes the part before the first):"]
    for kind, us in groups.items():
        lines.append(f"  {kind} ({len(us)}): {us[0].reason}")
        for u in us[:20]:
            extra = f" ({u.reason})" if u.reason != us[0].reason else ""
            lines.append(f"    {u.where}  {u.source}{extra}")
        if len(us) > 20:
            lines.append(f"    ... and {len(us) - 20} more")
    return "\n".join(lines)


class _MissingT:
    def __repr__(self):
        return "<missing>"
