"""Systems named in one word (issue 31): ``--device NAME`` / ``device=`` for n150, n300, t3000,
galaxy, p150 and p150x4, the Blackhole ``Arch`` entry measured on the mock p150, and real runs on
the mock p150 and the mock 32-chip Galaxy (each in its own process: tt-metal reads its cluster
descriptor once per process, and this one runs the mock n150, see conftest.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ttmodels
from ttmodels import arch
from ttmodels.errors import Error
from ttmodels.runtime.mesh import DEVICES, MeshSpec, get_device, resolve_target
from ttmodels.tools import cli

from test_mesh_verify import verify_resnet50_on   # the same launcher as the mesh runs
from test_mesh import assert_connected    # one check of a descriptor's ethernet graph


# ---- names -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,arch_name,mesh", [
    ("n150", "wormhole_b0", None), ("n300", "wormhole_b0", (1, 2)),
    ("t3000", "wormhole_b0", (1, 8)), ("galaxy", "wormhole_b0", (8, 4)),
    ("p150", "blackhole", None), ("p150x4", "blackhole", (1, 4)), ("P150", "blackhole", None),
])
def test_a_system_is_one_word(name, arch_name, mesh):
    t = resolve_target(name)
    assert t.arch == arch_name and t.system.name == name.lower()
    assert (t.mesh.shape if t.mesh else None) == mesh
    if mesh:
        assert t.mesh == MeshSpec(name.lower(), *mesh)


def test_mesh_keeps_working_and_must_agree_with_the_device():
    assert resolve_target(None, "n300").system.name == "n300"
    assert resolve_target(None, (2, 4)).arch == "wormhole_b0"
    assert resolve_target("galaxy", "8x4").mesh == MeshSpec("galaxy", 8, 4)
    assert resolve_target(None).system.name == "n150" and resolve_target(None).mesh is None
    with pytest.raises(Error, match="device p150 .* and mesh n300 .* disagree"):
        resolve_target("p150", "n300")
    with pytest.raises(Error, match="arch 'wormhole_b0' and device p150 \\(blackhole\\) disagree"):
        resolve_target("p150", arch="wormhole_b0")


def test_an_unknown_device_is_refused_with_the_known_names():
    with pytest.raises(Error) as e:
        get_device("n301")
    assert "unknown device 'n301'" in str(e.value)
    assert all(n in str(e.value) for n in DEVICES)


@pytest.mark.parametrize("argv", [
    ["verify", "resnet50", "--device", "n301"], ["verify", "resnet50", "--system", "n301"],
    ["plan", "resnet50", "--device", "n301"], ["compare", "resnet50", "--device", "n301"],
])
def test_cli_refuses_an_unknown_device_before_planning(argv, monkeypatch, capsys):
    """issue 35 item 24: ``verify --device n301`` planned for 11 s before it refused the name."""
    from ttmodels.planning import planner

    def planned(*a, **k):
        raise AssertionError("planned before the device name was checked")
    monkeypatch.setattr(planner, "plan_graph", planned)
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown device 'n301'; known: n150, n300, t3000, galaxy, p150, p150x4" in err


def test_verify_refuses_a_device_and_mesh_that_disagree(monkeypatch, capsys):
    from ttmodels.planning import planner
    monkeypatch.setattr(planner, "plan_graph", lambda *a, **k: pytest.fail("planned"))
    assert cli.main(["verify", "resnet50", "--device", "p150", "--mesh", "n300"]) == 2
    assert "disagree" in capsys.readouterr().err


# ---- plans name their system -------------------------------------------------------------------

def test_a_p150_plan_is_a_blackhole_plan_and_says_so():
    bh = arch.get("blackhole")
    p = ttmodels.plan("resnet18", device="p150", oracle=False)
    d = json.loads(p.to_json())
    assert (d["system"], d["arch"], d["grid"]) == ("p150", "blackhole", [13, 10])
    assert d["l1_bank_bytes"] == bh.l1_bank_no_l1_small - d["l1_small_size"]
    assert "mesh" not in d
    assert str(p).splitlines()[0].startswith("plan resnet18 on p150, blackhole (grid 13x10")
    grids = [l.output.memory.grid for l in p.layers if l.output.memory.sharded]
    assert any(x > 8 for x, _ in grids) and all(x <= 13 and y <= 10 for x, y in grids)


def test_a_galaxy_plan_splits_the_batch_over_32_chips():
    p = ttmodels.plan("resnet18", batch_size=64, device="galaxy", oracle=False)
    d = json.loads(p.to_json())
    assert (d["system"], d["arch"], d["grid"]) == ("galaxy", "wormhole_b0", [8, 8])
    assert d["mesh"] == {"name": "galaxy", "shape": [8, 4], "num_chips": 32, "batch_size": 64,
                         "per_chip_batch": 2}
    with pytest.raises(Error, match="does not divide over the 32 chips of mesh galaxy"):
        ttmodels.plan("resnet18", batch_size=48, device="galaxy", oracle=False)


# ---- the mock systems, for real ----------------------------------------------------------------

_FACTS = """
import json, sys
from ttmodels.backends import mock_device as M
tt, dev = M.open_device(sys.argv[1], l1_small_size=0)
print(json.dumps(M.chip_facts(tt, dev)))
"""


@pytest.mark.parametrize("system,entry", [("n150", "wormhole_b0"), ("p150", "blackhole")])
def test_arch_entries_are_what_the_mock_chip_reports(system, entry):
    """Every measured figure of the ``Arch`` entry, as ttnn reports it on the shipped mock."""
    r = subprocess.run([sys.executable, "-c", _FACTS, system], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    a = arch.get(entry)
    assert facts == {"grid": list(a.grid), "l1_bank_no_l1_small": a.l1_bank_no_l1_small,
                     "l1_base": a.l1_base, "l1_banks": a.l1_banks, "dram_banks": a.dram_banks,
                     "l1_alignment": a.l1_alignment}


#: The CI-sized real runs, each in its own process, both at once: ResNet50 on the mock p150 at
#: TT's per-chip batch 16, and on the mock 32-chip Galaxy at one image per chip (the acceptance
#: run, batch 512 = 16 per chip, takes about two minutes more: docs/multichip.md).
RUNS = {"p150": 16, "galaxy": 32}


@pytest.fixture(scope="module")
def real_runs():
    return verify_resnet50_on("--device", RUNS, 1200)


@pytest.mark.parametrize("device", sorted(RUNS))
def test_resnet50_runs_for_real_on_the_mock_system(real_runs, device):
    """verify exits 0 only when the real run reached the end with every step as planned; each
    step's output is on every chip of the system."""
    rc, stdout, stderr = real_runs[device]
    assert rc == 0, stderr[-3000:] + stdout[-3000:]
    d = json.loads(stdout)
    system = DEVICES[device]
    assert (d["system"], d["arch"], d["real_run"], d["completed"], d["ok"]) == \
        (device, system.arch, True, True, True)
    assert d["steps_run"] == d["steps_planned"]
    assert d["l1_bank_bytes"] == arch.get(system.arch).l1_bank_no_l1_small - 32768
    steps = d["layers"]
    assert [s["name"] for s in steps if s["kind"] == "layer"][-1] == "logits"
    assert all(s["accepted"] and s["memory_match"] and s["layout_match"] for s in steps)
    if system.num_chips > 1:
        assert all(s["chips"] == s["expected_chips"] == system.num_chips for s in steps)
    conv1 = next(s for s in steps if s["name"] == "conv1")
    per_chip = RUNS[device] // system.num_chips
    assert conv1["ttnn_shape"][2] == per_chip * 112 * 112
    if device == "p150":      # the Blackhole plan shards over more than Wormhole's 8 columns
        assert "in 13x10" in conv1["planned_memory"]
    else:
        assert d["mesh"]["shape"] == [8, 4] and d["mesh"]["per_chip_batch"] == per_chip


# ---- rules the Blackhole grid brought out ------------------------------------------------------

def test_a_binary_output_keeps_an_operands_uneven_shards():
    """On the mock p150, BEVDet's FPN upsample leaves 4,224 rows in block shards of 512 rows on
    9 core rows (uneven: 9 x 512 = 4,608); the add after it gives its output that same memory
    config. The table used to refit the shard to 480 rows, and verify found the step not as
    planned (bevdet_r50_encoder --batch 6 --input-size 256 704 --device p150)."""
    from ttmodels.planning import rules as R
    from ttmodels.planning.layout import MemSpec, TensorLayout
    m = MemSpec("block_sharded", "l1", (8, 9), 72, (512, 64))
    x = TensorLayout(m, "tile", "bfloat16")
    shape = (1, 1, 4224, 512)
    out = R.output_layout("add", [x, x], {}, None, [shape, shape])
    assert out.memory == m


# ---- the rules-vs-ttnn corpus on the mock p150 (tests/test_rules_vs_ttnn.py holds it on the n150)

#: The ops whose calls depend on the grid (parallel configs, shard divisors, program configs,
#: halos) in full; of the rest, every eighth case and every known difference. The whole corpus
#: (1,325 cases) agreed on the mock p150 exactly as on the n150 when this was written (the same
#: 39 known differences; 3 minutes: `python tests/rules_corpus.py` on an n150 process, and this
#: script with every case on a p150 one).
GRID_OPS = ("conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "global_avg_pool",
            "adaptive_avg_pool2d", "linear", "upsample")

_CORPUS = """
import json, sys
sys.path.insert(0, sys.argv[2])
import rules_corpus as C
from test_rules_vs_ttnn import KNOWN_DIFFERENCES
from ttmodels.backends import mock_device
ops = sys.argv[3].split(",")
sel = [c for i, c in enumerate(C.cases())
       if c.op in ops or c.id in KNOWN_DIFFERENCES or i % 8 == 0]
tt, dev = mock_device.open_device(sys.argv[1], l1_small_size=32768)
outs = C.run_corpus(tt, dev, sel)
print(json.dumps([[o.case.id, o.agree, o.describe()] for o in outs]))
"""


def test_rules_agree_with_ttnn_on_the_corpus_on_the_p150():
    from pathlib import Path

    from test_rules_vs_ttnn import KNOWN_DIFFERENCES
    r = subprocess.run([sys.executable, "-c", _CORPUS, "p150", str(Path(__file__).parent),
                        ",".join(GRID_OPS)], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    outs = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(outs) >= 400
    unexpected = [d for cid, agree, d in outs if not agree and cid not in KNOWN_DIFFERENCES]
    stale = [d for cid, agree, d in outs if agree and cid in KNOWN_DIFFERENCES]
    assert not unexpected, "rules.check disagrees with ttnn 0.81.1 on the p150:\n" + \
        "\n".join(unexpected)
    assert not stale, "known differences that agree on the p150:\n" + "\n".join(stale)


# ---- the planner's ttnn oracle asks the plan's chip ----------------------------------------------

def test_oracle_keys_name_the_system_and_keep_the_n150s():
    """An answer from the p150 is not an answer for the n150 (and the n150's keys are those it
    had before systems existed, so its cached answers stay valid)."""
    import hashlib

    from ttmodels.tools import ttnn_oracle as O
    plan = ttmodels.plan("resnet18", oracle=False)
    step = O.plan_steps(plan, params=False)[0]
    old = hashlib.sha256(json.dumps({"format": O.ORACLE_FORMAT, "ttnn": "0.81.1",
                                     "step": step.signature()}, sort_keys=True,
                                    default=str).encode()).hexdigest()
    assert step.key("0.81.1") == step.key("0.81.1", "n150") == old
    assert step.key("0.81.1", "p150") != old


def test_a_blackhole_plan_is_confirmed_by_the_mock_p150():
    """The oracle's worker opens the plan's chip: every step of ResNet18 on the p150 (the
    Blackhole grid's conv parallel configs, shard divisors, matmul program configs, halos)
    confirmed by ttnn on a mock p150, nothing contradicting the rule table. (ResNet50 and the
    BEV encoder on the p150 run for real above and in the acceptance runs.)"""
    plan = ttmodels.plan("resnet18", batch_size=16, device="p150", oracle=True)
    rec = plan.ttnn
    assert rec.oracle == "on (ttnn 0.81.1, mock p150)"
    assert not rec.unconfirmed, [f"{s.name}: {s.status} {s.error}" for s in rec.unconfirmed]
    assert not rec.contradictions


# ---- the shipped descriptors -------------------------------------------------------------------

NEW_DESCRIPTORS = {"p150": "blackhole_p150_mock_cluster.yaml",
                   "p150x4": "blackhole_p150x4_mock_cluster.yaml",
                   "galaxy": "wormhole_galaxy_mock_cluster.yaml"}


@pytest.mark.parametrize("system", sorted(NEW_DESCRIPTORS))
def test_a_shipped_descriptor_is_its_system(system):
    """As many chips as the system, of its arch, each on PCIe, harvested alike, each ethernet
    port used once, the chips connected; a Galaxy's chips at distinct (tray, position)."""
    import yaml

    from ttmodels.backends import mock_device
    d = yaml.safe_load(mock_device.descriptor_path(system).read_text())
    s = DEVICES[system]
    chips = set(d["arch"])
    assert len(chips) == s.num_chips and set(d["harvesting"]) == chips
    assert {a.lower() for a in d["arch"].values()} == {s.arch}
    assert {c for e in d["chips_with_mmio"] for c in e} == chips
    assert len({h["harvest_mask"] for h in d["harvesting"].values()}) == 1
    ports, links = set(), set()
    for a, b in d["ethernet_connections"]:
        for end in (a, b):
            assert (end["chip"], end["chan"]) not in ports
            ports.add((end["chip"], end["chan"]))
        links.add(frozenset((a["chip"], b["chip"])))
    assert_connected(chips, links)
    if system == "galaxy":
        bus = [int(v, 16) for v in d["chip_to_bus_id"].values()]
        assert len(set(bus)) == 32 and {b & 0xF0 for b in bus} == {0xC0, 0x80, 0x00, 0x40}
        assert {b & 0x0F for b in bus} == set(range(1, 9))
        assert len(links) == 52       # 4 trays x 10 in-tray pairs + 12 between trays


def test_the_galaxy_descriptor_is_the_generators():
    """The shipped Galaxy descriptor is what scripts/galaxy_descriptor.py writes."""
    from pathlib import Path

    from ttmodels.backends import mock_device
    script = Path(__file__).resolve().parents[1] / "scripts" / "galaxy_descriptor.py"
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == mock_device.descriptor_path("galaxy").read_text()
