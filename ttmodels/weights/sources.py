"""Reading weight sources: a state dict, an ``nn.Module``, ``.safetensors`` or a torch checkpoint
(``read_source``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ..errors import WeightsError


PTH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt")


# ---------------------------------------------------------------------------------------------
# reading sources
# ---------------------------------------------------------------------------------------------

def describe_source(source) -> str:
    if source is None:
        return "random"
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    if isinstance(source, Mapping):
        return f"state dict ({len(source)} keys)"
    return f"{type(source).__name__} module"


def _is_module(obj) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, torch.nn.Module)


def read_file(path) -> Mapping[str, Any]:
    """The raw state dict in a ``.safetensors`` / ``.pth`` file (no key checks). A safetensors
    file's tensors are read when looked up (``SafetensorsFile``), so keys the graph does not use
    cost nothing but their header entries."""
    from ..language.files import irregular
    if str(path) == "":
        raise WeightsError("weights='' names no file: pass 'random', 'pretrained', a state dict, "
                           "an nn.Module or a .safetensors/.pth path")
    p = Path(path)
    try:
        kind = irregular(p)
    except (OSError, ValueError):
        kind = None                 # missing or unusable name: reported below as not found
    if kind is not None and kind != "a directory":
        # checked before anything opens it: a FIFO blocks, a device may never end (/dev/zero)
        raise WeightsError(f"weights file '{path}' is {kind}, not a weights file")
    if not p.is_file():
        import difflib
        near = difflib.get_close_matches(str(path), ("random", "pretrained"), n=1, cutoff=0.6) \
            if not p.suffix and len(p.parts) == 1 else []
        raise WeightsError(f"weights file '{path}' not found" +
                           (" (it is a directory)" if p.is_dir() else "") +
                           (f"; did you mean weights='{near[0]}'?" if near else ""))
    # the bytes decide, not the name (a safetensors file saved as .bin is still safetensors);
    # the suffix only matters for content no format claims (then the reader says it is corrupt)
    suffix = _sniff(p) or p.suffix.lower()
    if suffix not in (".safetensors",) + PTH_SUFFIXES:
        raise WeightsError(f"weights file '{p}': unknown format; expected .safetensors or "
                           f"{'/'.join(PTH_SUFFIXES)}")
    if suffix == ".safetensors":
        try:
            return SafetensorsFile(p)
        except Exception as e:
            raise WeightsError(f"weights file '{path}' is not a readable safetensors file "
                               f"(corrupt or truncated?): {type(e).__name__}: {e}") from e
    import pickle

    import torch
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise WeightsError(
            f"weights file '{path}' was refused: it holds pickled objects other than tensors and "
            f"plain containers, and ttmodels only loads with torch.load(weights_only=True). Save "
            f"just the state dict (torch.save(model.state_dict(), ...)) or, better, convert it to "
            f".safetensors. ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from e
    except Exception as e:
        raise WeightsError(f"weights file '{path}' cannot be read as a torch checkpoint (corrupt "
                           f"or truncated?): {type(e).__name__}: {e}") from e
    return _unwrap_checkpoint(obj, path)


class SafetensorsFile(Mapping):
    """A ``.safetensors`` file as a read-only mapping: keys from its header, each tensor read
    when it is looked up (a header of 800k entries the graph does not use is not loaded)."""

    def __init__(self, path: Path):
        from safetensors import safe_open
        self.path = path
        self._file = safe_open(str(path), framework="pt", device="cpu")
        self._keys = list(self._file.keys())
        self._set = set(self._keys)

    def __getitem__(self, k):
        if k not in self._set:
            raise KeyError(k)
        try:
            return self._file.get_tensor(k)
        except Exception as e:
            raise WeightsError(f"weights file '{self.path}': tensor '{k}' is unreadable "
                               f"(corrupt or truncated?): {type(e).__name__}: {e}") from e

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)

    def __contains__(self, k):
        return k in self._set


def _sniff(p: Path) -> str | None:
    """The format the file's first bytes announce, None when they announce none."""
    with open(p, "rb") as f:
        head = f.read(9)
    if head[:2] == b"PK" or head[:1] == b"\x80":      # torch zip / legacy pickle
        return ".pth"
    if len(head) == 9 and head[8:9] == b"{":            # safetensors: u64 header size, then JSON
        return ".safetensors"
    return None


def _unwrap_checkpoint(obj, path) -> dict[str, Any]:
    if isinstance(obj, Mapping):
        for k in ("state_dict", "model"):   # mmcv/BEVDet checkpoints, then generic training ones
            if isinstance(obj.get(k), Mapping):
                return dict(obj[k])
        return dict(obj)
    raise WeightsError(f"weights file '{path}' holds a {type(obj).__name__}, not a state dict")


def read_source(source) -> Mapping[str, Any]:
    """The user's raw key -> tensor mapping (not copied yet, never modified)."""
    if isinstance(source, Mapping):
        return dict(source)
    if _is_module(source):
        return dict(source.state_dict())
    if isinstance(source, (str, os.PathLike)):
        return read_file(source)
    raise WeightsError(f"unsupported weights source of type {type(source).__name__}: expected a "
                       "state dict, an nn.Module, a .safetensors/.pth path, 'random' or 'pretrained'")
