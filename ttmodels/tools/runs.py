"""Build a model, run it once and close it, timed: what the demos share."""
from __future__ import annotations

import sys
import time


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
