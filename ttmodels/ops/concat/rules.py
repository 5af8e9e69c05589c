"""concat's layout rules, check and output layout."""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import TILE
from ...planning.layout import ROW_MAJOR, TILE_LAYOUT, WIDTH, TensorLayout
from ...planning.rules import CallArgs, OutputQuery, Rule, Violation, _v, reads
from .sharding import concat_shard_misalignment

_CAT = "ttnn/cpp/ttnn/operations/data_movement/concat/device/concat_device_operation.cpp"

RULE_LIST = (
    # --- concat -----------------------------------------------------------------------------
    Rule("concat.sharded", "concat",
         "sharded inputs: all inputs sharded with the same memory layout; only width or height "
         "concat; width (channel) concat needs HEIGHT or BLOCK sharded inputs with equal shard "
         "heights",
         f"{_CAT}: ConcatDeviceOperation::validate ('Only width or height concat on sharded "
         "tensors', 'Only support width concat on height-sharded or block-sharded tensors.')"),
    Rule("concat.same_format", "concat",
         "all inputs share one dtype (0.81.1 accepts a TILE input next to a ROW_MAJOR one when "
         "they are interleaved: concat.same_layout)",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All Tensors should have "
         "same dtypes.', 0.81.1 wheel: line 157)"),
    Rule("concat.same_layout", "concat",
         "sharded inputs share one layout (TILE or ROW_MAJOR); interleaved ones may mix (the "
         "wrapper converts them: to TILE when the first is TILE and all are tile aligned, else "
         "to ROW_MAJOR, refusing a TILE input whose channels are not a multiple of 32)",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All Tensors should have "
         "same layouts.', 0.81.1 wheel: line 156; measured on the mock device); concat.cpp:117 "
         "('input_tensor.layout() == ttnn::TILE_LAYOUT', measured: TILE 48 channels + ROW_MAJOR)"),
    Rule("concat.shard_align", "concat",
         "a channel concat of HEIGHT-sharded inputs needs every input's channel count a multiple "
         "of 16 (TILE or ROW_MAJOR alike); of BLOCK-sharded inputs, every input's first channel "
         "at a 16-byte offset; interleaved inputs take any channel counts",
         f"{_CAT}: ConcatDeviceOperation::validate ('Width concat: input 1 starts at column 92 "
         "(184 bytes), not L1-aligned (16 bytes)', 0.81.1 wheel: line 265); the height-sharded "
         "s2s program's 'DFB s2s_rm_input_0 ... is larger than the per-bank allocation' "
         "(metal2 dfb.cpp:82) and 'Shard width 128 must match physical width 256' "
         "(tensor_spec.cpp:173), measured on the 0.81.1 mock device"),
    Rule("concat.mixed", "concat",
         "inputs must be all sharded or all interleaved",
         f"{_CAT}: ConcatDeviceOperation::validate_on_program_cache_miss ('All tensors must be "
         "sharded or all must be interleaved', 0.81.1 wheel: line 170)"),
)


@dataclass(frozen=True)
class ConcatArgs(CallArgs):
    dim: int = -1                          # -1 / 3: channels


@reads(ConcatArgs)
def _c_concat(inputs, args: ConcatArgs, output, shapes):
    vs = []
    ts = [t for t in inputs if t is not None]
    sharded = [t.memory.sharded for t in ts]
    if len({t.dtype for t in ts}) > 1:
        vs.append(_v("concat.same_format", f"concat inputs have dtypes {[t.dtype for t in ts]}"))
    if any(sharded) and len({t.layout for t in ts}) > 1:
        vs.append(_v("concat.same_layout", f"sharded concat inputs have layouts "
                     f"{[t.layout for t in ts]}"))
    elif len({t.layout for t in ts}) > 1 and len(shapes) == len(ts) and \
            mixed_output_layout(ts, shapes) == ROW_MAJOR and \
            any(t.layout == TILE_LAYOUT and s is not None and s[3] % TILE
                for t, s in zip(ts, shapes)):
        # the wrapper untilizes the TILE inputs, and refuses one whose channels pad a tile
        vs.append(_v("concat.same_layout", "interleaved TILE and ROW_MAJOR concat inputs where "
                     "a TILE input's channels are not a multiple of 32"))
    if all(sharded) and ts and args.dim in (-1, 3):
        channels = [s[3] for s in shapes if s is not None]
        if len(channels) == len(ts):
            vs += _concat_shard_align(ts, channels)
    if any(sharded) and not all(sharded):
        vs.append(_v("concat.mixed", "concat inputs mix sharded and interleaved tensors"))
    if all(sharded) and ts:
        kinds = {t.memory.memory_layout for t in ts}
        if len(kinds) > 1:
            vs.append(_v("concat.sharded", f"concat inputs have different shard layouts {sorted(kinds)}"))
        dim = args.dim
        if dim in (-1, 3):
            if kinds & {WIDTH}:
                vs.append(_v("concat.sharded", "width (channel) concat of width-sharded inputs"))
            heights = {t.memory.shard_shape[0] for t in ts if t.memory.shard_shape}
            # ttnn compares the shard specs' CoreRangeSets: the same (x, y) extent over
            # another number of cores (56 vs 49 in 8x7, timm selecsls42b) is another grid
            grids = {(t.memory.grid, t.memory.num_cores, t.memory.orientation) for t in ts}
            if len(heights) > 1 or len(grids) > 1:
                vs.append(_v("concat.sharded", "channel concat inputs differ in shard height or grid"))
    return vs


def _concat_shard_align(ts: list[TensorLayout], channels: list[int]) -> list[Violation]:
    kinds = {t.memory.memory_layout for t in ts}
    why = concat_shard_misalignment(kinds.pop(), channels, ts[0].dtype) if len(kinds) == 1 else None
    return [_v("concat.shard_align", why)] if why else []


def mixed_output_layout(inputs: list[TensorLayout], shapes) -> str:
    """The layout of a concat of interleaved TILE and ROW_MAJOR inputs (concat.cpp's wrapper,
    measured on the 0.81.1 mock): TILE when the first input is TILE and every input is tile
    aligned ([.., rows, C] with rows and C multiples of 32; the ROW_MAJOR ones are tilized),
    else ROW_MAJOR (the TILE ones are untilized: 784 rows of TILE + ROW_MAJOR give ROW_MAJOR,
    DeepLabV3's ASPP concat at 224x224)."""
    layouts = {t.layout for t in inputs if t is not None}
    first = inputs[0].layout
    if len(layouts) < 2:
        return first
    aligned = all(s is not None and s[2] % TILE == 0 and s[3] % TILE == 0 for s in shapes)
    return TILE_LAYOUT if first == TILE_LAYOUT and aligned else ROW_MAJOR


def _out_concat(q: OutputQuery) -> TensorLayout:
    x = q.x
    layout = x.layout
    if not x.memory.sharded and q.shapes and len(q.shapes) == len(q.inputs):
        layout = mixed_output_layout(list(q.inputs), q.shapes)
    mem = q.requested if q.requested is not None else q.fit(x.memory, layout)
    return TensorLayout(mem, layout, q.dtype_in)