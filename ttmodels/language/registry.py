"""Names of model specs: the configs shipped in ``ttmodels/configs`` plus user registrations.

``resolve`` turns anything ``load_graph`` accepts (a name, a path, YAML text, a dict) into the parsed
top-level mapping, a display name for messages and the directory relative imports start from.
"""
from __future__ import annotations

import copy
import difflib
import os
from pathlib import Path
from typing import Any

from ._yaml import MAX_TEXT, YMap, from_python, load_yaml
from ..errors import SpecError
from .files import irregular

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CONFIGS_DIR = PACKAGE_DIR / "configs"
BLOCKS_DIR = PACKAGE_DIR / "blocks"
SHIPPED_PREFIX = "ttmodels/"

# name -> ("path", Path) | ("text", str) | ("dict", deep copy)
_REGISTERED: dict[str, tuple[str, Any]] = {}


def _shipped() -> dict[str, Path]:
    if not CONFIGS_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(CONFIGS_DIR.glob("*.yaml"))}


def display_path(path: Path) -> str:
    """Files of the package are shown as ``ttmodels/...`` (machine independent); others as is."""
    try:
        return SHIPPED_PREFIX + path.resolve().relative_to(PACKAGE_DIR).as_posix()
    except ValueError:
        return str(path)


def register(name: str, spec) -> None:
    """Register ``spec`` (path, YAML text or dict) under ``name``. A dict is copied, so later
    changes to it by the caller do not affect the registration."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name) or ":" in name:
        raise SpecError(f"invalid model name {name!r}: a non-empty string without spaces or ':'")
    if isinstance(spec, Path):
        _REGISTERED[name] = ("path", spec)
    elif isinstance(spec, dict):
        try:
            _REGISTERED[name] = ("dict", copy.deepcopy(spec))
        except Exception as e:  # noqa: BLE001 - anything uncopyable is bad input
            raise SpecError(f"cannot register {name!r}: the dict cannot be copied ({e})") from None
    elif isinstance(spec, str):
        kind = "text" if _looks_like_yaml(spec) else "path"
        _REGISTERED[name] = (kind, spec if kind == "text" else Path(spec))
    else:
        raise SpecError(f"cannot register {name!r}: expected a path, YAML text or dict, "
                        f"got {type(spec).__name__}")


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def list_models() -> list[str]:
    return sorted(set(_shipped()) | set(_REGISTERED))


def _looks_like_yaml(s: str) -> bool:
    return "\n" in s or ": " in s or s.rstrip().endswith(":") or s.lstrip().startswith(("{", "#"))


def read_file(path: Path, display: str | None = None, *, importer: str | None = None,
              line: int | None = None) -> Any:
    """Parse a YAML file. A missing file is reported at the importing file's line if given."""
    shown = display or display_path(path)
    try:
        kind = irregular(path)
        if kind is None:
            with open(path, encoding="utf-8") as f:
                text = f.read(MAX_TEXT + 1)      # load_yaml refuses more: never read a file whole
    except FileNotFoundError:
        if importer is not None:
            raise SpecError(f"imported file '{shown}' does not exist", file=importer,
                            line=line) from None
        raise SpecError(f"spec file '{shown}' does not exist", file=shown) from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SpecError(f"cannot read '{shown}': {e}", file=importer or shown, line=line) from None
    if kind is not None:
        # a FIFO would block until a writer comes, a device may never end (/dev/zero)
        raise SpecError(f"'{shown}' is {kind}, not a spec file", file=importer or shown, line=line)
    return load_yaml(text, shown)


def resolve(spec) -> tuple[YMap, str, Path]:
    """``(data, source_name, base_dir)`` for a name, path, YAML text or dict. ``data`` is a new
    YMap; the caller's objects are never modified."""
    if isinstance(spec, dict):
        data, source, base = from_python(spec, "<dict>"), "<dict>", Path.cwd()
    elif isinstance(spec, Path):
        data, source, base = read_file(spec), display_path(spec), spec.parent
    elif isinstance(spec, str):
        if spec in _REGISTERED:
            kind, payload = _REGISTERED[spec]
            if kind == "dict":
                data, source, base = from_python(payload, spec), spec, Path.cwd()
            elif kind == "text":
                data, source, base = load_yaml(payload, spec), spec, Path.cwd()
            else:
                data, source, base = read_file(payload), display_path(payload), payload.parent
        elif spec in _shipped():
            p = _shipped()[spec]
            data, source, base = read_file(p), display_path(p), p.parent
        elif _looks_like_yaml(spec):
            data, source, base = load_yaml(spec, "<string>"), "<string>", Path.cwd()
        elif spec.endswith((".yaml", ".yml")) or os.sep in spec or "/" in spec or Path(spec).exists():
            p = Path(spec)
            data, source, base = read_file(p, spec), spec, p.parent
        else:
            near = difflib.get_close_matches(spec, list_models(), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise SpecError(f"unknown model '{spec}'{hint}; known: {', '.join(list_models())}")
    else:
        raise SpecError(f"a spec is a model name, a path, YAML text or a dict, not "
                        f"{type(spec).__name__}")
    if not isinstance(data, YMap):
        raise SpecError("a spec must be a YAML mapping (with inputs:, layers:, ...)", file=source,
                        line=getattr(data, "line", 1 if data is not None else None))
    return data, source, base
