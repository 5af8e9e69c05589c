"""L1 estimates: they grow with what a core holds and respond to layout choices."""
from ttmodels import l1
from ttmodels import rules as R
from ttmodels.layout import BLOCK, HEIGHT, INTERLEAVED, WORMHOLE_L1_BYTES_PER_CORE, MemSpec, TensorLayout


def _conv(kind, rows, cin, cout, k, n_in_rows=None, **kw):
    pc = R.determine_parallel_config(kind, rows, cin, cout)
    inp = TensorLayout(R.conv_memspec(kind, n_in_rows or rows, cin, pc))
    out = TensorLayout(R.conv_memspec(kind, rows, cout, pc))
    return l1.conv_l1(kind=kind, in_layout=inp, out_layout=out, in_rows=n_in_rows or rows,
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
    # height sharding: every core holds all 3x3x512x512 weights in bfloat8_b
    assert e.parts["weights_cb"] == (512 * 9 // 32) * (512 // 32) * 1088
    assert e.total > WORMHOLE_L1_BYTES_PER_CORE
    b = _conv(BLOCK, 784, 512, 512, 3)
    assert b.parts["weights_cb"] < e.parts["weights_cb"] and b.total < WORMHOLE_L1_BYTES_PER_CORE


def test_smaller_act_block_uses_less():
    full = _conv(HEIGHT, 12544, 64, 64, 3)
    small = _conv(HEIGHT, 12544, 64, 64, 3, act_block_h=32)
    assert small.total < full.total
    assert small.parts["weights_cb"] == full.parts["weights_cb"]


def test_fp32_accum_doubles_partials():
    a = _conv(HEIGHT, 3136, 64, 64, 3)
    b = _conv(HEIGHT, 3136, 64, 64, 3, fp32_accum=True)
    assert b.parts["partials_cb"] == 2 * a.parts["partials_cb"]


def test_pool_and_eltwise():
    hs = TensorLayout(R.sharded_memspec(HEIGHT, 12544, 64, num_cores=56), "row_major")
    out = TensorLayout(R.sharded_memspec(HEIGHT, 3136, 64, num_cores=56), "row_major")
    p = l1.pool_l1(in_layout=hs, out_layout=out, in_rows=12544, in_w=112, c=64, out_rows=3136,
                   kernel=(3, 3), num_cores=56)
    assert p.parts["halo"] > p.parts["input"] and p.total == sum(p.parts.values())
    g = l1.pool_l1(in_layout=hs, out_layout=out, in_rows=12544, in_w=112, c=64, out_rows=1,
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
    assert out_of_place.total > WORMHOLE_L1_BYTES_PER_CORE >= in_place.total
