"""Data parallel over a ttnn MeshDevice, checked against the real ttnn 0.81.1 API (no card).

(a) ``ttnn_backend.open_mesh`` / ``close_device(mesh=True)`` call ``ttnn.open_mesh_device`` with
    a real ``MeshShape`` and ``DispatchCoreConfig``, the same ``l1_small_size`` /
    ``trace_region_size`` as a single device, and every argument binds to the real signature.
(b) The layers and the executor on a mesh backend (real ttnn classes, stubbed ops, as in
    test_contracts.py): weights and constants are replicated (``ReplicateTensorToMesh``), the
    input is sharded on dim 0 (``ShardTensorToMesh(dim=0)``) as [chips, 1, n*H*W, C], the
    output is gathered with ``ConcatMeshToTensor(dim=0)``; every call binds.
(c) The sim's mesh API accepts only keywords real ttnn has.
"""
from __future__ import annotations

import inspect

import pytest
import torch

ttnn = pytest.importorskip("ttnn")

from test_contracts import (FakeTensor, RealTypes, _plan, all_ops_graph, bind_error,  # noqa: E402
                            real_signatures)

from ttmodels.backends import Backend, Call  # noqa: E402
from ttmodels.backends import ttnn_backend  # noqa: E402
from ttmodels.runtime.mesh import resolve_mesh  # noqa: E402
from ttmodels.runtime.executor import Executor, to_torch_nchw  # noqa: E402

N300 = resolve_mesh("n300")


class FakeMeshDevice:
    def __init__(self, n=2, grid=(8, 8)):
        self.n, self.grid = n, grid

    def arch(self):
        return ttnn.device.Arch.WORMHOLE_B0

    def compute_with_storage_grid_size(self):
        return ttnn.CoreCoord(*self.grid)

    def get_num_devices(self):
        return self.n


class Mapper:
    def __init__(self, kind, dim=None):
        self.kind, self.dim = kind, dim


_MESH_STUBS = {"ReplicateTensorToMesh": lambda mesh_device: Mapper("replicate"),
               "ShardTensorToMesh": lambda mesh_device, dim: Mapper("shard", dim),
               "ConcatMeshToTensor": lambda mesh_device, dim: Mapper("concat", dim)}


class MeshRealTypes(RealTypes):
    """RealTypes plus the mesh mappers (argument-checked stubs: the real ones need a real
    MeshDevice). ``to_torch`` hands back a gathered [chips, 1, rows, C] torch tensor."""

    def __init__(self, chips=2, gathered_shape=None):
        super().__init__()
        self.chips, self.gathered_shape = chips, gathered_shape

    def __getattr__(self, name):
        if name in _MESH_STUBS:
            def stub(*a, **k):
                self.calls.append(Call(name, a, k))
                err = bind_error(name, a, k)
                assert err is None, err
                return _MESH_STUBS[name](*a, **k)
            return stub
        if name == "to_torch":
            def to_torch(*a, **k):
                self.calls.append(Call(name, a, k))
                err = bind_error(name, a, k)
                assert err is None, err
                return torch.arange(torch.Size(self.gathered_shape).numel(),
                                    dtype=torch.float32).reshape(self.gathered_shape)
            return to_torch
        return super().__getattr__(name)


def _mesh_backend(**kw) -> Backend:
    return Backend("ttnn-contract", MeshRealTypes(**kw), FakeMeshDevice(), mesh=N300)


# ---- (a) opening and closing the mesh --------------------------------------------------------

class _OpenRecorder:
    """``ttnn`` for open_mesh: real MeshShape / DispatchCoreConfig, recorded open/close."""

    def __init__(self, grid=(8, 8)):
        self.calls: list[Call] = []
        self.grid = grid

    def __getattr__(self, name):
        if name in ("open_mesh_device", "close_mesh_device", "synchronize_device"):
            def op(*a, **k):
                self.calls.append(Call(name, a, k))
                err = bind_error(name, a, k)
                assert err is None, err
                return FakeMeshDevice(grid=self.grid) if name == "open_mesh_device" else None
            return op
        return getattr(ttnn, name)


def test_open_mesh_calls_bind_with_device_options(monkeypatch):
    rec = _OpenRecorder()
    monkeypatch.setattr(ttnn_backend, "import_ttnn", lambda: rec)
    tt, dev = ttnn_backend.open_mesh(resolve_mesh("t3000"), l1_small_size=24576,
                                     trace_region_size=1 << 20)
    (call,) = rec.calls
    assert call.name == "open_mesh_device"
    shape = call.args[0] if call.args else call.kwargs["mesh_shape"]
    assert isinstance(shape, ttnn.MeshShape) and list(shape) == [1, 8]
    assert call.kwargs["l1_small_size"] == 24576 and call.kwargs["trace_region_size"] == 1 << 20
    dcc = call.kwargs["dispatch_core_config"]
    assert isinstance(dcc, ttnn.DispatchCoreConfig) and dcc.type == ttnn.DispatchCoreType.ETH
    ttnn_backend.close_device(tt, dev, mesh=True)
    assert [c.name for c in rec.calls[1:]] == ["synchronize_device", "close_mesh_device"]


def test_open_mesh_of_one_chip_keeps_default_dispatch(monkeypatch):
    rec = _OpenRecorder()
    monkeypatch.setattr(ttnn_backend, "import_ttnn", lambda: rec)
    ttnn_backend.open_mesh(resolve_mesh("n150"))
    assert "dispatch_core_config" not in rec.calls[0].kwargs


def test_open_mesh_rejects_a_smaller_worker_grid(monkeypatch):
    from ttmodels.errors import DeviceError
    rec = _OpenRecorder(grid=(8, 7))
    monkeypatch.setattr(ttnn_backend, "import_ttnn", lambda: rec)
    with pytest.raises(DeviceError, match="8x7 worker grid"):
        ttnn_backend.open_mesh(N300)
    assert rec.calls[-1].name == "close_mesh_device"


# ---- (b) layers and executor on a mesh -------------------------------------------------------

def test_mesh_run_replicates_weights_and_shards_the_batch():
    graph, params = all_ops_graph()
    plan = _plan(graph)
    plan.mesh = N300
    be = _mesh_backend()
    ex = Executor(plan, params, be)
    x = torch.randn(2, 8, 16, 16)          # the whole batch: one sample per chip
    ex.run({"x": x})
    calls = be.tt.calls
    bad = [e for c in calls if (e := bind_error(c.name, c.args, c.kwargs)) is not None]
    assert not bad, "\n".join(bad)
    from_torch = [c for c in calls if c.name == "from_torch"]
    assert from_torch and all("mesh_mapper" in c.kwargs for c in from_torch)
    kinds = [c.kwargs["mesh_mapper"].kind for c in from_torch]
    # conv weights/biases (host, prepared by conv2d on every chip), linear weights, the constant
    assert kinds.count("replicate") == len(from_torch) - 1
    (inp,) = [c for c in from_torch if c.kwargs["mesh_mapper"].kind == "shard"]
    assert inp.kwargs["mesh_mapper"].dim == 0
    assert tuple(inp.args[0].shape) == (2, 1, 16 * 16, 8)
    assert torch.equal(inp.args[0][1, 0], x[1].permute(1, 2, 0).reshape(-1, 8))
    assert {"ShardTensorToMesh", "ReplicateTensorToMesh"} <= {c.name for c in calls}
    # The ops are those of a single-chip run: one call each, on the mesh device.
    assert all(c.kwargs.get("device", be.device) is be.device for c in calls
               if c.name in ("conv2d", "from_torch") and "device" in c.kwargs)


def test_mesh_executor_refuses_a_plan_for_another_chip_count():
    from ttmodels.errors import Error
    graph, params = all_ops_graph()
    plan = _plan(graph)          # single chip
    with pytest.raises(Error, match="plan is for 1 chip"):
        Executor(plan, params, _mesh_backend())


def test_mesh_output_is_gathered_on_dim0_per_chip():
    from ttmodels.language.graph import TensorShape
    shape = TensorShape(1, 2, 2, 3)                 # one chip: 4 rows of 3 channels
    be = _mesh_backend(gathered_shape=(2, 1, 32, 32))   # tile padded per chip
    out = to_torch_nchw(be, FakeTensor(), shape)
    (call,) = [c for c in be.tt.calls if c.name == "to_torch"]
    assert call.kwargs["mesh_composer"].kind == "concat" and call.kwargs["mesh_composer"].dim == 0
    assert out.shape == (2, 3, 2, 2)
    # chip 1's rows start at 32*32 in the gathered tensor, its padding is dropped
    assert out[1, :, 0, 0].tolist() == [1024.0, 1025.0, 1026.0]
    assert out[0, :, 1, 1].tolist() == [96.0, 97.0, 98.0]


# ---- (c) the sim's mesh API against real ttnn ------------------------------------------------

@pytest.mark.parametrize("name", ["open_mesh_device", "close_mesh_device", "ReplicateTensorToMesh",
                                  "ShardTensorToMesh", "ConcatMeshToTensor",
                                  "replicate_tensor_to_mesh_mapper", "shard_tensor_to_mesh_mapper",
                                  "concat_mesh_to_tensor_composer", "get_device_tensors",
                                  "from_torch", "to_torch", "MeshShape"])
def test_sim_mesh_keywords_exist_in_real_ttnn(name):
    from ttmodels.backends import sim
    assert name in sim.TTNN_MESH_FUNCTIONS + sim.TTNN_MESH_CLASSES + ("from_torch", "to_torch")
    real = {p for sig in real_signatures(name) for p in sig.parameters}
    assert real, f"ttnn.{name} has no readable signature"
    obj = getattr(sim, name)
    target = obj.__init__ if inspect.isclass(obj) else obj
    ours = {n for n, p in inspect.signature(target).parameters.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    assert not ours - real, f"sim {name} accepts keywords ttnn does not: {sorted(ours - real)}"
