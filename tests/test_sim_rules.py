"""The sim backend rejects what ttnn 0.81 rejects, naming the rule (ttmodels/planning/rules.py ids, plus
the tensor-level ids the sim enforces itself)."""
from __future__ import annotations

import pytest
import torch

import ttmodels.backends.sim as tt
from ttmodels.errors import LayoutError

HS, WS, BS = (tt.TensorMemoryLayout.HEIGHT_SHARDED, tt.TensorMemoryLayout.WIDTH_SHARDED,
              tt.TensorMemoryLayout.BLOCK_SHARDED)


@pytest.fixture(scope="module")
def dev():
    return tt.open_device(device_id=0)


def sharded(kind, shard, cores=2, orient=tt.ShardOrientation.ROW_MAJOR, buffer=tt.BufferType.L1):
    grid = tt.CoreRangeSet([tt.CoreRange(tt.CoreCoord(0, 0), tt.CoreCoord(cores - 1, 0))])
    return tt.MemoryConfig(kind, buffer, tt.ShardSpec(grid, shard, orient))


def tensor(dev, shape=(1, 1, 64, 64), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT, mc=None):
    return tt.from_torch(torch.randn(*shape), dtype=dtype, layout=layout, device=dev, memory_config=mc)


def rule_of(excinfo) -> str:
    return excinfo.value.rule


# --- tensor-level facts ----------------------------------------------------------------------

def test_sharded_memory_config_needs_shard_spec(dev):
    with pytest.raises(LayoutError) as e:
        tensor(dev, mc=tt.MemoryConfig(HS, tt.BufferType.L1))
    assert rule_of(e) == "tensor.shard_spec"


def test_shard_shape_must_cover_the_tensor(dev):
    with pytest.raises(LayoutError) as e:
        tensor(dev, (1, 1, 256, 64), mc=sharded(HS, [64, 64], cores=2))   # 2 x 64 rows < 256
    assert rule_of(e) == "tensor.shard_spec"
    with pytest.raises(LayoutError) as e:
        tensor(dev, (1, 1, 64, 64), mc=sharded(HS, [32, 32], cores=2))    # height shard narrower than C
    assert rule_of(e) == "tensor.shard_spec"


def test_tile_shards_are_whole_tiles(dev):
    with pytest.raises(LayoutError) as e:
        tensor(dev, (1, 1, 48, 64), mc=sharded(HS, [24, 64], cores=2))
    assert rule_of(e) == "tensor.shard_tile"
    # the same shard shape is fine in ROW_MAJOR layout
    t = tensor(dev, (1, 1, 48, 64), layout=tt.ROW_MAJOR_LAYOUT, mc=sharded(HS, [24, 64], cores=2))
    assert t.is_sharded()


def test_shard_grid_within_worker_grid(dev):
    grid = tt.CoreRangeSet([tt.CoreRange(tt.CoreCoord(0, 0), tt.CoreCoord(8, 0))])
    mc = tt.MemoryConfig(HS, tt.BufferType.L1, tt.ShardSpec(grid, [32, 64], tt.ShardOrientation.ROW_MAJOR))
    with pytest.raises(LayoutError) as e:
        tensor(dev, (1, 1, 288, 64), mc=mc)
    assert rule_of(e) == "tensor.shard_grid"


def test_sharded_tensors_live_in_l1(dev):
    with pytest.raises(LayoutError) as e:
        tensor(dev, mc=sharded(HS, [32, 64], buffer=tt.BufferType.DRAM))
    assert rule_of(e) == "tensor.shard_l1"


def test_block_float_needs_tile_layout(dev):
    with pytest.raises(LayoutError) as e:
        tensor(dev, dtype=tt.bfloat8_b, layout=tt.ROW_MAJOR_LAYOUT)
    assert rule_of(e) == "tensor.bfp_tile"
    with pytest.raises(LayoutError) as e:
        tt.to_layout(tensor(dev, dtype=tt.bfloat8_b), tt.ROW_MAJOR_LAYOUT)
    assert rule_of(e) == "to_layout.dtype"


def test_ops_need_device_tensors(dev):
    host = tt.from_torch(torch.randn(1, 1, 32, 32), dtype=tt.bfloat16, layout=tt.TILE_LAYOUT)
    with pytest.raises(LayoutError) as e:
        tt.relu(host)
    assert rule_of(e) == "tensor.on_device"


# --- op rules --------------------------------------------------------------------------------

def _conv_args(dev, x, **cfg):
    w = tt.from_torch(torch.randn(32, 32, 3, 3), dtype=tt.float32)
    return dict(input_tensor=x, weight_tensor=w, device=dev, in_channels=32, out_channels=32, batch_size=1,
                input_height=8, input_width=8, kernel_size=(3, 3), padding=(1, 1),
                conv_config=tt.Conv2dConfig(**cfg))


def test_conv2d_interleaved_input_is_sharded_by_conv2d(dev):
    # ttnn 0.81.1 auto-shards an interleaved input without shard_layout (rules_vs_ttnn corpus)
    x = tensor(dev, (1, 1, 64, 32))
    assert tt.conv2d(**_conv_args(dev, x)).is_sharded()
    assert tt.conv2d(**_conv_args(dev, x, shard_layout=HS)).is_sharded()
    with pytest.raises(LayoutError) as e:
        tt.conv2d(**_conv_args(dev, x, shard_layout=HS, act_block_h_override=48))
    assert rule_of(e) == "conv2d.act_block_h"


def test_conv2d_row_major_bfp8_output(dev):
    x = tensor(dev, (1, 1, 64, 32))
    with pytest.raises(LayoutError) as e:
        tt.conv2d(dtype=tt.bfloat8_b, **_conv_args(dev, x, shard_layout=HS, output_layout=tt.ROW_MAJOR_LAYOUT))
    assert rule_of(e) == "conv2d.rm_bfp_output"


def _slice(kind="height", k=2):
    return tt.Op2DSliceConfig(slice_type=tt.Op2DDRAMSliceHeight if kind == "height" else tt.Op2DDRAMSliceWidth,
                              num_slices=k)


def test_conv2d_dram_slicing_rules(dev):
    dram = tensor(dev, (1, 1, 64, 32))
    assert tt.conv2d(slice_config=_slice(k=4), **_conv_args(dev, dram, shard_layout=HS)).memory_config() == \
        tt.DRAM_MEMORY_CONFIG
    # the input of a DRAM-sliced conv is DRAM interleaved (L1 interleaved or sharded is refused)
    for mc in (tt.L1_MEMORY_CONFIG, sharded(HS, [32, 32])):
        with pytest.raises(LayoutError) as e:
            tt.conv2d(slice_config=_slice(), **_conv_args(dev, tensor(dev, (1, 1, 64, 32), mc=mc), shard_layout=HS))
        assert rule_of(e) == "conv2d.slice_dram_input"
    # each slice is sharded with conv_config.shard_layout
    with pytest.raises(LayoutError) as e:
        tt.conv2d(slice_config=_slice(), **_conv_args(dev, dram))
    assert rule_of(e) == "conv2d.slice_shard_layout"
    # 2 <= num_slices <= the sliced output dimension (OH = 8; width: ceil(8 / 32) = 1 tile column)
    for sl in (_slice(k=1), _slice(k=9), _slice("width", 2)):
        with pytest.raises(LayoutError) as e:
            tt.conv2d(slice_config=sl, **_conv_args(dev, dram, shard_layout=HS))
        assert rule_of(e) == "conv2d.slice_count"
    # a 1x1 stride-1 conv is a matmul and never slices
    w1 = tt.from_torch(torch.randn(32, 32, 1, 1), dtype=tt.float32)
    args = dict(_conv_args(dev, dram, shard_layout=HS), weight_tensor=w1, kernel_size=(1, 1), padding=(0, 0))
    with pytest.raises(LayoutError) as e:
        tt.conv2d(slice_config=_slice(), **args)
    assert rule_of(e) == "conv2d.slice_mm"
    assert tt.conv2d(**args).is_sharded()


def test_binary_output_tensor_rules(dev):
    a = tensor(dev, (1, 1, 64, 64))
    row = tensor(dev, (1, 1, 1, 64))
    # the output tensor has the broadcast shape: the broadcasting operand cannot hold it
    with pytest.raises(LayoutError) as e:
        tt.add(a, row, output_tensor=row)
    assert rule_of(e) == "binary.output_tensor"
    with pytest.raises(LayoutError) as e:
        tt.add(a, row, output_tensor=tensor(dev, (1, 1, 32, 64)))
    assert rule_of(e) == "binary.output_tensor"
    # a dtype argument must be the output tensor's dtype
    with pytest.raises(LayoutError) as e:
        tt.add(a, row, dtype=tt.bfloat8_b, output_tensor=a)
    assert rule_of(e) == "binary.output_tensor"
    with pytest.raises(LayoutError) as e:
        tt.multiply(a, 2.0, dtype=tt.float32, output_tensor=tensor(dev, (1, 1, 64, 64), dtype=tt.bfloat8_b))
    assert rule_of(e) == "binary.output_tensor"
    # a memory_config must be the output tensor's
    with pytest.raises(LayoutError) as e:
        tt.add(a, row, memory_config=tt.L1_MEMORY_CONFIG, output_tensor=a)
    assert rule_of(e) == "binary.output_tensor"
    with pytest.raises(LayoutError) as e:
        tt.add(a, row, memory_config=tt.L1_MEMORY_CONFIG, output_tensor=tensor(dev, (1, 1, 64, 64)))
    assert rule_of(e) == "binary.output_tensor"
    # leading 1s aside, and with matching arguments, it is accepted
    o = tensor(dev, (64, 64))
    assert tt.add(a, row, dtype=tt.bfloat16, memory_config=tt.DRAM_MEMORY_CONFIG, output_tensor=o) is o
    tt.deallocate(o)
    with pytest.raises(ValueError, match="deallocated"):
        tt.add(a, row, output_tensor=o)


def test_binary_row_major_with_sharded_operand_runs_like_ttnn_081(dev):
    a = tensor(dev, layout=tt.ROW_MAJOR_LAYOUT, mc=sharded(HS, [32, 64]))
    b = tensor(dev, layout=tt.ROW_MAJOR_LAYOUT, mc=sharded(HS, [32, 64]))
    out = tt.add(a, b)
    assert torch.allclose(out.to_torch().float(), (a.to_torch().float() + b.to_torch().float()),
                          atol=0.05)


def test_binary_shapes_must_broadcast(dev):
    with pytest.raises(LayoutError) as e:
        tt.multiply(tensor(dev, (1, 1, 64, 64)), tensor(dev, (1, 1, 64, 32)))
    assert rule_of(e) == "binary.broadcast"


def test_binary_with_different_shard_specs_runs_like_ttnn_081(dev):
    # rules.py: ttnn 0.81's binary_ng has no shard-spec equality check (it falls back to reading
    # shards through TensorAccessor); the sim accepts it and computes the right values.
    a = tensor(dev, (1, 1, 128, 64), mc=sharded(HS, [64, 64], cores=2))
    b = tensor(dev, (1, 1, 128, 64), mc=sharded(HS, [32, 64], cores=4))
    y = tt.add(a, b)
    assert torch.equal(tt.to_torch(y).float(), (tt.to_torch(a).float() + tt.to_torch(b).float()).bfloat16().float())
    # both sharded: the output takes the spec of the operand on more cores (ttnn 0.81.1)
    assert y.memory_config() == b.memory_config()
    assert tt.add(b, a).memory_config() == b.memory_config()


def test_relu_has_no_dtype_and_linear_needs_tiles(dev):
    a = tensor(dev, (1, 1, 32, 64), layout=tt.ROW_MAJOR_LAYOUT)
    w = tensor(dev, (64, 32))
    with pytest.raises(LayoutError) as e:
        tt.linear(a, w)
    assert rule_of(e) == "linear.tile"


def test_linear_block_sharded_input_needs_program_config(dev):
    grid = tt.CoreRangeSet([tt.CoreRange(tt.CoreCoord(0, 0), tt.CoreCoord(1, 1))])
    a = tensor(dev, (1, 1, 64, 64), mc=tt.MemoryConfig(BS, tt.BufferType.L1, tt.ShardSpec(
        grid, [32, 32], tt.ShardOrientation.ROW_MAJOR)))
    w = tensor(dev, (64, 32))
    with pytest.raises(LayoutError) as e:
        tt.linear(a, w)
    assert rule_of(e) == "linear.sharded_needs_program_config"


def test_pool_bfp8_output_needs_tile(dev):
    x = tensor(dev, (1, 1, 64, 32), mc=sharded(HS, [32, 32]))
    with pytest.raises(LayoutError) as e:
        tt.max_pool2d(x, 1, 8, 8, 32, [2, 2], [2, 2], [0, 0], [1, 1], dtype=tt.bfloat8_b)
    assert rule_of(e) == "pool.dtype_layout"
    y = tt.max_pool2d(x, 1, 8, 8, 32, [2, 2], [2, 2], [0, 0], [1, 1], dtype=tt.bfloat8_b,
                      output_layout=tt.TILE_LAYOUT)
    assert y.dtype == tt.bfloat8_b and y.is_sharded()


def test_upsample_rules(dev):
    tiled = tensor(dev, (1, 4, 16, 32), mc=sharded(HS, [32, 32], cores=4))
    with pytest.raises(LayoutError) as e:
        tt.upsample(tiled, 2)
    assert rule_of(e) == "upsample.layout"
    wide = tensor(dev, (1, 2, 16, 64), layout=tt.ROW_MAJOR_LAYOUT, mc=sharded(WS, [32, 32]))
    with pytest.raises(LayoutError) as e:
        tt.upsample(wide, 2, mode="bilinear")
    assert rule_of(e) == "upsample.memory"


def test_concat_rules(dev):
    a = tensor(dev, (1, 1, 64, 32), mc=sharded(HS, [32, 32]))
    b = tensor(dev, (1, 1, 64, 32))
    with pytest.raises(LayoutError) as e:
        tt.concat([a, b], dim=3)
    assert rule_of(e) == "concat.mixed"
    c = tensor(dev, (1, 1, 64, 32), mc=sharded(HS, [64, 32], cores=1))
    with pytest.raises(LayoutError) as e:
        tt.concat([a, c], dim=3)
    assert rule_of(e) == "concat.sharded"


def test_pad_of_sharded_tile_tensor(dev):
    x = tensor(dev, (1, 2, 32, 32), mc=sharded(HS, [32, 32]))
    with pytest.raises(LayoutError) as e:
        tt.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], 0.0)
    assert rule_of(e) == "pad.memory"


def test_adapter_rules(dev):
    inter = tensor(dev)
    shard = tensor(dev, mc=sharded(HS, [32, 64]))
    with pytest.raises(LayoutError) as e:       # an interleaved input is copied: dtype ignored
        tt.sharded_to_interleaved(inter, output_dtype=tt.bfloat8_b)
    assert rule_of(e) == "s2i.input"
    with pytest.raises(LayoutError) as e:
        tt.interleaved_to_sharded(shard, sharded(HS, [32, 64]))
    assert rule_of(e) == "i2s.input"
    with pytest.raises(LayoutError) as e:
        tt.reshard(inter, sharded(HS, [32, 64]))
    assert rule_of(e) == "reshard.input"
    with pytest.raises(LayoutError) as e:
        tt.typecast(shard, tt.bfloat16, memory_config=tt.L1_MEMORY_CONFIG)
    assert rule_of(e) == "typecast.layout"


def test_layer_scope_names_the_layer(dev):
    with tt.layer_scope("layer1.0.conv1"):
        with pytest.raises(LayoutError, match="layer1.0.conv1") as e:
            tt.multiply(tensor(dev, (1, 1, 64, 64)), tensor(dev, (1, 1, 64, 32)))
    assert e.value.layer == "layer1.0.conv1"
