"""``ttmodels verify --mesh``: ResNet50 data parallel on the mock n300 and T3000 under ttnn 0.81.1.

tt-metal reads its cluster descriptor once per process (this test process runs on the mock
n150, see conftest.py), so each mesh runs in its own process, both at once. Every layer and
adapter must be accepted by ttnn, with its output on every chip of the mesh, and each chip must
see exactly what the other system's chips see at the same per-chip batch (16, TT's own per-chip
batch for ResNet50 on n300 and T3000).
"""
import json
import subprocess
import sys

import pytest

from ttmodels.backends import mock_device
from ttmodels.errors import DeviceError
from ttmodels.runtime.mesh import resolve_mesh

RUNS = {"n300": 32, "t3000": 128}


def verify_resnet50_on(flag: str, runs: dict[str, int], timeout: float) -> dict[str, tuple]:
    """``ttmodels verify resnet50 FLAG NAME --batch B --format json`` for every NAME: B of
    ``runs``, each in its own process (one mock system per process), all at once:
    {NAME: (exit code, stdout, stderr)}."""
    procs = {n: subprocess.Popen([sys.executable, "-m", "ttmodels.tools.cli", "verify", "resnet50",
                                  flag, n, "--batch", str(b), "--format", "json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n, b in runs.items()}
    out = {}
    for n, p in procs.items():
        stdout, stderr = p.communicate(timeout=timeout)
        out[n] = (p.returncode, stdout, stderr)
    return out


@pytest.fixture(scope="module")
def reports():
    out = {}
    for m, (returncode, stdout, stderr) in verify_resnet50_on("--mesh", RUNS, 900).items():
        # exit 1 = some step differs from the plan or exceeds the L1 bank (the planner's
        # business, the same on one chip); 2 = an error before verifying
        assert returncode in (0, 1), stderr[-3000:]
        out[m] = json.loads(stdout)
    return out


@pytest.mark.parametrize("mesh", sorted(RUNS))
def test_every_layer_is_accepted_by_ttnn_on_every_chip(reports, mesh):
    d = reports[mesh]
    m = resolve_mesh(mesh)
    assert d["mesh"] == {"name": mesh, "shape": list(m.shape), "num_chips": m.num_chips,
                         "batch_size": RUNS[mesh], "per_chip_batch": 16}
    assert d["batch_size"] == RUNS[mesh] and f"{m.num_chips} chips" in d["device"]
    assert d["ttnn_version"] == "0.81.1"
    steps = d["layers"]
    layers = [s for s in steps if s["kind"] == "layer"]
    assert len(layers) == 72 and layers[-1]["name"] == "logits"
    rejected = [(s["name"], s["error"]) for s in steps if not s["accepted"]]
    assert not rejected, rejected
    assert all(s["chips"] == s["expected_chips"] == m.num_chips for s in steps)
    # each chip holds its 16 images: the first conv's output is [1, 1, 16*112*112, 64] per chip
    conv1 = next(s for s in steps if s["name"] == "conv1")
    assert conv1["ttnn_shape"][2] == 16 * 112 * 112


def test_chips_see_the_same_work_on_n300_and_t3000(reports):
    keys = ("name", "op", "accepted", "ttnn_memory", "ttnn_layout", "ttnn_shape", "ttnn_peak_total",
            "ttnn_op_peak_total")
    a, b = ([{k: s[k] for k in keys} for s in reports[m]["layers"]] for m in ("n300", "t3000"))
    assert a == b
    assert reports["n300"]["peak_total"] == reports["t3000"]["peak_total"] > 0


def test_mock_mesh_needs_a_shipped_descriptor():
    with pytest.raises(DeviceError, match="no mock cluster descriptor for a 2x2"):
        mock_device.open_mesh_device(resolve_mesh((2, 2)), l1_small_size=32768)


def test_verify_mesh_batch_must_divide():
    out = subprocess.run([sys.executable, "-m", "ttmodels.tools.cli", "verify", "resnet50", "--mesh",
                          "n300", "--batch", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "batch_size 3 does not divide over the 2 chips" in out.stderr
