"""Key mapping (``key_map``), prefix filtering and the strict check (missing, unexpected,
mis-shaped and invalid keys, all in one ``WeightsError``).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .. import ops
from ..errors import WeightsError
from ..language.graph import Graph
from .reference import expected_parameters, optional_keys

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger("ttmodels.weights")

SHOW = 20                    # list at most this many keys per category in an error message


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


def _as_prefixes(p, what: str = "ignore") -> tuple[str, ...]:
    """``ignore=`` / ``select_prefix=`` as dotted prefixes: None, a prefix or a list of them.
    Anything else (a number, bytes, a None in the list, an empty name) is a WeightsError naming
    ``what``, not a TypeError from deep inside."""
    if p is None:
        return ()
    if isinstance(p, str):
        p = (p,)
    elif isinstance(p, (bytes, bytearray, Mapping)) or not isinstance(p, (list, tuple, set,
                                                                         frozenset)):
        raise WeightsError(f"{what}= takes a key prefix such as 'aux_head.' or a list of them, "
                           f"got {type(p).__name__} {p!r:.60}")
    bad = [x for x in p if not isinstance(x, str) or not x.strip(".")]
    if bad:
        bad = bad[0]
        raise WeightsError(f"{what}= takes key prefixes (non-empty strings such as 'aux_head.'), "
                           f"got {type(bad).__name__} {bad!r:.40} in {list(p)!r:.80}")
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
                     strict: bool = True, notes: Sequence[str] = (),
                     why_missing: Mapping[str, str] | None = None) -> None:
    """Raise one WeightsError listing every missing, unexpected (when ``strict``) and mis-shaped
    key (wrong shape, not a tensor) and every key with invalid values (non-floating dtype, NaN or
    Inf, negative BatchNorm variance, sparse layout). ``why_missing``: key -> why the caller
    dropped it (``ignore=``, ``key_map``), shown next to that missing key."""
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
        why = why_missing or {}
        msg.append(_fmt_list("missing", [f"{k} ({why[k]})" if k in why else k for k in missing]))
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
            # --ignore: only `ttmodels compare` has that flag (the demos have not)
            flags = " ".join("--ignore " + x for x in pre[:3])
            msg.append(f"  hint: ignore={pre[:3]}{more} drops the keys under those prefixes "
                       f"(ttmodels compare: {flags}); key_map= renames keys")
        else:
            msg.append("  hint: pass key_map= to rename or drop keys (see weights/README.md)")
    raise WeightsError("\n".join(msg), missing=missing, unexpected=unexpected, mismatched=mismatched,
                       invalid=invalid)


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
