"""YAML reading that keeps line numbers and expands aliases under a budget.

PyYAML's composer gives a node graph in which an alias is a second reference to the anchored node,
so a "billion laughs" document is small until it is constructed. We construct it ourselves, counting
every node we materialise, and stop at ``MAX_NODES``. Mappings and sequences become ``YMap`` /
``YList`` (a dict / list that also knows its file and line, and the line of each key / item), so
every later error can point at the spec line. Duplicate keys, which PyYAML silently overwrites, are
errors here.
"""
from __future__ import annotations

from typing import Any

import yaml

from ..errors import SpecError

MAX_NODES = 200_000      # materialised YAML nodes per document, aliases expanded
MAX_DEPTH = 100          # nesting depth (also bounds recursive aliases and self-referencing dicts)
MAX_TEXT = 4_000_000     # characters of YAML text

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


class YMap(dict):
    """A mapping read from a spec, with its location. ``key_lines[key]`` is the line of a key."""
    file: str = "<dict>"
    line: int | None = None

    def __init__(self, *a, file: str = "<dict>", line: int | None = None, **kw):
        super().__init__(*a, **kw)
        self.file, self.line = file, line
        self.key_lines: dict[str, int | None] = {}

    def line_of(self, key) -> int | None:
        ln = self.key_lines.get(key)
        return ln if ln is not None else self.line


class YList(list):
    """A sequence read from a spec, with its location and the line of each item."""

    def __init__(self, *a, file: str = "<dict>", line: int | None = None):
        super().__init__(*a)
        self.file, self.line = file, line
        self.item_lines: list[int | None] = []

    def line_of(self, i: int) -> int | None:
        if 0 <= i < len(self.item_lines) and self.item_lines[i] is not None:
            return self.item_lines[i]
        return self.line


class _Loader(yaml.SafeLoader):
    """SafeLoader used only to compose nodes (with marks) and to construct plain scalars."""


def _mark_line(mark) -> int | None:
    return None if mark is None else mark.line + 1


def load_yaml(text: str, file: str) -> Any:
    """Parse one YAML document into YMap/YList/scalars. Every defect is a SpecError."""
    if not isinstance(text, str):
        raise SpecError("YAML text must be a string", file=file)
    if len(text) > MAX_TEXT:
        raise SpecError(f"spec is larger than {MAX_TEXT} characters", file=file)
    try:
        # PyYAML's reader checks every character when the loader is made, not when it parses
        loader = _Loader(text)
    except yaml.reader.ReaderError as e:
        raise SpecError(_reader_problem(text, e), file=file,
                        line=text.count("\n", 0, e.position) + 1) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return _Builder(loader, file).build(node, 0)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = " ".join(s for s in (e.context, e.problem) if s) or "invalid YAML"
        lines = text.splitlines()
        for m in (e.problem_mark, e.context_mark):
            if m is not None and m.line < len(lines) and "${" in lines[m.line]:
                what += ' (inside {...} or [...], quote expressions: "${...}")'
                break
        raise SpecError(f"YAML syntax error: {what}", file=file, line=_mark_line(mark)) from None
    except yaml.YAMLError as e:
        raise SpecError(f"YAML error: {e}", file=file) from None
    except RecursionError:
        raise SpecError("YAML nesting is too deep", file=file) from None
    finally:
        loader.dispose()


def _reader_problem(text: str, e) -> str:
    ch = e.character
    code = ch if isinstance(ch, int) else ord(ch) if isinstance(ch, str) and ch else None
    what = f"character U+{code:04X}" if code is not None else "character"
    col = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
    return (f"{what} at column {col} is not allowed in YAML, not even in a comment (NUL and "
            f"control characters; is this a binary file?)")


class _Builder:
    def __init__(self, loader: _Loader, file: str):
        self.loader, self.file, self.count = loader, file, 0

    def tick(self, node) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise SpecError(f"YAML document expands to more than {MAX_NODES} nodes "
                            "(aliases are expanded; is this an alias bomb?)",
                            file=self.file, line=_mark_line(node.start_mark))

    def build(self, node, depth: int) -> Any:
        self.tick(node)
        line = _mark_line(node.start_mark)
        if depth > MAX_DEPTH:
            raise SpecError(f"YAML nesting deeper than {MAX_DEPTH} levels (recursive alias?)",
                            file=self.file, line=line)
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise SpecError(f"unsupported YAML tag {node.tag!r}", file=self.file, line=line)
            out = YList(file=self.file, line=line)
            for item in node.value:
                out.append(self.build(item, depth + 1))
                out.item_lines.append(_mark_line(item.start_mark))
            return out
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP_TAG:
                raise SpecError(f"unsupported YAML tag {node.tag!r}", file=self.file, line=line)
            out = YMap(file=self.file, line=line)
            merged: list[YMap] = []
            for knode, vnode in node.value:
                kline = _mark_line(knode.start_mark)
                if knode.tag == "tag:yaml.org,2002:merge":
                    val = self.build(vnode, depth + 1)
                    for m in (val if isinstance(val, list) else [val]):
                        if not isinstance(m, YMap):
                            raise SpecError("'<<' merge needs a mapping or a list of mappings",
                                            file=self.file, line=kline)
                        merged.append(m)
                    continue
                if not isinstance(knode, yaml.ScalarNode):
                    raise SpecError("mapping keys must be plain scalars", file=self.file, line=kline)
                self.tick(knode)
                # Keys are names: take YAML 1.1's `on`, `yes`, `1` literally instead of as
                # booleans / numbers (a parameter named `on` must not become True).
                key = knode.value
                if key in out:
                    raise SpecError(f"duplicate key '{key}' (first at line {out.key_lines[key]})",
                                    file=self.file, line=kline)
                out[key] = self.build(vnode, depth + 1)
                out.key_lines[key] = kline
            # Explicit keys win over merged ones; earlier merge sources win over later ones.
            for m in merged:
                for k, v in m.items():
                    if k not in out:
                        out[k] = v
                        out.key_lines[k] = m.line_of(k)
            return out
        raise SpecError("unsupported YAML node", file=self.file, line=line)  # pragma: no cover


def from_python(obj: Any, file: str = "<dict>") -> Any:
    """Copy a user's dict/list tree into YMap/YList (never modifying it), checking value types."""
    count = [0]

    def conv(o, depth: int, stack: tuple[int, ...]):
        count[0] += 1
        if count[0] > MAX_NODES:
            raise SpecError(f"spec has more than {MAX_NODES} values", file=file)
        if depth > MAX_DEPTH:
            raise SpecError(f"spec nesting deeper than {MAX_DEPTH} levels", file=file)
        if isinstance(o, (dict, list, tuple)) and id(o) in stack:
            raise SpecError("spec contains a reference cycle (a dict or list contains itself)",
                            file=file)
        if isinstance(o, dict):
            out = YMap(file=file)
            for k, v in o.items():
                if not isinstance(k, str):
                    raise SpecError(f"mapping key {k!r} is not a string", file=file)
                out[k] = conv(v, depth + 1, stack + (id(o),))
            return out
        if isinstance(o, (list, tuple)):
            out = YList(file=file)
            for v in o:
                out.append(conv(v, depth + 1, stack + (id(o),)))
                out.item_lines.append(None)
            return out
        if o is None or isinstance(o, (str, bool, int, float)):
            return o
        raise SpecError(f"unsupported value of type {type(o).__name__}: {o!r:.60}", file=file)

    return conv(obj, 0, ())
