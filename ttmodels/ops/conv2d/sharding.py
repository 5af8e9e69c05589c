"""conv2d's own layout math (conv2d_utils.cpp, op_slicing.cpp): whether a conv runs as a matmul,
the parallel config (cores) of each sharding and ttnn's automatic choice among them, the memory
configs of its input and output, and the dimensions DRAM slicing splits."""
from __future__ import annotations

from dataclasses import replace

from ...arch import DEFAULT_GRID
from ...language.graph import TILE, round_up
from ...planning.layout import BLOCK, HEIGHT, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec
from ...planning.sharding import (ParallelConfig, block_shard_shape, closest_divisor_with_padding,
                         cores_to_grid, height_shard_shape, width_shard_shape)


def matmul_conv_problem(kernel, stride, padding, dilation=(1, 1), groups: int = 1) -> str | None:
    """Why a conv is not a matmul, or None when it is: conv2d_utils.cpp
    ``use_matmul_for_1x1_conv``: a 1x1, stride-1, unpadded, undilated, ungrouped conv runs as a
    matmul (ttnn::linear) inside conv2d. The one definition the planner, the L1 model, the
    matmul solver (``lowering: linear``) and the sim use. ``padding``: 2 or 4 values."""
    pad = tuple(int(p) for p in padding)
    checks = (("kernel", tuple(int(k) for k in kernel), (1, 1)),
              ("stride", tuple(int(v) for v in stride), (1, 1)),
              ("padding", pad, (0,) * (len(pad) or 4)),
              ("dilation", tuple(int(d) for d in dilation), (1, 1)),
              ("groups", int(groups), 1))
    for name, got, want in checks:
        if got != want:
            return f"has {name} {got}, a matmul needs {want}"
    return None


def is_matmul_conv(kernel, stride, padding, dilation=(1, 1), groups: int = 1) -> bool:
    """``matmul_conv_problem`` is None: the conv runs as a matmul inside conv2d."""
    return matmul_conv_problem(kernel, stride, padding, dilation, groups) is None


def closest_divisor_with_padding2(num1: int, num2: int, start: int) -> int:
    """Two-number variant (block sharding: output and input channel tiles)."""
    d = max(1, start)
    while d > 1:
        p1, p2 = round_up(num1, d), round_up(num2, d)
        if p1 - num1 < p1 // d and p2 - num2 < p2 // d:
            return d
        d -= 1
    return 1


def closest_divisor_with_padding_mult(num: int, start: int, mult: int) -> int:
    """conv2d_utils.cpp ``find_closest_largest_divisor_with_num_padding_and_mult``: as
    ``closest_divisor_with_padding`` with ``num`` padded to multiples of d * mult (each core's
    rows a whole number of act blocks)."""
    d = max(1, start)
    while d > 1:
        padded = round_up(num, d * mult)
        if padded - num < padded // d:
            return d
        d -= 1
    return 1


def determine_parallel_config(kind: str, rows_out: int, c_in: int, c_out: int,
                              device_grid: tuple[int, int] = DEFAULT_GRID, *,
                              channels_padding: bool = True,
                              act_block_h: int | None = None) -> ParallelConfig:
    """Mirror of conv2d_utils.cpp ``determine_parallel_config`` (ROW_MAJOR orientation, tiled
    output): how many cores each sharding of a conv uses. ``act_block_h`` (the override, rows)
    makes every core's rows a multiple of it (ResNet50's stem at batch 16 with a 128-row act
    block: 63 cores of 3200 rows, not 64 of 3136)."""
    gx, gy = device_grid
    nhw_tiles = round_up(rows_out, TILE) // TILE
    cin_tiles = -(-c_in // TILE)
    cout_tiles = -(-c_out // TILE)
    mult = max(1, (act_block_h or 0) // TILE)
    if kind == HEIGHT:
        n = closest_divisor_with_padding_mult(nhw_tiles, gx * gy, mult)
        return ParallelConfig(HEIGHT, n, cores_to_grid(n, device_grid), n, 1)
    if kind == BLOCK:
        nhw = closest_divisor_with_padding_mult(nhw_tiles, gy, mult)
        if channels_padding:
            cc = closest_divisor_with_padding2(cout_tiles, cin_tiles, gx)
        else:
            cc = gx
            while cc > 1 and (cout_tiles % cc or cin_tiles % cc):
                cc -= 1
        return ParallelConfig(BLOCK, nhw * cc, (cc, nhw), nhw, cc)
    if kind == WIDTH:
        n = closest_divisor_with_padding(cin_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    raise ValueError(f"Conv2d supports Height, Block or Width Sharded Layouts but got {kind}")


def select_conv_shard_layout(rows_out: int, c_in: int, c_out: int, *, is_mm_conv: bool = False,
                             is_conv1d: bool = False,
                             device_grid: tuple[int, int] = DEFAULT_GRID) -> str:
    """Mirror of conv2d_utils.cpp ``select_shard_spec`` (ttnn's auto shard_layout): count the
    cores each scheme would use and prefer block sharding unless height sharding gets clearly
    more cores (and block fewer than 3/4 of the grid) or ties on at most one row of cores; width
    wins when it gets at least as many cores, or with >1280 input channels and >= 40 cores."""
    cc_h = determine_parallel_config(HEIGHT, rows_out, c_in, c_out, device_grid,
                                     channels_padding=not is_mm_conv).num_cores
    cc_w = 0 if (is_mm_conv or is_conv1d) else determine_parallel_config(
        WIDTH, rows_out, c_in, c_out, device_grid, channels_padding=True).num_cores
    cc_b = 0 if is_conv1d else determine_parallel_config(
        BLOCK, rows_out, c_in, c_out, device_grid, channels_padding=not is_mm_conv).num_cores
    kind, best = BLOCK, cc_b
    three_quarters = int(0.75 * device_grid[0] * device_grid[1])
    if (cc_h > best and best < three_quarters) or (cc_h == best and cc_h <= device_grid[0]):
        kind, best = HEIGHT, cc_h
    if cc_w >= best:
        kind, best = WIDTH, cc_w
    if kind == BLOCK and cc_w >= 40 and c_in > 1280:
        kind = WIDTH
    return kind


def conv_memspec(kind: str, rows: int, c: int, pc: ParallelConfig) -> MemSpec:
    """Sharded memory config of a [rows, c] conv tensor under parallel config ``pc`` (conv2d_utils
    ``create_sharded_memory_config_from_parallel_config``)."""
    if kind == HEIGHT:
        return MemSpec(HEIGHT, "l1", pc.grid, pc.num_cores, height_shard_shape(rows, c, pc.num_cores))
    if kind == WIDTH:
        return MemSpec(WIDTH, "l1", pc.grid, pc.num_cores, width_shard_shape(rows, c, pc.num_cores))
    return MemSpec(BLOCK, "l1", pc.grid, pc.num_cores, block_shard_shape(rows, c, pc.grid))


def parallel_config_of(mem: MemSpec) -> ParallelConfig:
    """The parallel config of an already sharded conv input (conv2d_utils.cpp
    get_conv_padded_input_shape_and_mem_config: with reshard_if_not_optimal=False a sharded input's
    shard grid *is* the conv's parallel config; get_num_cores_nhw / get_num_cores_channels)."""
    gx, gy = mem.grid
    if mem.memory_layout == BLOCK:
        return ParallelConfig(BLOCK, gx * gy, mem.grid, gy, gx)
    n = mem.num_cores or gx * gy
    if mem.memory_layout == WIDTH:
        return ParallelConfig(WIDTH, n, mem.grid, 1, n)
    return ParallelConfig(HEIGHT, n, mem.grid, n, 1)


def conv_reshards_input(mem: MemSpec, c_in: int, *, is_mm: bool) -> bool:
    """Whether conv2d reshards an already sharded input itself (reshard_if_not_optimal=False).
    conv2d_utils.cpp get_conv_padded_input_shape_and_mem_config: a matmul (1x1) conv with a
    BLOCK sharded input sets needs_shard_or_reshard when ``in_channels != num_cores_c *
    shard width`` (num_cores_c = the grid's x extent, row-major), i.e. when the channel cores do
    not split the input's channels exactly (64 channels in 32-wide shards on 6 channel cores:
    192 != 64). Measured on the mock n150: such an input gets a ReshardDeviceOperation inside
    ttnn.conv2d; 192 or 256 channels on 6 / 8 channel cores of 32 are kept."""
    if not (is_mm and mem.memory_layout == BLOCK and mem.shard_shape is not None):
        return False
    return int(c_in) != mem.grid[0] * mem.shard_shape[1]


def conv_input_parallel_config(mem: MemSpec, rows_out: int, c_in: int, c_out: int, *,
                               is_mm: bool, device_grid: tuple[int, int] = DEFAULT_GRID,
                               act_block_h: int | None = None) -> ParallelConfig:
    """The parallel config conv2d runs on when given an input sharded as ``mem``: the input's own
    grid (``parallel_config_of``), unless conv2d reshards it (``conv_reshards_input``); then
    get_conv_padded_input_shape_and_mem_config takes ``determine_parallel_config`` of the conv
    (the matmul conv's: no channel padding, so channel cores divide both channel tile counts),
    e.g. 64 -> 384 channels on 196 rows: 2x7 cores whatever grid the input came on."""
    if conv_reshards_input(mem, c_in, is_mm=is_mm):
        return determine_parallel_config(mem.memory_layout, rows_out, c_in, c_out, device_grid,
                                         channels_padding=not is_mm, act_block_h=act_block_h)
    return parallel_config_of(mem)


def conv_output_parallel_config(pc: ParallelConfig, c_out: int, *, is_mm: bool,
                                device_grid: tuple[int, int] = DEFAULT_GRID) -> ParallelConfig:
    """conv2d_utils.cpp ``determine_output_parallel_config``: a matmul (1x1) conv keeps the input's
    parallel config; otherwise width sharding re-spreads the *output* channel tiles over
    closest_divisor_with_padding(cout_tiles, grid cores) cores and block sharding keeps the
    input's row cores with closest_divisor_with_padding(cout_tiles, grid x) channel cores; height
    sharding keeps the input's cores."""
    if is_mm:
        return pc
    cout_tiles = -(-c_out // TILE)
    gx, gy = device_grid
    if pc.kind == WIDTH:
        n = closest_divisor_with_padding(cout_tiles, gx * gy)
        return ParallelConfig(WIDTH, n, cores_to_grid(n, device_grid), 1, n)
    if pc.kind == BLOCK:
        cc = closest_divisor_with_padding(cout_tiles, gx)
        return ParallelConfig(BLOCK, cc * pc.cores_nhw, (cc, pc.cores_nhw), pc.cores_nhw, cc)
    return pc


def conv_output_memspec(pc: ParallelConfig, rows_out: int, c_out: int, *, is_mm: bool,
                        device_grid: tuple[int, int] = DEFAULT_GRID) -> MemSpec:
    """The memory config ttnn 0.81.1 gives a conv2d output, ``pc`` being the conv's (input)
    parallel config.

    conv2d.cpp conv2d_L1: ``conv_out_memory_config = create_sharded_memory_config_from_parallel_config(
    [1, 1, rows, round_up(c_out, cores_c * 32)], output_parallel_config, 32)`` (shard height
    round_up(rows, cores_nhw * 32) / cores_nhw) on the output parallel config
    (``conv_output_parallel_config``). A non-matmul conv's output is exactly that, every core of
    the grid included even when trailing shards are empty (49 cores for 784 rows of 32-row shards).
    A matmul conv runs ttnn::matmul with per_core_M/N = that shard shape in tiles, and
    matmul_device_operation.cpp compute_output_specs keeps only the cores that hold blocks:
    1D (height): num_cores_to_corerangeset(ceil(M / per_core_M)) row-wise; 2D (block): a
    ceil(N / per_core_N) x ceil(M / per_core_M) range, M being the tile-padded rows and N the
    prepared weights' (channel-core padded) width. E.g. 3136 rows on 56 cores: shards of 64
    rows, output on 49 cores."""
    opc = conv_output_parallel_config(pc, c_out, is_mm=is_mm, device_grid=device_grid)
    mem = conv_memspec(opc.kind, rows_out, c_out, opc)
    if not is_mm:
        return mem
    sh, _ = mem.shard_shape
    m_blocks = -(-(-(-rows_out // TILE)) // (sh // TILE))
    # N is the prepared weights' width, out channels padded to cores_c tiles: every channel core
    # keeps a block (a 128-channel output on 8 channel cores stays 8 wide)
    n_blocks = opc.cores_c if opc.kind == BLOCK else 1
    if opc.kind == BLOCK:
        return replace(mem, grid=(n_blocks, m_blocks), num_cores=n_blocks * m_blocks)
    n = m_blocks * n_blocks
    return replace(mem, grid=cores_to_grid(n, device_grid), num_cores=n)


def conv_slice_dim(slice_type: str, out_h: int, out_w: int, output_layout: str = TILE_LAYOUT
                   ) -> tuple[int, int]:
    """(sliced output dimension, rounding of a slice) as op_slicing.cpp
    compute_slice_rounding_value: width slices of a TILE output are whole tiles (32 columns)."""
    if slice_type == "height":
        return out_h, 1
    if slice_type == "width":
        return out_w, (TILE if output_layout == TILE_LAYOUT else 1)
    raise ValueError(f"slice type {slice_type!r} must be 'height' or 'width'")


def conv_slice_type_guess(in_h: int, in_w: int, output_layout: str = TILE_LAYOUT) -> str:
    """op_slicing.cpp best_guess_slice_type: width slicing (smaller halo) unless the image is
    tall, or (TILE output) narrower than 200 columns."""
    if output_layout == ROW_MAJOR:
        return "height" if in_h > in_w * 3 else "width"
    if in_w < 200 or in_h > in_w:
        return "height"
    return "width"


def kernel_stride_fold(kernel, stride, padding, dilation, in_hw: tuple[int, int],
                       mem: MemSpec) -> int:
    """How many times conv2d folds its input's channels (``sh * sw``), 1 when it does not:
    conv2d_utils.cpp ``auto_enable_kernel_folding`` (enable_kernel_stride_folding unset) folds
    a conv whose kernel equals its stride (> 1), dilation 1, whose (padded) input divides by
    the stride, read from DRAM with zero padding (or height-sharded), into a matmul conv on
    ``C * sh * sw`` channels (``fold_input_tensor_if_required``). Seen on the 0.81.1 mock device:
    ConvNeXt's 4x4/4 stem on 3 channels, block-sharded, comes out on 1 x 8 cores of 96
    channels, not the 3 x 8 an unfolded conv's output parallel config gives; width sharding of
    such a conv is refused (the matmul program config takes no width shards)."""
    (kh, kw), (sh, sw) = tuple(kernel), tuple(stride)
    pad = tuple(int(p) for p in padding)
    if (kh, kw) != (sh, sw) or (sh, sw) == (1, 1) or tuple(dilation) != (1, 1):
        return 1
    if any(pad) or in_hw[0] % sh or in_hw[1] % sw:
        return 1
    if mem.buffer == "dram" or mem.memory_layout == HEIGHT:
        return sh * sw
    return 1


def folded_output_parallel_config(pc: ParallelConfig, c_in_folded: int, c_out: int, *,
                                  device_grid: tuple[int, int] = DEFAULT_GRID) -> ParallelConfig:
    """The parallel config of a folded (``kernel_stride_fold``) block-sharded conv: the
    candidate's row cores, and -- a matmul conv's (determine_parallel_config without channel
    padding) -- the most channel cores up to the grid's columns dividing both the folded
    input's and the output's channel tiles (3 -> 96 channels at 4x4/4: 48 and 96 channels,
    2 and 3 tiles: 1 core; 3 -> 256: 2 cores; 64 -> 512 at 2x2/2: 8 cores; all measured on
    the mock device). Height sharding is the unfolded conv's (measured alike)."""
    if pc.kind != BLOCK:
        return pc
    cin_t, cout_t = -(-c_in_folded // TILE), -(-c_out // TILE)
    cc = max(1, device_grid[0])
    while cc > 1 and (cin_t % cc or cout_t % cc):
        cc -= 1
    return ParallelConfig(BLOCK, cc * pc.cores_nhw, (cc, pc.cores_nhw), pc.cores_nhw, cc)
