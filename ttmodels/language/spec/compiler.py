"""The compiler: a spec -> a validated, shape-inferred ``Graph`` (``load_graph``). Its top-level
sections are in ``sections.py``, layer lists and blocks in ``expansion.py``.
"""
from __future__ import annotations

from pathlib import Path

from .. import expr as E
from .. import registry
from .._yaml import YList, YMap
from ...errors import SpecError
from ... import ops
from ...ops import BINARY
from ..graph import AUTO_OPS, Constant, Graph, LayoutPolicy, Node, Precision, SourceLoc, TensorShape
from .documents import _BlockDef, _Documents
from .expansion import _Expansion
from .fields import _Ctx, _Fields, _OpInput
from .precision_notes import warn_precision, warn_unresolved_auto
from .schema import MAX_DIM, MAX_GRAPH_NODES, _err, _is_int, _suggest, _typename, _where
from .sections import _Sections


def load_graph(spec, *, batch_size: int | None = None, input_size=None,
               profile: str | None = None) -> Graph:
    """Parse, expand and validate ``spec`` into a shape-inferred Graph.

    ``spec``: a shipped or registered config name ("resnet50"), a path (str or Path), YAML text or
    a dict (never modified). ``input_size=(H, W)`` overrides the spec's default input size;
    ``profile`` selects a named precision profile of the spec ("default" = the spec's defaults).
    ``batch_size``: None = the batch the spec declares (``batch:``), else 1.
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
# the compiler
# ---------------------------------------------------------------------------------------------

class _Compiler(_Sections, _Expansion):
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
        self.renamed_from: dict[str, str] = {}        # output name -> its layer's own name

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
        if self.batch_size is not None and (
                not _is_int(self.batch_size) or not 1 <= self.batch_size <= MAX_DIM):
            raise SpecError(f"batch_size must be a positive integer, got {self.batch_size!r}",
                            file=self.source)
        docs = _Documents()
        key = str((self.base / Path(self.source).name).resolve())
        top = docs.load(self.data, self.source, self.base, ((key, self.source),))
        self.blocks = docs.blocks
        tm: YMap = top["__map__"]
        batch = self.parse_batch(top.get("batch"), tm)
        ctx = _Ctx(prefix="", params={}, layout=LayoutPolicy(), precision={}, top=True)
        ctx.params = self.parse_params(ctx, top.get("params"), tm)
        self.parse_precision_defaults(ctx, top, tm)
        self.resolved = self.parse_resolved_precision(top.get("resolved_precision"), tm, ctx)
        self.resolved_used: set[str] = set()
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
        input_precision = Precision(**{k: v for k, v in ctx.precision.items() if k != "auto"})
        self.apply_resolved(self.nodes)
        self.check_resolved()
        ignore_weights = self.parse_ignore_weights(top.get("ignore_weights"), tm)
        graph = Graph(name=name, inputs=self.inputs, nodes=self.nodes, constants=self.constants,
                      outputs=outputs, source=self.source, input_precision=input_precision,
                      ignore_weights=ignore_weights, batch=batch)
        warn_precision(graph)
        warn_unresolved_auto(graph)
        return graph

    def check_resolved(self) -> None:
        """Every ``resolved_precision`` entry names a layer of the graph (an entry for a layer
        that is not under ``precision: auto`` in this profile is not applied)."""
        names = {n.name: n for n in self.nodes}
        names.update({own: names[final] for final, own in
                      self.renamed_from.items() if final in names})
        for name, (_, m) in self.resolved.items():
            n = names.get(name)
            if n is None:
                raise _err(f"resolved_precision: no layer '{name}' in this spec"
                           f"{_suggest(name, list(names))}", m, name)
            if name not in self.resolved_used and n.op not in AUTO_OPS:
                raise _err(f"resolved_precision: layer '{name}' is a {n.op}; precision planning "
                           f"chooses for {', '.join(AUTO_OPS)} only", m, name)

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
        precision, auto = self.node_precision(prec, full, op)
        node = Node(name=full, op=op, inputs=list(ins), attrs=attrs, shape=shape, layout=layout,
                    precision=precision, loc=SourceLoc(f.m.file, f.m.line),
                    weights=weights, bn=bn, block=ctx.instance, auto=auto)
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
