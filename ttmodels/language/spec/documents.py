"""Documents: ``extends:`` and ``imports:`` -> the merged top level and the block table."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import registry
from .._yaml import YList, YMap
from ...errors import SpecError
from .schema import (BLOCK_FIELDS, IMPORTED_FIELDS, INSTANCE, TOP_FIELDS, _NAME_RE, _check_keys,
                     _err, _typename)


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
