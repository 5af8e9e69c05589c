"""split's layout rules: one ttnn.slice per named output, so slice's (rule ``slice.memory``)."""
from __future__ import annotations

from ...planning.rules import CallArgs, reads
from ..slice.rules import _c_slice

RULE_LIST = ()


@reads(CallArgs)
def _c_split(inputs, args: CallArgs, output, shapes):
    """A split is one ttnn.slice per named output: slice's rules."""
    return _c_slice(inputs, args, output, shapes)
