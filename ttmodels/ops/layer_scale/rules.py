"""layer_scale's layout rule: run as x * gamma, binary_ng's rules."""
from __future__ import annotations

from ...planning.rules import Rule, reads
from ..binary.rules import _BNG, BinaryArgs, _c_binary

RULE_LIST = (
    Rule("layer_scale.as_binary", "layer_scale",
         "a layer scale runs as x * gamma with a per-channel [1,1,1,C] TILE constant, so it "
         "follows the binary_ng rules (as batch_norm.as_binary)",
         f"{_BNG}: validate_on_program_cache_miss / broadcast rules (as binary.*)"),
)


@reads(BinaryArgs)
def _c_layer_scale(inputs, args: BinaryArgs, output, shapes):
    return _c_binary(inputs, args, output, shapes)
