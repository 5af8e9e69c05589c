"""Data parallel over a mesh of chips: API, per-chip planning, the sim mesh, shipped descriptors.

The sim mesh must give every sample exactly the bits a single chip gives it: ResNet50 at batch 4
on ``mesh="n300"`` against two batch-2 runs on one chip, and PCC against torchvision.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import ttmodels
from ttmodels.errors import Error
from ttmodels.runtime.mesh import SYSTEMS, MeshSpec, per_chip_batch, resolve_mesh

DATA = Path(ttmodels.__file__).parent / "data"


# ---- mesh names and batch split ----------------------------------------------------------------

@pytest.mark.parametrize("given,shape,name", [
    ("n150", (1, 1), "n150"), ("n300", (1, 2), "n300"), ("T3000", (1, 8), "t3000"),
    ((1, 2), (1, 2), "n300"), ([2, 4], (2, 4), "2x4"), ("8x4", (8, 4), "galaxy"),
    ((1, 4), (1, 4), "1x4"),      # Wormhole chips: not the p150x4, which is named
])
def test_resolve_mesh(given, shape, name):
    m = resolve_mesh(given)
    assert (m.rows, m.cols) == shape and m.name == name and m.num_chips == shape[0] * shape[1]


@pytest.mark.parametrize("bad,match", [
    ("n400", "unknown mesh 'n400'"), ((0, 2), "positive integers"), ((1, 2, 3), "mesh must be"),
    (2, "mesh must be"), ((1.5, 2), "positive integers"),
])
def test_resolve_mesh_errors(bad, match):
    with pytest.raises(Error, match=match):
        resolve_mesh(bad)


def test_per_chip_batch():
    assert per_chip_batch(32, resolve_mesh("n300")) == 16
    assert per_chip_batch(128, resolve_mesh("t3000")) == 16
    assert per_chip_batch(3, None) == 3
    with pytest.raises(Error, match=r"batch_size 30 does not divide over the 8 chips.*24 or 32"):
        per_chip_batch(30, resolve_mesh("t3000"))
    with pytest.raises(Error, match="multiple of 2, e.g. 2"):
        per_chip_batch(1, resolve_mesh("n300"))
    with pytest.raises(Error, match="positive integer"):
        per_chip_batch(0, resolve_mesh("n300"))


# ---- planning ----------------------------------------------------------------------------------

def test_plan_is_per_chip_and_shows_the_mesh():
    p = ttmodels.plan("resnet50", batch_size=32, mesh="n300")
    assert p.mesh == MeshSpec("n300", 1, 2)
    assert (p.per_chip_batch, p.batch_size, p.num_chips) == (16, 32, 2)
    assert p.graph.inputs["image"].n == 16
    lines = str(p).splitlines()
    assert lines[1] == ("mesh n300 (1x2, 2 chips): batch 32 = 16 per chip x 2, data parallel; "
                        "the layouts below are each chip's")
    d = json.loads(p.to_json())
    assert d["mesh"] == {"name": "n300", "shape": [1, 2], "num_chips": 2, "batch_size": 32,
                         "per_chip_batch": 16}
    # The layouts are exactly the single-chip plan's at the per-chip batch.
    one = json.loads(ttmodels.plan("resnet50", batch_size=16).to_json())
    assert "mesh" not in one
    del d["mesh"]
    # the estimate: each chip's device time, the whole batch's samples (data parallel)
    est, est1 = d.pop("estimate"), one.pop("estimate")
    assert est["device_us"] == est1["device_us"] and est["samples"] == 2 * est1["samples"]
    assert est["fps"] == pytest.approx(2 * est1["fps"], rel=1e-3)
    assert (d.pop("system"), one.pop("system")) == ("n300", "n150")
    assert d == one


def test_plan_batch_must_divide():
    with pytest.raises(Error, match="batch_size 6 does not divide over the 8 chips of mesh t3000"):
        ttmodels.plan("resnet50", batch_size=6, mesh="t3000")


def test_cli_plan_and_validate_take_mesh(capsys):
    from ttmodels.tools.cli import main
    assert main(["plan", "resnet18", "--batch", "4", "--mesh", "n300", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mesh"]["per_chip_batch"] == 2 and d["mesh"]["name"] == "n300"
    assert main(["validate", "resnet18", "--batch", "8", "--mesh", "t3000"]) == 0
    assert "batch 8 = 1 per chip on t3000 (1x8, 8 chips)" in capsys.readouterr().out
    assert main(["plan", "resnet18", "--batch", "3", "--mesh", "n300"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: batch_size 3 does not divide") and "Traceback" not in err
    assert main(["plan", "resnet18", "--mesh", "n999"]) == 2
    assert "unknown mesh 'n999'" in capsys.readouterr().err


# ---- the sim mesh ------------------------------------------------------------------------------

def test_sim_mesh_device_and_mappers():
    from ttmodels.backends import sim
    mesh = sim.open_mesh_device(sim.MeshShape(1, 2), l1_small_size=32768)
    assert mesh.get_num_devices() == 2 and mesh.compute_with_storage_grid_size().x == 8
    x = torch.randn(2, 1, 64, 32)
    t = sim.from_torch(x, dtype=sim.bfloat16, layout=sim.TILE_LAYOUT, device=mesh,
                       mesh_mapper=sim.ShardTensorToMesh(mesh, dim=0))
    parts = sim.get_device_tensors(t)
    assert len(parts) == 2 and list(t.shape) == [1, 1, 64, 32]
    assert [p.device() for p in parts] == mesh.get_devices()
    y = sim.relu(t)
    back = sim.to_torch(y, mesh_composer=sim.ConcatMeshToTensor(mesh, dim=0)).float()
    assert torch.equal(back, torch.relu(x).to(torch.bfloat16).float())
    with pytest.raises(Error, match="needs mesh_composer"):
        sim.to_torch(y)
    with pytest.raises(Error, match="does not split into 2 equal parts"):
        sim.from_torch(torch.randn(3, 4), device=mesh, mesh_mapper=sim.ShardTensorToMesh(mesh, 0))
    # without a mapper a mesh gets a copy on every chip, as in ttnn
    r = sim.from_torch(torch.ones(1, 1, 32, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                       device=mesh)
    assert len(sim.get_device_tensors(r)) == 2
    # a function handing its operand back hands back the same multi-device tensor (the
    # executor frees by identity), a new result gets a new one
    from ttmodels.backends.sim.mesh import spmd
    assert spmd(lambda a: a)(t) is t
    assert spmd(lambda a: sim.relu(a))(t) is not t
    sim.close_mesh_device(mesh)
    assert not mesh.is_open and not any(d.is_open for d in mesh.get_devices())


def test_sim_mesh_rejects_mixed_meshes():
    from ttmodels.backends import sim
    m2 = sim.open_mesh_device(sim.MeshShape(1, 2))
    m4 = sim.open_mesh_device(sim.MeshShape(1, 4))
    a = sim.from_torch(torch.ones(1, 1, 32, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                       device=m2)
    b = sim.from_torch(torch.ones(1, 1, 32, 32), dtype=sim.bfloat16, layout=sim.TILE_LAYOUT,
                       device=m4)
    with pytest.raises(Error, match="meshes of 2 and 4 devices"):
        sim.add(a, b)


# ---- ResNet50 on the sim n300: bit-identical per sample, PCC vs torchvision --------------------

@pytest.fixture(scope="module")
def resnet50_runs():
    torchvision = pytest.importorskip("torchvision")
    from ttmodels.language.spec import load_graph
    from ttmodels.weights import load_state_dict, synthetic_images
    sd = load_state_dict("random", load_graph("resnet50", batch_size=2), seed=0)
    x = synthetic_images(4, 3, 224, 224, seed=7)
    with ttmodels.build("resnet50", weights=sd, backend="sim", batch_size=4, mesh="n300") as m:
        assert m.batch_size == 4 and m.mesh.name == "n300" and m.backend.num_chips == 2
        with pytest.raises(Error, match=r"expects NCHW \(4, 3, 224, 224\).*2 per chip"):
            m(x[:2])                                    # the model takes the whole batch
        mesh_out = m(x)
        # Trace capture/replay on the mesh: the same executor path a card takes (the sim replay
        # re-runs the plan with the new input copied onto every chip).
        from ttmodels.runtime.executor import to_torch_nchw
        m.executor.capture_trace({"image": x.flip(0)})
        raw = m.executor.run_traced({"image": x})["logits"]
        traced = to_torch_nchw(m.backend, raw, m.graph.shape_of("logits")).reshape(4, 1000)
        m.executor.release_trace()
    with ttmodels.build("resnet50", weights=sd, backend="sim", batch_size=2) as one:
        single = torch.cat([one(x[:2]), one(x[2:])])
    tv = torchvision.models.resnet50()
    tv.load_state_dict(sd)
    tv.eval()
    with torch.no_grad():
        ref = tv(x)
    return mesh_out, single, ref, traced


def test_resnet50_n300_bit_identical_to_one_chip(resnet50_runs):
    mesh_out, single, _, traced = resnet50_runs
    assert mesh_out.shape == (4, 1000)
    assert torch.equal(mesh_out, single)
    assert not torch.equal(mesh_out[:2], mesh_out[2:])      # the chips saw different samples
    assert torch.equal(traced, mesh_out)


def test_resnet50_n300_pcc_vs_torch(resnet50_runs):
    from ttmodels.weights.reference import pcc
    mesh_out, _, ref, _ = resnet50_runs
    assert pcc(ref, mesh_out) >= 0.99
    for i in range(4):                                        # every sample, both chips
        assert pcc(ref[i], mesh_out[i]) >= 0.99


# ---- shipped mock cluster descriptors ----------------------------------------------------------

DESCRIPTORS = {"n150": "wormhole_n150_mock_cluster.yaml", "n300": "wormhole_n300_mock_cluster.yaml",
               "t3000": "t3000_mock_cluster.yaml"}


@pytest.mark.parametrize("system", sorted(DESCRIPTORS))
def test_mock_cluster_descriptor_is_consistent(system):
    """Each shipped tt-umd descriptor: as many chips as the system's mesh, every chip listed in
    every section, ethernet links only between neighbouring chips with each port used once, a
    connected cluster, every card with one PCIe (MMIO) chip, equal harvesting per chip."""
    d = yaml.safe_load((DATA / DESCRIPTORS[system]).read_text())
    chips = set(d["chips"])
    rows, cols = SYSTEMS[system]
    assert len(chips) == rows * cols
    assert set(d["arch"]) == chips == set(d["harvesting"])
    assert all(a == "Wormhole" for a in d["arch"].values())
    ports, links = set(), set()
    for a, b in d["ethernet_connections"]:
        for end in (a, b):
            key = (end["chip"], end["chan"])
            assert key not in ports, f"ethernet port {key} used twice"
            assert 0 <= end["chan"] < 16
            ports.add(key)
        ca, cb = d["chips"][a["chip"]], d["chips"][b["chip"]]
        assert sum(abs(p - q) for p, q in zip(ca, cb)) == 1, (a, b)
        links.add(frozenset((a["chip"], b["chip"])))
    assert_connected(chips, links)
    mmio = {c for entry in d["chips_with_mmio"] for c in entry}
    boards = [{k: v for e in board for k, v in e.items()} for board in d["boards"]]
    assert sorted(c for b in boards for c in b["chips"]) == sorted(chips)
    for b in boards:
        assert len(set(b["chips"]) & mmio) == 1
        assert len(b["chips"]) == {"n150": 1, "n300": 2}[b["board_type"]]
    masks = [h["harvest_mask"] for h in d["harvesting"].values()]
    assert len({bin(m).count("1") for m in masks}) == 1 and all(0 < m < 1 << 10 for m in masks)


def assert_connected(chips: set, links: set) -> None:
    """Every chip reaches every other over the descriptor's ethernet links."""
    reached, todo = set(), [min(chips)]
    while todo:
        c = todo.pop()
        if c not in reached:
            reached.add(c)
            todo += [o for link in links if c in link for o in link if o != c]
    assert reached == chips
