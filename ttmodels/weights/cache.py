"""Prepared-weight cache: safetensors files under a cache directory.

What is cached: the output of ``weights.prepare_parameters`` -- every conv's BN-folded float32
weight/bias, linear weights, constants -- stored as ``"{node}::{param}"`` tensors, optionally
after a ``postprocess`` step (e.g. the builder's pre-quantized copies in TTNN's tile formats),
so a second build skips reading the source, random-weight calibration, folding and quantizing.

Where: ``dir`` argument > ``$TTMODELS_CACHE_DIR`` > ``~/.cache/ttmodels``. One file per key,
``{key}.safetensors``, written atomically (temp file + rename).

The key is a SHA-256 over (see ``cache_key``): the cache format and preparation versions; the
graph's structure (each node's name, op, inputs, attrs, weights/bn prefixes, weight precision;
constants; batch size and spatial sizes excluded since parameters don't depend on them); the
expected parameter keys and shapes; the precision; a fingerprint of the weights source (hash of a
state dict's names/dtypes/shapes/bytes; for a file: resolved path, size, mtime and a hash of its
content; "random": seed, init version and the input sizes calibration ran at; "pretrained":
torchvision's weights name) and the loading options (prefix filters, strict, postprocess tag;
a dict key_map by value, a callable one by what it does: the spec key it gives each of the
source's keys -- never by its code, which does not show closure variables, ``partial``
arguments or an object's state).

Nothing read back is trusted: an entry that fails to parse, was written for another key, has an
unknown format version, a checksum (over names, dtypes, shapes and bytes) that does not match its
tensors, or tensor names/shapes/dtypes other than expected is logged, deleted and rebuilt. A cache
location that cannot be used (a name too long, a NUL, an unknown ``~user``, not a path) means
no cache, with a warning: a cache must never break a build.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import zlib
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..language.graph import Graph

log = logging.getLogger("ttmodels.weights.cache")

CACHE_FORMAT = "2"          # 2: CRC-32 entry checksums (were blake2b)
# Bump when prepare_parameters' output changes (folding, layouts, names).
PREPARE_VERSION = 1
SEP = "::"
_CHUNK = 1 << 20


def default_cache_dir() -> Path:
    env = os.environ.get("TTMODELS_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ttmodels"


# ---------------------------------------------------------------------------------------------
# hashing
# ---------------------------------------------------------------------------------------------

def _update_tensor(h, name: str, t) -> None:
    import torch
    if t.is_meta or t.layout != torch.strided:
        # no bytes to hash (meta) or no contiguous form (sparse): the loader refuses such a
        # tensor under a key the graph uses, so nothing is cached from it but what it ignores
        h.update(f"{name}|{t.dtype}|{list(t.shape)}|{t.layout}|meta={t.is_meta}|".encode())
        return
    t = t.detach().cpu().contiguous()
    h.update(f"{name}|{t.dtype}|{list(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)


class _Crc32:
    """``hashlib``-style CRC-32: a stored entry's integrity check against truncation and
    corruption (not a security measure), read on every warm build: 4x cheaper than blake2b, which
    cost ~0.1 s of a ResNet50 build just to re-read its 100 MB."""

    def __init__(self):
        self.value = 0

    def update(self, data) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"crc32:{self.value:08x}"


def tensors_checksum(tensors: Mapping[str, "torch.Tensor"]) -> str:
    h = _Crc32()
    for k in sorted(tensors):
        _update_tensor(h, k, tensors[k])
    return h.hexdigest()


def file_fingerprint(path) -> dict[str, Any]:
    from ..language.files import irregular
    try:
        p = Path(path).resolve()
        if irregular(p) is not None:
            # never hashed: a FIFO blocks, a device never ends; the loader says what it is
            return {"file": str(p), "unreadable": True}
        st = p.stat()
        h = hashlib.blake2b(digest_size=32)
        with open(p, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    except (OSError, ValueError, RuntimeError):
        # Missing/unreadable: the loader raises the proper WeightsError; no cache lookup needed.
        return {"file": str(path), "unreadable": True}
    return {"file": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "blake2b": h.hexdigest()}


def key_map_identity(graph: "Graph", source, key_map) -> Any:
    """What a callable ``key_map`` does to ``source``'s keys, JSON-able: [user key, spec key or
    None] for each key (its code says nothing of closure variables, ``partial`` arguments or an
    object's state). None when the source's keys are not at hand without a download
    ("pretrained"): such a build is not cached."""
    from .reference import expected_parameters
    from . import apply_key_map, read_source
    if isinstance(source, str) and source == "pretrained":
        return None
    raw = read_source(source)                    # a .pth is read here; a safetensors' header only
    mapped, dropped, *_, reshape = apply_key_map(raw, key_map, expected_parameters(graph))
    pairs = [[repr(u), s] + ([list(reshape[s])] if s in reshape else [])
             for s, u in mapped.items()] + [[repr(u), None] for u in dropped]
    return sorted(pairs, key=lambda p: (p[0], str(p[1])))


def source_fingerprint(source, *, seed: int = 0) -> Any:
    """A JSON-able identity of a weights source, computed without loading it into the graph."""
    from . import RANDOM_INIT_VERSION, _is_module
    if source is None or (isinstance(source, str) and source == "random"):
        return {"random": seed, "init": RANDOM_INIT_VERSION}
    if isinstance(source, str) and source == "pretrained":
        return {"pretrained": True}          # completed with the weights name in cache_key
    if isinstance(source, (str, os.PathLike)):
        return file_fingerprint(source)
    if isinstance(source, Mapping) or _is_module(source):
        import torch
        sd = source if isinstance(source, Mapping) else source.state_dict()
        h = hashlib.blake2b(digest_size=32)
        for k in sorted(sd, key=str):
            v = sd[k]
            if isinstance(v, torch.Tensor):
                _update_tensor(h, str(k), v)
            else:
                h.update(f"{k}|{type(v).__name__}|{v!r}".encode())
        return {"state_dict": h.hexdigest()}
    return {"unhashable": type(source).__name__}


def _plain(x):
    if isinstance(x, Mapping):      # first: an op's Attrs is a dataclass read as its mapping
        return {str(k): _plain(v) for k, v in x.items()}
    if is_dataclass(x) and not isinstance(x, type):
        return {k: _plain(v) for k, v in asdict(x).items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


def graph_fingerprint(graph: "Graph") -> dict[str, Any]:
    from .reference import expected_parameters
    nodes = [{"name": n.name, "op": n.op, "inputs": list(n.inputs), "attrs": _plain(n.attrs),
              "weights": n.weights, "bn": n.bn, "wdtype": n.precision.weights}
             for n in graph.nodes]
    consts = [{"name": c.name, "shape": list(c.shape), "value": _plain(c.value),
               "weights": c.weights, "dtype": c.dtype} for c in graph.constants.values()]
    params = {k: list(v) for k, v in expected_parameters(graph).items()}
    return {"name": graph.name, "nodes": nodes, "constants": consts, "params": params}


def cache_key(graph: "Graph", precision, source, *, seed: int = 0, options: Mapping | None = None
              ) -> str:
    from . import pretrained_weights_name
    src = source_fingerprint(source, seed=seed)
    if isinstance(src, dict) and src.get("pretrained"):
        src = {"pretrained": pretrained_weights_name(graph)}
    if isinstance(src, dict) and "random" in src:
        # Calibration runs at the graph's input size (not part of graph_fingerprint).
        src["inputs"] = {k: [s.h, s.w, s.c] for k, s in graph.inputs.items()}
    opts = {}
    for k, v in (options or {}).items():
        if callable(v) and not isinstance(v, Mapping):
            raise TypeError(f"cache_key: option {k!r} is code; key it by what it does "
                            "(key_map_identity)")
        opts[k] = _plain(v)
    blob = {"format": CACHE_FORMAT, "prepare": PREPARE_VERSION, "graph": graph_fingerprint(graph),
            "precision": _plain(precision), "source": src, "options": opts}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=repr).encode()).hexdigest()[:40]


# ---------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------

class WeightCache:
    """A directory of ``{key}.safetensors`` entries whose integrity is checked on every read."""

    def __init__(self, dir=None):
        self.dir = Path(dir).expanduser() if dir is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        if not key or any(c in key for c in "/\\") or key.startswith("."):
            raise ValueError(f"invalid cache key {key!r}")
        return self.dir / f"{key}.safetensors"

    def get(self, key: str, *, expect: Mapping[str, tuple[int, ...]] | None = None,
            metadata: Mapping[str, Any] | None = None, dtype: str | None = None
            ) -> dict[str, "torch.Tensor"] | None:
        """The entry's tensors, or None when absent or invalid (invalid entries are deleted).
        ``expect``: exact tensor names -> shapes; ``dtype``: every tensor's dtype ("float32");
        ``metadata``: items the stored user metadata must contain."""
        p = self.path(key)
        try:
            if not p.is_file():
                return None
        except (OSError, ValueError) as e:
            log.warning("weight cache entry %s cannot be looked up (%s); building without it",
                        p, e)
            return None
        why = None
        try:
            from safetensors import safe_open
            with safe_open(str(p), framework="pt", device="cpu") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:
            why = f"unreadable ({type(e).__name__}: {e})"
        else:
            user = {}
            try:
                user = json.loads(meta.get("user", "{}"))
            except ValueError:
                why = "bad metadata"
            if why:
                pass
            elif meta.get("format") != CACHE_FORMAT:
                why = f"format {meta.get('format')!r} != {CACHE_FORMAT!r}"
            elif meta.get("key") != key:
                why = "written for another key"
            elif meta.get("checksum") != tensors_checksum(tensors):
                why = "checksum mismatch"
            elif expect is not None and {k: tuple(t.shape) for k, t in tensors.items()} != \
                    {k: tuple(v) for k, v in expect.items()}:
                why = "tensor names or shapes differ from the graph's"
            elif dtype is not None and any(str(t.dtype) != f"torch.{dtype}"
                                           for t in tensors.values()):
                why = f"tensor dtypes other than {dtype}"
            elif metadata is not None and any(user.get(k) != _plain(v) for k, v in metadata.items()):
                why = "metadata mismatch"
        if why is None:
            return tensors
        log.warning("weight cache entry %s is invalid (%s); rebuilding it", p, why)
        self.remove(key)
        return None

    def put(self, key: str, tensors: Mapping[str, "torch.Tensor"],
            metadata: Mapping[str, Any] | None = None) -> Path | None:
        """Store ``tensors`` atomically; returns the path, or None if the directory is not
        writable (a cache must never break a build)."""
        from safetensors.torch import save_file
        p = self.path(key)
        data = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
        meta = {"format": CACHE_FORMAT, "key": key, "checksum": tensors_checksum(data),
                "user": json.dumps(_plain(dict(metadata or {})), sort_keys=True)}
        tmp = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.dir)
            os.close(fd)
            save_file(data, tmp, metadata=meta)
            os.replace(tmp, p)
            return p
        except (OSError, ValueError) as e:
            log.warning("cannot write weight cache entry %s: %s", p, e)
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            return None

    def remove(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass


def flatten(params: Mapping[str, Mapping[str, "torch.Tensor"]]) -> dict[str, "torch.Tensor"]:
    return {f"{node}{SEP}{name}": t for node, d in params.items() for name, t in d.items()}


def unflatten(tensors: Mapping[str, "torch.Tensor"]) -> dict[str, dict[str, "torch.Tensor"]]:
    out: dict[str, dict[str, torch.Tensor]] = {}
    for k, t in tensors.items():
        node, _, name = k.rpartition(SEP)
        out.setdefault(node, {})[name] = t
    return out


def _in_graph_order(graph: "Graph", params: dict) -> dict:
    """safetensors stores names sorted; give back prepare_parameters' order (graph order)."""
    from . import prepared_shapes
    order = {n: list(d) for n, d in prepared_shapes(graph).items()}
    out = {}
    for n in list(order) + [n for n in params if n not in order]:
        if n in params:
            d = params[n]
            keys = [k for k in order.get(n, []) if k in d] + [k for k in d if k not in order.get(n, [])]
            out[n] = {k: d[k] for k in keys}
    return out


class PreparedParameters(dict):
    """``prepare_parameters``' dict (node -> {param: tensor}) with how it was obtained."""
    cache_hit: bool = False
    cache_key: str | None = None
    cache_path: Path | None = None
    info: str = ""
    report: Any = None
    consumable: bool = False    # the Executor may pop entries (set by the builder that owns it)


def _resolve_cache(cache) -> WeightCache | None:
    """The store ``cache`` names; None (no cache, with a warning) when it cannot be used."""
    if cache is None or cache is False:
        return None
    try:
        if cache is True:
            store = WeightCache()
        elif isinstance(cache, WeightCache):
            store = cache
        elif isinstance(cache, (str, os.PathLike)):
            store = WeightCache(cache)
        else:
            raise TypeError(f"cache must be a bool, a directory or a WeightCache, got "
                            f"{type(cache).__name__}")
        problem = _dir_problem(store.dir)
    except (TypeError, RuntimeError, ValueError) as e:   # RuntimeError: expanduser of ~nosuchuser
        problem, store = str(e), None
    if problem:
        log.warning("weight cache %r cannot be used (%s); building without the cache", cache,
                    problem)
        return None
    return store


def _dir_problem(d: Path) -> str | None:
    """Why directory ``d`` cannot hold a cache (None: it can, or can be created)."""
    s = str(d)
    if "\0" in s:
        return "the path contains a NUL character"
    if s.startswith("~"):
        return "unknown user in '~user'"
    try:
        if not d.is_dir() and d.exists():
            return "not a directory"
    except OSError as e:                        # a name too long, a loop of symlinks, ...
        return e.strerror or str(e)
    return None


def cached_prepare(graph: "Graph", source, precision=None, *, cache=True, key_map=None,
                   seed: int = 0, select_prefix=None, ignore=None, strict: bool = True,
                   postprocess: Callable[[dict], dict] | None = None,
                   postprocess_tag: str | None = None,
                   postprocess_keeps_shapes: bool = False) -> PreparedParameters:
    """``prepare_parameters(graph, load_state_dict(source, graph, ...))``, through the cache.

    ``cache``: True (default directory), False/None (no cache), a directory or a WeightCache.
    ``postprocess(params) -> params`` runs before storing (e.g. pre-quantization); its output must
    change only with ``postprocess_tag`` (part of the key). ``postprocess_keeps_shapes``: it keeps
    the tensor names and shapes, so entries are checked against them as unprocessed ones are.
    """
    from . import load_state_dict, prepare_parameters, prepared_shapes
    from .keys import _as_prefixes
    _as_prefixes(ignore)             # a bad ignore= is refused before the cache is asked
    store = _resolve_cache(cache)
    key = expect = None
    km = key_map
    if store is not None and callable(key_map) and not isinstance(key_map, Mapping):
        random = source is None or (isinstance(source, str) and source == "random")
        km = None if random else key_map_identity(graph, source, key_map)   # random: unused
        if km is None and not random:
            log.info("weights %s with a callable key_map are not cached", source)
            store = None
    if store is not None:
        opts = {"key_map": km, "select_prefix": select_prefix,
                "ignore": ignore, "strict": strict,
                "postprocess": postprocess_tag if postprocess is not None else None}
        key = cache_key(graph, precision, source, seed=seed, options=opts)
        expect = None if postprocess is not None and not postprocess_keeps_shapes else \
            {f"{n}{SEP}{k}": s for n, d in prepared_shapes(graph).items() for k, s in d.items()}
        hit = store.get(key, expect=expect, dtype=None if postprocess is not None else "float32")
        if hit is not None:
            out = PreparedParameters(_in_graph_order(graph, unflatten(hit)))
            out.cache_hit, out.cache_key, out.cache_path = True, key, store.path(key)
            from . import describe_source
            desc = f"random (seed {seed})" if source in (None, "random") else describe_source(source)
            out.info = f"{desc} [cached]"
            return out
    # No copy of the source: prepare_parameters folds BatchNorm into new tensors and copies the
    # rest, so the weights are held twice (source, prepared), not three times, while it runs.
    sd = load_state_dict(source, graph, key_map=key_map, seed=seed, select_prefix=select_prefix,
                         ignore=ignore, strict=strict, copy=False)
    report = getattr(sd, "report", None)
    params = prepare_parameters(graph, sd, consume=True)     # sd: ours to empty
    del sd
    if postprocess is not None:
        params = postprocess(params)
    out = PreparedParameters(params)
    out.report = report
    out.info = out.report.summary() if out.report is not None else ""
    out.cache_key = key
    if store is not None:
        out.cache_path = store.put(key, flatten(params), {"graph": graph.name,
                                                          "source": out.info})
    return out


def prepared_parameters(graph: Graph, source, *, key_map=None, cache=True, seed: int = 0,
                        select_prefix="auto", ignore=None, precision=None, **kw):
    """``(params, info)`` for the builder: ``prepare_parameters`` of ``source`` through the
    prepared-weight cache (``cached_prepare``). ``info`` is a one-line description
    ("weights/bevdet-r50.pth, ignored 812 keys outside img_backbone./img_neck. [cached]").

    Unlike ``load_state_dict``, keys outside the graph's top-level names are ignored (and counted)
    by default (``select_prefix="auto"``), so a full BEVDet checkpoint builds its image encoder.
    """
    params = cached_prepare(graph, source, precision, cache=cache, key_map=key_map, seed=seed,
                            select_prefix=select_prefix, ignore=ignore, **kw)
    return params, params.info
