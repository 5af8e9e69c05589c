"""Program configs for running 1x1 stride-1 convolutions as ``ttnn.linear``.

A 1x1 stride-1 conv is the matmul ``[N*H*W, Cin] x [Cin, Cout]``. tt-metal's conv2d already runs
such convs through ``ttnn::linear`` (conv2d.cpp, ``mm_conv`` branch) with a program config built by
``determine_matmul_op_config_from_conv_op_config`` (conv2d_utils.cpp). This module solves that
config ourselves so a layer can call ``ttnn.linear`` directly (``lowering: linear``), and so the
choice between 1D and 2D multicast is ours. Every rule below cites where tt-metal enforces it; see
docs/lowering.md for the full table.

Pure Python: no ttnn or torch import. ``to_ttnn(tt, cfg)`` builds the real config object from any
ttnn-like namespace.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..arch import DEFAULT_GRID
from ..errors import Error, LayoutError
from ..language.graph import TILE, Node
from .l1 import l1_bank_bytes
from .layout import BLOCK, BYTES_PER_TILE, HEIGHT, MemSpec, closest_common_divisor

# The Wormhole L1 bank with the default l1_small_size (l1.l1_bank_bytes)
L1_BANK_BYTES = l1_bank_bytes()
from ..ops.conv2d.sharding import matmul_conv_problem
from .sharding import closest_divisor_with_padding

KIND_1D = "1d_mcast_in1"
KIND_2D = "2d_mcast"
KINDS = (KIND_1D, KIND_2D)
_PREFER_ALIASES = {"1d": KIND_1D, KIND_1D: KIND_1D, "2d": KIND_2D, KIND_2D: KIND_2D}

# Wormhole dest register file: 16 tiles of 32x32; halved in half-sync mode (dst_full_sync_en
# false, the default) and halved again with fp32_dest_acc_en.
# Source: ttnn/cpp/ttnn/operations/core/compute_kernel/compute_kernel_config.cpp get_dest_reg_count.
DEST_TILES_FULL = 16

# tt-metal conv2d_utils.cpp determine_largest_subblock_size: (h, w) candidates in preference order.
_CONV_SUBBLOCKS = ((2, 4), (4, 2), (1, 8), (8, 1), (1, 7), (7, 1), (2, 3), (3, 2), (1, 6), (6, 1),
                   (1, 5), (5, 1), (2, 2), (1, 4), (4, 1), (1, 3), (3, 1), (1, 2), (2, 1), (1, 1))

# matmul_program_config.cpp is_narrow_shape: 1D configs pay off when one side is > 8x the other.
NARROW_SHAPE_RATIO = 8
# matmul/device/utilities: MCAST_INPUT_BUFFERING_DEPTH (in0/in1 CBs double buffered when K has
# more than one block).
MCAST_BUFFERING = 2


@dataclass(frozen=True)
class MatmulConfig:
    """A solved matmul program config plus the operand layouts it expects.

    The first block of fields mirrors the ttnn classes' keyword arguments exactly
    (``MatmulMultiCoreReuseMultiCast1DProgramConfig`` for ``kind == "1d_mcast_in1"``, which has no
    ``transpose_mcast``; ``MatmulMultiCoreReuseMultiCastProgramConfig`` for ``"2d_mcast"``, which
    has no ``mcast_in0``). All block sizes are in 32x32 tiles.
    """
    kind: str
    compute_with_storage_grid_size: tuple[int, int]   # (x, y)
    in0_block_w: int
    out_subblock_h: int
    out_subblock_w: int
    out_block_h: int
    out_block_w: int
    per_core_M: int
    per_core_N: int
    transpose_mcast: bool
    fuse_batch: bool
    mcast_in0: bool
    fused_activation: str | None          # canonical activation (ttmodels.ops.activations) | None
    # --- the problem and what the config expects around it --------------------------------
    M: int
    K: int
    N: int
    num_cores: int                         # cores holding an in0/output shard
    in0_memory: MemSpec                    # activation [M, K]: height (1D) / block (2D) sharded L1
    out_memory: MemSpec                    # output [M, N]: same sharding kind as in0
    fp32_accum: bool
    conv_k_block: int                      # in0_block_w conv2d's own lowering would use
    l1_bytes_per_core: int                 # estimate: in0 shard + CBs + output shard

    @property
    def Mt(self) -> int:
        return -(-self.M // TILE)

    @property
    def Kt(self) -> int:
        return -(-self.K // TILE)

    @property
    def Nt(self) -> int:
        return -(-self.N // TILE)

    @property
    def k_blocks(self) -> int:
        return self.Kt // self.in0_block_w

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["in0_memory"] = self.in0_memory.short()
        d["out_memory"] = self.out_memory.short()
        return d


# ---------------------------------------------------------------------------------------------
# small pure helpers (mirrors of tt-metal's own)
# ---------------------------------------------------------------------------------------------

def dest_tile_limit(fp32_accum: bool, dst_full_sync: bool = False) -> int:
    """compute_kernel_config.cpp ``get_dest_reg_count`` for 32x32 tiles."""
    n = DEST_TILES_FULL
    if not dst_full_sync:
        n //= 2
    if fp32_accum:
        n //= 2
    return n


def cores_to_grid(num_cores: int, grid: tuple[int, int]) -> tuple[int, int]:
    """Extent of ``num_cores_to_corerangeset(n, grid, row_wise=true)``."""
    gx, _ = grid
    return (num_cores, 1) if num_cores <= gx else (gx, -(-num_cores // gx))


def conv_subblock(block_h: int, block_w: int, limit: int) -> tuple[int, int]:
    """conv2d_utils.cpp ``determine_largest_subblock_size`` (no split reader): the first (h, w)
    that divides the block, fits ``limit`` dest tiles, and has h == 1 unless w spans the block."""
    for h, w in _CONV_SUBBLOCKS:
        if h * w > limit:
            continue
        if block_h % h == 0 and block_w % w == 0 and (w == block_w or h == 1):
            return h, w
    return 1, 1


def is_narrow_shape(height: int, width: int) -> bool:
    """matmul_program_config.cpp ``is_narrow_shape`` (all_dram=false); integer division as there."""
    ratio = height // width if height > width else width // height
    return ratio > NARROW_SHAPE_RATIO


def _tile_bytes(dtype: str) -> int:
    try:
        return BYTES_PER_TILE[dtype]
    except KeyError:
        raise Error(f"unknown dtype {dtype!r}; expected one of {sorted(BYTES_PER_TILE)}") from None


def _shard_bytes(per_core_M: int, k_shard: int, per_core_N: int, act_dtype: str,
                 out_dtype: str) -> int:
    """Per-core bytes of the in0 and output shards (the CBs globally allocated on them: the
    shards themselves, not circular buffers of their own)."""
    return per_core_M * (k_shard * _tile_bytes(act_dtype) + per_core_N * _tile_bytes(out_dtype))


def _l1_estimate(*, kind: str, per_core_M: int, per_core_N: int, out_block_h: int, k_shard: int,
                 kb: int, kt: int, act_dtype: str, weights_dtype: str, out_dtype: str,
                 fp32_accum: bool, packer_l1_acc: bool, bias: bool) -> int:
    """Per-core L1 of the program factories' circular buffers plus the sharded tensors.

    matmul_multicore_reuse_mcast_{1d,2d}_program_factory.cpp: a sharded in0 / output CB is
    globally allocated on the shard (so the shard itself is the cost); in1 (and in 2D the
    multicast in0 receive buffer) hold one K block of one output block, doubled when K has more
    than one block; interm0 (out_block_h x out_block_w) gets its own CB when its format differs
    from the output's (fp32 accumulation into a non-fp32 output, or packer L1 accumulation into a
    bfp output) or when a sharded output has out_block_h != per_core_M
    (``do_not_inplace_interm0_out_CB``); bias holds out_block_w tiles.
    """
    blocks = kt // kb
    depth = MCAST_BUFFERING if blocks > 1 else 1
    a, w, o = _tile_bytes(act_dtype), _tile_bytes(weights_dtype), _tile_bytes(out_dtype)
    total = _shard_bytes(per_core_M, k_shard, per_core_N, act_dtype, out_dtype)
    if kind == KIND_1D and kb < k_shard:
        # the 1D factory copies the whole in0 shard into a CB of its own when in0_block_w is
        # less than the shard's K (tt-metal extract_shard_sub_blocks; measured on the mock
        # n150, yolov8s b4 model.12.cv1.conv: 393,216 B, not borrowed, at in0_block_w 4 and 8)
        total += per_core_M * k_shard * a
    if kind == KIND_2D:
        total += out_block_h * kb * depth * a           # in0 multicast receive CB
    total += per_core_N * kb * depth * w                # in1 CB (out_block_w == per_core_N)
    interm = out_block_h * per_core_N
    if fp32_accum and out_dtype != "float32":
        total += interm * BYTES_PER_TILE["float32"]
    elif packer_l1_acc and out_dtype not in ("bfloat16", "float32"):
        total += interm * BYTES_PER_TILE["bfloat16"]
    elif out_block_h != per_core_M:
        total += interm * o
    if bias:
        total += per_core_N * w
    return total


# ---------------------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------------------

def _positive_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise Error(f"matmul solver: {name} must be a positive integer, got {v!r}")
    return v


def solve(M: int, K: int, N: int, *, grid: tuple[int, int] = DEFAULT_GRID, fp32_accum: bool = False,
          activation: str | None = None, k_block_tiles: int | None = None,
          prefer: str | None = None, act_dtype: str = "bfloat16",
          weights_dtype: str = "bfloat8_b", out_dtype: str | None = None, bias: bool = True,
          packer_l1_acc: bool = False,
          l1_budget: int = L1_BANK_BYTES, cb_cap: int | None = None) -> MatmulConfig:
    """A program config for ``[M, K] x [K, N]`` on ``grid`` (x, y) cores.

    The 1D (rows over all cores, in1 multicast, height-sharded in0/output) or 2D (block multicast,
    block-sharded in0/output) config is chosen like tt-metal's ``create_matmul_program_config``:
    1D first when the product is tall and narrow (``is_narrow_shape`` or N within one tile), else
    2D first; the other kind is the fallback. ``prefer`` ("1d"/"2d" or a kind name) allows only
    that kind. Grid split, K blocking and subblocks default to what conv2d's 1x1 lowering picks
    (``determine_parallel_config`` / ``determine_per_core_conv_block_config``), so the result is
    the config conv2d itself would pass to ``ttnn::linear``. ``k_block_tiles`` pins in0_block_w
    (the K blocking decides the order in which partial sums are accumulated).

    ``cb_cap``: at most that many bytes per core of circular buffers besides the in0 and output
    shards (the address model found the CBs of the uncapped config reaching an L1 buffer:
    ``plan_alloc._capped``); blockings or the other kind that keep below it.

    Raises ``Error`` (a ValueError) for bad arguments and ``LayoutError`` when no config fits.
    """
    M, K, N = _positive_int("M", M), _positive_int("K", K), _positive_int("N", N)
    if (not isinstance(grid, (tuple, list)) or len(grid) != 2
            or any(isinstance(g, bool) or not isinstance(g, int) or g <= 0 for g in grid)):
        raise Error(f"matmul solver: grid must be two positive integers (x, y), got {grid!r}")
    grid = (int(grid[0]), int(grid[1]))
    if activation is not None:
        from ..ops import activations
        try:
            fuses = activations.get(activation).fuses_matmul
        except ValueError as e:
            raise Error(f"matmul solver: {e}") from None
        if not fuses:
            raise Error(f"matmul solver: matmul cannot fuse {activation!r}")
    if k_block_tiles is not None:
        _positive_int("k_block_tiles", k_block_tiles)
    if prefer is not None and prefer not in _PREFER_ALIASES:
        raise Error(f"matmul solver: prefer must be one of {sorted(_PREFER_ALIASES)} or None, "
                    f"got {prefer!r}")
    for d in (act_dtype, weights_dtype) + ((out_dtype,) if out_dtype else ()):
        _tile_bytes(d)
    _positive_int("l1_budget", l1_budget)
    out_dtype = out_dtype or act_dtype

    Mt, Kt, Nt = -(-M // TILE), -(-K // TILE), -(-N // TILE)
    if k_block_tiles is not None and Kt % k_block_tiles:
        raise Error(f"matmul solver: k_block_tiles={k_block_tiles} does not divide K={K} "
                    f"({Kt} tiles); in0_block_w must divide K in tiles")

    if prefer is not None:
        order = [_PREFER_ALIASES[prefer]]
    else:
        tall = Mt >= Nt
        within_tile = K <= TILE or N <= TILE or M <= TILE
        narrow = is_narrow_shape(Mt * TILE, Nt * TILE) or within_tile
        order = [KIND_1D, KIND_2D] if (tall and narrow) else [KIND_2D, KIND_1D]

    common = dict(M=M, K=K, N=N, Mt=Mt, Kt=Kt, Nt=Nt, grid=grid, fp32_accum=fp32_accum,
                  activation=activation, k_block_tiles=k_block_tiles, act_dtype=act_dtype,
                  weights_dtype=weights_dtype, out_dtype=out_dtype, bias=bias,
                  packer_l1_acc=packer_l1_acc, l1_budget=l1_budget, cb_cap=cb_cap)
    reasons = []
    for kind in order:
        cfg, why = (_solve_1d if kind == KIND_1D else _solve_2d)(**common)
        if cfg is not None:
            return cfg
        reasons.append(f"{kind}: {why}")
    raise LayoutError(f"no matmul program config for M={M}, K={K}, N={N} on a {grid[0]}x{grid[1]} "
                      f"grid: " + "; ".join(reasons), rule="linear.program_config")


def _divisors_desc(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _pick_blocks(*, k_shard: int, conv_kb: int, k_block_tiles: int | None, per_core_M: int,
                 l1, budget: int, cb_cap: int | None = None, shards: int = 0
                 ) -> tuple[tuple[int, int] | None, str]:
    """(in0_block_w, out_block_h): the caller's K block, else conv2d's, else the largest divisor
    of the K shard that fits; for each, the tallest out_block_h dividing per_core_M that fits
    (shrinking the output block does not change the order in which K is accumulated). With
    ``cb_cap``, fitting also means CBs (``l1`` less the in0 and output ``shards``) within it."""
    if k_block_tiles is not None:
        if k_shard % k_block_tiles:
            return None, (f"k_block_tiles={k_block_tiles} does not divide the per-core K shard "
                          f"({k_shard} tiles)")
        kbs = [k_block_tiles]
    else:
        kbs = [conv_kb] + [d for d in _divisors_desc(k_shard) if d != conv_kb]
    for kb in kbs:
        for obh in _divisors_desc(per_core_M):
            if l1(kb, obh) <= budget and (cb_cap is None or l1(kb, obh) - shards <= cb_cap):
                return (kb, obh), ""
    if cb_cap is not None:
        return None, f"no blocking keeps its circular buffers within {cb_cap} B"
    return None, (f"k_block_tiles={k_block_tiles} does not fit L1" if k_block_tiles is not None
                  else "does not fit L1 even with in0_block_w=1 and out_block_h=1")


def _solve_1d(*, M, K, N, Mt, Kt, Nt, grid, fp32_accum, activation, k_block_tiles, act_dtype,
              weights_dtype, out_dtype, bias, packer_l1_acc, l1_budget, cb_cap):
    # Rows over the cores as conv2d's HEIGHT_SHARDED determine_parallel_config splits them;
    # output height sharded => per_core_N == N (matmul_device_operation.cpp, 1D mcast_in1:
    # "N must be equal to per_core_N"); in0 shard width == K ("K must be equal to
    # shard_shape[1] / in0_tile.get_width()").
    n = closest_divisor_with_padding(Mt, grid[0] * grid[1])
    per_core_M = -(-Mt // n)
    n = -(-Mt // per_core_M)           # cores that actually hold rows
    per_core_N = Nt
    conv_kb = Kt                       # conv2d HEIGHT_SHARDED: act_block_w = padded Cin * kw

    def l1(kb, obh):
        return _l1_estimate(kind=KIND_1D, per_core_M=per_core_M, per_core_N=per_core_N,
                            out_block_h=obh, k_shard=Kt, kb=kb, kt=Kt, act_dtype=act_dtype,
                            weights_dtype=weights_dtype, out_dtype=out_dtype,
                            fp32_accum=fp32_accum, packer_l1_acc=packer_l1_acc, bias=bias)

    shards = _shard_bytes(per_core_M, Kt, per_core_N, act_dtype, out_dtype)
    picked, why = _pick_blocks(k_shard=Kt, conv_kb=conv_kb, k_block_tiles=k_block_tiles,
                               per_core_M=per_core_M, l1=l1, budget=l1_budget,
                               cb_cap=cb_cap, shards=shards)
    if picked is None:
        return None, why
    kb, obh = picked
    sh, sw = conv_subblock(obh, per_core_N, dest_tile_limit(fp32_accum))
    ext = cores_to_grid(n, grid)
    in0 = MemSpec(HEIGHT, "l1", ext, n, (per_core_M * TILE, Kt * TILE), "row_major")
    out = MemSpec(HEIGHT, "l1", ext, n, (per_core_M * TILE, Nt * TILE), "row_major")
    return MatmulConfig(
        kind=KIND_1D, compute_with_storage_grid_size=ext, in0_block_w=kb, out_subblock_h=sh,
        out_subblock_w=sw, out_block_h=obh, out_block_w=per_core_N, per_core_M=per_core_M,
        per_core_N=per_core_N, transpose_mcast=False, fuse_batch=True, mcast_in0=False,
        fused_activation=activation, M=M, K=K, N=N, num_cores=n, in0_memory=in0, out_memory=out,
        fp32_accum=fp32_accum, conv_k_block=conv_kb, l1_bytes_per_core=l1(kb, obh)), ""


def _solve_2d(*, M, K, N, Mt, Kt, Nt, grid, fp32_accum, activation, k_block_tiles, act_dtype,
              weights_dtype, out_dtype, bias, packer_l1_acc, l1_budget, cb_cap):
    # conv2d BLOCK_SHARDED determine_parallel_config for a 1x1 conv (channel padding disabled for
    # mm convs): channel cores = largest d <= grid.x dividing both Cin and Cout tiles; row cores =
    # closest divisor of the row tiles (with padding) <= grid.y. Row-major orientation, so
    # transpose_mcast is false (matmul_device_operation.cpp: ROW_MAJOR in0 for non-transposed).
    gx = closest_common_divisor(Nt, Kt, grid[0])
    gy = closest_divisor_with_padding(Mt, grid[1])
    if gx < 2 or gy < 2:
        # matmul_program_config.cpp get_matmul_program_config: block-sharded 2D mcast needs
        # grid.x > 1 and grid.y > 1.
        return None, (f"a block grid needs > 1 core each way; got {gx}x{gy} "
                      f"(K={Kt} and N={Nt} tiles share no divisor > 1 within {grid[0]})"
                      if gx < 2 else f"a block grid needs > 1 row core; got {gy} for {Mt} row tiles")
    per_core_M = -(-Mt // gy)
    gy = -(-Mt // per_core_M)
    per_core_N = Nt // gx
    k_shard = Kt // gx
    conv_kb = k_shard                  # conv2d BLOCK_SHARDED: act_block_w = padded Cin / cores_c

    def l1(kb, obh):
        return _l1_estimate(kind=KIND_2D, per_core_M=per_core_M, per_core_N=per_core_N,
                            out_block_h=obh, k_shard=k_shard, kb=kb, kt=Kt, act_dtype=act_dtype,
                            weights_dtype=weights_dtype, out_dtype=out_dtype,
                            fp32_accum=fp32_accum, packer_l1_acc=packer_l1_acc, bias=bias)

    shards = _shard_bytes(per_core_M, k_shard, per_core_N, act_dtype, out_dtype)
    picked, why = _pick_blocks(k_shard=k_shard, conv_kb=conv_kb, k_block_tiles=k_block_tiles,
                               per_core_M=per_core_M, l1=l1, budget=l1_budget,
                               cb_cap=cb_cap, shards=shards)
    if picked is None:
        return None, why
    kb, obh = picked
    sh, sw = conv_subblock(obh, per_core_N, dest_tile_limit(fp32_accum))
    in0 = MemSpec(BLOCK, "l1", (gx, gy), gx * gy, (per_core_M * TILE, k_shard * TILE), "row_major")
    out = MemSpec(BLOCK, "l1", (gx, gy), gx * gy, (per_core_M * TILE, per_core_N * TILE),
                  "row_major")
    return MatmulConfig(
        kind=KIND_2D, compute_with_storage_grid_size=(gx, gy), in0_block_w=kb, out_subblock_h=sh,
        out_subblock_w=sw, out_block_h=obh, out_block_w=per_core_N, per_core_M=per_core_M,
        per_core_N=per_core_N, transpose_mcast=False, fuse_batch=True, mcast_in0=False,
        fused_activation=activation, M=M, K=K, N=N, num_cores=gx * gy, in0_memory=in0,
        out_memory=out, fp32_accum=fp32_accum, conv_k_block=conv_kb,
        l1_bytes_per_core=l1(kb, obh)), ""


# ---------------------------------------------------------------------------------------------
# ttnn objects
# ---------------------------------------------------------------------------------------------

def to_ttnn(tt, cfg: MatmulConfig):
    """The real program-config object for ``cfg`` built from ``tt`` (ttnn or a mirror)."""
    gx, gy = cfg.compute_with_storage_grid_size
    kw = dict(compute_with_storage_grid_size=tt.CoreCoord(gx, gy), in0_block_w=cfg.in0_block_w,
              out_subblock_h=cfg.out_subblock_h, out_subblock_w=cfg.out_subblock_w,
              out_block_h=cfg.out_block_h, out_block_w=cfg.out_block_w,
              per_core_M=cfg.per_core_M, per_core_N=cfg.per_core_N, fuse_batch=cfg.fuse_batch)
    if cfg.fused_activation is not None:
        from ..ops import activations
        kw["fused_activation"] = activations.matmul_activation(tt, cfg.fused_activation)
    if cfg.kind == KIND_1D:
        return tt.MatmulMultiCoreReuseMultiCast1DProgramConfig(**kw, mcast_in0=cfg.mcast_in0)
    if cfg.kind == KIND_2D:
        return tt.MatmulMultiCoreReuseMultiCastProgramConfig(**kw,
                                                            transpose_mcast=cfg.transpose_mcast)
    raise Error(f"unknown matmul config kind {cfg.kind!r}; expected one of {KINDS}")


# ---------------------------------------------------------------------------------------------
# graph nodes
# ---------------------------------------------------------------------------------------------

def _where(node: Node) -> str:
    return f"{node.loc}: layer '{node.name}'" if node.loc else f"layer '{node.name}'"


def conv1x1_problem(node: Node) -> str | None:
    """Why ``node`` is not a 1x1 stride-1 conv that is a plain matmul, or None if it is."""
    if node.op != "conv2d":
        return f"is a {node.op}, not a conv2d"
    a = node.attrs
    return matmul_conv_problem(a.get("kernel", ()), a.get("stride", ()), a.get("padding", ()),
                                 a.get("dilation", (1, 1)), a.get("groups", 1))


def is_conv1x1_stride1(node: Node) -> bool:
    return conv1x1_problem(node) is None


def conv1x1_as_matmul_shape(node: Node) -> tuple[int, int, int]:
    """(M, K, N) = (N*H*W, Cin, Cout) of a 1x1 stride-1 conv node."""
    why = conv1x1_problem(node)
    if why:
        raise Error(f"{_where(node)} {why}; only 1x1 stride-1 unpadded ungrouped convs lower to "
                    f"linear")
    return node.shape.rows, int(node.attrs.in_channels), int(node.attrs.out_channels)


def solve_node(node: Node, *, grid: tuple[int, int] = DEFAULT_GRID, **kw) -> MatmulConfig:
    """``solve`` for a conv node with its own precision and fused activation."""
    M, K, N = conv1x1_as_matmul_shape(node)
    p = node.precision
    kw.setdefault("fp32_accum", p.fp32_accum)
    kw.setdefault("act_dtype", p.activations)
    kw.setdefault("weights_dtype", p.weights)
    kw.setdefault("bias", bool(node.attrs.get("bias", True)) or node.bn is not None)
    from ..ops.activations import matmul_split
    # an activation the matmul cannot fuse runs after it (ops/conv2d/layer.py)
    return solve(M, K, N, grid=grid, activation=matmul_split(node.attrs.get("activation"))[0],
                 **kw)


def can_lower_to_linear(node: Node, *, grid: tuple[int, int] = DEFAULT_GRID) -> bool:
    """True if ``node`` is a 1x1 stride-1 conv and the solver finds a config that fits."""
    if not is_conv1x1_stride1(node):
        return False
    try:
        solve_node(node, grid=grid)
    except LayoutError:
        return False
    return True


LOWERINGS = ("conv2d", "linear", "auto")


def resolve_lowering(node: Node, *, grid: tuple[int, int] = DEFAULT_GRID) -> str:
    """"conv2d" or "linear" for a conv node from its ``lowering`` attribute (default conv2d).

    ``auto`` = linear where the solver finds a config, else conv2d. An explicit ``linear`` on a
    conv that is not a plain matmul, or that no config fits, is an error naming the layer."""
    want = node.attrs.get("lowering") or "conv2d"
    if want not in LOWERINGS:
        raise Error(f"{_where(node)}: lowering must be one of {', '.join(LOWERINGS)}, got {want!r}")
    if node.op != "conv2d" or want == "conv2d":
        return "conv2d"
    if want == "auto":
        return "linear" if can_lower_to_linear(node, grid=grid) else "conv2d"
    why = conv1x1_problem(node)
    if why:
        raise Error(f"{_where(node)}: lowering: linear, but the conv {why}")
    try:
        solve_node(node, grid=grid)
    except LayoutError as e:
        raise LayoutError(f"lowering: linear, but {e.reason}", layer=node.name,
                          rule=e.rule) from None
    return "linear"
