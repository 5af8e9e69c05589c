"""Shared by the benchmarks: resident-set measurement (call it in a clean spawned process)."""
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
