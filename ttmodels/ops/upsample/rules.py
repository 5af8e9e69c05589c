"""ttnn.upsample's layout rules, check and output layout; and grid_sample's, the ttnn op an
align_corners upsample is lowered to (``LOWERED``: found by ``rules.check`` / ``output_layout``)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...arch import DEFAULT_GRID
from ...formats import BLOCK_FLOAT_DTYPES
from ...language.graph import TILE, round_up
from ...planning.layout import (BLOCK, HEIGHT, INTERLEAVED, ROW_MAJOR, TILE_LAYOUT, WIDTH, MemSpec,
                       TensorLayout)
from ...planning.rules import CallArgs, OutputQuery, Rule, _rows_c, _v, reads
from ...planning.sharding import cores_to_grid, split_work_to_cores
from .sharding import grid_sample_points, upsample_output_memspec

_UP = "ttnn/cpp/ttnn/operations/pool/upsample/device/upsample_device_operation.cpp"
_UP_API = "ttnn/cpp/ttnn/operations/pool/upsample/upsample.cpp"
_GS = "ttnn/cpp/ttnn/operations/pool/grid_sample/device/grid_sample_device_operation.cpp"

RULE_LIST = (
    # --- upsample ---------------------------------------------------------------------------
    Rule("upsample.memory", "upsample",
         "bilinear upsample takes an interleaved or HEIGHT-sharded input (nearest also takes "
         "WIDTH and BLOCK shards: 0.81.1 accepts them)",
         f"{_UP}: UpsampleDeviceOperation::validate_on_program_cache_miss / select_upsample_path "
         "('Unsupported upsample configuration:', 0.81.1 wheel: line 83)"),
    Rule("upsample.layout", "upsample",
         "a TILE input must be tile aligned in the layer's [N, H, W, C] view (W and C multiples "
         "of 32: no padding); then nearest takes it interleaved only (its output is ROW_MAJOR, "
         "so a block-float input comes out bfloat16) and bilinear sharded only; a sharded "
         "nearest input must be ROW_MAJOR; bilinear needs bfloat16 (measured on 0.81.1)",
         f"{_UP}: UpsampleDeviceOperation::validate_on_program_cache_miss ('Tiled input must be "
         "tile-aligned (no padding difference)', 0.81.1 wheel: line 73; 'Unsupported upsample "
         "configuration:' line 83; 'Bilinear upsample requires BFLOAT16 input'); "
         f"{_UP_API}: compute_bilinear_autoshard_memory_config (the planner's bilinear shards)"),
    Rule("upsample.channels", "upsample",
         "bilinear upsample needs channels a multiple of 32 (and its ROW_MAJOR shards L1-aligned "
         "pages): other channel counts run padded (``pad_c``: the layer pads an interleaved "
         "ROW_MAJOR input to pad_c channels, upsamples, and slices the result back into an "
         "interleaved output)",
         "ttnn/cpp/ttnn/operations/pool/upsample/device/upsample_bilinear_program_factory_"
         "multicore.cpp:67 ('in_channels % 32 == 0', measured on 0.81.1: 21 and 24 refused, 32 "
         "runs); interleaved_to_sharded_op.cpp:115 ('Shard page size must currently have L1 "
         "aligned page size': a 21-channel bfloat16 row is 42 B)"),
    # --- grid_sample (bilinear upsample with align_corners=True, docs/spec.md) ---------------
    Rule("grid_sample.input", "grid_sample",
         "the input is a 4D NHWC tensor, bfloat16 or float32, ROW_MAJOR, INTERLEAVED or "
         "HEIGHT_SHARDED, with channels a multiple of 32",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Input tensor must be "
         "BFLOAT16 or FLOAT32', 'Input tensor must be ROW_MAJOR layout', 'Input tensor must have "
         "INTERLEAVED or HEIGHT_SHARDED memory layout', 'Input tensor last dimension must be "
         "divisible by TILE_WIDTH')"),
    Rule("grid_sample.grid", "grid_sample",
         "the grid is ROW_MAJOR, INTERLEAVED or HEIGHT_SHARDED, has the input's batch and 6*K "
         "values per point when precomputed (then bfloat16 only), 2*K otherwise (bfloat16 or "
         "float32); nearest mode needs a precomputed grid",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Grid tensor must be "
         "ROW_MAJOR layout', 'Precomputed grid tensor must be BFLOAT16', 'Batch size mismatch', "
         "'Grid tensor must have INTERLEAVED or HEIGHT_SHARDED memory layout', "
         "'use_precomputed_grid = false is not supported with mode = 'nearest'')"),
    Rule("grid_sample.output", "grid_sample",
         "the output is ROW_MAJOR in the input's dtype, INTERLEAVED or HEIGHT_SHARDED; its memory "
         "config is memory_config, else the grid's; bilinear with an interleaved grid and an "
         "interleaved memory config writes interleaved",
         f"{_GS}: GridSampleOperation::validate_on_program_cache_miss ('Output tensor must have "
         "INTERLEAVED or HEIGHT_SHARDED memory layout'), compute_output_specs, invoke "
         "(memory_config.value_or(grid.memory_config()))"),
)


@dataclass(frozen=True)
class UpsampleArgs(CallArgs):
    mode: str | None = "nearest"
    in_w: int | None = None                  # the input's W: TILE alignment of its NHWC view
    pad_c: int | None = None                 # bilinear: channels the layer pads to (multiple of 32)


@dataclass(frozen=True)
class GridSampleArgs(CallArgs):
    """What grid_sample's rules read (the grid as an operand, or as ``grid``/``grid_shape``)."""
    mode: str | None = "bilinear"
    use_precomputed_grid: bool = False
    padding_mode: str | None = "zeros"
    grid: TensorLayout | None = None
    grid_shape: tuple[int, int, int, int] | None = None
    batch: int | None = None
    grid_batch: int | None = None
    device_grid: tuple[int, int] = DEFAULT_GRID
    pad_c: int | None = None                 # channels the layer pads to (multiple of 32)


@reads(UpsampleArgs)
def _c_upsample(inputs, args: UpsampleArgs, output, shapes):
    vs = []
    x = inputs[0]
    if x is None:
        return [_v("upsample.memory", "upsample input is missing")]
    mode = args.mode
    c_in = shapes[0][3] if shapes and shapes[0] is not None else None
    if mode == "bilinear" and args.pad_c is not None:
        # the padded form: pad (interleaved ROW_MAJOR only), upsample, slice back (rules above)
        if args.pad_c % TILE or (c_in is not None and args.pad_c < c_in):
            vs.append(_v("upsample.channels", f"pad_c {args.pad_c} is not a multiple of 32 at "
                         f"least the input's {c_in} channels"))
        if x.memory.sharded or x.layout != ROW_MAJOR:
            vs.append(_v("upsample.channels", "a channel-padded bilinear upsample takes an "
                         f"interleaved ROW_MAJOR input, got {x.memory.short()} {x.layout}"))
        if output is not None and output.sharded:
            vs.append(_v("upsample.channels", "a channel-padded bilinear upsample writes an "
                         f"interleaved output, got {output.short()}"))
        if x.dtype != "bfloat16":
            vs.append(_v("upsample.layout", f"bilinear upsample needs a bfloat16 input, got {x.dtype}"))
        return vs
    if mode == "bilinear" and c_in is not None and c_in % TILE:
        vs.append(_v("upsample.channels", f"bilinear upsample of {c_in} channels (not a multiple "
                     "of 32) without channel padding"))
    if mode == "bilinear" and x.memory.memory_layout in (WIDTH, BLOCK):
        vs.append(_v("upsample.memory", f"bilinear upsample of a {x.memory.memory_layout} input"))
    if x.layout == TILE_LAYOUT:
        w = args.in_w
        c = shapes[0][3] if shapes and shapes[0] is not None else None
        if (c is not None and c % TILE) or (w is not None and w % TILE):
            # the layer views the input as [N, H, W, C]: tile padding of W or C is refused
            vs.append(_v("upsample.layout", f"TILE upsample input whose [N,H,W,C] view "
                         f"(W={w}, C={c}) is not tile aligned"))
        elif mode == "nearest" and x.memory.sharded:
            vs.append(_v("upsample.layout", "sharded nearest upsample needs ROW_MAJOR, got TILE"))
        elif mode == "bilinear" and not x.memory.sharded:
            vs.append(_v("upsample.layout", "bilinear upsample of an interleaved TILE input"))
        elif mode == "nearest" and x.dtype in BLOCK_FLOAT_DTYPES:
            vs.append(_v("upsample.layout", f"nearest upsample of an interleaved TILE input "
                         f"returns ROW_MAJOR bfloat16, not {x.dtype}"))
    if mode == "bilinear" and x.dtype != "bfloat16":
        vs.append(_v("upsample.layout", f"bilinear upsample needs a bfloat16 input, got {x.dtype}"))
    return vs


@reads(GridSampleArgs)
def _c_grid_sample(inputs, args: GridSampleArgs, output, shapes):
    """Input 0: the NHWC input; input 1 (or ``args.grid`` and ``grid_shape``): the grid."""
    vs = []
    x = inputs[0]
    g = inputs[1] if len(inputs) > 1 else args.grid
    xs = shapes[0] if shapes else None
    gs = shapes[1] if shapes and len(shapes) > 1 and shapes[1] is not None else args.grid_shape
    if x is None:
        return [_v("grid_sample.input", "grid_sample input is missing")]
    if x.dtype not in ("bfloat16", "float32"):
        vs.append(_v("grid_sample.input", f"grid_sample input must be bfloat16 or float32, got {x.dtype}"))
    if x.layout != ROW_MAJOR:
        vs.append(_v("grid_sample.input", f"grid_sample input must be ROW_MAJOR, got {x.layout}"))
    if x.memory.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.input", "grid_sample input must be interleaved or height sharded, "
                     f"got {x.memory.short()}"))
    if args.pad_c is not None:
        # the padded form (plan.plan_grid_sample): the layer pads an interleaved input's
        # channels in DRAM, samples, slices them back
        if args.pad_c % TILE or (xs is not None and args.pad_c < xs[3]):
            vs.append(_v("grid_sample.input", f"pad_c {args.pad_c} is not a multiple of 32 at "
                         "least the input's channels"))
        if x.memory.sharded:
            vs.append(_v("grid_sample.input", "a channel-padded grid_sample takes an interleaved "
                         f"input, got {x.memory.short()}"))
    elif xs is not None and xs[3] % TILE:
        vs.append(_v("grid_sample.input", f"grid_sample input channels {xs[3]} are not a multiple of 32"))
    mode = args.mode
    pre = bool(args.use_precomputed_grid)
    if args.padding_mode != "zeros":
        vs.append(_v("grid_sample.grid", "grid_sample supports padding_mode 'zeros' only"))
    if mode == "nearest" and not pre:
        vs.append(_v("grid_sample.grid", "nearest grid_sample needs a precomputed grid"))
    if g is None:
        vs.append(_v("grid_sample.grid", "grid_sample grid is missing"))
        return vs
    if g.layout != ROW_MAJOR:
        vs.append(_v("grid_sample.grid", f"grid must be ROW_MAJOR, got {g.layout}"))
    if pre and g.dtype != "bfloat16":
        vs.append(_v("grid_sample.grid", f"a precomputed grid must be bfloat16, got {g.dtype}"))
    elif g.dtype not in ("bfloat16", "float32"):
        vs.append(_v("grid_sample.grid", f"grid must be bfloat16 or float32, got {g.dtype}"))
    if g.memory.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.grid", f"grid must be interleaved or height sharded, got {g.memory.short()}"))
    if gs is not None:
        per = grid_sample_points(gs[3], pre, mode)
        if gs[3] % per or gs[3] < per:
            vs.append(_v("grid_sample.grid", f"grid has {gs[3]} values per point, expected a multiple of {per}"))
        xn = args.batch
        gn = args.grid_batch
        if xn is not None and gn is not None and xn != gn:
            vs.append(_v("grid_sample.grid", f"batch size mismatch: input {xn}, grid {gn}"))
    if output is not None and output.memory_layout not in (INTERLEAVED, HEIGHT):
        vs.append(_v("grid_sample.output", f"grid_sample output must be interleaved or height sharded, "
                     f"got {output.short()}"))
    return vs


@reads(UpsampleArgs)
def _out_upsample(q: OutputQuery) -> TensorLayout:
    x, out_rc, requested, dtype_in = q.x, q.out_rc, q.requested, q.dtype_in
    if q.attrs.mode == "bilinear" and requested is None and \
            x.memory.memory_layout == HEIGHT and out_rc is not None and x.memory.shard_shape:
        # upsample_common.cpp compute_integer_output_mem_config (bilinear): the haloed input's
        # cores, shard height round_up(out rows, cores) / cores, the input's shard width
        n = x.memory.num_cores or x.memory.grid[0] * x.memory.grid[1]
        return TensorLayout(replace(x.memory, shard_shape=(round_up(out_rc[0], n) // n,
                                                           x.memory.shard_shape[1])), x.layout, dtype_in)
    if requested is None and x.memory.sharded and out_rc is not None and q.shapes[0] is not None:
        factor = out_rc[0] // _rows_c(tuple(q.shapes[0]))[0]
        return TensorLayout(upsample_output_memspec(x.memory, factor), x.layout, dtype_in)
    mem = requested if requested is not None else (q.fit(x.memory, x.layout) if x.memory.sharded
                                                   else x.memory)
    # nearest of an interleaved TILE input writes ROW_MAJOR in the input's dtype (measured on
    # the 0.81.1 mock: bfloat16 and float32, L1 and DRAM in and out; rule upsample.layout)
    layout = ROW_MAJOR if x.layout == TILE_LAYOUT and not x.memory.sharded else x.layout
    return TensorLayout(mem, layout, dtype_in)


@reads(GridSampleArgs)
def _out_grid_sample(q: OutputQuery) -> TensorLayout:
    # invoke: memory_config.value_or(grid's); compute_output_specs: bilinear with an
    # interleaved grid and an interleaved config stays interleaved; a config with a shard spec
    # (grid interleaved) is used as is; otherwise height shards over split_work_to_cores of
    # the grid points. Output ROW_MAJOR in the input's dtype.
    args: GridSampleArgs = q.attrs
    inputs, x, out_rc, requested = q.inputs, q.x, q.out_rc, q.requested
    g = inputs[1] if len(inputs) > 1 and inputs[1] is not None else args.grid
    mem = requested if requested is not None else (g.memory if g is not None else x.memory)
    grid_sharded = g is not None and g.memory.sharded
    if args.mode == "bilinear" and not grid_sharded and not mem.sharded:
        pass
    elif mem.sharded and mem.shard_shape is not None and not grid_sharded:
        pass
    elif grid_sharded:
        n = g.memory.num_cores or g.memory.grid[0] * g.memory.grid[1]
        mem = MemSpec(HEIGHT, "l1", g.memory.grid, n,
                      (g.memory.shard_shape[0], out_rc[1] if out_rc else x.memory.shard_shape[1]))
    elif out_rc is not None:
        cores, per = split_work_to_cores(out_rc[0], tuple(args.device_grid))
        mem = MemSpec(HEIGHT, "l1", cores_to_grid(cores, tuple(args.device_grid)),
                      cores, (per, out_rc[1]))
    return TensorLayout(mem, ROW_MAJOR, q.dtype_in)


#: the ttnn ops upsample is lowered to: their (check, output layout) functions
LOWERED = {"grid_sample": (_c_grid_sample, _out_grid_sample)}
