"""The loader: any source -> a checked float32 state dict in the spec's key names
(``load_state_dict``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import WeightsError
from ..language.graph import Graph
from .reference import expected_parameters, optional_keys
from .keys import (_as_prefixes, _fmt_list, apply_key_map, check_key_types, check_state_dict,
                   graph_prefixes, warn_huge)
from .pretrained import pretrained_state_dict
from .random_init import random_state_dict
from .sources import describe_source, read_source

log = logging.getLogger("ttmodels.weights")


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
    drop = _as_prefixes(ignore)          # refused before anything is read, random weights too
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
    keep = _as_prefixes(graph_prefixes(graph) if select_prefix == "auto" else select_prefix,
                        "select_prefix")
    unused_by_spec = tuple(graph.ignore_weights)
    filtered = _Renamed(raw)           # tensors are looked up only for the expected keys
    # key -> why it was dropped: each key its own reason (the prefix that dropped it), so an
    # error names why a needed key is missing, not every filter's reasons at once
    ignored: dict[str, str] = dict.fromkeys(dropped, "dropped by key_map")
    spec_skipped = False
    for k, uk in mapped.items():
        if unused_by_spec and k.startswith(unused_by_spec) and k not in expected:
            ignored[k] = "under the spec's ignore_weights " + _first_prefix(k, unused_by_spec)
            spec_skipped = True
        # k + ".": a top-level key without a dot (a layer_scale named "gamma") is its own prefix
        elif keep and not (k + ".").startswith(keep):
            ignored[k] = "outside " + "/".join(keep)
        elif drop and k.startswith(drop):
            ignored[k] = "under ignore= " + _first_prefix(k, drop)
        elif k in optional and k not in expected:
            report.skipped_optional.append(k)
        else:
            filtered.names[k] = uk
            if k in reshape:
                filtered.reshape[k] = reshape[k]
    report.ignored = list(ignored)
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
    # Shown only with an error, where an ignored key is often the one a key_map forgot: one line
    # per reason, each listing only the keys it dropped.
    for why in dict.fromkeys(ignored.values()):
        notes.append(_fmt_list(f"ignored, {why}", [k for k, w in ignored.items() if w == why]
                               ).strip())
    check_state_dict(graph, filtered, source=desc, strict=strict, notes=notes, why_missing=ignored)
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


def _first_prefix(key: str, prefixes: tuple[str, ...]) -> str:
    return next(p for p in prefixes if key.startswith(p))


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
