"""batch_norm's layout rule: run as x * scale + shift, binary_ng's rules (its check and output
are binary's)."""
from __future__ import annotations

from ...planning.rules import Rule, reads
from ..binary.rules import _BNG, BinaryArgs, _c_binary

_BN = "ttnn/cpp/ttnn/operations/normalization/batch_norm/device/batch_norm_device_operation.cpp"

RULE_LIST = (
    Rule("batch_norm.as_binary", "batch_norm",
         "a standalone eval BatchNorm runs on the NHWC activation as x * scale + shift with "
         "per-channel [1,1,1,C] TILE constants (ttnn.batch_norm wants NCHW [N,C,H,W]; NHWC data "
         "would need two permutes), so it follows the binary_ng rules; after a conv it is folded "
         "into the conv's weights instead",
         f"{_BNG}: validate_on_program_cache_miss / broadcast rules (as binary.*); "
         f"{_BN}: BatchNormOperation (NCHW [N,C,H,W] input, not used)"),
)


@reads(BinaryArgs)
def _c_batch_norm(inputs, args: BinaryArgs, output, shapes):
    return _c_binary(inputs, args, output, shapes)
