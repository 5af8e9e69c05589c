"""Shared by the benchmarks: resident-set measurement in a clean spawned process."""
from __future__ import annotations

import sys


def rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB, from /proc/self/status VmRSS / VmHWM.

    Not ru_maxrss: Linux carries it across fork+exec, so a spawned child would report the
    parent's peak whenever that is higher."""
    vals = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    vals[k] = int(v.split()[0]) / 1024
    except OSError:
        pass
    if "VmHWM" not in vals:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = peak / 2**20 if sys.platform == "darwin" else peak / 1024
        return peak, peak
    return vals.get("VmRSS", vals["VmHWM"]), vals["VmHWM"]


def peak_rss_worker(make, make_args, x, q) -> None:
    """Spawned: import torch (+torchvision, which both sides load), note the RSS, build the model
    with ``make(*make_args)``, run it once on ``x``, and put {"peak", "growth"} (MB) on ``q``."""
    try:
        import torch
        import torchvision  # noqa: F401  (both sides import it: count it in the baseline)
        base, _ = rss_mb()
        m = make(*make_args)
        with torch.no_grad():
            m(x)
        _, peak = rss_mb()
        q.put({"peak": peak, "growth": peak - base})
    except BaseException as e:  # report, don't hang the parent
        q.put({"peak": float("nan"), "growth": float("nan"), "error": repr(e)})
