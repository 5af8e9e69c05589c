"""Layer lists: block instances expanded, ``repeat``, ``when:``, library blocks (a part of
``_Compiler``).
"""
from __future__ import annotations

from typing import Any

from .. import expr as E
from .. import registry
from .._yaml import YList, YMap
from ...ops import OPS
from .documents import _BlockDef, _Documents
from .fields import _Ctx, _Fields
from .schema import (COMMON, INSTANCE, MAX_BLOCK_DEPTH, MAX_DIM, MAX_REPEAT, OP_FIELDS, REPEAT_NAME,
                     REQUIRED, STRUCTURAL, _NAME_RE, _as_name, _check_keys, _err, _is_int, _suggest,
                     _typename, _where)


class _Expansion:
    """Layer lists and block instances, for ``_Compiler`` (``compiler.py``)."""

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
