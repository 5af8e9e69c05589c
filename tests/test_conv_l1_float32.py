"""A float32 conv's L1 as ttnn 0.81.1 places it (issue 33: yolov8s at batch 4 planned every step
confirmed, then its real run clashed CBs with an L1 buffer at a float32 3x3 conv).

Measured on the mock n150 (`scripts/measure_op_events.py`-style timeline of the real run of
`ttmodels verify yolov8s --batch 4`, step model.4.m.1.cv1.conv: 3x3/1 pad 1, 64 -> 64 channels
on 4 x 80 x 80, height sharded on 62 cores of 416 rows, float32 activations and weights,
fp32_accum): halo buffer 193,536 B per core (twice, one per halo pass), CB region ending at
802,208 = the L1 base 105,824 + 696,384 B of CBs."""
from ttmodels.ops.conv2d.l1 import conv_l1
from ttmodels.ops.conv2d.sharding import (conv_memspec, conv_output_memspec,
                                          determine_parallel_config)
from ttmodels.planning import l1
from ttmodels.planning.layout import BLOCK, HEIGHT, TensorLayout

ROWS, C = 4 * 80 * 80, 64


def _conv(dtype, **kw):
    pc = determine_parallel_config(HEIGHT, ROWS, C, C)
    inp = TensorLayout(conv_memspec(HEIGHT, ROWS, C, pc), "tile", dtype)
    out = TensorLayout(conv_output_memspec(pc, ROWS, C, is_mm=False), "tile", dtype)
    geo = l1.ConvGeometry(4, 80, 80, 80, 80, (3, 3), (1, 1), (1, 1, 1, 1))
    return pc, conv_l1(kind=HEIGHT, in_layout=inp, out_layout=out, in_rows=ROWS, in_w=80,
                       c_in=C, out_rows=ROWS, c_out=C, kernel=(3, 3), cores_nhw=pc.cores_nhw,
                       cores_c=pc.cores_c, num_cores=pc.num_cores, geometry=geo, **kw)


def test_a_float32_conv_haloes_and_reads_float32_as_ttnn_measured():
    pc, e = _conv("float32", weights_dtype="float32", fp32_accum=True)
    assert (pc.num_cores, pc.cores_nhw) == (62, 62)         # the measured conv's cores
    # the halo's row-major sticks are float32 (get_cb_info: "Output of halo op is always
    # ROW_MAJOR, so input for convs is either FLOAT32 or BFLOAT16")
    assert e.parts["halo"] == 193_536
    # and so is the height-sharded act CB; with weights, tilized act, bias and scratchpad the
    # CBs end where ttnn's did
    assert l1.estimate_cbs(e) == 802_208 - 105_824


def test_a_bfloat16_conv_keeps_its_bfloat16_halo_and_act_cb():
    # the same conv in bfloat16: half the float32 halo, act CB in bfloat16 tiles
    _, f = _conv("float32", weights_dtype="float32", fp32_accum=True)
    _, b = _conv("bfloat16", weights_dtype="bfloat16")
    assert b.parts["halo"] * 2 == f.parts["halo"]
    assert b.parts["act_cb"] * 2 == f.parts["act_cb"]
    # a bfloat8_b input still haloes to bfloat16 sticks
    _, b8 = _conv("bfloat8_b", weights_dtype="bfloat8_b")
    assert b8.parts["halo"] == b.parts["halo"] and b8.parts["act_cb"] == b.parts["act_cb"]


def test_a_block_conv_whose_input_and_output_formats_differ_has_its_own_row_major_act_cb():
    # get_cb_info overlaps block sharding's row-major act CB with the act CB only when the halo's
    # format (float32 or bfloat16) is the output's. Measured through the oracle: resnet50
    # tt-perf (bfloat8_b activations) b1 layer2.1.conv2, 3x3 128 -> 128 on 28x28, block sharded:
    # ttnn's figure 24,624 B above the estimate without that CB (12 tiles x 2048 B + 48)
    pc = determine_parallel_config(BLOCK, 784, 128, 128)
    geo = l1.ConvGeometry(1, 28, 28, 28, 28, (3, 3), (1, 1), (1, 1, 1, 1))

    def block(dtype):
        inp = TensorLayout(conv_memspec(BLOCK, 784, 128, pc), "tile", dtype)
        out = TensorLayout(conv_output_memspec(pc, 784, 128, is_mm=False), "tile", dtype)
        return conv_l1(kind=BLOCK, in_layout=inp, out_layout=out, in_rows=784, in_w=28,
                       c_in=128, out_rows=784, c_out=128, kernel=(3, 3),
                       cores_nhw=pc.cores_nhw, cores_c=pc.cores_c, num_cores=pc.num_cores,
                       weights_dtype="bfloat8_b", geometry=geo)
    bf8, bf16, f32 = block("bfloat8_b"), block("bfloat16"), block("float32")
    assert bf8.parts["act_cb"] == 12 * 1088                 # the measured conv's act block
    assert bf8.parts["act_row_major_cb"] == 12 * 2048       # bfloat16 tiles: the halo's format
    assert "act_row_major_cb" not in bf16.parts and "act_row_major_cb" not in f32.parts
