"""Build a model, run it once and close it, timed: what the demos share."""
from __future__ import annotations

import sys
import time


def weights_problem(value: str | None) -> str | None:
    """Why a demo's ``--weights VALUE`` is refused before anything runs, None when it is not:
    an empty name (``--weights ""``, an unset shell variable) must not fall back to a default
    such as random weights without a word."""
    if value is not None and not value.strip():
        return (f"--weights {value!r}: empty; name the weights (see --help) or leave --weights "
                "out for the default")
    return None


def build_and_run(spec, weights, x, **build_kw):
    """Build ``spec`` (``weights()`` gives its weights, so a demo can defer loading them), run
    it once on ``x``, close it: ``(model, outputs, build seconds, run seconds)``, or exit code
    2 after printing a ttmodels error."""
    import ttmodels
    try:
        t0 = time.perf_counter()
        model = ttmodels.build(spec, weights=weights(), **build_kw)
        build_s = time.perf_counter() - t0
    except ttmodels.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        t0 = time.perf_counter()
        outputs = model.run(x)
        return model, outputs, build_s, time.perf_counter() - t0
    finally:
        model.close()
