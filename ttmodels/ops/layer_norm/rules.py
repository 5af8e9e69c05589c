"""layer_norm's layout rule (interleaved input) and check; its output keeps the input's memory
config."""
from __future__ import annotations

from dataclasses import dataclass

from ...planning.layout import HEIGHT
from ...planning.rules import CallArgs, Rule, _v, reads

_LN = "ttnn/cpp/ttnn/operations/normalization/layernorm/device/layernorm_device_operation.cpp"

RULE_LIST = (
    Rule("layer_norm.interleaved", "layer_norm",
         "ttnn.layer_norm without a LayerNormShardedMultiCoreProgramConfig (none is planned) "
         "refuses a HEIGHT_SHARDED input, and a WIDTH/BLOCK-sharded input with an interleaved "
         "output memory config (seen on the 0.81.1 mock device); interleaved inputs in L1 or "
         "DRAM, TILE or ROW_MAJOR, bfloat16 or bfloat8_b are taken, the output keeping the "
         "input's memory config, layout and dtype; weight and bias as [1, 1, 1, C] TILE. The "
         "planner gives it an interleaved input",
         f"{_LN}: validate ('a.memory_config().memory_layout() != "
         "TensorMemoryLayout::HEIGHT_SHARDED', 0.81.1 wheel: line 227; 'output_mem_config."
         "is_sharded() && ... != HEIGHT_SHARDED', line 231; gamma TILE with the input's padded "
         "width, or ROW_MAJOR [C/32, 32])"),
)


@dataclass(frozen=True)
class LayerNormArgs(CallArgs):
    program_config: object | None = None   # a sharded program config (the plan gives none)


@reads(LayerNormArgs)
def _c_layer_norm(inputs, args: LayerNormArgs, output, shapes):
    x = inputs[0]
    if x is None or not x.memory.sharded or args.program_config is not None:
        return []
    if x.memory.memory_layout == HEIGHT:
        return [_v("layer_norm.interleaved", "layer_norm of a HEIGHT_SHARDED input needs a "
                   "sharded program config")]
    if output is not None and not output.sharded:
        return [_v("layer_norm.interleaved", f"layer_norm of a {x.memory.memory_layout} input "
                   f"with an interleaved output memory config ({output.short()})")]
    return []
