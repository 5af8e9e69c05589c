"""Writing the spec: YAML text with a comment per layer (module path and source line)."""
from __future__ import annotations

import json
import re
from typing import Any

from .blocks import _BlockDef, _Emitter, _find_repeats, _op_fields, _snake
from .intermediate import ImportError_, Traced


_DEFAULTS = {
    "conv2d": {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": False, "bn": None,
               "act": None},
    "conv_transpose2d": {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1,
                         "groups": 1, "bias": False, "act": None},
    "linear": {"bias": True, "act": None},
    "batch_norm": {"weights": None, "eps": 1e-5, "act": None},
    "add": {"act": None}, "multiply": {"act": None}, "subtract": {"act": None},
    "max_pool2d": {"padding": 0, "dilation": 1, "ceil_mode": False},
    "avg_pool2d": {"padding": 0, "ceil_mode": False, "count_include_pad": True},
    "upsample": {"mode": "nearest", "align_corners": False},
    "leaky_relu": {"slope": 0.01},
    "layer_norm": {"eps": 1e-5, "affine": True}, "group_norm": {"eps": 1e-5, "affine": True},
    "grn": {"eps": 1e-6}, "pad": {"value": 0.0}, "layer_scale": {"param_shape": "vector"},
}


def _yaml_scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return f"{v:.1f}"
        s = repr(v)
        if "e" in s and "." not in s.split("e")[0]:
            a, b = s.split("e")
            s = f"{a}.0e{b}"
        return s
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(x)}" for k, x in v.items()) + "}"
    s = str(v)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./\-]*", s) and s.lower() not in (
            "true", "false", "null", "yes", "no", "on", "off", "y", "n", "none", "~"):
        return s
    return json.dumps(s)


def _flow(m: dict, indent: str, width: int = 100, prefix: str = "- ") -> list[str]:
    """``- {k: v, ...}`` wrapped at ``width``."""
    parts = [f"{k}: {_yaml_scalar(v)}" for k, v in m.items()]
    lines, cur = [], indent + prefix + "{"
    for i, p in enumerate(parts):
        piece = p + ("}" if i == len(parts) - 1 else ",")
        if len(cur) + len(piece) + 1 > width and not cur.endswith("{"):
            lines.append(cur)
            cur = indent + " " * (len(prefix) + 1) + piece
        else:
            cur += ("" if cur.endswith("{") else " ") + piece
    lines.append(cur)
    return lines


def _spec_fields(op: str, f: dict) -> dict:
    """Fields without their defaults; ``bn`` in its short form when the eps is torch's."""
    d = _DEFAULTS.get(op, {})
    out = {}
    for k, v in f.items():
        if k in d and d[k] == v and not (isinstance(v, str) and "${" in v):
            continue
        if k == "stride" and op in ("max_pool2d", "avg_pool2d") and v == f.get("kernel"):
            continue
        if k == "bn" and isinstance(v, dict) and v.get("eps") == 1e-5:
            v = v["name"]
        out[k] = v
    return out


def _entry_line(m: dict, comment: str, indent: str) -> list[str]:
    lines = _flow(m, indent)
    return [f"{indent}# {comment}"] + lines if comment else lines


class _Spec:
    """Assembles the YAML text."""

    def __init__(self, em: _Emitter, tr: Traced, name: str, flat: bool):
        self.em, self.tr, self.name, self.flat = em, tr, name, flat

    def text(self) -> str:
        tr = self.tr
        n, c, h, w = tr.input_shape
        out = [f"# Imported from {tr.module_class} by `ttmodels import` (torch.fx trace on a "
               f"{n}x{c}x{h}x{w} input).",
               "# Layer names are the module's paths, so its state_dict() loads as it is; each "
               "layer's comment",
               "# names the module(s) it was made of and the source line that calls it.",
               f"name: {_yaml_scalar(self.name)}"]
        if tr.unused_prefixes:
            out.append("# Modules the forward pass does not use (their keys: build(..., ignore="
                       f"{list(tr.unused_prefixes)})): " + ", ".join(tr.unused_prefixes))
        if tr.partial_stop is not None:
            u = tr.partial_stop
            out.append(f"# PARTIAL: stops before {u.kind} at {u.where} ({u.source}): {u.reason}")
        out += ["inputs:",
                f"  {tr.input_name}: {{channels: {c}, size: [{h}, {w}]}}",
                "defaults:",
                "  layout: auto",
                # precision planning (docs/spec.md): `ttmodels import` resolves it on the
                # module's weights and writes the choice per layer (resolved_precision:)
                "  precision: {activations: bfloat16, auto: true}",
                "profiles:",
                "  tt-perf: {activations: bfloat8_b, weights: bfloat8_b, math_fidelity: LoFi}",
                "  float32: {activations: float32, weights: float32, math_fidelity: HiFi4, "
                "fp32_accum: true}"]
        if tr.constants:       # learned scalars (hgnetv2's affine), loaded from their own keys
            out.append("constants:")
            out += [f"  {k}: {{shape: {_yaml_scalar(list(v))}, weights: {k}, dtype: float32}}"
                    for k, v in tr.constants.items()]
        if any(not b.library for b in self.em.blocks.values()) and not self.flat:
            out.append("blocks:")
            for bd in self.em.blocks.values():
                if not bd.library:
                    out += self._block_text(bd)
        out.append("layers:")
        ents = self.em.entries("", self.tr.layers) if not self.flat else \
            [self.em._op_entry(l) for l in self.tr.layers]
        if not self.flat:
            ents = _find_repeats(ents, self.em)
        prev = tr.input_name
        for e in ents:
            m: dict[str, Any] = {"name": e.name}
            if e.kind == "op":
                m["op"] = e.layer.op
            else:
                m["block"] = e.block
            if e.inputs != [prev]:
                m["in"] = e.inputs[0] if len(e.inputs) == 1 else list(e.inputs)
            if e.kind == "op":
                m.update(_spec_fields(e.layer.op, _op_fields(e.layer, "")))
            else:
                bd = next(b for b in self.em.blocks.values() if b.name == e.block)
                if e.repeat:
                    m.update(e.repeat["head"])
                m.update({k: v for k, v in e.params.items() if bd.params[k] != v})
                if e.repeat and e.repeat.get("first"):
                    m["first"] = e.repeat["first"]
            out += _entry_line(m, e.comment, "  ")
            # a split's outputs are always named (the spec refuses a bare split as `in`)
            prev = None if e.kind == "op" and e.layer.outputs else e.output
        outs = tr.outputs
        if tr.output_names:                # forward returned a dict or a tuple: named outputs
            out.append("outputs: " + _yaml_scalar(dict(zip(tr.output_names, outs))))
        else:
            out.append("outputs: " + (_yaml_scalar(outs[0]) if len(outs) == 1 else
                                      _yaml_scalar(outs)))
        return "\n".join(out) + "\n"

    def _block_text(self, bd: _BlockDef) -> list[str]:
        out = [f"  # {bd.comment}", f"  {bd.name}:"]
        if bd.params:
            out += _flow(bd.params, "    ", prefix="params: ")
        if bd.inputs and len(bd.inputs) > 1:
            out.append(f"    inputs: {_yaml_scalar(['x'] + [f'x{i}' for i in range(1, len(bd.inputs))])}")
        out.append("    layers:")
        for r, m, comment in bd.rows:
            mm = {"name": r}
            mm.update({k: m[k] for k in ("when", "op", "block", "in") if k in m})
            rest = {k: v for k, v in m.items() if k not in mm}
            if "op" in m:
                rest = _spec_fields(m["op"], rest)
            else:
                inner = next(b for b in self.em.blocks.values() if b.name == m["block"])
                rest = {k: v for k, v in rest.items()
                        if not (inner.params.get(k) == v and "${" not in str(v))}
            mm.update(rest)
            out += _entry_line(mm, comment, "      ")
        last = bd.rows[-1][0] if bd.rows else None
        if bd.output is not None and bd.output != last:
            out.append(f"    outputs: {_yaml_scalar(bd.output)}")
        return out


def emit_spec(tr: Traced, module, *, name: str | None = None, flat: bool = False,
              library: bool = True) -> str:
    """The spec text of a traced module: blocks and repeats (``flat``: one line per layer;
    ``library``: the library's blocks where they match)."""
    if not tr.layers:
        raise ImportError_(f"{tr.module_class}: nothing to import (no layers before the first "
                           "unsupported node)")
    em = _Emitter(tr, module, use_library=library)
    nm = name or _snake(tr.module_class.rsplit(".", 1)[-1])
    return _Spec(em, tr, nm, flat).text()
