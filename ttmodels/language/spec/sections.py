"""The spec's top-level sections: ``params``, ``defaults`` (precision profiles, layouts),
``inputs``, ``constants``, ``outputs``, ``ignore_weights`` (a part of ``_Compiler``).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from .._yaml import YList, YMap
from ...errors import SpecError
from ..graph import (AUTO_OPS, AUTO_PCC, BUFFERS, DTYPES, LAYOUT_KINDS, MATH_FIDELITIES,
                     AutoPrecision, Constant, LayoutPolicy, Precision, SourceLoc, TensorShape,
                     float32_followers)
from .fields import _Ctx, _Fields
from .schema import (CONSTANT_FIELDS, DEFAULT_FIELDS, INPUT_FIELDS, LAYOUT_FIELDS, MAX_DIM,
                     MAX_GRID, PRECISION_FIELDS, _NAME_RE, _check_keys, _err, _is_int, _suggest,
                     _typename, _where)


class _Sections:
    """The top-level sections of ``_Compiler`` (``compiler.py``)."""

    def parse_batch(self, value, tm: YMap) -> int | None:
        """``batch: 16``: the batch the spec's explicit layouts were written for (TT's
        hand-tuned ResNet50's grids), the default when no batch is given. Another batch plans
        with the same layouts: where one does not apply there, the planner refuses that layer
        and names this batch (``planner.plan_graph``); resnet50_tt's run for real at batch 8
        too, so a blanket refusal here refused models ttnn runs (issue 33)."""
        if value is None:
            if self.batch_size is None:
                self.batch_size = 1
            return None
        if not _is_int(value) or not 1 <= value <= MAX_DIM:
            raise _err(f"'batch' must be a positive integer, got {value!r}", tm, "batch")
        if self.batch_size is None:
            self.batch_size = value
        return value

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
            if pname == "auto":
                raise _err("a profile cannot be named 'auto' (`precision: auto` is precision "
                           "planning)", self.profiles, pname)
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

    def precision_update(self, base: dict, v, m, key, layer, ctx: _Ctx, allow_profile=True,
                         allow_auto=True) -> dict:
        """``base`` (the inherited precision fields) updated by the spec value ``v``: a mapping
        of precision fields, a profile name, or ``auto`` (``{auto: true}``). An ``auto`` entry
        is an ``AutoPrecision`` under the key "auto"; a precision given without it replaces an
        inherited auto (later wins)."""
        v = self.ev(ctx, v, m, key, layer)
        if v is None:
            return base
        if v == "auto" and allow_auto:
            out = dict(base)
            out["auto"] = AutoPrecision(loc=SourceLoc(*_where(m, key)))
            return out
        if isinstance(v, str) and allow_profile:
            if v not in self.profiles:
                raise _err(f"unknown precision profile '{v}'{_suggest(v, list(self.profiles))}"
                           + ("" if not allow_auto else "; or 'auto' (precision planning)"),
                           m, key, layer, ctx.chain)
            return self.precision_update(base, self.profiles[v], self.profiles, v, layer, ctx,
                                         allow_profile=False, allow_auto=allow_auto)
        if not isinstance(v, YMap):
            raise _err(f"'precision' must be a mapping ({', '.join(PRECISION_FIELDS)})"
                       f"{' or a profile name' if allow_profile else ''}"
                       f"{' or auto' if allow_auto else ''}, got {_typename(v)}",
                       m, key, layer, ctx.chain)
        out = dict(base)
        out.pop("auto", None)
        for k, x in v.items():
            if k not in PRECISION_FIELDS or (k == "auto" and not allow_auto):
                allowed = [f for f in PRECISION_FIELDS if f != "auto" or allow_auto]
                raise _err(f"unknown precision field '{k}'{_suggest(k, allowed)}; "
                           f"allowed: {', '.join(allowed)}", v, k, layer, ctx.chain)
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
            elif k == "auto":
                x = self.parse_auto(x, v, layer, ctx)
                if x is None:
                    continue
            elif not isinstance(x, bool):
                raise _err(f"'fp32_accum' must be true or false, got {x!r}", v, k, layer, ctx.chain)
            out[k] = x
        return out

    def parse_auto(self, x, v: YMap, layer, ctx: _Ctx) -> AutoPrecision | None:
        """``auto: true`` (PCC target 0.99), ``auto: false`` (None: not auto), or ``auto: {pcc:
        0.995}``: the outputs' PCC target, in (0, 1)."""
        loc = SourceLoc(*_where(v, "auto"))
        if isinstance(x, bool):
            return AutoPrecision(loc=loc) if x else None
        if not isinstance(x, YMap):
            raise _err(f"'auto' must be true, false or {{pcc: TARGET}}, got {_typename(x)}",
                       v, "auto", layer, ctx.chain)
        _check_keys(x, ("pcc",), "'auto'", layer, ctx.chain)
        pcc = x.get("pcc", AUTO_PCC)
        if isinstance(pcc, bool) or not isinstance(pcc, (int, float)) or not 0 < pcc < 1:
            raise _err(f"'pcc' (the outputs' PCC target) must be a number between 0 and 1, e.g. "
                       f"0.99, got {pcc!r}", x, "pcc", layer, ctx.chain)
        return AutoPrecision(pcc=float(pcc), loc=loc)

    def parse_resolved_precision(self, value, tm: YMap, ctx: _Ctx) -> dict:
        """``resolved_precision:`` (written by ``ttmodels precision``): full layer name ->
        precision fields, applied to the layers that are under ``precision: auto``. Returns
        name -> (fields, the entry's YMap) for the check after expansion."""
        if value is None:
            return {}
        if not isinstance(value, YMap):
            raise _err("'resolved_precision' must be a mapping layer name -> precision "
                       "(written by `ttmodels precision`)", tm, "resolved_precision")
        out = {}
        for name, p in value.items():
            fields = self.precision_update({}, p, value, name, name, ctx, allow_profile=False,
                                           allow_auto=False)
            out[name] = (fields, value)
        return out

    def node_precision(self, prec: dict, name: str, op: str) -> tuple[Precision, AutoPrecision | None]:
        """A layer's ``Precision`` from its merged fields, and its ``AutoPrecision`` when it is a
        matmul op under ``precision: auto``; unresolved (until ``apply_resolved``) it runs at
        HiFi4 with bfloat16 weights, the most any choice gives."""
        fields = {k: v for k, v in prec.items() if k != "auto"}
        auto = prec.get("auto")
        if auto is None or op not in AUTO_OPS:
            return Precision(**fields), None
        fields.update(math_fidelity="HiFi4", weights="bfloat16")
        return Precision(**fields), auto

    def apply_resolved(self, nodes) -> None:
        """Give each auto layer its ``resolved_precision`` entry, by its final name (after the
        outputs' renames, which is how ``ttmodels precision`` writes them) or its own name (how
        the shipped specs name them: an extending spec may rename other layers or none)."""
        own = self.renamed_from
        for n in nodes:
            key = n.name if n.name in self.resolved else own.get(n.name)
            hit = self.resolved.get(key) if key is not None else None
            if n.auto is None or hit is None:
                continue
            self.resolved_used.add(key)
            n.precision = dataclasses.replace(n.precision, **hit[0])
            n.auto = dataclasses.replace(n.auto, resolved=True)
        follow = float32_followers(nodes)        # float32 chosen for a layer is not rounded away
        for n in nodes:
            if n.name in follow:
                n.precision = follow[n.name]

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
                try:
                    if isinstance(value, list):
                        value = [float(x) for x in value] if all(
                            isinstance(x, (int, float)) for x in value) else _to_lists(value)
                    else:
                        value = float(value)
                except OverflowError:        # an integer of 400 digits fits no float
                    raise f.fail("constant value holds an integer too large for a float",
                                 "value") from None
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
        # output name -> the layer's own name: a resolved_precision entry may name either, so
        # that a spec extending this one with other outputs keeps the choices (apply_resolved)
        self.renamed_from = {a: t for t, a in rename.items()}
        if rename:
            for n in self.nodes:
                n.name = rename.get(n.name, n.name)
                n.inputs = [rename.get(i, i) for i in n.inputs]
                if n.outputs:
                    n.outputs = {rename.get(t, t): s for t, s in n.outputs.items()}
        return result


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
