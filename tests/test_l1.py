"""L1 estimates: they grow with what a core holds and respond to layout choices."""
from ttmodels.planning import l1
from ttmodels.ops.conv2d.l1 import conv_l1
from ttmodels.ops.pool.l1 import pool_l1
from ttmodels.planning import rules as R
from ttmodels.ops.conv2d.sharding import (conv_memspec, conv_output_memspec,
                                          determine_parallel_config)
from ttmodels.planning.layout import BLOCK, HEIGHT, INTERLEAVED, MemSpec, TensorLayout


def _conv(kind, rows, cin, cout, k, n_in_rows=None, **kw):
    pc = determine_parallel_config(kind, rows, cin, cout)
    inp = TensorLayout(conv_memspec(kind, n_in_rows or rows, cin, pc))
    out = TensorLayout(conv_memspec(kind, rows, cout, pc))
    return conv_l1(kind=kind, in_layout=inp, out_layout=out, in_rows=n_in_rows or rows,
                      in_w=int((n_in_rows or rows) ** 0.5), c_in=cin, out_rows=rows, c_out=cout,
                      kernel=(k, k), cores_nhw=pc.cores_nhw, cores_c=pc.cores_c,
                      num_cores=pc.num_cores, **kw)


def test_per_core_bytes():
    hs = TensorLayout(R.sharded_memspec(HEIGHT, 12544, 64, num_cores=56))
    assert l1.per_core_bytes(hs, 12544, 64) == 224 * 64 * 2
    assert l1.per_core_bytes(TensorLayout(MemSpec(INTERLEAVED, "dram")), 12544, 64) == 0
    bf8 = TensorLayout(hs.memory, "tile", "bfloat8_b")
    assert l1.per_core_bytes(bf8, 12544, 64) == 224 * 64 * 1088 // 1024


def test_conv_estimate_parts_and_weights_dominate_height_sharding():
    e = _conv(HEIGHT, 784, 512, 512, 3)
    assert e.total == sum(e.parts.values())
    # get_cb_info: height sharding streams one kernel row of weights (per_core_N x act_block_w
    # = 16 x 48 tiles of bfloat8_b) when the core's rows are one act block
    assert e.parts["weights_cb"] == 16 * (512 * 3 // 32) * 1088
    b = _conv(BLOCK, 784, 512, 512, 3)
    assert b.parts["weights_cb"] < e.parts["weights_cb"] and b.total < e.total


def test_several_act_blocks_buffer_all_weight_rows():
    full = _conv(HEIGHT, 12544, 64, 64, 3)
    small = _conv(HEIGHT, 12544, 64, 64, 3, act_block_h=32)
    assert small.parts["act_cb"] < full.parts["act_cb"]
    assert small.parts["weights_cb"] == 3 * full.parts["weights_cb"]


def test_partials_only_when_their_dtype_is_not_the_outputs():
    a = _conv(HEIGHT, 3136, 64, 64, 3)
    b = _conv(HEIGHT, 3136, 64, 64, 3, fp32_accum=True)
    assert "partials_cb" not in a.parts      # bfloat16 partials sit on the bfloat16 output
    assert b.parts["partials_cb"] == 2 * 2 * 4096   # per_core_M x per_core_N float32 tiles


def test_halo_span_of_a_3x3_conv():
    # 56x56x64, 3x3/1 pad 1, 49 cores of 64 output rows: the first core reads from padded
    # input pixel (0, 0) to (3, 9): 3 rows of 58 plus 10 = 184 sticks (ttnn 0.81.1: 23552 B)
    g = l1.ConvGeometry(1, 56, 56, 56, 56, (3, 3), (1, 1), (1, 1, 1, 1))
    assert l1.halo_sticks_per_core(g, 64, 49) == 184
    # stride 2 (ResNet50 layer2.0.conv2): 241 sticks of 128 channels = 61696 B in ttnn
    g2 = l1.ConvGeometry(1, 56, 56, 28, 28, (3, 3), (2, 2), (1, 1, 1, 1))
    assert l1.halo_sticks_per_core(g2, 32, 49) == 241


def test_matmul_conv_cbs():
    # ResNet50 layer4.1.conv1 at batch 1 (block 8x2, K 2048 -> 8 tiles per core, N 64 per core):
    # in0 2 x 1 x 8 bf16 tiles, in1 2 x 8 x 2 bfloat8_b tiles, bias 2 tiles
    pc = R.ParallelConfig(BLOCK, 16, (8, 2), 2, 8)
    inp = TensorLayout(conv_memspec(BLOCK, 49, 2048, pc))
    out = TensorLayout(conv_output_memspec(pc, 49, 512, is_mm=True))
    e = conv_l1(kind=BLOCK, in_layout=inp, out_layout=out, in_rows=49, in_w=7, c_in=2048,
                   out_rows=49, c_out=512, kernel=(1, 1), cores_nhw=2, cores_c=8, num_cores=16,
                   is_mm=True)
    assert e.parts == {"input": 16384, "output": 4096, "in1_cb": 34816, "in0_cb": 32768,
                       "bias_cb": 2176}


def test_pool_and_eltwise():
    hs = TensorLayout(R.sharded_memspec(HEIGHT, 12544, 64, num_cores=56), "row_major")
    out = TensorLayout(R.sharded_memspec(HEIGHT, 3136, 64, num_cores=56), "row_major")
    p = pool_l1(in_layout=hs, out_layout=out, in_rows=12544, in_w=112, c=64, out_rows=3136,
                   kernel=(3, 3), num_cores=56)
    assert p.parts["halo"] > p.parts["input"] and p.total == sum(p.parts.values())
    g = pool_l1(in_layout=hs, out_layout=out, in_rows=12544, in_w=112, c=64, out_rows=1,
                   kernel=(112, 112), num_cores=56, global_pool=True)
    assert "halo" not in g.parts
    e = l1.eltwise_l1(inputs=[(hs, 12544, 64), (hs, 12544, 64)], out_layout=hs, out_rows=12544, c=64)
    assert e.parts["input0"] == e.parts["output"] == 224 * 64 * 2


def test_in_place_eltwise_output_costs_no_l1():
    hs = TensorLayout(R.sharded_memspec(HEIGHT, 67584, 256, num_cores=64))
    ins = [(hs, 67584, 256), (hs, 67584, 256)]
    out_of_place = l1.eltwise_l1(inputs=ins, out_layout=hs, out_rows=67584, c=256)
    in_place = l1.eltwise_l1(inputs=ins, out_layout=hs, out_rows=67584, c=256,
                             output_aliases_input=0)
    shard = 1056 * 256 * 2                      # BEVDet b6 layer1 residual: 540 KB per core
    assert out_of_place.parts["output"] == shard and in_place.parts["output"] == 0
    assert out_of_place.total - in_place.total == shard
    assert out_of_place.total > l1.l1_bank_bytes() >= in_place.total
