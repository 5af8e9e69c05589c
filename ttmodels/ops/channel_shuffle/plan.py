"""channel_shuffle plans as the reshape family does: an interleaved bfloat16 TILE input."""
from ..reshape.plan import plan  # noqa: F401
