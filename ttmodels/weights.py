"""Weight sources, strict key checks, BatchNorm folding.

    sd = load_state_dict("weights/resnet50.safetensors", graph)   # spec key -> float32 tensor
    params = prepare_parameters(graph, sd)                         # node -> {"weight", "bias"}

Sources (``load_state_dict``):
  * a state dict (any ``Mapping[str, Tensor]``), an ``nn.Module`` (its ``state_dict()``);
  * a path to ``.safetensors`` (``safetensors.torch.load_file``) or ``.pth`` / ``.pt`` / ``.bin`` /
    ``.ckpt`` (``torch.load(..., map_location="cpu", weights_only=True)``; a checkpoint dict holding
    ``"state_dict"`` (mmcv / BEVDet) or ``"model"`` is unwrapped);
  * ``"random"`` (or None): seeded He-init weights with BatchNorm statistics calibrated on
    synthetic images (``random_state_dict``);
  * ``"pretrained"``: torchvision's weights for the graph's model name (``ResNet50_Weights.IMAGENET1K_V2``
    for resnet50), downloaded through torchvision's weights API.

``key_map`` (renaming, reshaping or dropping the user's keys; applied before prefix filtering):
  * callable ``f(user_key) -> spec_key | (spec_key, shape) | None``: every user key goes through
    ``f``; a ``(spec_key, shape)`` pair also reshapes the tensor (``torch.reshape``: one ``-1``
    allowed); ``None`` drops the key (it is counted as ignored, never an error).
  * dict: each entry is either
      - a *prefix rename* ``{user_prefix: spec_prefix}`` when the entry's key is ``""`` or ends
        with ``"."``: a user key starting with ``user_prefix`` gets it replaced by ``spec_prefix``
        (``{"module.": ""}`` strips DataParallel's prefix, ``{"backbone.": "img_backbone."}``
        renames a stage). The longest matching prefix wins; ``""`` matches every key;
      - an *exact rename* ``{spec_key: user_key}``: the spec's ``spec_key`` is read from the user's
        ``user_key``. The reverse direction ``{user_key: spec_key}`` is accepted when unambiguous
        (left side is a user key and right side a spec key);
      - a *drop* ``{user_key_or_prefix: None}``: the key (or every key under the prefix, a key
        ending with ``"."``) is dropped (counted as ignored);
      - a *reshape* ``{spec_key: {"from": user_key, "reshape": [d0, d1, ...]}}``: the spec's key
        is read from ``user_key`` (default: ``spec_key`` itself) reshaped (one ``-1`` allowed).
        A tensor whose element count does not fit the shape is a WeightsError naming both keys.
    Exact renames, drops and reshapes are applied first; a key taken by one is not prefix-renamed.
    Keys no entry matches keep their name. Entries that match nothing are listed in the report
    (and in the error message if loading fails), keys that still fit no spec key are reported as
    unexpected. ``ttmodels compare --key-map FILE`` reads the dict form from a YAML or JSON file
    (``null`` drops).

Filtering (after key_map, on spec-side names): ``select_prefix`` (a prefix or a list of them;
``"auto"`` = the top-level names the graph uses, e.g. ``img_backbone.``/``img_neck.`` for BEVDet's
encoder) keeps only keys under those prefixes; ``ignore`` (a prefix or a list: ``build(ignore=...)``,
``--ignore PREFIX``) drops keys under those. Dropped
keys are counted in ``result.report`` and logged ("ignored 1234 keys outside img_backbone./img_neck.").

Strict check: missing, unexpected and mis-shaped keys, and keys with invalid values (non-float,
NaN/Inf, negative BatchNorm variance, sparse), are all listed in one ``WeightsError``. ``{bn}.num_batches_tracked`` is accepted and ignored.
Nothing the user gave is modified: every returned tensor is a fresh float32 copy.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import ops
from .ops.conv2d import batchnorm_scale_shift, fold_batchnorm  # noqa: F401  (the BN math lives with its facts)
from .errors import WeightsError
from .graph import Graph
from .reference import (ReferenceModel, constant_tensor, expected_parameters,
                        node_parameters, optional_keys)

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger("ttmodels.weights")

SHOW = 20                    # list at most this many keys per category in an error message
PTH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Bump when random_state_dict's procedure changes: it is part of the prepared-weight cache key.
RANDOM_INIT_VERSION = 4
# torchvision's weights for a graph name; the rest of the family uses the enum's DEFAULT.
PRETRAINED = {"resnet50": "ResNet50_Weights.IMAGENET1K_V2"}


@dataclass
class LoadReport:
    """What ``load_state_dict`` did besides returning the tensors."""
    source: str
    loaded: int = 0
    ignored: list[str] = field(default_factory=list)        # user keys dropped by filters/key_map
    ignored_reason: str = ""
    renamed: int = 0
    unused_key_map: list[str] = field(default_factory=list)
    skipped_optional: list[str] = field(default_factory=list)  # e.g. num_batches_tracked

    def summary(self) -> str:
        s = f"{self.source}: {self.loaded} tensors"
        if self.ignored:
            s += f", ignored {len(self.ignored)} keys {self.ignored_reason}".rstrip()
        return s


class LoadedStateDict(dict):
    """A plain ``dict`` spec key -> float32 tensor, with the ``report`` of how it was loaded;
    ``owned``: its tensors are fresh copies (False: some may be the caller's own, ``copy=False``)."""
    report: LoadReport
    owned: bool = True


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
    from .files import irregular
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


# ---------------------------------------------------------------------------------------------
# key mapping, filtering, strict check
# ---------------------------------------------------------------------------------------------

def _is_prefix_entry(k: str) -> bool:
    return k == "" or k.endswith(".")


def _reshape_target(shape, where: str) -> tuple[int, ...]:
    """A key_map reshape: a list of ints, each >= 1 or one -1."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not shape or \
            not all(isinstance(d, int) and not isinstance(d, bool) and (d >= 1 or d == -1)
                    for d in shape) or list(shape).count(-1) > 1:
        raise WeightsError(f"key_map {where}: 'reshape' must be a list of sizes >= 1 (at most one "
                           f"-1), got {shape!r}")
    return tuple(shape)


def apply_key_map(raw: Mapping[str, Any], key_map, expected: Mapping[str, Any]
                  ) -> tuple[dict[str, str], list[str], list[str], list[str], int,
                             dict[str, tuple[int, ...]]]:
    """-> (spec key -> user key, dropped user keys, unused key_map entries, conflicts, renamed
    count, spec key -> reshape target). Only names: no tensor of ``raw`` is looked up."""
    if key_map is None:
        return {k: k for k in raw}, [], [], [], 0, {}
    out: dict[str, str] = {}
    reshape: dict[str, tuple[int, ...]] = {}
    dropped, unused, conflicts = [], [], []
    renamed = 0

    def put(spec_key: str, user_key: str):
        nonlocal renamed
        if spec_key in out:
            conflicts.append(f"{spec_key} <- both '{out[spec_key]}' and '{user_key}'")
            return
        out[spec_key] = user_key
        renamed += spec_key != user_key

    if callable(key_map) and not isinstance(key_map, Mapping):
        for uk in raw:
            try:
                sk = key_map(uk)
            except Exception as e:
                raise WeightsError(f"key_map raised on key '{uk}': {type(e).__name__}: {e}") from e
            if sk is None:
                dropped.append(uk)
                continue
            if isinstance(sk, tuple):
                if len(sk) != 2 or not isinstance(sk[0], str):
                    raise WeightsError(f"key_map returned {sk!r} for key '{uk}': give a spec key, "
                                       "(spec key, shape) or None")
                sk, shape = sk
                reshape[sk] = _reshape_target(shape, f"on key '{uk}'")
            put(str(sk), uk)
        return out, dropped, unused, conflicts, renamed, reshape
    if not isinstance(key_map, Mapping):
        raise WeightsError(f"key_map must be a dict or a callable, got {type(key_map).__name__}")

    exact: dict[str, str] = {}        # user key -> spec key
    prefixes: list[tuple[str, str]] = []
    drop_keys: set[str] = set()
    drop_prefixes: list[str] = []
    used_drop: set[str] = set()
    for k, v in key_map.items():
        k = str(k)
        if v is None:
            (drop_prefixes.append(k) if _is_prefix_entry(k) else drop_keys.add(k))
            continue
        if isinstance(v, Mapping):
            bad = [f for f in v if f not in ("from", "reshape")]
            if bad or "reshape" not in v:
                raise WeightsError(f"key_map entry {k!r}: a mapping value is "
                                   "{'from': user key, 'reshape': [sizes]} ('from' optional), got "
                                   f"{dict(v)!r}")
            uk = str(v.get("from", k))
            shape = _reshape_target(v["reshape"], f"entry {k!r}")
            if uk in raw:
                exact[uk] = k
                reshape[k] = shape
            else:
                unused.append(f"{k!r}: {dict(v)!r}")
            continue
        v = str(v)
        if _is_prefix_entry(k):
            prefixes.append((k, v))
        elif k in expected and v in raw:
            exact[v] = k
        elif k in raw and v in expected:
            exact[k] = v
        else:
            unused.append(f"{k!r}: {v!r}")
    prefixes.sort(key=lambda kv: -len(kv[0]))
    drop_prefixes.sort(key=len, reverse=True)
    used_prefix = set()
    for uk in raw:
        if uk in exact:
            put(exact[uk], uk)
            continue
        if uk in drop_keys:
            used_drop.add(uk)
            dropped.append(uk)
            continue
        dp = next((p for p in drop_prefixes if uk.startswith(p)), None)
        if dp is not None:
            used_drop.add(dp)
            dropped.append(uk)
            continue
        for up, sp in prefixes:
            if uk.startswith(up):
                used_prefix.add(up)
                put(sp + uk[len(up):], uk)
                break
        else:
            put(uk, uk)
    unused += [f"{up!r}: {sp!r}" for up, sp in prefixes if up not in used_prefix]
    unused += [f"{d!r}: None" for d in sorted(drop_keys) + drop_prefixes if d not in used_drop]
    return out, dropped, unused, conflicts, renamed, reshape


def _as_prefixes(p) -> tuple[str, ...]:
    if p is None:
        return ()
    if isinstance(p, str):
        p = (p,)
    return tuple(x if x.endswith(".") else x + "." for x in p)


def graph_prefixes(graph: Graph) -> tuple[str, ...]:
    """Top-level key names the graph uses ("img_backbone.", "img_neck." for BEVDet's encoder)."""
    keys = list(expected_parameters(graph)) + sorted(optional_keys(graph))
    return tuple(dict.fromkeys(k.split(".", 1)[0] + "." for k in keys))


def _fmt_list(title: str, items: Sequence[str]) -> str:
    items = list(items)
    more = f" ... and {len(items) - SHOW} more" if len(items) > SHOW else ""
    return f"  {title} ({len(items)}): " + ", ".join(items[:SHOW]) + more


def _shape(t) -> list[int]:
    return list(getattr(t, "shape", ()))


def _covering_prefixes(unexpected: Sequence[str], used: Sequence[str]) -> list[str]:
    """For ``ignore=``: each unexpected key's shortest dotted prefix that no used key starts
    with (``model.22.dfl.`` for Ultralytics' ``model.22.dfl.conv.weight`` next to
    ``model.22.cv2...``), in order, once each. Keys without such a prefix are left out."""
    def prefixes(k: str):
        parts = k.split(".")
        return (".".join(parts[:i]) + "." for i in range(1, len(parts)))
    taken = {p for u in used for p in prefixes(u)}
    out: dict[str, None] = {}
    for k in unexpected:
        p = next((p for p in prefixes(k) if p not in taken), None)
        if p is not None:
            out[p] = None
    return list(out)


def check_state_dict(graph: Graph, sd: Mapping[str, Any], *, source: str = "state dict",
                     strict: bool = True, notes: Sequence[str] = ()) -> None:
    """Raise one WeightsError listing every missing, unexpected (when ``strict``) and mis-shaped
    key (wrong shape, not a tensor) and every key with invalid values (non-floating dtype, NaN or
    Inf, negative BatchNorm variance, sparse layout)."""
    import torch
    expected = expected_parameters(graph)
    optional = optional_keys(graph)
    missing = [k for k in expected if k not in sd]
    unexpected = [k for k in sd if k not in expected and k not in optional] if strict else []
    mismatched: list[tuple[str, tuple, Any]] = []
    invalid: list[tuple[str, str]] = []          # right shape, unusable values
    variances = {f"{bn}.running_var" for n in graph.nodes for bn in ops.get(n.op).batch_norms(n)}
    lines = []
    for k, shape in expected.items():
        if k not in sd:
            continue
        t = sd[k]
        if not isinstance(t, torch.Tensor):
            mismatched.append((k, shape, f"not a tensor ({type(t).__name__})"))
        elif t.layout != torch.strided:
            # isfinite and the copies below are not implemented for sparse layouts
            invalid.append((k, f"{t.layout} tensor; store it dense (tensor.to_dense())"))
        elif t.is_meta:
            invalid.append((k, "meta tensor: it has a shape but no values (load the real "
                               "weights, e.g. without device='meta')"))
        elif tuple(t.shape) != tuple(shape):
            mismatched.append((k, shape, tuple(t.shape)))
        elif not (t.is_floating_point()):
            invalid.append((k, f"dtype {t.dtype} is not floating point"))
        elif not bool(torch.isfinite(t).all()):
            invalid.append((k, "contains NaN or Inf"))
        elif k in variances and bool((t < 0).any()):
            invalid.append((k, "negative BatchNorm variance"))
    if not (missing or unexpected or mismatched or invalid):
        return
    for k, shape, got in mismatched:
        g = list(got) if isinstance(got, tuple) else got
        lines.append(f"{k}: expected {list(shape)}, got {g}")
    counts = ", ".join(f"{n} {what}" for n, what in ((len(missing), "missing"),
                                                      (len(unexpected), "unexpected"),
                                                      (len(mismatched), "mis-shaped"),
                                                      (len(invalid), "with invalid values"))
                       if n)
    msg = [f"weights from {source} do not fit '{graph.name}' ({len(expected)} keys expected): {counts}"]
    if missing:
        msg.append(_fmt_list("missing", missing))
    if unexpected:
        msg.append(_fmt_list("unexpected", unexpected))
    if mismatched:
        msg.append(_fmt_list("mis-shaped", lines))
    if invalid:
        msg.append(_fmt_list("invalid values", [f"{k}: {why}" for k, why in invalid]))
    msg.extend(f"  {n}" for n in notes)
    if unexpected and missing:
        msg.append("  hint: pass key_map= to rename keys (see weights/README.md)")
    elif unexpected:
        pre = _covering_prefixes(unexpected, list(expected) + list(optional))
        if pre:
            more = f" ... and {len(pre) - 3} more" if len(pre) > 3 else ""
            msg.append(f"  hint: ignore={pre[:3]}{more} drops the keys under those prefixes "
                       f"(command line: {' '.join('--ignore ' + x for x in pre[:3])}); key_map= "
                       "renames keys")
        else:
            msg.append("  hint: pass key_map= to rename or drop keys (see weights/README.md)")
    raise WeightsError("\n".join(msg), missing=missing, unexpected=unexpected, mismatched=mismatched,
                       invalid=invalid)


# ---------------------------------------------------------------------------------------------
# the loader
# ---------------------------------------------------------------------------------------------

def load_state_dict(source, graph: Graph, *, key_map=None, seed: int = 0,
                    select_prefix: str | Sequence[str] | None = None,
                    ignore: str | Sequence[str] | None = None,
                    strict: bool = True, copy: bool = True) -> LoadedStateDict:
    """The graph's parameters from ``source`` as ``{spec_key: float32 tensor}`` (fresh copies).

    See the module docstring for sources, ``key_map`` and filters. ``strict=False`` tolerates
    unexpected keys (missing and mis-shaped ones are always errors). ``seed`` is for "random".
    ``copy=False``: float32 CPU tensors of the source are returned as they are (``owned`` is then
    False): for a caller that only reads them, e.g. to fold BatchNorm into new tensors, which
    saves holding the weights three times (source, copy, folded) while they are prepared.
    """
    import torch
    desc = describe_source(source)
    if source is None or (isinstance(source, str) and source == "random"):
        sd = random_state_dict(graph, seed=seed)
        out = LoadedStateDict(sd)
        out.report = LoadReport(source=f"random (seed {seed}, BatchNorm calibrated)", loaded=len(sd))
        return out
    if isinstance(source, str) and source == "pretrained":
        raw, desc = pretrained_state_dict(graph)
    else:
        raw = read_source(source)

    expected = expected_parameters(graph)
    optional = optional_keys(graph)
    check_key_types(raw, desc, key_map)
    mapped, dropped, unused, conflicts, renamed, reshape = apply_key_map(raw, key_map, expected)

    report = LoadReport(source=desc, renamed=renamed, unused_key_map=unused)
    keep = _as_prefixes(graph_prefixes(graph) if select_prefix == "auto" else select_prefix)
    drop = _as_prefixes(ignore)
    unused_by_spec = tuple(graph.ignore_weights)
    filtered = _Renamed(raw)           # tensors are looked up only for the expected keys
    ignored = list(dropped)
    spec_skipped = False
    for k, uk in mapped.items():
        if unused_by_spec and k.startswith(unused_by_spec) and k not in expected:
            ignored.append(k)
            spec_skipped = True
        # k + ".": a top-level key without a dot (a layer_scale named "gamma") is its own prefix
        elif (keep and not (k + ".").startswith(keep)) or (drop and k.startswith(drop)):
            ignored.append(k)
        elif k in optional and k not in expected:
            report.skipped_optional.append(k)
        else:
            filtered.names[k] = uk
            if k in reshape:
                filtered.reshape[k] = reshape[k]
    report.ignored = ignored
    reasons = []
    if spec_skipped:
        reasons.append("under the spec's ignore_weights " + "/".join(unused_by_spec))
    if keep:
        reasons.append("outside " + "/".join(keep))
    if drop:
        reasons.append("under " + "/".join(drop))
    if dropped:
        reasons.append("dropped by key_map")
    report.ignored_reason = ", ".join(reasons)
    if ignored:
        log.info("%s: ignored %d keys %s", desc, len(ignored), report.ignored_reason)

    notes = []
    if conflicts:
        notes.append(_fmt_list("key_map conflicts", conflicts).strip())
    if unused:
        notes.append(_fmt_list("key_map entries that matched nothing", unused).strip())
    if ignored:
        # Shown only with an error, where an ignored key is often the one a key_map forgot.
        notes.append(_fmt_list(f"ignored ({report.ignored_reason})", ignored).strip())
    check_state_dict(graph, filtered, source=desc, strict=strict, notes=notes)
    if conflicts:
        raise WeightsError(f"weights from {desc}: key_map maps several keys to one spec key\n"
                           + "\n".join(f"  {n}" for n in notes), unexpected=conflicts)

    out = LoadedStateDict()
    for k in expected:
        out[k] = filtered[k].detach().to(device="cpu", dtype=torch.float32, copy=copy).contiguous()
    out.owned = copy
    report.loaded = len(out)
    out.report = report
    warn_huge(out, desc)
    return out


class _Renamed(Mapping):
    """Spec key -> the user's tensor under its own key, looked up (read, for a safetensors file)
    only when asked for, and once."""

    def __init__(self, raw: Mapping):
        self.raw, self.names, self._got = raw, {}, {}
        self.reshape: dict[str, tuple[int, ...]] = {}     # spec key -> key_map reshape target

    def __getitem__(self, k):
        if k not in self._got:
            t = self.raw[self.names[k]]
            if k in self.reshape:
                t = self._reshaped(k, t)
            self._got[k] = t
        return self._got[k]

    def _reshaped(self, k, t):
        shape, uk = self.reshape[k], self.names[k]
        src = f"'{uk}'" if uk == k else f"'{uk}' (for spec key '{k}')"
        if not hasattr(t, "reshape") or not hasattr(t, "shape"):
            raise WeightsError(f"key_map: cannot reshape {src}: not a tensor "
                               f"({type(t).__name__})", mismatched=[(k, shape, type(t).__name__)])
        try:
            return t.reshape(shape)               # a view where it can be: the source is untouched
        except RuntimeError:
            n = t.numel()
            raise WeightsError(f"key_map: cannot reshape {src} of shape {list(t.shape)} ({n:,} "
                               f"values) to {list(shape)}", mismatched=[(k, shape, tuple(t.shape))]
                               ) from None

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __contains__(self, k):
        return k in self.names


def check_key_types(raw: Mapping, source: str, key_map=None) -> None:
    """Keys are strings (a callable ``key_map`` is given the keys as they are, and names them)."""
    if callable(key_map) and not isinstance(key_map, Mapping):
        return
    bad = [k for k in raw if not isinstance(k, str)]
    if bad:
        shown = ", ".join(f"{type(k).__name__} {k!r:.40}" for k in bad[:SHOW])
        raise WeightsError(f"weights from {source}: {len(bad)} keys are not strings ({shown}); "
                           "state dict keys are names like 'conv1.weight' (a callable key_map= "
                           "may name them)")


# Trained networks' weights are far below this (|w| < 100 typically); a few layers of such
# values overflow bfloat16's 3.4e38 (conv and matmul sum thousands of products), and the first
# sign is then an Inf or NaN output.
HUGE_WEIGHT = 1e8


def warn_huge(sd: Mapping[str, "torch.Tensor"], source: str) -> list[str]:
    """Log a warning naming the keys with values beyond ``HUGE_WEIGHT`` (BatchNorm variances
    excepted: they divide); returns those keys."""
    huge = []
    for k, t in sd.items():
        if k.endswith("running_var") or not t.numel():
            continue
        m = float(t.abs().max())
        if m > HUGE_WEIGHT:
            huge.append(f"{k} (|w| up to {m:.3g})")
    if huge:
        log.warning("weights from %s have huge values, outputs may overflow to Inf/NaN: %s",
                    source, ", ".join(huge[:SHOW]) + (f" ... and {len(huge) - SHOW} more"
                                                      if len(huge) > SHOW else ""))
    return huge


# ---------------------------------------------------------------------------------------------
# pretrained (torchvision)
# ---------------------------------------------------------------------------------------------

def pretrained_weights_name(graph: Graph) -> str:
    """torchvision's weights enum entry for the graph ("ResNet50_Weights.IMAGENET1K_V2")."""
    name = graph.name
    if name in PRETRAINED:
        return PRETRAINED[name]
    try:
        import torchvision
        return str(torchvision.models.get_model_weights(name).DEFAULT)
    except Exception as e:
        raise WeightsError(
            f"no pretrained weights known for '{name}': 'pretrained' covers torchvision's models "
            f"(resnet18 ... resnet152, resnext, wide_resnet). For BEVDet download the checkpoint "
            f"(see weights/README.md) and pass its path, e.g. weights='weights/bevdet-r50.pth'") from e


def pretrained_state_dict(graph: Graph) -> tuple[dict[str, Any], str]:
    """Download (or take from torch.hub's cache) torchvision's weights for the graph."""
    wname = pretrained_weights_name(graph)
    import torchvision
    try:
        weights = torchvision.models.get_weight(wname)
    except Exception as e:
        raise WeightsError(f"torchvision has no weights '{wname}': {e}") from e
    try:
        sd = weights.get_state_dict(progress=False, check_hash=True)
    except Exception as e:
        fname = f"{graph.name}.safetensors"
        raise WeightsError(
            f"could not download torchvision's {wname} from {weights.url} "
            f"({type(e).__name__}: {e}). Without internet access, on a machine that has it run:\n"
            f"  python -c \"import torchvision; from safetensors.torch import save_file; "
            f"m = torchvision.models.get_model('{graph.name}', weights='{wname.split('.')[-1]}'); "
            f"save_file({{k: v.contiguous() for k, v in m.state_dict().items()}}, '{fname}')\"\n"
            f"then copy {fname} here (e.g. to weights/{fname}) and pass "
            f"weights='weights/{fname}' (see weights/README.md)") from e
    return dict(sd), f"torchvision {wname}"


# ---------------------------------------------------------------------------------------------
# random weights with calibrated BatchNorm
# ---------------------------------------------------------------------------------------------

def synthetic_images(n: int, c: int, h: int, w: int, *, seed: int = 0) -> "torch.Tensor":
    """Smooth random images (noise at a few scales, values in [0, 1]) normalised like ImageNet."""
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, c, h, w)
    for cells, amp in ((2, 1.0), (6, 0.7), (24, 0.4), (max(h, w), 0.15)):
        ch, cw = max(1, min(cells, h)), max(1, min(cells, w))
        noise = torch.randn(n, c, ch, cw, generator=g)
        x += amp * F.interpolate(noise, size=(h, w), mode="bilinear", align_corners=False)
    x = (x - x.mean(dim=(1, 2, 3), keepdim=True)) / x.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6)
    x = (0.45 + 0.25 * x + 0.1 * torch.randn(n, c, 1, 1, generator=g)).clamp(0.0, 1.0)
    if c == 3:
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    else:
        mean, std = torch.tensor(0.45), torch.tensor(0.226)
    return (x - mean) / std


def _residual_branch_ends(graph: Graph) -> set[str]:
    """Convs with BN (and no activation) feeding an activation + activation add: residual branch
    ends and projection shortcuts. They get small BN scales so sums stay O(1) along the trunk,
    as in trained ResNets (whose last-BN gammas are small)."""
    acts = set(graph.inputs) | {n.name for n in graph.nodes}
    ends = set()
    for n in graph.nodes:
        if n.op == "add" and all(i in acts for i in n.inputs):
            for i in n.inputs:
                if i in graph.inputs:
                    continue
                src = graph.node(i)
                if (src.op == "conv2d" and src.bn and not src.attrs.get("activation")
                        and not _is_projection(graph, src)):
                    ends.add(src.name)
    return ends


def _is_projection(graph: Graph, conv) -> bool:
    """A shortcut conv (reads the block's input directly, like torchvision's downsample.0) as
    opposed to the last conv of a residual branch: its input is not produced by a conv chain of the
    same block. Recognised by its input also feeding another conv (the branch's first conv)."""
    src = conv.inputs[0]
    return any(n.op == "conv2d" and n.name != conv.name for n in graph.consumers(src))


# A BatchNorm net at init is chaotic (its input-output sensitivity grows exponentially with
# depth; Yang et al. 2019, "A mean field theory of batch normalization"); trained nets are not.
# Deep chains without identity paths (MobileNet's expand -> depthwise -> project, EfficientNet's
# MBConv) amplify any rounding then, so their BNs before a ReLU6 / SiLU / ... get beta ~ 1: most
# units sit in the activation's near-linear part and the random net stays tame. ReLU ResNets keep
# beta ~ 0 (their small residual-branch gammas suffice; their published PCCs use that init).
_PRE_ACT_BN_SHIFT = 1.0


def _bn_shift(node, graph: Graph | None = None) -> float:
    act = node.attrs.get("activation")
    if act is None and graph is not None:
        # the activation as a layer of its own right after (e.g. hardswish, which fuses nowhere)
        users = graph.consumers(node.name)
        if len(users) == 1 and users[0].op in activation_names():
            act = users[0].op
    if act == "relu" and graph is not None and _in_depthwise_chain(node, graph):
        # MobileNet-style chains with ReLU (MNASNet): as tame as the ReLU6 ones only when
        # shifted too; ResNets (no depthwise convs) keep beta ~ 0
        return _PRE_ACT_BN_SHIFT
    return _PRE_ACT_BN_SHIFT if act is not None and act != "relu" else 0.0


def _is_depthwise(node) -> bool:
    a = node.attrs
    return node.op == "conv2d" and a.get("groups", 1) > 1 and \
        a.get("groups") == a.get("out_channels") == a.get("in_channels")


def _in_depthwise_chain(node, graph: Graph) -> bool:
    """A depthwise conv, or a conv feeding one (an inverted residual's expansion)."""
    return _is_depthwise(node) or any(_is_depthwise(c) for c in graph.consumers(node.name))


def activation_names() -> tuple[str, ...]:
    from .activations import NAMES
    return NAMES


def calibration_batch_size(graph: Graph) -> int:
    """Enough synthetic images that deep BN statistics generalise to held-out images (8 at
    224x224; 4..32, scaled inversely with the input's pixel count to bound the cost)."""
    pixels = max((s.h * s.w for s in graph.inputs.values()), default=224 * 224)
    return max(4, min(32, -(-8 * 224 * 224 // max(1, pixels))))


def random_state_dict(graph: Graph, *, seed: int = 0, calibrate: bool = True,
                      calibration_batch: int | None = None,
                      bn_shift: Mapping[str, float] | None = None) -> dict[str, "torch.Tensor"]:
    """Seeded random parameters with realistic activation scales.

    1. Convs: He-normal (std sqrt(2 / fan_in)), small biases. BatchNorm: weight ~ U(0.5, 1.0)
       (U(0.01, 0.1) on residual-branch ends, see ``_residual_branch_ends``), bias ~ N(0, 0.1).
       Linear: N(0, 1/in). Weight-loaded constants: U(0.5, 1.5) if multiplied, else N(0, 0.1).
    2. Calibration (``calibrate``): ``calibration_batch`` (default ``calibration_batch_size``)
       synthetic images (``synthetic_images``, seeded with ``seed``)
       run through the ReferenceModel in topological order. Before each conv+BN, its raw output on
       the batch sets the BN's running_mean / running_var (biased) to the batch statistics, so the
       BN output has per-channel mean = bias and std = weight. Convs without BN and linears are
       rescaled so their output RMS is 1 (logits O(1)). Later layers see the calibrated earlier ones.

    ``bn_shift`` ``{node-name prefix: shift}`` replaces ``_bn_shift`` for the BNs of nodes under
    a prefix (the longest wins): e.g. ``{"decoder.": 1.0}`` for a plain conv-BN-ReLU chain, which
    at beta ~ 0 is as chaotic as any deep random BN net (a UNet decoder), unlike trained ones.
    """
    import torch
    g = torch.Generator().manual_seed(seed)
    expected = expected_parameters(graph)
    sd: dict[str, torch.Tensor] = {}
    ends = _residual_branch_ends(graph)
    prefixes = sorted(bn_shift or (), key=len, reverse=True)

    def shift(node):        # bn_shift's prefixes first, else the default rule
        p = next((p for p in prefixes if node.name.startswith(p)), None)
        return _bn_shift(node, graph) if p is None else float(bn_shift[p])
    init = RandomInit(g, expected, ends, shift)
    for node in graph.nodes:
        fn = ops.get(node.op).init_random        # the op's module: its parameters' distribution
        if fn is not None:
            sd.update(fn(node, init))
    for c in graph.constants.values():
        if c.weights and c.weights not in sd:
            shape = tuple(int(s) for s in c.shape)
            if any(n.op == "multiply" for n in graph.consumers(c.name)):
                sd[c.weights] = 0.5 + torch.rand(shape, generator=g)
            else:
                sd[c.weights] = 0.1 * torch.randn(shape, generator=g)
    if calibrate and graph.nodes:
        _calibrate(graph, sd, seed=seed, batch=calibration_batch or calibration_batch_size(graph))
    return sd


@dataclass(frozen=True)
class RandomInit:
    """What an op's ``init_random`` (``ttmodels/ops/<op>.py``) draws with: the seeded generator
    (ops draw in graph order), the expected key shapes, the convs that end a residual branch
    (``_residual_branch_ends``: a small BN scale) and the BN bias shift before a non-relu
    activation (``_bn_shift``)."""
    g: Any
    expected: Mapping[str, tuple[int, ...]]
    residual_ends: set
    bn_shift: Any


def _calibrate(graph: Graph, sd: dict, *, seed: int, batch: int) -> None:
    import torch
    model = ReferenceModel(graph, sd)
    inputs = {name: synthetic_images(batch, shape.c, shape.h, shape.w, seed=seed + i)
              for i, (name, shape) in enumerate(graph.inputs.items())}
    last_use: dict[str, int] = {}
    for idx, n in enumerate(graph.nodes):
        for i in n.inputs:
            last_use[i] = idx
    keep = set(graph.outputs)

    env: dict[str, torch.Tensor] = dict(inputs)
    with torch.no_grad():
        for idx, node in enumerate(graph.nodes):
            # the op's module sets its BN statistics / rescales its weights on this batch
            fn = ops.get(node.op).calibrate or type(model).eval_node
            model.bind(node, fn(model, node, env), env)
            for i in node.inputs:
                if last_use.get(i) == idx and i not in keep and i in env:
                    del env[i]
    for k in sd:
        sd[k] = model.params[k].clone()


# ---------------------------------------------------------------------------------------------
# BatchNorm folding, prepared parameters
# ---------------------------------------------------------------------------------------------

def prepared_shapes(graph: Graph) -> dict[str, dict[str, tuple[int, ...]]]:
    """The shapes ``prepare_parameters`` produces: node/constant name -> {param: shape}."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    exp = expected_parameters(graph)
    for node in graph.nodes:
        shapes = ops.get(node.op).prepared_shapes
        if shapes is not None:
            out[node.name] = shapes(node, exp)
    for c in graph.constants.values():
        out[c.name] = {"value": tuple(int(s) for s in c.shape)}
    return out


def prepare_parameters(graph: Graph, state_dict: Mapping[str, "torch.Tensor"], *,
                       consume: bool = False) -> dict[str, dict[str, "torch.Tensor"]]:
    """What the layer builder consumes: node name -> float32 tensors, torch layouts.

    conv2d: ``weight`` [O, I/groups, kh, kw] and ``bias`` [O] with any BatchNorm folded in
    (``bias`` present iff the conv has a bias or a BN); linear: ``weight`` [out, in], ``bias``
    [out] if it has one; every constant: ``value`` of its shape. ``state_dict`` uses spec keys
    (``load_state_dict``'s result) and is not modified -- unless ``consume``: a state dict the
    caller owns (``load_state_dict``'s) is emptied of the conv/linear/BN entries as they are
    folded, so that the weights are never held three times over (source, copy, folded); its
    tensors are used without copying when they are fresh copies (``owned``, the default), and
    copied otherwise (``load_state_dict(..., copy=False)`` hands the source's own tensors over).
    """
    import torch
    check_state_dict(graph, state_dict, strict=False)
    if consume:
        uses: dict[str, int] = {}
        for node in graph.nodes:
            for k in node_parameters(node):
                uses[k] = uses.get(k, 0) + 1

        def take(k):                                # the last reader of a (shared) key pops it
            uses[k] -= 1
            return state_dict.pop(k) if uses[k] == 0 else state_dict[k]  # type: ignore[attr-defined]
        owned = getattr(state_dict, "owned", True)
        f32 = lambda t: t.detach().to(dtype=torch.float32, copy=not owned).contiguous()  # noqa: E731
    else:
        take = state_dict.__getitem__
        f32 = lambda t: t.detach().to(dtype=torch.float32, copy=True).contiguous()  # noqa: E731
    out: dict[str, dict[str, torch.Tensor]] = {}
    for node in graph.nodes:
        prepare = ops.get(node.op).prepare       # the op's module: BN folded, torch layouts
        if prepare is not None:
            out[node.name] = prepare(node, take, f32, state_dict)
    for name, c in graph.constants.items():
        out[name] = {"value": constant_tensor(c, state_dict)}
    return out


def pretrained_available(name: str) -> bool:
    """True when torchvision's pretrained weights for model ``name`` are already on this machine
    (torch.hub's checkpoint cache), so "pretrained" will load without a download. Never touches
    the network: the demos use it to pick a default without hanging on a closed network."""
    import os

    try:
        import torch
        import torchvision

        weights = torchvision.models.get_weight(PRETRAINED[name]) if name in PRETRAINED else \
            torchvision.models.get_model_weights(name).DEFAULT
        path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))
        return os.path.isfile(path)
    except Exception:
        return False
