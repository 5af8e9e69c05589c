"""A 1x1 conv lowered to ttnn.linear: the 1D factory's copy of its in0 shard in the solver's
estimate, and the CB cap the address model asks of it (``plan_alloc._capped``), which the
solver meets with another blocking or the 2D kind (yolov8s b4 ``model.12.cv1.conv``: its 1D
form's CBs reached an L1 buffer, ttnn's real clash; the 2D form runs)."""
from __future__ import annotations

import pytest

from ttmodels.errors import LayoutError
from ttmodels.language.spec import load_graph
from ttmodels.planning.l1 import layer_parts
from ttmodels.planning.matmul_solver import KIND_1D, KIND_2D, solve
from ttmodels.planning.planner import plan_graph

# yolov8s b4 model.12.cv1.conv as a matmul: M = 4 x 40 x 40, K = 768, N = 256, float32
# activations and weights, fp32 accumulation, biased (its BN)
M, K, N = 6400, 768, 256
F32 = dict(fp32_accum=True, act_dtype="float32", weights_dtype="float32", bias=True)


def test_1d_estimate_holds_the_copy_of_the_in0_shard_below_its_k():
    # measured (mock n150, ttnn 0.81.1, ttnn.linear alone with that program config, NO_DISPATCH
    # capture; DEVELOPERS.md "y8s"): in0 shard 393,216 + its copy 393,216 + in1 262,144 +
    # output 131,072 + bias 32,768 = 1,212,416 at in0_block_w 4 (the oracle's figure in the
    # plan); at in0_block_w = K (24 tiles) no copy, in1 786,432
    cfg = solve(M, K, N, prefer="1d", k_block_tiles=4, **F32)
    assert (cfg.kind, cfg.per_core_M, cfg.per_core_N) == (KIND_1D, 4, 8)
    assert cfg.l1_bytes_per_core == 1_212_416
    whole = solve(M, K, N, prefer="1d", k_block_tiles=24, **F32)
    assert whole.l1_bytes_per_core == 393_216 + 786_432 + 131_072 + 32_768


def _cbs(cfg) -> int:
    act = out = 4096        # float32 tiles
    k_shard = cfg.K // 32 // (cfg.compute_with_storage_grid_size[0] if cfg.kind == KIND_2D else 1)
    return cfg.l1_bytes_per_core - cfg.per_core_M * (k_shard * act + cfg.per_core_N * out)


def test_a_cb_cap_takes_the_blocking_or_kind_that_keeps_below_it():
    free = solve(M, K, N, **F32)
    assert free.kind == KIND_1D and _cbs(free) > 300_000
    capped = solve(M, K, N, cb_cap=300_000, **F32)
    assert capped.kind == KIND_2D and _cbs(capped) <= 300_000
    with pytest.raises(LayoutError, match="circular buffers within 1000 B"):
        solve(M, K, N, cb_cap=1000, **F32)


def _spec() -> dict:
    return {"name": "cap", "inputs": {"x": {"channels": K, "size": [40, 40]}},
            "profiles": {"float32": {"activations": "float32", "weights": "float32",
                                     "math_fidelity": "HiFi4", "fp32_accum": True}},
            "layers": [{"name": "c0", "op": "conv2d", "out": N, "kernel": 1,
                        "lowering": "linear", "act": "silu"}],
            "outputs": ["c0"]}


def test_a_lowered_conv_honours_the_address_models_cb_cap():
    g = load_graph(_spec(), batch_size=4, profile="float32")
    free = plan_graph(g, oracle=False).layer("c0")
    assert free.config.matmul["kind"] == KIND_1D and layer_parts(free)["cb"] > 300_000
    capped = plan_graph(g, oracle=False, cap_hints=frozenset({("c0", 300_000)})).layer("c0")
    assert capped.config.matmul["kind"] == KIND_2D
    assert layer_parts(capped)["cb"] <= 300_000
    assert capped.inputs[0].memory.memory_layout == "block_sharded"
