"""conv2d's per-core L1 estimate (ttnn 0.81.1's phases: halo, conv; or the matmul of a 1x1
conv), on the shared model of ``ttmodels/planning/l1.py``."""
from __future__ import annotations

from ...language.graph import TILE, round_up
from ...planning.l1 import ConvGeometry, L1Estimate, _bpe, halo_sticks_per_core, per_core_bytes, tile_bytes
from ...planning.layout import BLOCK, HEIGHT, WIDTH, TensorLayout


def conv_l1(*, kind: str, in_layout: TensorLayout, out_layout: TensorLayout, in_rows: int,
            in_w: int, c_in: int, out_rows: int, c_out: int, kernel: tuple[int, int],
            cores_nhw: int, cores_c: int, num_cores: int, weights_dtype: str = "bfloat8_b",
            fp32_accum: bool = False, act_block_h: int | None = None, bias: bool = True,
            geometry: ConvGeometry | None = None, received: TensorLayout | None = None,
            is_mm: bool = False) -> L1Estimate:
    """ttnn 0.81.1's per-core L1 for one conv2d (what its graph capture shows on the mock
    device, ``ttmodels verify``): the largest of its phases.

    ``received`` is the tensor the layer is given (alive throughout; default ``in_layout``),
    ``in_layout`` the sharded input conv2d works on (its own interleaved_to_sharded copy of an
    interleaved input, freed after the halo).

    * Non-matmul convs: halo phase = conv input shard + halo output; conv phase = received input
      + halo output + conv output + the CBs conv2d_op_program_factory_common.cpp ``get_cb_info``
      does not place on a tensor: weights (per_core_N x act_block_w tiles, x kh when the height
      is split in several act blocks), act (act_block_h x act_block_w; height sharding's in the
      input's tile size, float32 or bfloat16, block sharding's mcast block in the output's, and
      then also a row-major block in the input's when the two differ), tilized act (same count,
      output tile), bias (per_core_N tiles), the 64 B scratchpad, and partials only when their
      dtype differs from the output's (otherwise they sit on the output buffer). The halo's
      sticks are float32 for a float32 input, else bfloat16.
    * Matmul (1x1) convs run ttnn::matmul: received input + output + in1 (in0_block_w x
      per_core_N weight tiles, twice when K takes more than one block) + bias; 2D (block) also an
      in0 CB of 2 x per_core_M x in0_block_w tiles (1D reads in0 from its shard); a row-major
      input is first tilized into a TILE copy of its shard."""
    kh, kw = kernel
    received = received or in_layout
    out_mem = out_layout.memory
    out_shard_h = out_mem.shard_shape[0] if out_mem.sharded else \
        round_up(-(-out_rows // max(cores_nhw, 1)), TILE)
    out_shard_w = out_mem.shard_shape[1] if out_mem.sharded else round_up(c_out, TILE)
    per_core_m = -(-out_shard_h // TILE)
    per_core_n = max(1, -(-out_shard_w // TILE))
    wt = tile_bytes(weights_dtype)
    out_tile = tile_bytes(out_layout.dtype)
    # what conv2d works on after the halo (get_cb_info's conv_input_dtype): the halo writes
    # row-major sticks, float32 for a float32 input and bfloat16 for any other; the act CBs read
    # by the input's tile size. Measured on the mock device (yolov8s float32 b4 model.4.m.1.cv1:
    # halo 193,536 B and act CB 319,488 B, twice a bfloat16 count; the model's bfloat16 figures
    # put a 45,472 B CB clash out of its sight)
    conv_in_dtype = "float32" if in_layout.dtype == "float32" else "bfloat16"
    in_tile, in_datum = tile_bytes(conv_in_dtype), (4 if conv_in_dtype == "float32" else 2)
    parts = {"input": per_core_bytes(received, in_rows, c_in),
             "output": per_core_bytes(out_layout, out_rows, c_out)}
    if is_mm:
        k_core = round_up(c_in, TILE * (cores_c if kind == BLOCK else 1)) // \
            (cores_c if kind == BLOCK else 1)
        in0_bw = -(-k_core // TILE)
        k_blocks = -(-round_up(c_in, TILE) // TILE) // in0_bw
        dbl = 2 if k_blocks > 1 else 1
        parts["in1_cb"] = dbl * in0_bw * per_core_n * wt
        if kind == BLOCK:
            act_tile = tile_bytes(in_layout.dtype if in_layout.layout == "tile" else "bfloat16")
            parts["in0_cb"] = dbl * per_core_m * in0_bw * act_tile
        if in_layout.layout != "tile":
            # conv2d tilizes a row-major input (a TILE copy of the shard) before the matmul
            sh = in_layout.memory.shard_shape[0] if in_layout.memory.sharded else out_shard_h
            # (in the input's dtype: a float32 map tilizes to float32 tiles, measured on the
            # mock device: efficientnet_b2 float32's SE fc1, 270,336 B for 1 x 66 tiles)
            parts["tilized_input"] = round_up(sh, TILE) // TILE * in0_bw * in_tile
        elif received is not in_layout and not received.memory.sharded and \
                in_layout.memory.sharded:
            # an interleaved TILE input: conv2d's own interleaved_to_sharded copy, alive through
            # the matmul (measured on the mock device: resnet50 b32 layer1 conv3 after a
            # DRAM-sliced conv2)
            parts["input_copy"] = per_core_bytes(in_layout, in_rows, c_in)
        if bias:
            parts["bias_cb"] = per_core_n * wt
        return L1Estimate(sum(parts.values()), parts)
    # act block: act_block_h_override tiles (must divide the per-core height), else all of it
    abh = per_core_m
    if act_block_h:
        want = max(1, act_block_h // TILE)
        abh = want if per_core_m % want == 0 else max(d for d in range(1, want + 1)
                                                      if per_core_m % d == 0)
    # padded input channels: conv2d_utils.cpp get_input_channels_alignment -- 8 (L1 alignment /
    # 2) for a row-major input of a height/block conv unless its shard width is a tile multiple
    row_major_in = received.layout != "tile" and not (
        received.memory.sharded and received.memory.shard_shape[1] % TILE == 0)
    align = 8 if (row_major_in and kind != WIDTH) else TILE
    cin_p = round_up(c_in, align * (cores_c if kind == BLOCK else 1))
    if kind == HEIGHT:
        abw = -(-(cin_p * kw) // TILE)
    elif kind == BLOCK:
        abw = -(-(cin_p // cores_c * kw) // TILE)
    else:
        abw = -(-(round_up(c_in, TILE * num_cores) * kh * kw // num_cores) // TILE)
    act_blocks_h = per_core_m // abh
    weights_tiles = per_core_n * abw * (kh if kind == HEIGHT and act_blocks_h > 1 else 1)
    if kind == WIDTH:
        weights_tiles = per_core_n * abw
    parts["weights_cb"] = weights_tiles * wt
    parts["act_cb"] = abh * abw * (in_tile if kind == HEIGHT else out_tile)
    parts["tilized_act_cb"] = abh * abw * out_tile
    if kind == WIDTH:
        parts["act_row_major_cb"] = 2 * abw * in_tile
    elif kind == BLOCK and conv_in_dtype != out_layout.dtype:
        # get_cb_info overlaps block sharding's row-major act CB with the act CB only when the
        # input's and the output's data formats agree; else it is a block of input tiles of its
        # own (measured through the oracle: resnet50 tt-perf b1 layer2.1.conv2, bfloat8_b in and
        # out, ttnn's figure 24,624 B above an estimate without it: 12 x 2048 + 48)
        parts["act_row_major_cb"] = abh * abw * in_tile
    if bias:
        parts["bias_cb"] = per_core_n * wt
    acc = "float32" if fp32_accum else "bfloat16"
    if out_layout.dtype != acc:
        parts["partials_cb"] = per_core_m * per_core_n * tile_bytes(acc)
    parts["scratch"] = 64
    # halo: row-major sticks of the core's channels (aligned to 8 channels), in conv_in_dtype
    if geometry is not None:
        sticks = halo_sticks_per_core(geometry, out_shard_h, max(cores_nhw, 1))
    else:
        share = -(-in_rows // max(cores_nhw, 1))
        sticks = share + (kh - 1) * (in_w + kw)
    if in_layout is received and in_layout.memory.sharded:
        c_core = in_layout.memory.shard_shape[1]
        conv_input = per_core_bytes(in_layout, in_rows, c_in, num_cores)
    else:
        c_core = own_copy_channels(in_layout, c_in, kind, cores_c)
        conv_input = own_input_copy(in_layout, in_rows, c_in, kind, cores_c, cores_nhw)
    halo = sticks * round_up(c_core, 8) * in_datum
    parts["halo"] = halo
    conv_phase = sum(parts.values())
    halo_phase = parts["input"] + (conv_input if in_layout is not received else 0) + halo
    if halo_phase > conv_phase:
        parts["halo_phase_extra"] = halo_phase - conv_phase
    return L1Estimate(sum(parts.values()), parts)


def own_copy_channels(in_layout: TensorLayout, c_in: int, kind: str, cores_c: int) -> int:
    """The channels a core holds of conv2d's own sharded copy of an input it is not given
    sharded: aligned to 8 for row-major (L1 alignment / 2), 32 for TILE (conv2d_utils.cpp
    get_input_channels_alignment), split over the channel cores of block / width sharding."""
    split = cores_c if kind in (BLOCK, WIDTH) else 1
    align = 8 if in_layout.layout != "tile" else TILE
    return round_up(c_in, align * split) // split


def own_input_copy(in_layout: TensorLayout, in_rows: int, c_in: int, kind: str, cores_c: int,
                   cores_nhw: int) -> int:
    """Bytes per core of the sharded copy ``in_layout`` that a halo conv makes of an input it
    receives in DRAM or interleaved in L1 (alive with the first halo pass, freed before the
    second: ``plan_alloc.op_events``). In the input's own format: measured on the mock n150, a
    3-channel float32 DRAM input takes 8 x 4 = 32 B a row (bfloat16: 16), a 16-channel one 64
    (tests/test_conv_input_copy.py)."""
    rows = in_layout.memory.shard_shape[0] if in_layout.memory.sharded else \
        -(-in_rows // max(cores_nhw, 1))
    return int(rows * own_copy_channels(in_layout, c_in, kind, cores_c) * _bpe(in_layout))
