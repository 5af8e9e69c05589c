"""matmul / linear's layout rules, check and output layout."""
from __future__ import annotations

from dataclasses import dataclass

from ...planning.layout import BLOCK, INTERLEAVED, TILE_LAYOUT, MemSpec, TensorLayout
from ...planning.rules import CallArgs, OutputQuery, Rule, _v, reads
from ..conv2d.rules import _mm_activation

_MM = "ttnn/cpp/ttnn/operations/matmul/device/matmul_device_operation.cpp"
_PC = "ttnn/cpp/ttnn/operations/matmul/device/config/matmul_program_config.cpp"

RULE_LIST = (
    # --- matmul / linear --------------------------------------------------------------------
    Rule("linear.tile", "linear",
         "matmul operands must be TILE layout",
         f"{_MM}: Matmul::validate ('Inputs to matmul must be tilized')"),
    Rule("linear.program_config", "linear",
         "a 1x1 conv lowered to linear needs a 1D (in1 mcast, height-sharded in0) or 2D (block "
         "mcast, block-sharded in0) program config whose blocks divide the problem and fit L1; "
         "the matmul solver raises this when none exists",
         f"{_PC}: get_matmul_program_config / {_MM}: Matmul::validate (per_core_M/N, in0_block_w "
         "and subblock constraints; see docs/lowering.md); a sharded in0 must be the config's "
         "('MatmulMultiCoreReuseMultiCast1DProgramConfig: input A must be HEIGHT_SHARDED', "
         "0.81.1 wheel: line 2358; 2D: 'K ({}) must equal in0_block_w ({})', line 1767), an "
         "interleaved one is accepted"),
    Rule("linear.sharded_needs_program_config", "linear",
         "a BLOCK-sharded input a needs an explicit 2D program config (the automatic one must "
         "match its grid); height/width-sharded inputs get an automatic 1D config",
         f"{_PC}: get_matmul_program_config ('Num cores along y ({{}}) must match provided grid "
         "size ({}) or divided up size ({})', 0.81.1 wheel: matmul_program_config.cpp:784)"),
)


@dataclass(frozen=True)
class LinearArgs(CallArgs):
    program_config: object | None = None
    activation: str | None = None          # fused into the matmul


@reads(LinearArgs)
def _c_linear(inputs, args: LinearArgs, output, shapes):
    vs = []
    for i, t in enumerate(inputs):
        if t is not None and t.layout != TILE_LAYOUT:
            vs.append(_v("linear.tile", f"linear input {i} is {t.layout}"))
    x = inputs[0]
    if x is not None and x.memory.memory_layout == BLOCK and not args.program_config:
        vs.append(_v("linear.sharded_needs_program_config",
                     f"linear input is {x.memory.short()} without a sharded program config"))
    vs += _mm_activation(args.activation)
    return vs


def _out_linear(q: OutputQuery) -> TensorLayout:
    x = q.x
    mem = q.requested if q.requested is not None else (x.memory if not x.memory.sharded else
                                                       MemSpec(INTERLEAVED, "l1"))
    return TensorLayout(mem, TILE_LAYOUT, q.dtype)
