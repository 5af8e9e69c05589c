"""The 1x1-conv-as-linear program-config solver, checked against TTNN's own rules.

The checker below restates the rules of tt-metal's matmul validation
(matmul_device_operation.cpp, 1D mcast_in1 with height-sharded in0/output and 2D block-sharded
mcast), the dest register limit (compute_kernel_config.cpp get_dest_reg_count) and conv2d's
1x1 K blocking (conv2d_utils.cpp determine_per_core_conv_block_config) on its own, reading the
fields back from the REAL ttnn config objects.
"""
from __future__ import annotations

import pytest

from ttmodels.errors import Error, LayoutError
from ttmodels.language.graph import Node, Precision, TensorShape
from ttmodels.planning.matmul_solver import (KIND_1D, KIND_2D, can_lower_to_linear, conv1x1_as_matmul_shape,
                                    resolve_lowering, solve, to_ttnn)

import ttnn  # noqa: E402  (a pinned dependency: a broken import must fail, not skip)

L1_BYTES = 1_499_136
TILE_BYTES = {"bfloat16": 2048, "bfloat8_b": 1088, "float32": 4096}
B, H, W = 6, 256, 704


def _resnet50_1x1_convs():
    """(name, M, K, N, relu, stride) of every 1x1 conv of a torchvision ResNet50 trunk at B x H x W."""
    convs = []
    h, w = H // 4, W // 4                       # after the stride-2 stem conv and max pool
    cin = 64
    for li, (blocks, width, stride) in enumerate(((3, 64, 1), (4, 128, 2), (6, 256, 2),
                                                  (3, 512, 2)), start=1):
        cout = width * 4
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            ho, wo = h // s, w // s
            convs.append((f"layer{li}.{bi}.conv1", B * h * w, cin, width, True, 1))
            convs.append((f"layer{li}.{bi}.conv3", B * ho * wo, width, cout, False, 1))
            if bi == 0:
                convs.append((f"layer{li}.{bi}.downsample.0", B * ho * wo, cin, cout, False, s))
            cin, h, w = cout, ho, wo
    return convs


TRUNK = _resnet50_1x1_convs()
FPN = [("neck.lateral0", B * 16 * 44, 1024, 512, False, 1),
       ("neck.lateral1", B * 8 * 22, 2048, 512, False, 1)]
# BEVDet's BEV encoder neck (FPN_LSS) out_conv, up2.4, on the 128x128 BEV grid at batch 1: the
# seed probe's shape [12] (bevdet_r50_bev_encoder, tests/test_bevdet_bev.py).
BEV = [("img_bev_encoder_neck.up2.4", 128 * 128, 256, 256, False, 1)]
STRIDE1 = [c for c in TRUNK + FPN + BEV if c[5] == 1]
SHAPES = sorted({(M, K, N, relu) for _, M, K, N, relu, _ in STRIDE1})


def test_shape_list_is_the_bevdet_r50_encoder():
    # 16 bottlenecks x 2 + 4 downsamples = 36 trunk 1x1 convs; 3 downsamples are stride 2.
    assert len(TRUNK) == 36
    assert sum(1 for c in TRUNK if c[5] == 2) == 3
    assert ("layer1.0.downsample.0", 67584, 64, 256, False, 1) in TRUNK
    assert (B * 64 * 176, 64, 256, False) in SHAPES
    assert (4224, 1024, 512, False) in SHAPES and (1056, 2048, 512, False) in SHAPES
    assert (16384, 256, 256, False) in SHAPES


def test_bev_encoder_out_conv_config():
    """M=16384, K=256, N=256 (FPN_LSS up2.4): tall and narrow -> 1D in1 multicast, 256 rows of
    the BEV grid per core on all 64 cores, all of K in one block (conv2d's 1x1 blocking)."""
    cfg = solve(16384, 256, 256)
    pc = to_ttnn(ttnn, cfg)
    check_config(cfg, pc, 16384, 256, 256, fp32=False, relu=False)
    assert cfg.kind == KIND_1D and cfg.in0_memory.num_cores == 64
    assert (pc.per_core_M, pc.per_core_N, pc.in0_block_w) == (8, 8, 8)
    assert cfg.in0_memory.shard_shape == (256, 256) and cfg.out_memory.shard_shape == (256, 256)


def _tiles(x):
    return -(-x // 32)


def check_config(cfg, pc, M, K, N, *, fp32, relu, k_block=None):
    """Every TTNN constraint on the real program-config object ``pc`` (independent of the solver)."""
    Mt, Kt, Nt = _tiles(M), _tiles(K), _tiles(N)
    gx, gy = pc.compute_with_storage_grid_size.x, pc.compute_with_storage_grid_size.y
    assert 0 < gx <= 8 and 0 < gy <= 8
    pcm, pcn, kb = pc.per_core_M, pc.per_core_N, pc.in0_block_w
    sh, sw, obh, obw = pc.out_subblock_h, pc.out_subblock_w, pc.out_block_h, pc.out_block_w
    assert min(pcm, pcn, kb, sh, sw, obh, obw) > 0
    # K blocking: in0_block_w divides K in tiles
    assert Kt % kb == 0
    # dest register file: 16 tiles, half sync -> 8, fp32 accumulation -> 4
    assert sh * sw <= (4 if fp32 else 8)
    # block/subblock divisibility (validate_matmul_block_and_subblock_configuration)
    assert obh % sh == 0 and obw % sw == 0 and pcm % obh == 0 and pcn % obw == 0
    # sharded output: a subblock spans the per-core width unless it is one tile high
    assert sw == pcn or sh == 1
    assert obw == pcn or obh == 1
    assert pc.fuse_batch is True
    in0_h, in0_w = cfg.in0_memory.shard_shape
    out_h, out_w = cfg.out_memory.shard_shape
    assert in0_h == pcm * 32 and out_h == pcm * 32        # per_core_M == shard_shape[0] / 32
    if isinstance(pc, ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig):
        assert cfg.kind == KIND_1D and pc.mcast_in0 is False
        assert cfg.in0_memory.memory_layout == "height_sharded"
        assert cfg.out_memory.memory_layout == "height_sharded"
        assert pcn == Nt and out_w == N                     # "N must be equal to per_core_N"
        assert in0_w == Kt * 32                             # "K must be equal to shard_shape[1]/32"
        n_cores = cfg.in0_memory.num_cores
        assert Mt <= pcm * n_cores                          # shards cover every row tile
        assert -(-Mt // pcm) <= n_cores <= gx * gy          # blocks <= cores
        conv_kb = Kt                                        # conv2d height sharded: whole K
    else:
        assert isinstance(pc, ttnn.MatmulMultiCoreReuseMultiCastProgramConfig)
        assert cfg.kind == KIND_2D and pc.transpose_mcast is False
        assert cfg.in0_memory.memory_layout == "block_sharded"
        assert cfg.out_memory.memory_layout == "block_sharded"
        assert cfg.in0_memory.grid == (gx, gy) and gx > 1 and gy > 1
        assert -(-Mt // pcm) <= gy and -(-Nt // pcn) <= gx  # "Num output blocks along x/y"
        assert pcm <= Mt
        assert gx * in0_w >= K and gx * out_w >= N and gy * in0_h >= M
        assert (in0_w // 32) % kb == 0                      # shard width divisible by in0_block_w
        assert out_w == pcn * 32
        conv_kb = Kt // gx                                  # conv2d block sharded: K per core column
    assert cfg.conv_k_block == conv_kb
    assert kb == (k_block if k_block is not None else conv_kb)
    # L1: in0 shard + in1 (and 2D in0 mcast) CBs + output shard + interm + bias <= budget
    a, wt, o = TILE_BYTES["bfloat16"], TILE_BYTES["bfloat8_b"], TILE_BYTES["bfloat16"]
    depth = 2 if Kt // kb > 1 else 1
    l1 = pcm * (in0_w // 32) * a + pcn * kb * depth * wt + pcm * pcn * o + pcn * wt
    if cfg.kind == KIND_2D:
        l1 += obh * kb * depth * a
    if fp32:
        l1 += obh * pcn * TILE_BYTES["float32"]
    elif obh != pcm:
        l1 += obh * pcn * o
    assert l1 <= L1_BYTES
    # fused activation
    if relu:
        assert pc.fused_activation is not None
        assert pc.fused_activation.op_type == ttnn.UnaryOpType.RELU
    else:
        assert pc.fused_activation is None


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16acc", "fp32acc"])
@pytest.mark.parametrize("M,K,N,relu", SHAPES, ids=[f"{m}x{k}x{n}{'r' if r else ''}"
                                                      for m, k, n, r in SHAPES])
def test_every_bevdet_1x1_conv_gets_a_valid_config(M, K, N, relu, fp32):
    cfg = solve(M, K, N, fp32_accum=fp32, activation="relu" if relu else None)
    pc = to_ttnn(ttnn, cfg)
    check_config(cfg, pc, M, K, N, fp32=fp32, relu=relu)
    # default K blocking equals conv2d's own 1x1 lowering
    assert cfg.in0_block_w == cfg.conv_k_block


def test_kind_follows_tt_metal_narrow_shape_heuristic():
    assert solve(67584, 64, 256).kind == KIND_1D            # ratio 264
    assert solve(4224, 1024, 256).kind == KIND_1D           # ratio 16
    assert solve(4224, 1024, 512).kind == KIND_2D           # 4224 // 512 == 8, not > 8
    assert solve(1056, 2048, 512).kind == KIND_2D
    assert solve(4224, 1024, 512, prefer="1d").kind == KIND_1D


def test_fp32_accumulation_halves_the_subblock_limit():
    sizes = {}
    for fp32 in (False, True):
        sizes[fp32] = [(c.out_subblock_h * c.out_subblock_w)
                       for c in (solve(M, K, N, fp32_accum=fp32) for M, K, N, _ in SHAPES)]
    assert max(sizes[False]) == 8
    assert max(sizes[True]) == 4


def test_relu_is_fused_into_the_real_object():
    pc = to_ttnn(ttnn, solve(67584, 64, 64, activation="relu"))
    assert pc.fused_activation.op_type == ttnn.UnaryOpType.RELU
    assert '"op_type":' in pc.to_json()
    assert to_ttnn(ttnn, solve(67584, 64, 64)).fused_activation is None
    pc2 = to_ttnn(ttnn, solve(1056, 2048, 512, activation="relu"))
    assert isinstance(pc2, ttnn.MatmulMultiCoreReuseMultiCastProgramConfig)
    assert pc2.fused_activation.op_type == ttnn.UnaryOpType.RELU


@pytest.mark.parametrize("M,K,N,kb", [(67584, 256, 64, 2), (16896, 512, 128, 4),
                                      (4224, 1024, 512, 1), (1056, 2048, 512, 2)])
def test_k_block_tiles_is_honoured(M, K, N, kb):
    cfg = solve(M, K, N, k_block_tiles=kb)
    assert cfg.in0_block_w == kb
    check_config(cfg, to_ttnn(ttnn, cfg), M, K, N, fp32=False, relu=False, k_block=kb)


def test_k_block_that_cannot_block_the_shard_falls_back_or_fails():
    # Kt = 32 pinned: no 2D grid has a 32-tile K shard, so the 1D config must be used
    cfg = solve(4224, 1024, 512, k_block_tiles=32)
    assert cfg.kind == KIND_1D and cfg.in0_block_w == 32
    with pytest.raises(ValueError, match="does not divide K"):
        solve(4224, 1024, 512, k_block_tiles=3)
    with pytest.raises(LayoutError):
        solve(4224, 1024, 512, k_block_tiles=32, prefer="2d")


@pytest.mark.parametrize("args,kw", [
    ((4224, 0, 512), {}), ((4224, -32, 512), {}), ((0, 64, 64), {}), ((64, 64, 0), {}),
    ((64.0, 64, 64), {}), ((64, True, 64), {}), ((64, 64, 64), {"grid": (0, 8)}),
    ((64, 64, 64), {"grid": (8,)}), ((64, 64, 64), {"activation": "swish"}),
    ((64, 64, 64), {"prefer": "3d"}), ((64, 64, 64), {"k_block_tiles": 0}),
    ((64, 64, 64), {"weights_dtype": "int4"}),
])
def test_bad_input_raises_value_error(args, kw):
    with pytest.raises(ValueError):
        solve(*args, **kw)


def test_too_small_l1_budget_is_a_layout_error():
    with pytest.raises(LayoutError, match="no matmul program config"):
        solve(67584, 256, 256, l1_budget=10_000)


def test_real_objects_carry_the_solved_fields():
    for M, K, N, relu in SHAPES:
        cfg = solve(M, K, N, activation="relu" if relu else None)
        pc = to_ttnn(ttnn, cfg)
        assert (pc.compute_with_storage_grid_size.x,
                pc.compute_with_storage_grid_size.y) == cfg.compute_with_storage_grid_size
        for f in ("in0_block_w", "out_subblock_h", "out_subblock_w", "out_block_h",
                  "out_block_w", "per_core_M", "per_core_N", "fuse_batch"):
            assert getattr(pc, f) == getattr(cfg, f), f


def test_sim_namespace_builds_the_same_config():
    from ttmodels.backends import sim
    cfg = solve(1056, 2048, 512, activation="relu")
    pc = to_ttnn(sim, cfg)
    assert isinstance(pc, sim.MatmulMultiCoreReuseMultiCastProgramConfig)
    assert pc.per_core_N == cfg.per_core_N and pc.fused_activation.op_type == sim.UnaryOpType.RELU


# --- graph nodes ------------------------------------------------------------------------------

def _conv(name, k=1, s=1, pad=0, groups=1, cin=1024, cout=512, h=16, w=44, lowering=None,
          act=None, fp32=False):
    attrs = dict(in_channels=cin, out_channels=cout, kernel=(k, k), stride=(s, s),
                 padding=(pad,) * 4, dilation=(1, 1), groups=groups, bias=True, activation=act)
    if lowering:
        attrs["lowering"] = lowering
    return Node(name=name, op="conv2d", inputs=["x"], attrs=attrs,
                shape=TensorShape(B, h // s, w // s, cout), precision=Precision(fp32_accum=fp32))


def test_conv_node_shapes_and_eligibility():
    n = _conv("neck.lateral0")
    assert conv1x1_as_matmul_shape(n) == (4224, 1024, 512)
    assert can_lower_to_linear(n)
    for bad in (_conv("ds", s=2), _conv("c3", k=3, pad=1), _conv("p", pad=1),
                _conv("g", groups=2)):
        assert not can_lower_to_linear(bad)
        with pytest.raises(ValueError, match=f"layer '{bad.name}'"):
            conv1x1_as_matmul_shape(bad)
    relu = Node(name="r", op="relu", inputs=["x"], attrs={}, shape=TensorShape(1, 1, 1, 1))
    assert not can_lower_to_linear(relu)


def test_resolve_lowering():
    assert resolve_lowering(_conv("a", lowering="auto")) == "linear"
    assert resolve_lowering(_conv("a", k=3, pad=1, lowering="auto")) == "conv2d"
    assert resolve_lowering(_conv("a")) == "conv2d"
    assert resolve_lowering(_conv("a", lowering="linear")) == "linear"
    with pytest.raises(Error, match="layer 'b'.*stride"):
        resolve_lowering(_conv("b", s=2, lowering="linear"))
    with pytest.raises(Error, match="lowering must be one of"):
        resolve_lowering(_conv("c", lowering="matmul"))


# --- probe ----------------------------------------------------------------------------------

def test_probe_without_card_says_so_and_exits_2(tmp_path, capsys, monkeypatch):
    from ttmodels.tools import probe
    monkeypatch.setattr(probe, "card_present", lambda: False)
    out = tmp_path / "p.json"
    rc = probe.run_probe("does-not-matter.yaml", batch_size=6, input_size=(256, 704),
                         profile=None, out=str(out), write_spec=None)
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Tenstorrent card" in err[0]
    assert not out.exists()


def test_lowering_overrides_round_trip(tmp_path):
    from ttmodels.tools import probe
    from ttmodels.language.graph import Graph
    g = Graph(name="t", inputs={"x": TensorShape(B, 16, 44, 1024)},
              nodes=[_conv("neck.lateral0"), _conv("c3", k=3, pad=1)], constants={},
              outputs=["c3"])
    path = tmp_path / "lowering.yaml"
    probe.write_lowering_overrides(path, {"neck.lateral0": "linear"}, header="test")
    assert path.read_text().startswith("# test\n")
    ov = probe.load_lowering_overrides(path)
    assert ov == {"neck.lateral0": "linear"}
    probe.apply_lowering_overrides(g, ov)
    assert g.node("neck.lateral0").attrs["lowering"] == "linear"
    with pytest.raises(Error, match="'nope'"):
        probe.apply_lowering_overrides(g, {"nope": "linear"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("lowering: {neck.lateral0: fast}\n")
    with pytest.raises(Error, match="fast"):
        probe.load_lowering_overrides(bad)


def test_probe_groups_distinct_problems():
    from ttmodels.tools import probe
    from ttmodels.language.graph import Graph
    g = Graph(name="t", inputs={"x": TensorShape(B, 16, 44, 1024)},
              nodes=[_conv("a"), _conv("b"), _conv("c", act="relu"), _conv("d", s=2)],
              constants={}, outputs=["d"])
    probs = probe.problems_of(g)
    assert sorted(probs.values()) == [["a", "b"], ["c"]]
