"""An exact float32 max_pool2d / avg_pool2d, for pools whose activations are float32.

ttnn 0.81.1's pool2d reads and writes bfloat16 only (pool_op.cpp:30 "Only BFLOAT16 supported for
now", generic_pools.cpp:154), so a float32 pool through it is rounded to 8 mantissa bits: the
whole float32 loss of googlenet's importer self-check and of most imported timm / smp models.
This lowering keeps the arithmetic in float32:

* the map ([1, 1, N*H*W, C], row-major) is viewed as [N, H, W, C] and padded (``ttnn.pad``) to
  the pool's padding plus ceil_mode's extra rows/columns: -inf for a max pool (a padded cell
  never wins), 0 for an average;
* each of the kernel's kh*kw taps is one strided ``ttnn.slice`` [N, OH, OW, C] of that map
  (stride, dilation);
* the taps fold with ``ttnn.maximum`` or ``ttnn.add``. binary_ng runs both on the SFPU in
  float32 (binary_ng_device_operation.cpp ``is_binary_sfpu_op``: MAXIMUM always, ADD when both
  operands are FLOAT32), so the max is exact and the sum is float32 in torch's tap order;
* an average is scaled by 1/count: one scalar when every window counts the same cells, else a
  [1, OH, OW, 1] constant of per-position reciprocals (count_include_pad=False where the padding
  reaches the map; ceil_mode windows clipped at the padded map's edge), with torch's divisors.

Every intermediate is DRAM interleaved, the output too (in the layout the consumers want): the
composite then holds no L1 buffer, only its programs' CBs (``exact_l1``). Each call was run on the
0.81.1 mock device (row-major float32 pad, strided slice, maximum / add / multiply with a
broadcast constant, to_layout both ways).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...language.graph import TensorShape

# the pools this lowering replaces when their activations are float32
EXACT_OPS = ("max_pool2d", "avg_pool2d")


@dataclass(frozen=True)
class Window:
    """A window pool's geometry on an [N, H, W, C] map to [N, OH, OW, C]: ``pad`` is what the
    map is padded by (top, bottom, left, right; bottom/right include ceil_mode's extra)."""
    n: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]          # the spec's (t, b, l, r)

    @property
    def pad(self) -> tuple[int, int, int, int]:
        t, b, l, r = self.padding
        need_h = (self.oh - 1) * self.stride[0] + self.dilation[0] * (self.kernel[0] - 1) + 1
        need_w = (self.ow - 1) * self.stride[1] + self.dilation[1] * (self.kernel[1] - 1) + 1
        return (t, max(b, need_h - self.h - t), l, max(r, need_w - self.w - l))

    def taps(self) -> list[tuple[list[int], list[int], list[int]]]:
        """ttnn.slice (starts, ends, steps) of each tap on the padded map, in torch's order
        (kernel rows, then columns)."""
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        out = []
        for i in range(kh):
            for j in range(kw):
                h0, w0 = i * dh, j * dw
                out.append(([0, h0, w0, 0],
                            [self.n, h0 + (self.oh - 1) * sh + 1, w0 + (self.ow - 1) * sw + 1,
                             self.c],
                            [1, sh, sw, 1]))
        return out


def window(attrs, op: str, s_in: TensorShape, s_out: TensorShape) -> Window:
    """The geometry of pool node attrs ``attrs`` (``MaxPool2dAttrs`` / ``AvgPool2dAttrs``)."""
    k = tuple(int(v) for v in attrs["kernel"])
    return Window(s_in.n, s_in.h, s_in.w, s_in.c, s_out.h, s_out.w, k,
                  tuple(int(v) for v in (attrs.get("stride") or k)),
                  tuple(int(v) for v in attrs.get("dilation", (1, 1))) if op == "max_pool2d"
                  else (1, 1),
                  tuple(int(v) for v in attrs.get("padding", (0, 0, 0, 0))))


def _counts(start: int, k: int, size: int, before: int, after: int, include_pad: bool) -> int:
    """Cells of one window axis torch divides by: the window clipped to the padded map
    (``min(start + k, size + pad)``), then to the map itself when padding does not count."""
    lo, hi = start - before, min(start - before + k, size + after)
    if include_pad:
        return hi - lo
    return min(hi, size) - max(lo, 0)


def divisors(g: Window, count_include_pad: bool) -> list[list[int]]:
    """Per output position (oh, ow), the count torch's avg_pool2d divides the window sum by."""
    t, b, l, r = g.padding
    rows = [_counts(o * g.stride[0], g.kernel[0], g.h, t, b, count_include_pad)
            for o in range(g.oh)]
    cols = [_counts(o * g.stride[1], g.kernel[1], g.w, l, r, count_include_pad)
            for o in range(g.ow)]
    return [[a * c for c in cols] for a in rows]


def uniform_divisor(d: list[list[int]]) -> int | None:
    """The one divisor of every position, or None when they differ."""
    vals = {v for row in d for v in row}
    return vals.pop() if len(vals) == 1 else None


def wanted(op: str, activations: str, input_dtype: str) -> bool:
    """Whether a pool runs exactly: a max/avg window pool whose activations are float32."""
    return op in EXACT_OPS and activations == "float32" and input_dtype == "float32"


def run(tt, x, g: Window, op: str, *, tiled_in: bool, tiled_out: bool, memory_config,
        count_include_pad: bool = True, divisor_tensor=None):
    """The layer's ttnn calls on the flat [1, 1, N*H*W, C] float32 ``x`` (interleaved):
    returns [1, 1, N*OH*OW, C] float32 in ``memory_config``. ``divisor_tensor``: the
    [1, OH, OW, 1] row-major reciprocals of a non-uniform average (``reciprocal_map``)."""
    rm = tt.to_layout(x, tt.ROW_MAJOR_LAYOUT, memory_config=memory_config) if tiled_in else x
    v = tt.reshape(rm, (g.n, g.h, g.w, g.c))
    t, b, l, r = g.pad
    fill = float("-inf") if op == "max_pool2d" else 0.0
    padded = (t, b, l, r) != (0, 0, 0, 0)
    p = tt.pad(v, [(0, 0), (t, b), (l, r), (0, 0)], fill, memory_config=memory_config) \
        if padded else v
    fold = tt.maximum if op == "max_pool2d" else tt.add
    acc = None
    for starts, ends, steps in g.taps():
        s = tt.slice(p, starts, ends, steps, memory_config=memory_config)
        if acc is None:
            acc = s
            continue
        nxt = fold(acc, s, memory_config=memory_config)
        tt.deallocate(acc)
        tt.deallocate(s)
        acc = nxt
    if padded:
        tt.deallocate(p)
    if tiled_in:
        tt.deallocate(rm)
    if op == "avg_pool2d":
        d = uniform_divisor(divisors(g, count_include_pad))
        scale = 1.0 / d if d is not None else divisor_tensor
        scaled = tt.multiply(acc, scale, memory_config=memory_config)
        tt.deallocate(acc)
        acc = scaled
    y = tt.reshape(acc, (1, 1, g.n * g.oh * g.ow, g.c))
    if not tiled_out:
        return y
    out = tt.to_layout(y, tt.TILE_LAYOUT, memory_config=memory_config)
    tt.deallocate(acc)
    return out


def reciprocal_map(g: Window, count_include_pad: bool):
    """The [1, OH, OW, 1] float32 host tensor of 1/count (torch), for ``run``'s
    ``divisor_tensor``; None when one scalar does."""
    d = divisors(g, count_include_pad)
    if uniform_divisor(d) is not None:
        return None
    import torch
    return (1.0 / torch.tensor(d, dtype=torch.float32)).reshape(1, g.oh, g.ow, 1)
