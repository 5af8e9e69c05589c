"""concat's shard alignment (concat_device_operation.cpp): which channel concats of sharded inputs
ttnn refuses."""
from __future__ import annotations

from ...planning.layout import BLOCK, HEIGHT


def concat_shard_misalignment(kind: str, channels: list[int], dtype: str) -> str | None:
    """Why a channel concat of ``kind``-sharded inputs of these channel counts is refused
    (rule concat.shard_align), or None."""
    if kind == HEIGHT and any(c % 16 for c in channels):
        return f"height-sharded channel concat of {channels} channels (each must be a multiple of 16)"
    if kind == BLOCK:
        elem = 4 if dtype == "float32" else 2
        bad = [c for c in (sum(channels[:i]) for i in range(1, len(channels))) if c * elem % 16]
        if bad:
            return (f"block-sharded channel concat: an input starts at channel {bad[0]} "
                    f"({bad[0] * elem} bytes), not 16-byte aligned")
    return None
