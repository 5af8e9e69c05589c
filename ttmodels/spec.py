"""The YAML spec language -> a validated, shape-inferred ``Graph``.

Pipeline: ``registry.resolve`` (name / path / text / dict -> YMap with line numbers) ->
``_Documents`` (``extends:`` and ``imports:``, block table) -> ``_Compiler`` (params, blocks,
repeats, ``when:``, references, per-op attribute canonicalisation and shape inference, layout and
precision inheritance) -> output naming -> ``Graph``. Every defect is a ``SpecError`` naming the
file, the line and the layer; see docs/spec.md for the language.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import activations as A
from . import expr as E
from . import registry
from ._yaml import YList, YMap
from .errors import SpecError
from . import ops
from .ops import BINARY, OPS, SPEC_FIELDS
from .graph import (BUFFERS, DTYPES, LAYOUT_KINDS, MATH_FIDELITIES, Constant, Graph,
                    LayoutPolicy, Node, Precision, SourceLoc, TensorShape)

__all__ = ["load_graph"]

MAX_GRAPH_NODES = 100_000
MAX_REPEAT = 10_000
MAX_BLOCK_DEPTH = 32        # block instances inside block instances (docs/spec.md "Limits")
MAX_GRID = 8                # Wormhole's compute grid is 8x8 cores
MAX_DIM = 1 << 20           # sanity bound on any size / channel count
REQUIRED = "required"       # block parameter default meaning "must be given"

_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")

TOP_FIELDS = ("name", "doc", "extends", "imports", "params", "inputs", "constants", "defaults",
              "profiles", "blocks", "layers", "outputs", "ignore_weights")
IMPORTED_FIELDS = ("name", "doc", "imports", "blocks")
BLOCK_FIELDS = ("doc", "params", "inputs", "layers", "outputs")
INPUT_FIELDS = ("channels", "size", "divisible_by", "doc")
CONSTANT_FIELDS = ("shape", "value", "weights", "dtype", "doc")
DEFAULT_FIELDS = ("layout", "precision")
PRECISION_FIELDS = ("weights", "activations", "math_fidelity", "fp32_accum")
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


def load_graph(spec, *, batch_size: int = 1, input_size=None, profile: str | None = None) -> Graph:
    """Parse, expand and validate ``spec`` into a shape-inferred Graph.

    ``spec``: a shipped or registered config name ("resnet50"), a path (str or Path), YAML text or
    a dict (never modified). ``input_size=(H, W)`` overrides the spec's default input size;
    ``profile`` selects a named precision profile of the spec ("default" = the spec's defaults).
    """
    data, source, base = registry.resolve(spec)
    try:
        return _Compiler(data, source, base, batch_size, input_size, profile).run()
    except RecursionError as e:
        # Python's stack, not a rule of ours, ran out (nesting and alias limits come first).
        # Anything else (KeyError, TypeError, ...) is a bug of ours and must not be re-labelled
        # as the user's mistake.
        raise SpecError(f"the spec nests too deeply to expand ({e})", file=source) from e


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


@dataclass
class _BlockDef:
    name: str
    data: YMap
    params: list[tuple[str, Any]]
    inputs: list[str]
    # Blocks addressed as ``ttmodels/<file>/<block>`` carry their own file's block table, so the
    # block names inside them mean that file's blocks whatever the spec defines; ``key`` tells
    # such a block apart from a user block of the same short name (recursion check).
    table: dict[str, "_BlockDef"] | None = None
    key: str = ""


@dataclass
class _Ctx:
    """One list of layers being expanded: the top level or the body of one block instance."""
    prefix: str
    params: dict
    layout: LayoutPolicy
    precision: dict
    top: bool
    chain: tuple[str, ...] = ()
    stack: tuple[str, ...] = ()
    instance: str | None = None
    blocks: dict[str, _BlockDef] | None = None   # a library block's own table (see _BlockDef)
    local: dict[str, str] = field(default_factory=dict)
    local_where: dict[str, tuple] = field(default_factory=dict)
    block_inputs: tuple[str, ...] = ()    # the block's input names (``x`` when it declares none)
    implicit_inputs: bool = False         # the block has no ``inputs:`` (it reads one, ``x``)
    later: set = field(default_factory=set)
    skipped: set = field(default_factory=set)
    current: str | None = None


# ---------------------------------------------------------------------------------------------
# documents: extends + imports -> merged top level and block table
# ---------------------------------------------------------------------------------------------

class _Documents:
    def __init__(self):
        self.blocks: dict[str, _BlockDef] = {}
        self.block_origin: dict[str, tuple[str, str, int | None]] = {}  # name -> (kind, file, line)
        self.loaded: set = set()

    def load(self, data: YMap, source: str, base: Path, stack: tuple) -> dict:
        _check_keys(data, TOP_FIELDS, "the spec")
        merged: dict[str, Any] = {}
        if "extends" in data:
            ref = data["extends"]
            if not isinstance(ref, str) or not ref:
                raise _err(f"'extends' must be a model name or path, got {_typename(ref)}",
                           data, "extends")
            bdata, bsource, bbase, key = self._resolve_extends(ref, data, base)
            if key in [s[0] for s in stack]:
                chain = " -> ".join([s[1] for s in stack] + [bsource])
                raise _err(f"'extends' cycle: {chain}", data, "extends")
            merged = self.load(bdata, bsource, bbase, stack + ((key, bsource),))
        self.load_imports(data, source, base, stack)
        if "blocks" in data:
            self.add_blocks(data["blocks"], own=True, where=(data, "blocks"))
        for k, v in data.items():
            if k in ("extends", "imports", "blocks"):
                continue
            if k in ("params", "constants", "profiles") and isinstance(v, YMap) and \
                    isinstance(merged.get(k), YMap):
                both = YMap(merged[k], file=v.file, line=v.line)
                both.key_lines.update(merged[k].key_lines)
                for kk, vv in v.items():
                    both[kk] = vv
                    both.key_lines[kk] = v.line_of(kk)
                merged[k] = both
            else:
                merged[k] = v
        merged["__map__"] = data
        return merged

    def _resolve_extends(self, ref: str, data: YMap, base: Path):
        p = Path(ref)
        if ref.endswith((".yaml", ".yml")) or "/" in ref or os.sep in ref:
            path = p if p.is_absolute() else base / p
            shown = ref if data.file.startswith("<") else \
                os.path.normpath(os.path.join(os.path.dirname(data.file), ref))
            bdata = registry.read_file(path, shown, importer=data.file, line=data.line_of("extends"))
            if not isinstance(bdata, YMap):
                raise _err("an extended spec must be a mapping", data, "extends")
            return bdata, shown, path.parent, str(path.resolve())
        try:
            bdata, bsource, bbase = registry.resolve(ref)
        except SpecError as e:
            raise _err(f"cannot extend '{ref}': {e}", data, "extends") from None
        return bdata, bsource, bbase, "name:" + ref

    def load_imports(self, data: YMap, source: str, base: Path, stack: tuple) -> None:
        imports = data.get("imports")
        if imports is None:
            return
        if isinstance(imports, str):
            items = YList([imports], file=data.file, line=data.line_of("imports"))
            items.item_lines.append(data.line_of("imports"))
            imports = items
        if not isinstance(imports, YList):
            raise _err(f"'imports' must be a list of files, got {_typename(imports)}", data,
                       "imports")
        for i, entry in enumerate(imports):
            line = imports.line_of(i)
            if not isinstance(entry, str) or not entry:
                raise SpecError(f"an import must be a path string, got {_typename(entry)}",
                                file=data.file, line=line)
            if entry.startswith(registry.SHIPPED_PREFIX):
                rel = entry[len(registry.SHIPPED_PREFIX):]
                rel = rel if rel.endswith((".yaml", ".yml")) else rel + ".yaml"
                path = registry.BLOCKS_DIR / rel
                shown = f"{registry.SHIPPED_PREFIX}blocks/{rel}"
            else:
                p = Path(entry)
                path = p if p.is_absolute() else base / p
                shown = entry if data.file.startswith("<") else \
                    os.path.normpath(os.path.join(os.path.dirname(data.file), entry))
            try:
                key = str(path.resolve())
            except (OSError, RuntimeError):
                key = str(path)
            if key in [s[0] for s in stack]:
                chain = " -> ".join([s[1] for s in stack] + [shown])
                raise SpecError(f"import cycle: '{data.file}' imports '{shown}' which is already "
                                f"being imported ({chain})", file=data.file, line=line)
            if key in self.loaded:
                continue
            idata = registry.read_file(path, shown, importer=data.file, line=line)
            if not isinstance(idata, YMap):
                raise SpecError(f"imported file '{shown}' is not a spec: expected a mapping "
                                f"with 'blocks:', got {_typename(idata)}", file=data.file, line=line)
            _check_keys(idata, IMPORTED_FIELDS, f"imported file '{shown}'")
            self.loaded.add(key)
            self.load_imports(idata, shown, path.parent, stack + ((key, shown),))
            if "blocks" in idata:
                self.add_blocks(idata["blocks"], own=False, where=(idata, "blocks"))

    def add_blocks(self, blocks, own: bool, where: tuple[YMap, str]) -> None:
        if not isinstance(blocks, YMap):
            raise _err(f"'blocks' must be a mapping of block name -> definition, got "
                       f"{_typename(blocks)}", *where)
        for name, bd in blocks.items():
            line = blocks.line_of(name)
            if not _NAME_RE.match(name):
                raise SpecError(f"invalid block name '{name}'", file=blocks.file, line=line)
            if not isinstance(bd, YMap):
                raise SpecError(f"block '{name}' must be a mapping (params:, layers:, ...)",
                                file=blocks.file, line=line)
            _check_keys(bd, BLOCK_FIELDS, f"block '{name}'")
            prev = self.block_origin.get(name)
            if prev and not own and prev[0] == "import" and prev[1] != blocks.file:
                raise SpecError(f"block '{name}' is defined twice: here and at {prev[1]}:{prev[2]}",
                                file=blocks.file, line=line)
            if prev and own and prev[0] == "own" and prev[1] == blocks.file:
                raise SpecError(f"block '{name}' is defined twice", file=blocks.file, line=line)
            if prev and not own and prev[0] == "own":
                continue  # the spec's own definition overrides imported ones
            params = bd.get("params", YMap(file=bd.file, line=bd.line))
            if params is None:
                params = YMap(file=bd.file, line=bd.line)
            if not isinstance(params, YMap):
                raise _err(f"'params' of block '{name}' must be a mapping name -> default",
                           bd, "params")
            for p in params:
                if not p.isidentifier() or p in INSTANCE:
                    raise _err(f"invalid parameter name '{p}' in block '{name}' (must be an "
                               f"identifier and not one of {', '.join(INSTANCE)})", params, p)
            inputs = bd.get("inputs", ["x"])
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not inputs or \
                    not all(isinstance(i, str) and _NAME_RE.match(i) for i in inputs):
                raise _err(f"'inputs' of block '{name}' must be a non-empty list of names",
                           bd, "inputs")
            if len(set(inputs)) != len(inputs):
                raise _err(f"duplicate input name in block '{name}'", bd, "inputs")
            self.blocks[name] = _BlockDef(name, bd, list(params.items()), list(inputs))
            self.block_origin[name] = ("own" if own else "import", blocks.file, line)


# ---------------------------------------------------------------------------------------------
# field access for one layer (values from the layer mapping or its ``first:`` overrides)
# ---------------------------------------------------------------------------------------------

class _Fields:
    def __init__(self, comp: "_Compiler", ctx: _Ctx, m: YMap, first: YMap | None, layer: str,
                 skip=()):
        self.comp, self.ctx, self.m, self.layer = comp, ctx, m, layer
        self.src: dict[str, YMap] = {k: m for k in m if k not in skip}
        if first is not None:
            for k in first:
                self.src[k] = first

    def has(self, k) -> bool:
        return k in self.src and self.src[k].get(k) is not None

    def fail(self, msg: str, k=None) -> SpecError:
        m = self.src.get(k, self.m) if k is not None else self.m
        return _err(msg, m, k if k in m else None, self.layer, self.ctx.chain)

    def raw(self, k, default=_MISSING):
        if k not in self.src:
            if default is _MISSING:
                raise self.fail(f"missing required field '{k}'")
            return default
        return self.comp.ev(self.ctx, self.src[k][k], self.src[k], k, self.layer)

    def get(self, k, default=_MISSING):
        v = self.raw(k, default)
        if v is None and default is _MISSING:
            raise self.fail(f"field '{k}' must not be null", k)
        return v

    def int(self, k, default=_MISSING, lo: int | None = 1) -> int:
        v = self.get(k, default)
        if not _is_int(v):
            raise self.fail(f"'{k}' must be an integer, got {_typename(v)} {v!r}", k)
        if lo is not None and v < lo:
            raise self.fail(f"'{k}' must be >= {lo}, got {v}", k)
        if v > MAX_DIM:
            raise self.fail(f"'{k}' = {v} is out of range", k)
        return v

    def pair(self, k, default=_MISSING, lo: int = 1) -> tuple[int, int]:
        v = self.get(k, default)
        vals = [v, v] if _is_int(v) else v
        if not isinstance(vals, list) or len(vals) != 2 or not all(_is_int(x) for x in vals):
            raise self.fail(f"'{k}' must be an integer or a list [h, w] of integers, got {v!r}", k)
        if any(x < lo for x in vals):
            raise self.fail(f"'{k}' must be >= {lo}, got {v!r}", k)
        if any(x > MAX_DIM for x in vals):
            raise self.fail(f"'{k}' = {v!r} is out of range", k)
        return int(vals[0]), int(vals[1])

    def pad4(self, k, default=_MISSING) -> tuple[int, int, int, int]:
        v = self.get(k, default)
        if _is_int(v):
            vals = [v] * 4
        elif isinstance(v, list) and len(v) == 2:
            vals = [v[0], v[0], v[1], v[1]]
        elif isinstance(v, list) and len(v) == 4:
            vals = list(v)
        else:
            raise self.fail(f"'{k}' must be an integer, [h, w] or [top, bottom, left, right], "
                            f"got {v!r}", k)
        if not all(_is_int(x) for x in vals):
            raise self.fail(f"'{k}' values must be integers, got {v!r}", k)
        if any(x < 0 for x in vals) or any(x > MAX_DIM for x in vals):
            raise self.fail(f"'{k}' must be non-negative, got {v!r}", k)
        return tuple(int(x) for x in vals)  # type: ignore[return-value]

    def bool(self, k, default) -> bool:
        v = self.get(k, default)
        if not isinstance(v, bool):
            raise self.fail(f"'{k}' must be true or false, got {v!r}", k)
        return v

    def choice(self, k, choices, default):
        v = self.raw(k, default)
        if v not in choices:
            shown = ", ".join("null" if c is None else str(c) for c in choices)
            raise self.fail(f"invalid {k} {v!r}{_suggest(v, choices)}; expected one of {shown}", k)
        return v

    def act(self, k="act", fused_in: str | None = None):
        """An activation (``ttmodels.activations``): a name, ``"leaky_relu(0.2)"`` or a mapping;
        ``fused_in`` ("conv", "matmul", "binary"): the kind of op it is fused into; what ttnn 0.81.1
        cannot fuse there the layer runs standalone right after the op (``activations.op_split``),
        so every activation is accepted on every op."""
        v = self.raw(k, None)
        if isinstance(v, YMap):
            v = dict(v)
        try:
            act = A.parse(v)
        except ValueError as e:
            word = v if isinstance(v, str) else None
            raise self.fail(f"invalid {k} {v!r}: {e}{_suggest(word, A.NAMES) if word else ''}",
                            k) from None
        return act

    def number(self, k, default=_MISSING, *, positive: bool = False) -> float:
        v = self.get(k, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or \
                v in (float("inf"), float("-inf")):
            raise self.fail(f"'{k}' must be a finite number, got {_typename(v)} {v!r}", k)
        if positive and v <= 0:
            raise self.fail(f"'{k}' must be > 0, got {v!r}", k)
        return float(v)

    def name(self, k, default=_MISSING):
        v = _as_name(self.raw(k, default))
        if v is None:
            return None
        if not isinstance(v, str) or not _NAME_RE.match(v):
            raise self.fail(f"'{k}' must be a name like 'bn1' or 'layer1.0.bn1', got {v!r}", k)
        return v


class _OpInput(ops.OpInput):
    """One layer as its op's ``parse`` sees it (``ttmodels.ops.base.OpInput``)."""

    def __init__(self, comp: "_Compiler", ctx: _Ctx, f: _Fields, name: str, op: str,
                 ins: list[str]):
        self.comp, self.ctx, self.f, self.name, self.op, self.ins = comp, ctx, f, name, op, ins

    def shape(self, i: int = 0) -> TensorShape:
        return self.comp.tensor_shape(self.f, self.ins[i], self.op)

    def shape_of(self, t: str) -> TensorShape:
        return self.comp.shapes[t]

    def is_constant(self, t: str) -> bool:
        return t in self.comp.constants

    def check_broadcast(self, t: str, x: TensorShape) -> None:
        self.comp.check_broadcast(self.f, self.comp.constants[t], x, self.op)

    def tensor(self, k: str) -> tuple[str, TensorShape]:
        """The tensor a field names (upsample's ``size_of``): (the reference, its shape)."""
        f = self.f
        ref = f.raw(k)
        t = self.comp.resolve(self.ctx, ref, f.src[k], k, f.layer)
        return ref, self.comp.tensor_shape(f, t, k)

    def bn(self, k: str = "bn") -> tuple[str | None, float]:
        """A folded BatchNorm: ``bn: <prefix>`` or ``bn: {name: <prefix>, eps: <eps>}`` ->
        (scoped key prefix or None, eps; ``ops.conv2d.BN_EPS`` unless given). ``name: null``
        is no BatchNorm, so that a block can switch it off by a parameter (conv_bn_act)."""
        from .ops.conv2d import BN_EPS
        v = self.f.raw(k, None)
        if not isinstance(v, YMap):
            return self.key(k, None), BN_EPS
        _check_keys(v, ("name", "eps"), f"'{k}'", self.f.layer, self.ctx.chain)
        sub = _Fields(self.comp, self.ctx, v, None, self.f.layer)
        if "name" in v and v["name"] is None:
            return None, BN_EPS
        if not sub.has("name"):
            raise self.f.fail(f"'{k}' needs a 'name' (the BatchNorm's key prefix), e.g. "
                              f"{{name: bn1, eps: 0.001}}", k)
        return self.ctx.prefix + sub.name("name"), sub.number("eps", BN_EPS, positive=True)

    def key(self, k: str = "weights", default=_MISSING) -> str | None:
        """A state-dict key prefix field (``weights:`` defaults to the layer's name), scoped by
        the enclosing block instances; None when the field is absent and ``default`` is None."""
        v = self.f.name(k, self.name if default is _MISSING else default)
        return self.ctx.prefix + v if v else None


# ---------------------------------------------------------------------------------------------
# the compiler
# ---------------------------------------------------------------------------------------------

class _Compiler:
    def __init__(self, data: YMap, source: str, base: Path, batch_size, input_size, profile):
        self.data, self.source, self.base = data, source, base
        self.batch_size, self.input_size, self.profile = batch_size, input_size, profile
        self.inputs: dict[str, TensorShape] = {}
        self.constants: dict[str, Constant] = {}
        self.nodes: list[Node] = []
        self.shapes: dict[str, TensorShape] = {}
        self.symbols: dict[str, str] = {}     # every full name -> tensor (nodes, instances, ...)
        self.defined_at: dict[str, tuple] = {}
        self.library: dict[str, dict[str, _BlockDef]] = {}   # "ttmodels/<file>" -> its blocks
        self.splits: dict[str, dict[str, str]] = {}   # split node -> {output name: its tensor}

    # ---- expressions ----------------------------------------------------------------------
    def ev(self, ctx: _Ctx, v, m, key, layer=None):
        """Substitute ``${...}`` in ``v`` (recursively) with ``ctx.params``."""
        if isinstance(v, str):
            if "${" not in v:
                return v
            try:
                return E.substitute(v, ctx.params)
            except E.ExprError as e:
                raise _err(str(e), m, key, layer, ctx.chain) from None
        if isinstance(v, YList):
            out = YList(file=v.file, line=v.line)
            for i, x in enumerate(v):
                out.append(self.ev(ctx, x, v, i, layer))
            out.item_lines = list(v.item_lines)
            return out
        if isinstance(v, YMap):
            out = YMap(file=v.file, line=v.line)
            for k, x in v.items():
                out[k] = self.ev(ctx, x, v, k, layer)
            out.key_lines = dict(v.key_lines)
            return out
        return v

    # ---- entry ----------------------------------------------------------------------------
    def run(self) -> Graph:
        if not _is_int(self.batch_size) or not 1 <= self.batch_size <= MAX_DIM:
            raise SpecError(f"batch_size must be a positive integer, got {self.batch_size!r}",
                            file=self.source)
        docs = _Documents()
        key = str((self.base / Path(self.source).name).resolve())
        top = docs.load(self.data, self.source, self.base, ((key, self.source),))
        self.blocks = docs.blocks
        tm: YMap = top["__map__"]
        ctx = _Ctx(prefix="", params={}, layout=LayoutPolicy(), precision={}, top=True)
        ctx.params = self.parse_params(ctx, top.get("params"), tm)
        self.parse_precision_defaults(ctx, top, tm)
        self.parse_inputs(top.get("inputs"), tm)
        self.parse_constants(ctx, top.get("constants"), tm)
        layers = top.get("layers")
        if layers is None:
            raise _err("the spec has no 'layers:'", tm)
        first_input = next(iter(self.inputs))
        last = self.expand(ctx, layers, first_input, (tm, "layers"))
        outputs = self.parse_outputs(ctx, top.get("outputs"), tm, last)
        name = top.get("name")
        if name is not None and not isinstance(name, str):
            raise _err("'name' must be a string", tm, "name")
        if name is None:
            name = Path(self.source).stem if not self.source.startswith("<") else "model"
        input_precision = Precision(**ctx.precision)
        ignore_weights = self.parse_ignore_weights(top.get("ignore_weights"), tm)
        return Graph(name=name, inputs=self.inputs, nodes=self.nodes, constants=self.constants,
                     outputs=outputs, source=self.source, input_precision=input_precision,
                     ignore_weights=ignore_weights)

    def parse_ignore_weights(self, value, tm: YMap) -> tuple[str, ...]:
        """Key prefixes that checkpoints for this spec carry and no layer reads (Ultralytics'
        fixed DFL buffer ``model.22.dfl.``): skipped when present, never required."""
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, YList) and not isinstance(value, str):
            raise _err("'ignore_weights' must be a key prefix or a list of them, got "
                       f"{_typename(value)}", tm, "ignore_weights")
        out = []
        for i, p in enumerate(items):
            where = (items, i) if isinstance(items, YList) else (tm, "ignore_weights")
            if not isinstance(p, str) or not p.strip(".") or not _NAME_RE.match(p.rstrip(".")):
                raise _err(f"'ignore_weights' entries are key prefixes like 'model.22.dfl.', got "
                           f"{p!r}", *where)
            out.append(p if p.endswith(".") else p + ".")
        return tuple(dict.fromkeys(out))

    # ---- top-level sections ---------------------------------------------------------------
    def parse_params(self, ctx: _Ctx, params, m) -> dict:
        if params is None:
            return {}
        if not isinstance(params, YMap):
            raise _err("'params' must be a mapping name -> value", m, "params")
        out: dict[str, Any] = {}
        for k, v in params.items():
            if not k.isidentifier():
                raise _err(f"invalid parameter name '{k}'", params, k)
            ctx.params = out
            out[k] = self.ev(ctx, v, params, k)
        return out

    def parse_precision_defaults(self, ctx: _Ctx, top: dict, tm: YMap) -> None:
        profiles = top.get("profiles")
        if profiles is not None and not isinstance(profiles, YMap):
            raise _err("'profiles' must be a mapping name -> precision", tm, "profiles")
        self.profiles: YMap = profiles if profiles is not None else YMap(file=tm.file)
        for pname, p in self.profiles.items():
            self.precision_update({}, p, self.profiles, pname, None, ctx, allow_profile=False)
        defaults = top.get("defaults")
        prec: dict = {}
        layout = LayoutPolicy()
        if defaults is not None:
            if not isinstance(defaults, YMap):
                raise _err("'defaults' must be a mapping (layout:, precision:)", tm, "defaults")
            _check_keys(defaults, DEFAULT_FIELDS, "'defaults'")
            if "precision" in defaults:
                prec = self.precision_update({}, defaults["precision"], defaults, "precision",
                                             None, ctx, allow_profile=False)
            if "layout" in defaults:
                layout = self.parse_layout(defaults["layout"], defaults, "layout", None, ctx)
        if self.profile is not None and (self.profile != "default" or "default" in self.profiles):
            if not isinstance(self.profile, str) or self.profile not in self.profiles:
                names = ", ".join(["default", *self.profiles]) if self.profiles else "default"
                raise SpecError(f"unknown precision profile {self.profile!r}"
                                f"{_suggest(self.profile, list(self.profiles))}; this spec has: "
                                f"{names}", file=self.source, line=self.profiles.line)
            prec = self.precision_update(prec, self.profiles[self.profile], self.profiles,
                                         self.profile, None, ctx, allow_profile=False)
        ctx.precision, ctx.layout = prec, layout

    def precision_update(self, base: dict, v, m, key, layer, ctx: _Ctx, allow_profile=True) -> dict:
        v = self.ev(ctx, v, m, key, layer)
        if v is None:
            return base
        if isinstance(v, str) and allow_profile:
            if v not in self.profiles:
                raise _err(f"unknown precision profile '{v}'{_suggest(v, list(self.profiles))}",
                           m, key, layer, ctx.chain)
            return self.precision_update(base, self.profiles[v], self.profiles, v, layer, ctx,
                                         allow_profile=False)
        if not isinstance(v, YMap):
            raise _err(f"'precision' must be a mapping ({', '.join(PRECISION_FIELDS)})"
                       f"{' or a profile name' if allow_profile else ''}, got {_typename(v)}",
                       m, key, layer, ctx.chain)
        out = dict(base)
        for k, x in v.items():
            if k not in PRECISION_FIELDS:
                raise _err(f"unknown precision field '{k}'{_suggest(k, PRECISION_FIELDS)}; "
                           f"allowed: {', '.join(PRECISION_FIELDS)}", v, k, layer, ctx.chain)
            if k in ("weights", "activations"):
                if x not in DTYPES:
                    raise _err(f"invalid dtype {x!r}{_suggest(x, DTYPES)}; expected one of "
                               f"{', '.join(DTYPES)}", v, k, layer, ctx.chain)
            elif k == "math_fidelity":
                fix = {f.lower(): f for f in MATH_FIDELITIES}
                if not isinstance(x, str) or x.lower() not in fix:
                    raise _err(f"invalid math fidelity {x!r}{_suggest(x, MATH_FIDELITIES)}; "
                               f"expected one of {', '.join(MATH_FIDELITIES)}", v, k, layer,
                               ctx.chain)
                x = fix[x.lower()]
            elif not isinstance(x, bool):
                raise _err(f"'fp32_accum' must be true or false, got {x!r}", v, k, layer, ctx.chain)
            out[k] = x
        return out

    def parse_layout(self, v, m, key, layer, ctx: _Ctx) -> LayoutPolicy:
        v = self.ev(ctx, v, m, key, layer)

        def bad(msg, mm=m, kk=key):
            return _err(msg, mm, kk, layer, ctx.chain)

        if isinstance(v, str):
            toks = v.split()
            if not toks:
                raise bad("empty layout")
            kind, buffer, grid = toks[0], None, None
            for t in toks[1:]:
                if t in BUFFERS:
                    buffer = t
                elif re.fullmatch(r"-?\d+x-?\d+", t):
                    gx, gy = t.split("x")
                    grid = [int(gx), int(gy)]
                else:
                    raise bad(f"invalid layout token '{t}' in '{v}': expected a buffer "
                              f"({', '.join(BUFFERS)}) or a grid like 8x8")
            mm, kk = m, key
        elif isinstance(v, YMap):
            _check_keys(v, LAYOUT_FIELDS, "layout", layer, ctx.chain)
            kind, buffer, grid = v.get("kind", "auto"), v.get("buffer"), v.get("grid")
            mm, kk = v, None
        else:
            raise bad(f"layout must be a string like 'height_sharded l1' or a mapping "
                      f"(kind, buffer, grid), got {_typename(v)}")
        if kind not in LAYOUT_KINDS:
            raise bad(f"invalid layout {kind!r}{_suggest(kind, LAYOUT_KINDS)}; expected one of "
                      f"{', '.join(LAYOUT_KINDS)}", mm, "kind" if kk is None and "kind" in mm else kk)
        if buffer is not None and buffer not in BUFFERS:
            raise bad(f"invalid buffer {buffer!r}{_suggest(buffer, BUFFERS)}; expected "
                      f"{' or '.join(BUFFERS)}", mm, "buffer" if kk is None else kk)
        if grid is not None:
            gk = "grid" if kk is None else kk
            if not (isinstance(grid, list) and len(grid) == 2 and all(_is_int(g) for g in grid)):
                raise bad(f"shard grid must be [x, y] integers, got {grid!r}", mm, gk)
            if not all(1 <= g <= MAX_GRID for g in grid):
                raise bad(f"impossible shard grid {grid[0]}x{grid[1]}: each side must be 1.."
                          f"{MAX_GRID} cores", mm, gk)
            if kind in ("interleaved", "auto"):
                raise bad(f"a core grid only applies to sharded layouts, not '{kind}'", mm, gk)
            grid = (int(grid[0]), int(grid[1]))
        return LayoutPolicy(kind=kind, buffer=buffer, grid=grid)

    def parse_inputs(self, inputs, tm: YMap) -> None:
        if inputs is None:
            raise _err("the spec has no 'inputs:'", tm)
        if not isinstance(inputs, YMap) or not inputs:
            raise _err("'inputs' must be a mapping name -> {channels, size}", tm, "inputs")
        override = self.input_size
        if override is not None:
            if _is_int(override):
                override = (override, override)
            if not (isinstance(override, (tuple, list)) and len(override) == 2 and
                    all(_is_int(x) and 1 <= x <= MAX_DIM for x in override)):
                raise SpecError(f"input_size must be (H, W) positive integers, got "
                                f"{self.input_size!r}", file=self.source)
        for name, d in inputs.items():
            if not _NAME_RE.match(name):
                raise _err(f"invalid input name '{name}'", inputs, name)
            if not isinstance(d, YMap):
                raise _err(f"input '{name}' must be a mapping {{channels, size, divisible_by}}",
                           inputs, name)
            _check_keys(d, INPUT_FIELDS, f"input '{name}'", name)
            ctx = _Ctx(prefix="", params={}, layout=LayoutPolicy(), precision={}, top=True)
            f = _Fields(self, ctx, d, None, name)
            c = f.int("channels")
            h, w = f.pair("size") if override is None else (int(override[0]), int(override[1]))
            dv = f.pair("divisible_by", 1)
            if h % dv[0] or w % dv[1]:
                raise _err(f"input size {h}x{w} of '{name}' is not divisible by "
                           f"{dv[0] if dv[0] == dv[1] else list(dv)} as the spec requires",
                           d, "divisible_by", name)
            self.inputs[name] = TensorShape(self.batch_size, h, w, c)
            self.define(name, name, d, None, None, (), unique=True)
            self.shapes[name] = self.inputs[name]

    def parse_constants(self, ctx: _Ctx, consts, tm: YMap) -> None:
        if consts is None:
            return
        if not isinstance(consts, YMap):
            raise _err("'constants' must be a mapping name -> {shape, value | weights}, got "
                       f"{_typename(consts)}", tm, "constants")
        for name, d in consts.items():
            if not _NAME_RE.match(name):
                raise _err(f"invalid constant name '{name}'", consts, name)
            if not isinstance(d, YMap):
                raise _err(f"constant '{name}' must be a mapping {{shape, value | weights}}",
                           consts, name, name)
            _check_keys(d, CONSTANT_FIELDS, f"constant '{name}'", name)
            f = _Fields(self, ctx, d, None, name)
            shape = f.get("shape")
            if _is_int(shape):
                shape = [shape]
            if not isinstance(shape, list) or not 1 <= len(shape) <= 4 or \
                    not all(_is_int(s) and 1 <= s <= MAX_DIM for s in shape):
                raise f.fail(f"constant shape must be a list of 1 to 4 positive integers, "
                             f"got {shape!r}", "shape")
            has_v, has_w = "value" in d, "weights" in d
            if has_v == has_w:
                raise f.fail(f"constant '{name}' needs exactly one of 'value' or 'weights'")
            value = weights = None
            if has_v:
                value = f.get("value")
                numel = 1
                for s in shape:
                    numel *= s
                if isinstance(value, bool) or not (isinstance(value, (int, float)) or
                                                   isinstance(value, list)):
                    raise f.fail(f"constant value must be a number or a list, got {value!r}",
                                 "value")
                if isinstance(value, list):
                    flat = _flatten_numbers(value)
                    if flat is None:
                        raise f.fail("constant value must contain only numbers", "value")
                    if len(flat) != numel:
                        raise f.fail(f"constant value has {len(flat)} numbers, shape {shape} "
                                     f"needs {numel}", "value")
                    value = [float(x) for x in value] if all(
                        isinstance(x, (int, float)) for x in value) else _to_lists(value)
                else:
                    value = float(value)
            else:
                weights = f.get("weights")
                if not isinstance(weights, str) or not weights:
                    raise f.fail("constant 'weights' must be a state-dict key", "weights")
            dtype = f.choice("dtype", DTYPES, "bfloat16")
            self.constants[name] = Constant(name=name, shape=tuple(int(s) for s in shape),
                                            value=value, weights=weights, dtype=dtype,
                                            loc=SourceLoc(d.file, d.line))
            self.define(name, name, consts, name, None, (), unique=True)

    def parse_outputs(self, ctx: _Ctx, outs, tm: YMap, last: str) -> list[str]:
        pairs: list[tuple[str | None, str, Any, Any]] = []   # (alias, ref, map, key)
        if outs is None:
            self.check_single(last, last, tm, "layers", None, ctx)
            return [last]
        if isinstance(outs, str):
            pairs.append((None, outs, tm, "outputs"))
        elif isinstance(outs, YMap):
            for k, v in outs.items():
                pairs.append((k, v, outs, k))
        elif isinstance(outs, YList):
            for i, v in enumerate(outs):
                if isinstance(v, YMap) and len(v) == 1:
                    (k, r), = v.items()
                    pairs.append((k, r, outs, i))
                else:
                    pairs.append((None, v, outs, i))
        else:
            raise _err("'outputs' must be a name, a list or a mapping name -> layer", tm, "outputs")
        if not pairs:
            raise _err("'outputs' is empty", tm, "outputs")
        result: list[str] = []
        rename: dict[str, str] = {}
        for alias, ref, m, key in pairs:
            ref = self.ev(ctx, ref, m, key)
            if not isinstance(ref, str):
                raise _err(f"an output must name a layer, got {_typename(ref)}", m, key)
            tensor = self.resolve(ctx, ref, m, key, None)
            if tensor in self.constants:
                raise _err(f"output '{ref}' is a constant, not a layer", m, key)
            if alias is not None and alias != tensor:
                if not _NAME_RE.match(alias):
                    raise _err(f"invalid output name '{alias}'", m, key)
                if tensor in self.inputs:
                    raise _err(f"graph input '{tensor}' cannot be renamed to '{alias}'", m, key)
                if tensor in rename:
                    raise _err(f"'{ref}' is already the output '{rename[tensor]}'", m, key)
                taken = alias in self.shapes or alias in self.constants or \
                    alias in rename.values()
                if taken:
                    raise _err(f"output name '{alias}' is already the name of another tensor",
                               m, key)
                rename[tensor] = alias
                tensor_name = alias
            else:
                tensor_name = tensor
            if tensor_name in result:
                raise _err(f"output '{tensor_name}' is listed twice", m, key)
            result.append(tensor_name)
        if rename:
            for n in self.nodes:
                n.name = rename.get(n.name, n.name)
                n.inputs = [rename.get(i, i) for i in n.inputs]
                if n.outputs:
                    n.outputs = {rename.get(t, t): s for t, s in n.outputs.items()}
        return result

    # ---- names ----------------------------------------------------------------------------
    def define(self, full: str, tensor: str, m, key, layer, chain, unique=False) -> None:
        """Register a full name. Inputs, constants and nodes must be new names; instance names
        may be registered again for the same tensor."""
        if full in self.symbols and (unique or self.symbols[full] != tensor):
            f, ln = self.defined_at.get(full, ("?", None))
            raise _err(f"duplicate name '{full}' (already defined at {f}:{ln})", m, key, layer,
                       chain)
        self.symbols[full] = tensor
        self.defined_at[full] = _where(m, key)

    def resolve(self, ctx: _Ctx, ref, m, key, layer) -> str:
        t = self._resolve(ctx, ref, m, key, layer)
        self.check_single(t, ref, m, key, layer, ctx)
        return t

    def check_single(self, t: str, ref, m, key, layer, ctx: _Ctx) -> None:
        """A split's value is its named outputs: the layer itself is no tensor to read."""
        if t in self.splits:
            outs = ", ".join(f"{ref}.{k}" for k in self.splits[t])
            raise _err(f"'{ref}' is a split with named outputs: use one of {outs}", m, key, layer,
                       ctx.chain)

    def _resolve(self, ctx: _Ctx, ref, m, key, layer) -> str:
        if not isinstance(ref, str) or not ref:
            raise _err(f"a layer reference must be a name, got {_typename(ref)} {ref!r}", m, key,
                       layer, ctx.chain)
        if ref in ctx.local:
            return ctx.local[ref]
        if ctx.top and ref in self.symbols:
            return self.symbols[ref]
        if ref in self.constants:
            return ref
        if ref == ctx.current:
            raise _err(f"layer '{ref}' refers to itself (cycle)", m, key, layer, ctx.chain)
        if ref in ctx.later:
            raise _err(f"'{ref}' is defined later; a layer can only use earlier layers "
                       "(this would be a cycle or a forward reference)", m, key, layer, ctx.chain)
        if ref in ctx.skipped:
            raise _err(f"'{ref}' is switched off by its 'when:' here", m, key, layer, ctx.chain)
        head, _, tail = ref.rpartition(".")
        owner = ctx.local.get(head) or (self.symbols.get(head) if ctx.top else None)
        if head and owner in self.splits:
            names = list(self.splits[owner])
            raise _err(f"split '{head}' has no output '{tail}'{_suggest(tail, names)}; its "
                       f"outputs: {', '.join(names)}", m, key, layer, ctx.chain)
        known = list(ctx.local) + list(self.constants) + (list(self.symbols) if ctx.top else [])
        raise _err(f"unknown layer '{ref}'{_suggest(ref, known)}", m, key, layer, ctx.chain)

    # ---- layers ---------------------------------------------------------------------------
    def expand(self, ctx: _Ctx, layers, default_in: str | None, where: tuple[YMap, str]) -> str:
        """``where``: the mapping holding ``layers`` and its key (a scalar has no line)."""
        if not isinstance(layers, YList):
            raise _err(f"'layers' must be a list of layers, got {_typename(layers)}", *where,
                       None, ctx.chain)
        if not layers:
            raise _err("'layers' is empty", layers, None, None, ctx.chain)
        names: list[str | None] = []
        for item in layers:
            n = item.get("name") if isinstance(item, YMap) else None
            if isinstance(n, str) and "${" in n:
                try:
                    n = _as_name(E.substitute(n, ctx.params))
                except E.ExprError:
                    n = None
            names.append(n if isinstance(n, str) else None)
        prev = default_in
        for i, item in enumerate(layers):
            ctx.later = {n for n in names[i + 1:] if n is not None}
            if not isinstance(item, YMap):
                raise _err(f"a layer must be a mapping (name:, op: or block:, ...), got "
                           f"{_typename(item)}", layers, i, None, ctx.chain)
            prev = self.layer(ctx, item, prev)
        ctx.later = set()
        return prev

    def layer(self, ctx: _Ctx, m: YMap, prev: str | None) -> str:
        if "name" not in m:
            raise _err("layer has no 'name'", m, None, None, ctx.chain)
        name = _as_name(self.ev(ctx, m["name"], m, "name"))
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise _err(f"invalid layer name {name!r}: use letters, digits, '_', '-', joined by "
                       "dots", m, "name", None, ctx.chain)
        full = ctx.prefix + name
        has_op, has_block = "op" in m, "block" in m
        if has_op and has_block:
            raise _err("a layer has either 'op' or 'block', not both", m, "block", full, ctx.chain)
        if not has_op and not has_block:
            raise _err(f"layer needs 'op' ({', '.join(OPS)}) or 'block'", m, None, full, ctx.chain)
        if "when" in m:
            w = self.ev(ctx, m["when"], m, "when", full)
            if not isinstance(w, bool):
                raise _err(f"'when' must be true or false, got {w!r}", m, "when", full, ctx.chain)
            if not w:
                ctx.skipped.add(name)
                return prev  # type: ignore[return-value]
        if name in ctx.block_inputs:
            what = ("the block's implicit input (a block without 'inputs:' reads one input, "
                    f"named '{name}')") if ctx.implicit_inputs else "one of the block's inputs"
            raise _err(f"layer name '{name}' is taken: '{name}' is {what}; rename the layer", m,
                       "name", full, ctx.chain)
        if name in ctx.local:
            f, ln = ctx.local_where.get(name, ("?", None))
            raise _err(f"duplicate layer name '{name}' (first defined at {f}:{ln})", m, "name",
                       full, ctx.chain)
        repeat = self.ev(ctx, m.get("repeat", 1), m, "repeat", full)
        if not _is_int(repeat) or not 1 <= repeat <= MAX_REPEAT:
            raise _err(f"'repeat' must be an integer 1..{MAX_REPEAT}, got {repeat!r}", m,
                       "repeat", full, ctx.chain)
        start, fmt = self.repeat_naming(ctx, m, full, name)
        first = m.get("first")
        if first is not None and not isinstance(first, YMap):
            raise _err(f"'first' must be a mapping of fields for the first repeat, got "
                       f"{_typename(first)}", m, "first", full, ctx.chain)
        if first is not None:
            bad = [k for k in first if k in STRUCTURAL]
            if bad:
                raise _err(f"'first' cannot override '{bad[0]}'", first, bad[0], full, ctx.chain)
        ctx.current = name

        if has_op:
            op = self.ev(ctx, m["op"], m, "op", full)
            if op not in OPS:
                raise _err(f"unknown op {op!r}{_suggest(op, OPS)}; ops: {', '.join(OPS)}", m, "op",
                           full, ctx.chain)
            allowed = COMMON + OP_FIELDS[op]
            _check_keys(m, allowed, f"a {op} layer", full, ctx.chain)
            if first is not None:
                _check_keys(first, allowed, f"'first' of a {op} layer", full, ctx.chain)
        else:
            bname = self.ev(ctx, m["block"], m, "block", full)
            bdef = self.find_block(ctx, bname, m, full)
            allowed = INSTANCE + tuple(p for p, _ in bdef.params)
            _check_keys(m, allowed, f"an instance of block '{bname}'", full, ctx.chain)
            if first is not None:
                _check_keys(first, allowed, f"'first' of an instance of block '{bname}'", full,
                            ctx.chain)

        out = prev
        # With 'repeat:' (even 1) instances are indexed like an nn.Sequential: name.0, name.1 ...
        indexed = "repeat" in m
        for r in range(repeat):
            sub = fmt.format(name=name, i=start + r) if indexed else name
            fl = _Fields(self, ctx, m, first if r == 0 else None, ctx.prefix + sub)
            # Repeats form a chain: only the first one reads 'in'.
            ins = self.layer_inputs(ctx, fl, prev) if r == 0 else [out]
            if has_op:
                out = self.make_op(ctx, fl, sub, op, ins)
            else:
                out = self.instantiate(ctx, fl, sub, bdef, ins, start + r if indexed else None)
            if indexed:
                ctx.local[sub] = out
                ctx.local_where[sub] = _where(m, "name")
                self.define(ctx.prefix + sub, out, m, "name", ctx.prefix + sub, ctx.chain)
        ctx.local[name] = out  # type: ignore[assignment]
        ctx.local_where[name] = _where(m, "name")
        self.define(full, out, m, "name", full, ctx.chain)  # type: ignore[arg-type]
        ctx.current = None
        return out  # type: ignore[return-value]

    def repeat_naming(self, ctx: _Ctx, m: YMap, full: str, name: str) -> tuple[int, str]:
        """``repeat_start`` (first index, default 0) and ``repeat_name`` (the repeats' names, a
        pattern of ``{name}`` and ``{i}``, default ``{name}.{i}``): torchvision's densenet counts
        ``denselayer1..``, regnet names ``block2-0..``."""
        for k in ("repeat_start", "repeat_name"):
            if k in m and "repeat" not in m:
                raise _err(f"'{k}' needs 'repeat'", m, k, full, ctx.chain)
        start = self.ev(ctx, m.get("repeat_start", 0), m, "repeat_start", full)
        if not _is_int(start) or not 0 <= start <= MAX_DIM:
            raise _err(f"'repeat_start' must be an integer >= 0, got {start!r}", m,
                       "repeat_start", full, ctx.chain)
        fmt = self.ev(ctx, m.get("repeat_name", REPEAT_NAME), m, "repeat_name", full)
        try:
            ok = isinstance(fmt, str) and "{i}" in fmt and \
                bool(_NAME_RE.match(fmt.format(name=name, i=start)))
        except (KeyError, IndexError, ValueError):
            ok = False
        if not ok:
            raise _err(f"'repeat_name' must be a name pattern with '{{i}}' (and optionally "
                       f"'{{name}}'), e.g. \"{{name}}.denselayer{{i}}\", got {fmt!r}", m,
                       "repeat_name", full, ctx.chain)
        return start, fmt

    def find_block(self, ctx: _Ctx, bname, m: YMap, full: str) -> _BlockDef:
        """A block by name: ``ttmodels/<file>/<block>`` (a shipped block, no import needed), else
        the enclosing library block's own table, else the spec's blocks (its own + imported)."""
        if isinstance(bname, str) and bname.startswith(registry.SHIPPED_PREFIX) and \
                "/" in bname[len(registry.SHIPPED_PREFIX):]:
            file, _, short = bname.rpartition("/")
            shipped = sorted(registry.SHIPPED_PREFIX + q.stem
                             for q in registry.BLOCKS_DIR.glob("*.yaml"))
            if file not in shipped:
                raise _err(f"unknown block file '{file}' in block '{bname}'"
                           f"{_suggest(file, shipped)}; shipped block files: {', '.join(shipped)} "
                           "(user files are imported with 'imports:')", m, "block", full,
                           ctx.chain)
            table = self.library_blocks(file, m)
            if short not in table:
                raise _err(f"unknown block '{short}' in '{file}'{_suggest(short, list(table))}; "
                           f"it defines: {', '.join(sorted(table)) or 'nothing'}", m, "block",
                           full, ctx.chain)
            return table[short]
        if isinstance(bname, str) and ctx.blocks is not None and bname in ctx.blocks:
            return ctx.blocks[bname]
        if not isinstance(bname, str) or bname not in self.blocks:
            raise _err(f"unknown block {bname!r}{_suggest(bname, list(self.blocks))}; "
                       f"known blocks: {', '.join(sorted(self.blocks)) or 'none'} "
                       "(did you import the file that defines it? shipped blocks can also be "
                       "named as ttmodels/<file>/<block>)", m, "block", full, ctx.chain)
        return self.blocks[bname]

    def library_blocks(self, file: str, m: YMap) -> dict[str, _BlockDef]:
        """The blocks of shipped file ``ttmodels/<file>`` (with its imports), loaded once, each
        bound to that table. A missing file is reported at the layer's 'block:' line."""
        if file not in self.library:
            line = m.line_of("block")
            imports = YList([file], file=m.file, line=line)
            imports.item_lines.append(line)
            holder = YMap(file=m.file, line=m.line)
            holder["imports"] = imports
            holder.key_lines["imports"] = line
            docs = _Documents()
            docs.load_imports(holder, m.file, registry.BLOCKS_DIR, ())
            for bdef in docs.blocks.values():
                bdef.table, bdef.key = docs.blocks, f"{file}/{bdef.name}"
            self.library[file] = docs.blocks
        return self.library[file]

    def layer_inputs(self, ctx: _Ctx, f: _Fields, prev: str | None) -> list[str]:
        if "in" not in f.src:
            if prev is None:
                raise f.fail("layer has no 'in' and there is no previous layer")
            if prev in self.splits:
                outs = ", ".join(f"{prev}.{k}" for k in self.splits[prev])
                raise f.fail(f"layer has no 'in' and the previous layer '{prev}' is a split: "
                             f"name one of its outputs ({outs})")
            return [prev]
        raw = f.raw("in")
        refs = [raw] if isinstance(raw, str) else raw
        if not isinstance(refs, list) or not refs:
            raise f.fail(f"'in' must be a layer name or a list of names, got {raw!r}", "in")
        m = f.src["in"]
        return [self.resolve(ctx, r, m, "in", f.layer) for r in refs]

    def instantiate(self, ctx: _Ctx, f: _Fields, name: str, bdef: _BlockDef,
                    ins: list[str], index: int | None) -> str:
        full = ctx.prefix + name
        key = bdef.key or bdef.name
        if key in ctx.stack:
            raise f.fail(f"block '{bdef.name}' instantiates itself (recursion: "
                         f"{' -> '.join(ctx.stack + (key,))})", "block")
        if len(ctx.stack) >= MAX_BLOCK_DEPTH:
            raise f.fail(f"blocks are nested more than {MAX_BLOCK_DEPTH} levels deep", "block")
        if len(ins) != len(bdef.inputs):
            raise f.fail(f"block '{bdef.name}' takes {len(bdef.inputs)} input(s) "
                         f"({', '.join(bdef.inputs)}), got {len(ins)}", "in")
        bd = bdef.data
        params_map = bd.get("params") if isinstance(bd.get("params"), YMap) else YMap()
        chain = (f"in '{full}', an instance of block '{bdef.name}' at "
                 f"{_where(f.m)[0]}:{_where(f.m)[1]}",) + ctx.chain
        child = _Ctx(prefix="", params={}, layout=ctx.layout, precision=ctx.precision, top=False,
                     chain=chain, stack=ctx.stack + (key,), instance=full,
                     blocks=bdef.table if bdef.table is not None else ctx.blocks)
        params: dict[str, Any] = {}
        for p, default in bdef.params:
            if p in f.src:
                params[p] = f.raw(p)
            elif default == REQUIRED:
                raise f.fail(f"block '{bdef.name}' needs parameter '{p}'")
            else:
                child.params = params
                params[p] = self.ev(child, default, params_map, p, full)
        child.params = params
        if f.has("layout"):
            child.layout = self.parse_layout(f.src["layout"]["layout"], f.src["layout"], "layout",
                                             full, ctx)
        if f.has("precision"):
            child.precision = self.precision_update(ctx.precision, f.src["precision"]["precision"],
                                                    f.src["precision"], "precision", full, ctx)
        scope = f.raw("scope", None)
        if scope is None:
            child.prefix = full + "."
        elif scope == "":
            child.prefix = ctx.prefix
        elif isinstance(scope, str) and _NAME_RE.match(scope):
            child.prefix = ctx.prefix + scope + "."
        else:
            raise f.fail(f"'scope' must be a name or \"\" (no prefix), got {scope!r}", "scope")
        if scope is not None and index is not None:
            # Repeated instances with an explicit scope still need distinct prefixes.
            child.prefix += f"{index}."
        child.block_inputs = tuple(bdef.inputs)
        child.implicit_inputs = "inputs" not in bd
        for inp, t in zip(bdef.inputs, ins):
            child.local[inp] = t
            child.local_where[inp] = _where(bd, "inputs")
        last = self.expand(child, bd.get("layers"), ins[0], (bd, "layers"))
        # Block outputs: the first is the instance's value, all are "<instance>.<name>".
        outs = bd.get("outputs")
        pairs: list[tuple[str, Any, Any, Any]] = []
        if outs is None:
            pairs = []
        elif isinstance(outs, str):
            pairs = [(outs, outs, bd, "outputs")]
        elif isinstance(outs, YList):
            pairs = [(o, o, outs, i) for i, o in enumerate(outs)]
        elif isinstance(outs, YMap):
            pairs = [(k, v, outs, k) for k, v in outs.items()]
        else:
            raise _err(f"'outputs' of block '{bdef.name}' must be a name, list or mapping",
                       bd, "outputs", full, chain)
        value = last
        outputs: dict[str, str] = {}
        for i, (alias, ref, m, key) in enumerate(pairs):
            ref = self.ev(child, ref, m, key, full)
            if not isinstance(alias, str) or not _NAME_RE.match(alias):
                raise _err(f"invalid block output name {alias!r}", m, key, full, chain)
            t = self.resolve(child, ref, m, key, full)
            if i == 0:
                value = t
            outputs[alias] = t
            ctx.local[f"{name}.{alias}"] = t
            self.define(f"{full}.{alias}", t, m, key, full, chain)
        if scope:
            # Its layers are named under the scope (trunk_output.block2.conv), so the scope's name
            # (trunk_output.block2) is the instance too, unless something else already has it.
            rel = child.prefix[len(ctx.prefix):-1]
            if rel not in ctx.local and ctx.prefix + rel not in self.symbols:
                for suffix, t in [("", value)] + [(f".{a}", t) for a, t in outputs.items()]:
                    ctx.local[rel + suffix] = t
                    ctx.local_where[rel + suffix] = _where(f.m, "scope")
                    self.define(ctx.prefix + rel + suffix, t, f.m, "scope", full, chain)
        return value

    # ---- ops ------------------------------------------------------------------------------
    def tensor_shape(self, f: _Fields, t: str, op: str) -> TensorShape:
        if t in self.constants:
            raise f.fail(f"constant '{t}' cannot be an input of {op} (only of "
                         f"{'/'.join(BINARY)})", "in")
        return self.shapes[t]

    def make_op(self, ctx: _Ctx, f: _Fields, name: str, op: str, ins: list[str]) -> str:
        full = ctx.prefix + name
        if len(self.nodes) >= MAX_GRAPH_NODES:
            raise f.fail(f"the graph has more than {MAX_GRAPH_NODES} layers")
        d = ops.get(op)
        n_in = len(ins)
        for t in ins:          # e.g. a repeated split: its repeats would read the split itself
            if t in self.splits:
                outs = ", ".join(self.splits[t].values())
                raise f.fail(f"'{t}' is a split with named outputs: read one of {outs}", "in")
        if d.arity == "2+":
            if n_in < 2:
                raise f.fail(f"{op} takes 2 or more inputs, got {n_in}", "in")
        elif n_in != d.arity:
            raise f.fail(f"{op} takes {d.arity} input{'s' if d.arity != 1 else ''}, got {n_in}",
                         "in")
        parsed = d.parse(_OpInput(self, ctx, f, name, op, ins))
        attrs, shape, weights, bn = parsed.attrs, parsed.shape, parsed.weights, parsed.bn
        if max(shape.h, shape.w, shape.c) > MAX_DIM:
            raise f.fail(f"output shape {shape} is out of range")

        layout = ctx.layout
        if f.has("layout"):
            layout = self.parse_layout(f.src["layout"]["layout"], f.src["layout"], "layout", full,
                                       ctx)
        prec = ctx.precision
        if f.has("precision"):
            prec = self.precision_update(prec, f.src["precision"]["precision"], f.src["precision"],
                                         "precision", full, ctx)
        node = Node(name=full, op=op, inputs=list(ins), attrs=attrs, shape=shape, layout=layout,
                    precision=Precision(**prec), loc=SourceLoc(f.m.file, f.m.line),
                    weights=weights, bn=bn, block=ctx.instance)
        self.define(full, full, f.m, "name", full, ctx.chain, unique=True)
        if parsed.outputs:
            # named outputs (split): each is a tensor of its own, ``<layer>.<output>`` in this
            # scope, defined at the op's field that names them (``Parsed.outputs_field``)
            self.splits[full] = {}
            for out_name, out_shape in parsed.outputs:
                t = f"{full}.{out_name}"
                self.define(t, t, f.src.get(parsed.outputs_field, f.m), parsed.outputs_field,
                            full, ctx.chain, unique=True)
                node.outputs[t] = out_shape
                self.shapes[t] = out_shape
                self.splits[full][out_name] = t
                ctx.local[f"{name}.{out_name}"] = t
                ctx.local_where[f"{name}.{out_name}"] = _where(f.m, "name")
        self.nodes.append(node)
        self.shapes[full] = shape
        return full

    def check_broadcast(self, f: _Fields, c: Constant, x: TensorShape, op: str) -> None:
        numel = 1
        for s in c.shape:
            numel *= s
        if numel == 1:
            return
        ok = False
        if len(c.shape) == 1:
            ok = c.shape[0] == x.c
        elif len(c.shape) in (3, 4):
            full = x.nhwc[-len(c.shape):]
            ok = all(a in (1, b) for a, b in zip(c.shape, full))
        if not ok:
            raise f.fail(f"constant '{c.name}' of shape {list(c.shape)} does not broadcast to "
                         f"{x} (NHWC): use [C] = [{x.c}], a single value, [H, W, C] or "
                         f"[N, H, W, C]", "in")


def _flatten_numbers(v):
    out = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(x)
        else:
            return None
    return out


def _to_lists(v):
    return [_to_lists(x) for x in v] if isinstance(v, list) else float(v)
