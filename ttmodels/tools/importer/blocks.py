"""Block and repeat detection: module classes with several instances become blocks (what
differs between instances becomes a parameter, a layer only some have gets ``when:``), chains of
equal instances ``repeat``.
"""
from __future__ import annotations

import inspect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .intermediate import Layer, Traced, _MissingT
from .library import LIBRARY_BLOCKS
from .where import _short_path


_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


@dataclass
class _Entry:
    name: str                    # full name
    kind: str                    # "op" | "inst"
    layer: Layer | None = None
    block: str | None = None     # inst: block name
    params: dict = field(default_factory=dict)   # inst: every parameter's value
    inputs: list = field(default_factory=list)   # full tensor names read from outside
    output: str = ""             # the tensor it produces (inst: its output)
    produced: tuple = ()         # every tensor made inside
    comment: str = ""
    repeat: dict | None = None   # repeat fields when this entry stands for a run


@dataclass
class _BlockDef:
    name: str
    cls: str
    rows: list                   # [(rel name, spec mapping without name, comment)]
    params: dict                 # param -> default
    inputs: list[str]
    output: str                  # rel name of the output
    comment: str
    instance_params: dict        # instance path -> {param: value}
    library: bool = False        # one of the library's blocks (ttmodels/<file>/<block>)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return re.sub(r"[^a-z0-9_]", "_", s.lower()).strip("_") or "block"


def _ident(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", s).strip("_")
    return s if s and not s[0].isdigit() else f"p{s}"


def _rel(name: str, scope: str) -> str | None:
    if not scope:
        return name
    return name[len(scope) + 1:] if name.startswith(scope + ".") else None


class _Emitter:
    def __init__(self, tr: Traced, module, use_library: bool = True):
        self.use_library = use_library
        self.tr = tr
        self.layers = tr.layers
        self.index = {id(l): i for i, l in enumerate(self.layers)}
        self.producer: dict[str, Layer] = {}
        for lay in self.layers:
            for t in (lay.outputs or [lay.name]):
                self.producer[t] = lay
        self.consumers: dict[str, list[Layer]] = defaultdict(list)
        for lay in self.layers:
            for t in lay.inputs:
                self.consumers[t].append(lay)
        self.containers = set()
        self.class_src = {}
        for path, m in module.named_modules():
            if any(c.__name__ in _CONTAINERS for c in type(m).__mro__):
                self.containers.add(path)
        self.classes: dict[str, str] = {}
        self.members: dict[str, list[Layer]] = defaultdict(list)
        for lay in self.layers:
            for path, cls in lay.stack:
                self.classes[path] = cls
                self.members[path].append(lay)
        self.chosen: set[str] = set()
        self.blocks: dict[str, _BlockDef] = {}      # block name -> def
        self.block_of: dict[str, _BlockDef] = {}    # instance path -> its block
        self._temps: dict[str, tuple] = {}
        self.block_names: dict[str, str] = {}
        self._pick_blocks(module)

    # -- which module instances are blocks
    def _valid_instance(self, path: str) -> bool:
        ls = self.members[path]
        if path in self.containers or not path or len(ls) < 2:
            return False
        idx = [self.index[id(l)] for l in ls]
        if idx != list(range(idx[0], idx[0] + len(idx))):
            return False
        if any(t in self.tr.constants for l in ls for t in l.inputs):
            return False      # a learned scalar's constant is one instance's key, no parameter
        inside = {t for l in ls for t in (l.outputs or [l.name])}
        for l in ls:
            if _rel(l.name, path) is None:
                return False
            bn = l.fields.get("bn")
            if bn and _rel(bn["name"], path) is None:
                return False
        escaping = {t for t in inside if t in self.tr.outputs or
                    any(id(c) not in {id(x) for x in ls} for c in self.consumers[t])}
        return len(escaping) == 1

    def _pick_blocks(self, module):
        by_class: dict[str, list[str]] = defaultdict(list)
        for path in self.members:
            if self._valid_instance(path):
                by_class[self.classes[path]].append(path)
        cands = {c: ps for c, ps in by_class.items() if len(ps) >= 2}
        for c, ps in cands.items():
            self.chosen.update(ps)
        # deepest classes first: an outer block's rows name the inner block's parameters
        depth = {c: max(p.count(".") for p in ps) for c, ps in cands.items()}
        used_names = set()
        for c in sorted(cands, key=lambda c: -depth[c]):
            # instances whose layers line up form one block; a class can give several
            groups: list[list[str]] = []
            for p in cands[c]:
                for g in groups:
                    # one instance's layers a subset of the other's (ResNet's block without /
                    # with a downsample), never two different shapes merged into one
                    mine = set(self._rows(p))
                    if all(mine <= set(self._rows(q)) or mine >= set(self._rows(q)) for q in g) \
                            and self._make_block(c, "?", g + [p]) is not None:
                        g.append(p)
                        break
                else:
                    groups.append([p])
            short = _snake(c.rsplit(".", 1)[-1])
            for g in groups:
                bd = self._make_block(c, "?", g) if len(g) >= 2 else None
                if bd is None:
                    self.chosen.difference_update(g)
                    continue
                name, k = short, 2
                while name in used_names:
                    name, k = f"{short}_{k}", k + 1
                bd.name = name
                lib = self._library(c, g) if self.use_library else None
                if lib is not None:
                    bd.name, bd.params, bd.instance_params, bd.library = lib
                    name = bd.name
                used_names.add(name)
                self.blocks[name] = bd
                for p in g:
                    self.block_of[p] = bd

    def _library(self, cls: str, paths: list[str]):
        """The library's block for these instances (``LIBRARY_BLOCKS``), when its parameters
        can be read off every instance: (name, defaults, per-instance params, True)."""
        row = LIBRARY_BLOCKS.get(cls)
        if row is None:
            return None
        block, defaults, read = row
        inst = {}
        for p in paths:
            by_rel = {_rel(l.name, p): l for l in self.members[p]}
            try:
                params = read(by_rel)
            except (KeyError, TypeError, ZeroDivisionError, AttributeError):
                params = None
            if params is None:
                return None
            inst[p] = params
        return block, dict(defaults), inst, True

    def _rows(self, path: str) -> list[str]:
        if path not in self._temps:
            self._temps[path] = self._template(path)
        return self._temps[path][1]

    # -- entries of a scope
    def entries(self, scope: str, layers: list[Layer]) -> list[_Entry]:
        out, i = [], 0
        while i < len(layers):
            lay = layers[i]
            inst = None
            for path, _ in lay.stack:
                if path in self.chosen and path != scope and (not scope or
                                                             path.startswith(scope + ".")):
                    if path in self.block_of:
                        inst = path
                        break
            if inst is None:
                out.append(self._op_entry(lay))
                i += 1
                continue
            ms = self.members[inst]
            out.append(self._inst_entry(inst, ms))
            i += len(ms)
        return out

    def _op_entry(self, lay: Layer) -> _Entry:
        return _Entry(lay.name, "op", layer=lay, inputs=list(lay.inputs),
                      output=(lay.outputs or [lay.name])[0],
                      produced=tuple(lay.outputs or [lay.name]),
                      comment=_layer_comment(lay))

    def _inst_entry(self, path: str, ms: list[Layer]) -> _Entry:
        bd = self.block_of[path]
        inside = [t for l in ms for t in (l.outputs or [l.name])]
        ins = []
        for l in ms:
            for t in l.inputs:
                if t not in inside and t not in ins:
                    ins.append(t)
        out = next(t for t in inside if t in self.tr.outputs or
                   any(c not in ms for c in self.consumers[t]))
        return _Entry(path, "inst", block=bd.name, params=dict(bd.instance_params[path]),
                      inputs=ins, output=out, produced=tuple(inside),
                      comment=f"{bd.cls.rsplit('.', 1)[-1]} {path}")

    # -- a block from the instances of one class
    def _template(self, path: str):
        ms = self.members[path]
        ents = self.entries(path, ms)
        ext = []
        for e in ents:
            for t in e.inputs:
                if not any(t in x.produced for x in ents) and t not in ext:
                    ext.append(t)
        names = ["x"] + [f"x{i}" for i in range(1, len(ext))]
        local = {}
        for e in ents:
            r = _rel(e.name, path)
            if e.kind == "inst":
                local[e.output] = r
            else:
                for t in e.produced:
                    local[t] = _rel(t, path)
        rows = {}
        order = []
        for e in ents:
            r = _rel(e.name, path)
            ins = [local.get(t) or names[ext.index(t)] for t in e.inputs]
            if e.kind == "op":
                spec = _op_fields(e.layer, path)
                key = ("op", e.layer.op)
            else:
                spec = dict(e.params)
                key = ("block", e.block)
            rows[r] = (key, spec, ins, e.comment.replace(path + ".", ""))
            order.append(r)
        out_rel = local[next(t for e in ents for t in e.produced
                             if t in self.tr.outputs or any(
                                 c not in ms for c in self.consumers[t]))]
        return rows, order, names, out_rel

    def _make_block(self, cls: str, name: str, paths: list[str]) -> _BlockDef | None:
        for p in paths:
            if p not in self._temps:
                self._temps[p] = self._template(p)
        temps = {p: self._temps[p] for p in paths}
        if len({len(t[2]) for t in temps.values()}) != 1:
            return None
        outs = {t[3] for t in temps.values()}
        if all(t[3] == t[1][-1] for t in temps.values()):
            out_rel = None               # each instance's last layer: the default output
        elif len(outs) == 1:
            out_rel = outs.pop()
        else:
            return None
        kinds: dict[str, tuple] = {}
        for rows, order, _, _ in temps.values():
            for r in order:
                if kinds.setdefault(r, rows[r][0]) != rows[r][0]:
                    return None
        order = _merge_orders([t[1] for t in temps.values()])
        if order is None:
            return None
        # values per (row, key) across instances; _ABSENT = the row is absent there
        slots: dict[tuple, list] = {}
        ins_lit: dict[str, list] = {}
        for r in order:
            here = [temps[p][0].get(r) for p in paths]
            if not all(here):
                slots[(r, "when")] = [h is not None for h in here]
            keys = []
            for h in here:
                for k in (h[1] if h else ()):
                    if k not in keys:
                        keys.append(k)
            for k in keys:
                vals = [h[1].get(k, _Missing) if h else _ABSENT for h in here]
                if any(v is _Missing for v in vals):
                    return None          # a field some instances leave out
                slots[(r, k)] = vals
            ins = [tuple(h[2]) if h else _ABSENT for h in here]
            known = [v for v in ins if v is not _ABSENT]
            if len({len(v) for v in known}) != 1:
                return None
            lit = list(known[0])
            for i in range(len(lit)):
                col = [v[i] if v is not _ABSENT else _ABSENT for v in ins]
                if len({c for c in col if c is not _ABSENT}) > 1:
                    slots[(r, f"in{i}")] = col
                    lit[i] = None
            ins_lit[r] = lit
        params: dict[str, Any] = {}
        slot_param: dict[tuple, str] = {}
        by_values: dict[str, tuple] = {}
        # a field that varies in one layer only gives its bare name ("stride"), else the
        # layer's too ("branch2_0_conv_out")
        varying = Counter(key[1] for key, vals in slots.items() if key[1] != "when" and len(
            {_hashable(v) for v in vals if v is not _ABSENT}) > 1)
        self._varying = varying
        for key, vals in slots.items():
            known = [v for v in vals if v is not _ABSENT]
            if key[1] != "when" and len({_hashable(v) for v in known}) <= 1:
                continue
            vt = tuple(_hashable(v) for v in vals)
            # an existing parameter that agrees wherever both are known
            pname = next((n for n, t in by_values.items() if all(
                a is _ABSENT or b is _ABSENT or (a == b and type(a) is type(b))
                for a, b in zip(t, vt))), None)
            if pname is None:
                pname = self._param_name(key, params)
                by_values[pname] = vt
            else:
                by_values[pname] = tuple(a if a is not _ABSENT else b
                                         for a, b in zip(by_values[pname], vt))
            common = Counter(v for v in by_values[pname] if v is not _ABSENT).most_common(1)
            params[pname] = _unhash(common[0][0]) if common else None
            slot_param[key] = pname
        inst_params = {p: {n: (_unhash(by_values[n][j]) if by_values[n][j] is not _ABSENT
                               else params[n]) for n in params}
                       for j, p in enumerate(paths)}
        rows_out = []
        t0 = temps[paths[0]]
        prev, prev_cond = "x", False
        for r in order:
            (kind, what), spec, _, comment = next(
                (h[0], h[1], h[2], h[3]) for h in (temps[p][0].get(r) for p in paths) if h)
            m: dict[str, Any] = {}
            if (r, "when") in slot_param:
                m["when"] = "${%s}" % slot_param[(r, "when")]
            m["op" if kind == "op" else "block"] = what
            ins = ["${%s}" % slot_param[(r, f"in{i}")] if v is None else v
                   for i, v in enumerate(ins_lit[r])]
            if ins != [prev] or prev_cond:
                m["in"] = ins[0] if len(ins) == 1 else ins
            for k, v in spec.items():
                m[k] = "${%s}" % slot_param[(r, k)] if (r, k) in slot_param else v
            rows_out.append((r, m, comment))
            prev, prev_cond = r, "when" in m
        src = _class_source(cls, self.tr)
        return _BlockDef(name, cls, rows_out, params, t0[2], out_rel,
                         f"{cls}{'  ' + src if src else ''} ({len(paths)} instances)",
                         inst_params)

    def _param_name(self, key, params) -> str:
        r, k = key
        if k == "when":
            base = _ident(f"has_{r}")
        elif k == "in":
            base = _ident(f"{r}_in")
        else:
            base = _ident(k)
            if base in params or self._varying.get(k, 0) > 1:
                base = _ident(f"{r}_{k}")
        name, i = base, 2
        while name in params or name in ("x",):
            name, i = f"{base}_{i}", i + 1
        return name


_Missing = _MissingT()
_ABSENT = _MissingT()


def _hashable(v):
    if isinstance(v, dict):
        return ("__dict__",) + tuple((k, _hashable(x)) for k, x in v.items())
    if isinstance(v, list):
        return ("__list__",) + tuple(_hashable(x) for x in v)
    return v


def _unhash(v):
    if isinstance(v, tuple) and v and v[0] == "__dict__":
        return {k: _unhash(x) for k, x in v[1:]}
    if isinstance(v, tuple) and v and v[0] == "__list__":
        return [_unhash(x) for x in v[1:]]
    return v


def _merge_orders(orders: list[list[str]]) -> list[str] | None:
    """One order of every row name that keeps each instance's order (None: there is none)."""
    succ: dict[str, set] = defaultdict(set)
    names: list[str] = []
    for o in orders:
        for a in o:
            if a not in names:
                names.append(a)
        for a, b in zip(o, o[1:]):
            succ[a].add(b)
    indeg = Counter(b for a in succ for b in succ[a])
    ready = [n for n in names if indeg[n] == 0]
    out = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for b in sorted(succ[n], key=names.index):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
        ready.sort(key=names.index)
    return out if len(out) == len(names) else None


def _op_fields(lay: Layer, scope: str) -> dict:
    """The layer's spec fields (name and in excluded), names relative to ``scope``."""
    f = dict(lay.fields)
    if f.get("bn"):
        f["bn"] = {"name": _rel(f["bn"]["name"], scope) if scope else f["bn"]["name"],
                   "eps": f["bn"]["eps"]}
    if f.get("weights"):                # a module called again: its keys are the first call's
        f["weights"] = _rel(f["weights"], scope) if scope else f["weights"]
    elif lay.op == "batch_norm":
        f["weights"] = None
    return f


def _layer_comment(lay: Layer) -> str:
    return f"{' '.join(lay.parts)}  {lay.source}"


def _class_source(cls: str, tr: Traced) -> str:
    import importlib
    mod, _, qual = cls.rpartition(".")
    try:
        obj = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        f = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
        return f"{_short_path(f)}:{line}"
    except Exception:          # classes defined in __main__, C extensions: no source line
        return ""


_INDEXED = re.compile(r"^(.*)\.([A-Za-z_\-]*?)(\d+)$")


def _find_repeats(ents: list[_Entry], em: _Emitter) -> list[_Entry]:
    """Chains of instances of one block that are all the children of a container become one
    entry with ``repeat`` (``first:`` for what the first one differs in)."""
    out, i = [], 0
    names = [e.name for e in ents]
    while i < len(ents):
        e = ents[i]
        m = _INDEXED.match(e.name) if e.kind == "inst" else None
        if m is None:
            out.append(e)
            i += 1
            continue
        cont, pre, k0 = m.group(1), m.group(2), int(m.group(3))
        j = i + 1
        while j < len(ents):
            f = ents[j]
            mf = _INDEXED.match(f.name) if f.kind == "inst" else None
            if not (mf and f.block == e.block and mf.group(1) == cont and mf.group(2) == pre
                    and int(mf.group(3)) == k0 + (j - i) and f.inputs == [ents[j - 1].output]
                    and (j == i + 1 or f.params == ents[i + 1].params)):
                break
            j += 1
        run = ents[i:j]
        # the container's other children may be earlier siblings before the run (ShuffleNet's
        # stage2.0, a block of its own, then stage2.1 .. stage2.3 with repeat_start: 1)
        before = {f"{cont}.{pre}{k}" for k in range(k0)} & set(names[:i])
        others = [n for n in names if (n == cont or n.startswith(cont + ".")) and
                  n not in {r.name for r in run} and n not in before]
        if len(run) < 2 or others or cont in em.tr.outputs:
            out.append(e)
            i += 1
            continue
        common = run[1].params
        head: dict[str, Any] = {"repeat": len(run)}
        if k0:
            head["repeat_start"] = k0
        if pre:
            head["repeat_name"] = "{name}.%s{i}" % pre
        first = {k: v for k, v in run[0].params.items() if common[k] != v}
        cls = em.classes[run[0].name].rsplit(".", 1)[-1]
        out.append(_Entry(cont, "inst", block=e.block, params=dict(common), inputs=run[0].inputs,
                          output=run[-1].output, produced=tuple(t for r in run for t in r.produced),
                          comment=f"{cls} x{len(run)}: {run[0].name} .. {run[-1].name}",
                          repeat={"head": head, "first": first}))
        i = j
    return out
