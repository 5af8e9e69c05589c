"""The rule table: structure, layout math, and each op's accept/reject behaviour."""
import pytest

from ttmodels.planning import rules as R
from ttmodels.ops.conv2d.sharding import (conv_reshards_input, determine_parallel_config,
                                          select_conv_shard_layout)
from ttmodels.ops.pool.sharding import pool_input_memspec, pool_output_memspec, pool_parallel_config
from ttmodels.errors import LayoutError
from ttmodels.planning.layout import BLOCK, HEIGHT, INTERLEAVED, TILE_LAYOUT, WIDTH, MemSpec, TensorLayout

DRAM = TensorLayout(MemSpec(INTERLEAVED, "dram"))
HS = TensorLayout(R.sharded_memspec(HEIGHT, 12544, 64, num_cores=56))
FLAT = (1, 1, 12544, 64)


# Rules that state what an op produces (applied by rules.output_layout) rather than something a
# card rejects: no checker raises them. batch_norm.as_binary says batch_norm is checked as a
# binary op (its checker is _c_binary's).
DESCRIPTIVE = {"binary.memory", "binary.dtype_out", "batch_norm.as_binary",
               # issue 23's ops: what the planner gives them, nothing ttnn refuses
               "layer_scale.as_binary", "softmax.tile", "reshape.interleaved",
               # a 1x1 conv out of DRAM: its output layout (DRAM interleaved), issue 33
               "conv2d.mm_interleaved"}


def _raised_rule_ids() -> set[str]:
    """Rule ids some checker can raise: rules.check's _v(...), the sim's _violation(...),
    Violation(...) and LayoutError(rule=...) anywhere in the package."""
    import re
    from pathlib import Path
    pkg = Path(R.__file__).parents[1]     # the ttmodels package
    pat = re.compile(r'(?:\b_v|_violation|Violation)\(\s*"([\w.]+)"|rule="([\w.]+)"')
    ids = set()
    for f in pkg.rglob("*.py"):
        for a, b in pat.findall(f.read_text()):
            ids.add(a or b)
    return ids


def test_table_is_complete_and_cited():
    known_ops = set(R.GRAPH_OPS + R.LOWERED_OPS + R.ADAPTER_OPS)
    ops = set()
    for rid, r in R.RULES.items():
        assert rid == r.id and r.text and r.kind in ("error", "perf")
        assert r.source.startswith(("ttnn/", "tt_metal/")) and (":" in r.source), rid
        named = set(r.op.split("|"))
        assert named <= known_ops | {"*"}, (rid, named - known_ops)   # no typo'd op names
        assert named == {"*"} or "*" not in named, rid                 # '*' stands alone
        ops.update(named)
    # every op the planner or an adapter can run has rules of its own ('*' rules do not count)
    assert [op for op in sorted(known_ops) if op not in ops] == []


def test_every_rule_can_be_raised_and_every_raised_rule_is_in_the_table():
    raised = _raised_rule_ids()
    assert raised - set(R.RULES) == set()                  # no checker cites a missing rule
    assert set(R.RULES) - raised == DESCRIPTIVE           # no dead rule besides these


@pytest.mark.parametrize("rows,c,n,expect", [
    (12544, 64, 56, (224, 64)),        # 112*112 rows over 56 cores
    (12544, 64, 64, (224, 64)),        # ceil(196) -> 224: tile rounding
    (3136, 64, 49, (64, 64)),
    (49, 2048, 2, (32, 2048)),
    (100, 3, 4, (32, 32)),             # channels tile padded
])
def test_height_shard_shape(rows, c, n, expect):
    assert R.height_shard_shape(rows, c, n) == expect


def test_width_block_shard_shape_and_grid():
    assert R.width_shard_shape(49, 2048, 64) == (64, 32)
    assert R.block_shard_shape(196, 1024, (8, 7)) == (32, 128)
    assert R.cores_to_grid(56, (8, 8)) == (8, 7)
    assert R.cores_to_grid(5, (8, 8)) == (5, 1)
    assert R.cores_to_grid(57, (8, 8)) == (8, 8)
    with pytest.raises(ValueError):
        R.cores_to_grid(65, (8, 8))


def test_parallel_config_mirrors_ttnn():
    # 112x112 output: 392 tile rows; 64 would pad 56 -> closest divisor with little padding = 56
    assert determine_parallel_config(HEIGHT, 12544, 64, 64).num_cores == 56
    pc = determine_parallel_config(BLOCK, 196, 1024, 256)
    assert (pc.cores_nhw, pc.cores_c) == (7, 8)
    assert determine_parallel_config(WIDTH, 49, 2048, 512).num_cores == 64


def _mm_conv_out(x: MemSpec, rows: int, c_in: int, c_out: int) -> MemSpec:
    return R.output_layout("conv2d", [TensorLayout(x)],
                           {"is_mm_conv": True, "in_channels": c_in,
                            "out_shape": (1, 1, rows, c_out)}, None, None).memory


@pytest.mark.parametrize("rows,c_in,c_out,grid,shard,expect_grid,expect_shard", [
    # mobilenet_v2 features.9.conv.0.0: 64 channels in 32-wide shards on 6 channel cores
    # (6*32 != 64): conv2d reshards onto its own 2x7 config (2 divides 2 and 12 channel tiles)
    (196, 64, 384, (6, 7), (32, 32), (2, 7), (32, 192)),
    # features.15.conv.0.0: 160 -> 960 on 49 rows, 6x2 input of 32-wide shards -> 5x2
    (49, 160, 960, (6, 2), (32, 32), (5, 2), (32, 192)),
    # efficientnet_b0 features.4.0.block.3.0: 240 -> 80 (8 and 3 tiles): one channel core
    (196, 240, 80, (8, 7), (32, 32), (1, 7), (32, 96)),
    (392, 240, 80, (8, 7), (64, 32), (1, 7), (64, 96)),          # batch 2
    # channel cores that split the input exactly are kept, even when not "optimal"
    (196, 192, 384, (6, 7), (32, 32), (6, 7), (32, 64)),
    (196, 256, 384, (8, 7), (32, 32), (8, 7), (32, 64)),
])
def test_matmul_conv_output_follows_conv2d_internal_reshard(rows, c_in, c_out, grid, shard,
                                                            expect_grid, expect_shard):
    """Measured on the mock n150 (ttnn 0.81.1): a block-sharded 1x1 conv input whose channel
    cores times shard width is not the input's channel count is resharded inside ttnn.conv2d
    (conv2d_utils.cpp get_conv_padded_input_shape_and_mem_config), and the matmul's output
    lands on that config's cores."""
    x = MemSpec(BLOCK, "l1", grid, grid[0] * grid[1], shard)
    out = _mm_conv_out(x, rows, c_in, c_out)
    assert (out.memory_layout, out.grid, out.num_cores, out.shard_shape) == \
        (BLOCK, expect_grid, expect_grid[0] * expect_grid[1], expect_shard)
    assert conv_reshards_input(x, c_in, is_mm=True) == (expect_grid != grid)
    assert not conv_reshards_input(x, c_in, is_mm=False)      # only the matmul path checks


def test_select_shard_layout_heuristic():
    assert select_conv_shard_layout(12544, 64, 64) == HEIGHT
    assert select_conv_shard_layout(196, 1024, 256) == BLOCK
    assert select_conv_shard_layout(49, 2048, 512) == WIDTH      # >1280 in_channels
    assert select_conv_shard_layout(49, 2048, 512, is_mm_conv=True) != WIDTH


def test_conv_interleaved_input_without_shard_layout_is_auto_sharded():
    # ttnn 0.81.1 accepts it (auto shard, tests/test_rules_vs_ttnn.py); the planner is told
    assert R.check("conv2d", [DRAM], {}, shapes=[FLAT]) == []
    assert [x.rule for x in R.advise("conv2d", [DRAM], {}, shapes=[FLAT])] == \
        ["conv2d.sharded_or_shard_layout"]
    assert R.check("conv2d", [DRAM], {"shard_layout": HEIGHT}, shapes=[FLAT]) == []
    v = R.check("conv2d", [HS], {"act_block_h_override": 33}, shapes=[FLAT])
    assert [x.rule for x in v] == ["conv2d.act_block_h"]
    assert R.check("conv2d", [HS], {}, shapes=[FLAT]) == []
    v = R.check("conv2d", [HS], {"output_layout": "row_major", "dtype": "bfloat8_b"})
    assert [x.rule for x in v] == ["conv2d.rm_bfp_output"]


def test_binary_sharded_broadcast_and_mismatch_accepted_in_081():
    const = TensorLayout(MemSpec(INTERLEAVED, "l1"))
    assert R.check("multiply", [HS, const], {}, shapes=[FLAT, (1, 1, 1, 64)]) == []
    other = TensorLayout(R.sharded_memspec(BLOCK, 12544, 64, grid=(2, 8)))
    assert R.check("add", [HS, other], {}, shapes=[FLAT, FLAT]) == []
    assert [v.rule for v in R.advise("add", [HS, other], {}, shapes=[FLAT, FLAT])] == \
        ["binary.native_sharding"]
    assert R.advise("add", [HS, HS], {}, shapes=[FLAT, FLAT]) == []


def test_binary_rejects():
    rm = TensorLayout(MemSpec(INTERLEAVED, "l1"), "row_major")
    # ttnn 0.81.1 accepts row-major operands next to sharded ones (measured on the mock device)
    assert R.check("add", [HS, rm], {}, shapes=[FLAT, FLAT]) == []
    assert R.check("add", [rm, rm], {}, shapes=[FLAT, FLAT]) == []
    v = R.check("add", [HS, DRAM], {}, shapes=[FLAT, (1, 1, 12544, 32)])
    assert [x.rule for x in v] == ["binary.broadcast"]


def test_tensor_rules():
    bad = TensorLayout(MemSpec(HEIGHT, "l1", (8, 7), 56, (32, 64)))
    v = R.check("relu", [bad], {}, shapes=[FLAT])
    assert [x.rule for x in v] == ["tensor.shard_spec"]
    v = R.check("relu", [TensorLayout(MemSpec(INTERLEAVED), "row_major", "bfloat8_b")], {})
    assert [x.rule for x in v] == ["tensor.bfp_tile"]
    dram_hs = TensorLayout(MemSpec(HEIGHT, "dram", (8, 7), 56, (224, 64)))
    assert R.check("relu", [dram_hs], {}, shapes=[FLAT]) == []    # eltwise: accepted by ttnn
    v = R.check("max_pool2d", [dram_hs], {}, shapes=[FLAT])
    assert [x.rule for x in v] == ["tensor.shard_l1"]
    # TILE shards are whole tiles; width shards are exactly as tall as the physical tensor
    v = R.check("relu", [TensorLayout(MemSpec(HEIGHT, "l1", (4, 1), 4, (25, 64)))], {},
                shapes=[(1, 1, 100, 64)])
    assert [x.rule for x in v] == ["tensor.shard_tile"]
    ws = MemSpec(WIDTH, "l1", (2, 1), 2, (128, 32))
    assert R.check("relu", [TensorLayout(ws)], {}, shapes=[(1, 1, 100, 64)]) == []
    v = R.check("relu", [TensorLayout(ws, "row_major")], {}, shapes=[(1, 1, 100, 64)])
    assert [x.rule for x in v] == ["tensor.shard_spec"]


def test_relu_cannot_change_dtype():
    assert [v.rule for v in R.check("relu", [HS], {"dtype": "bfloat8_b"})] == ["relu.dtype"]
    assert R.check("relu", [HS], {"dtype": "bfloat16"}) == []


def test_pool_refuses_channels_not_divisible_by_its_channel_shards():
    # a 1x1 conv's 512 channels block-sharded on 5 columns of 128 (the last one empty): ttnn
    # 0.81.1 validate_pool2d "input channels (512) should be divisible by num_shards (5)"
    five = TensorLayout(MemSpec(BLOCK, "l1", (5, 8), 40, (64, 128)), TILE_LAYOUT)
    four = TensorLayout(MemSpec(BLOCK, "l1", (4, 8), 32, (64, 128)), TILE_LAYOUT)
    shape = (1, 1, 490, 512)
    for op in ("max_pool2d", "global_avg_pool"):
        assert [v.rule for v in R.check(op, [five], {}, shapes=[shape])] == ["pool.channel_shards"]
        assert R.check(op, [four], {}, shapes=[shape]) == []

def test_pool_linear_upsample_concat_pad_adapters():
    assert R.check("max_pool2d", [HS], {}, shapes=[FLAT]) == []
    assert [v.rule for v in R.check("max_pool2d", [HS], {"dtype": "bfloat8_b"})] == ["pool.dtype_layout"]
    assert R.check("linear", [HS, DRAM], {}) == []            # automatic 1D config
    bs = TensorLayout(R.sharded_memspec(BLOCK, 64, 256, grid=(2, 2)))
    assert [v.rule for v in R.check("linear", [bs, DRAM], {})] == ["linear.sharded_needs_program_config"]
    ws = TensorLayout(R.sharded_memspec(WIDTH, 64, 256, num_cores=8), "row_major")
    assert R.check("upsample", [ws], {}) == []
    assert "upsample.memory" in [v.rule for v in R.check("upsample", [ws], {"mode": "bilinear"})]
    assert [v.rule for v in R.check("upsample", [HS], {})] == ["upsample.layout"]
    assert [v.rule for v in R.check("concat", [HS, DRAM], {})] == ["concat.mixed"]
    assert [v.rule for v in R.check("pad", [HS], {})] == ["pad.memory"]
    assert [v.rule for v in R.check("interleaved_to_sharded", [HS], {}, HS.memory)] == ["i2s.input"]
    assert R.check("sharded_to_interleaved", [DRAM], {}, DRAM.memory) == []
    assert [v.rule for v in R.check("sharded_to_interleaved", [HS], {}, HS.memory)] == ["s2i.input"]
    l1 = MemSpec(INTERLEAVED, "l1")
    assert [v.rule for v in R.check("to_memory_config", [TensorLayout(l1)], {"dtype": "bfloat8_b"},
                                    l1)] == ["to_memory_config.any"]
    assert R.check("reshard", [HS], {}, HS.memory) == []
    assert [v.rule for v in R.check("typecast", [HS], {"dtype": "bfloat8_b"}, DRAM.memory)] == \
        ["typecast.layout"]
    assert [v.rule for v in R.check("to_layout", [HS], {"layout": "row_major", "dtype": "bfloat8_b"})] == \
        ["to_layout.dtype"]
    with pytest.raises(ValueError):
        R.check("argmax", [HS], {})           # not a spec op, not a ttnn op of the table


def test_output_layout():
    conv_out = R.output_layout("conv2d", [DRAM], {"shard_layout": HEIGHT, "in_channels": 3,
                                                  "out_shape": FLAT}, None, [(1, 1, 50176, 3)])
    assert conv_out.memory.memory_layout == HEIGHT and conv_out.memory.shard_shape == (224, 64)
    pooled = R.output_layout("max_pool2d", [conv_out], {"out_shape": (1, 1, 3136, 64)}, None, [FLAT])
    assert pooled.memory.memory_layout == HEIGHT and pooled.memory.grid == conv_out.memory.grid
    # generic_pools.cpp: a ROW_MAJOR output's shard height is round_up(rows, cores)/cores,
    # not tile rounded: 3136 rows over 56 cores = 56 (a TILE output would get 64)
    assert pooled.memory.shard_shape == (56, 64) and pooled.layout == "row_major"
    tiled = R.output_layout("max_pool2d", [conv_out], {"out_shape": (1, 1, 3136, 64),
                                                       "output_layout": "tile"}, None, [FLAT])
    assert tiled.memory.shard_shape == (64, 64)
    mul = R.output_layout("multiply", [HS, DRAM], {"dtype": "bfloat8_b"}, None, [FLAT, (1, 1, 1, 64)])
    assert mul.memory == HS.memory and mul.dtype == "bfloat8_b"
    r = R.output_layout("relu", [HS], {}, None, [FLAT])
    assert r == HS


def test_raise_if_violations_names_layer_and_rule():
    R.raise_if_violations([], "x")
    with pytest.raises(LayoutError) as e:
        R.raise_if_violations(R.check("conv2d", [DRAM], {"act_block_h_override": 33}),
                              "layer1.0.conv1")
    assert e.value.layer == "layer1.0.conv1" and e.value.rule == "conv2d.act_block_h"
    assert "conv2d_utils.cpp" in str(e.value)


def test_pool_on_interleaved_input_shards_like_pool2d():
    # generic_pools.cpp get_pool_input_memory_config: width sharding of 32 channels with a TILE
    # output is one channel tile -> the largest exact divisor is 1 core (not the whole grid)
    pc = pool_parallel_config(WIDTH, 2, 32, in_tiled=False, out_tiled=True)
    assert (pc.num_cores, pc.grid) == (1, (1, 1))
    assert pool_input_memspec(pc, 512, 32, in_tiled=False).shard_shape == (512, 32)
    x = TensorLayout(MemSpec(INTERLEAVED, "dram"), "row_major")
    out = R.output_layout("avg_pool2d", [x], {"applied_shard_scheme": WIDTH, "output_layout": "tile",
                                              "out_shape": (1, 1, 2, 32)}, None, [(1, 1, 512, 32)])
    assert out.memory == MemSpec(WIDTH, "l1", (1, 1), 1, (32, 32))
    # 2048 channels: 64 channel tiles over all 64 cores, [32, 32] each
    assert pool_parallel_config(WIDTH, 2, 2048, in_tiled=True, out_tiled=True).num_cores == 64
    # row-major output: height "tiles" are single rows (3136 = 49*64 -> 64 cores, 49 rows each)
    pc = pool_parallel_config(HEIGHT, 3136, 64, in_tiled=False, out_tiled=False)
    assert pc.num_cores == 64
    assert pool_output_memspec(pc, 3136, 64, out_tiled=False).shard_shape == (49, 64)


def test_rule_ids_used_by_the_sim_are_in_the_table():
    import pathlib
    import re
    root = pathlib.Path(R.__file__).parents[1]     # the ttmodels package
    used = set()
    for f in (list((root / "backends").rglob("*.py")) + list((root / "ops").rglob("sim.py"))
              + [root / "planning" / "matmul_solver.py"]):
        text = f.read_text()
        used |= set(re.findall(r'_violation\(\s*"([a-z0-9_.]+)"', text))
        used |= set(re.findall(r'rule="([a-z0-9_.]+)"', text))
    # (concat.same_format is no longer raised by the sim by name: its concat goes through the
    # table's check like every op, issue 25)
    assert {"tensor.shard_tile", "tensor.shard_grid", "tensor.on_device",
            "tensor.shard_spec"} <= used
    assert used - set(R.RULES) == set()


def test_binary_in_place_output_tensor_must_be_a_with_the_output_spec():
    # ttnn.add(a, b, output_tensor=a) (= ttnn.add_): binary_ng takes the preallocated tensor's
    # spec as the output spec, so a must have the broadcast output shape, dtype and memory config
    attrs = {"inplace": True, "out_shape": FLAT}
    assert R.check("add", [HS, HS], attrs, shapes=[FLAT, FLAT]) == []
    assert R.check("add", [HS, HS], {**attrs, "dtype": "bfloat16"}, shapes=[FLAT, FLAT]) == []
    v = R.check("add", [HS, HS], {**attrs, "dtype": "bfloat8_b"}, shapes=[FLAT, FLAT])
    assert [x.rule for x in v] == ["binary.output_tensor"]
    other = R.sharded_memspec(BLOCK, 12544, 64, grid=(2, 8))
    v = R.check("add", [HS, HS], {**attrs, "memory_config": other}, shapes=[FLAT, FLAT])
    assert [x.rule for x in v] == ["binary.output_tensor"]
    # a broadcast operand cannot hold the output; swapped operands make the second input a
    const = TensorLayout(MemSpec(INTERLEAVED, "l1"))
    v = R.check("multiply", [const, HS], {"inplace": True}, shapes=[(1, 1, 1, 64), FLAT])
    assert [x.rule for x in v] == ["binary.output_tensor"]
    assert R.check("multiply", [const, HS], {"inplace": True, "swap_operands": True},
                   shapes=[(1, 1, 1, 64), FLAT]) == []
    # without inplace the same calls are accepted (the rule is about output_tensor only)
    assert R.check("add", [HS, HS], {"dtype": "bfloat8_b", "memory_config": other},
                   shapes=[FLAT, FLAT]) == []
    assert R.RULES["binary.output_tensor"].kind == "error"


def test_folded_stem_conv_output_is_the_matmul_convs():
    # ConvNeXt's 4x4/4 stem on 3 channels from DRAM: conv2d folds it into a matmul conv on 48
    # channels (auto_enable_kernel_folding); block-sharded, ttnn 0.81.1 gives 1 x 8 cores of
    # 96 channels (mock device), not the 3 x 8 of an unfolded conv's output parallel config
    from ttmodels.ops.conv2d.sharding import kernel_stride_fold
    dram = MemSpec(INTERLEAVED, "dram")
    fold = kernel_stride_fold((4, 4), (4, 4), (0, 0, 0, 0), (1, 1), (64, 64), dram)
    assert fold == 16
    assert kernel_stride_fold((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (64, 64), dram) == 1
    args = {"shard_layout": BLOCK, "in_channels": 3, "out_shape": (1, 1, 256, 96)}
    x = TensorLayout(dram, TILE_LAYOUT)
    out = R.output_layout("conv2d", [x], {**args, "fold": fold}, None, [(1, 1, 4096, 3)])
    assert (out.memory.grid, out.memory.shard_shape) == ((1, 8), (32, 96))
    unfolded = R.output_layout("conv2d", [x], args, None, [(1, 1, 4096, 3)])
    assert unfolded.memory.grid == (3, 8)
