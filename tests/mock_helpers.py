"""Helpers shared by tests that compare the address model with the mock device: allocation
events as signed sizes, and a script run in its own process (tt-metal holds one mock system per
process)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ttmodels.planning import plan_alloc as PA

ROOT = Path(__file__).resolve().parents[1]


def signed_sizes(events, sizes=None) -> list[int]:
    """``plan_alloc.op_events`` as ttnn's measured rows: + size on an allocation, - size on a
    free (0-byte allocations, DRAM outputs, dropped: ttnn's capture has no L1 buffer for them;
    ``sizes`` for buffers the step frees but did not make, e.g. ``in:0``)."""
    size, out = dict(sizes or {}), []
    for e in events:
        if e[0] == PA.ALLOC and e[2] > 0:
            size[e[1]] = e[2]
            out.append(e[2])
        elif e[0] == PA.FREE and e[1] in size:
            out.append(-size[e[1]])
    return out


def run_own_process(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -c code`` with this checkout first on PYTHONPATH and the n150 mock descriptor
    unless one is set."""
    env = dict(os.environ)
    env.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH",
                   str(ROOT / "ttmodels" / "data" / "wormhole_n150_mock_cluster.yaml"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)
