"""An adaptive average pool to a size larger than its input (torchvision's VGG at 96x96: 3x3 up
to 7x7) as the spec's nearest ``upsample`` then ``avg_pool2d`` with ``count_include_pad:
false``, when that pair reproduces torch's bins exactly.

torch's bin i of an n -> m axis averages inputs floor(i n / m) .. ceil((i + 1) n / m) - 1; going
up, one or two of them. Upsampled by f, each input is f equal values; a window of k at stride t
over it (p padding each side, not counted) averages whole inputs in the proportion of the copies
it covers. Both are separable, so each axis is matched on its own: the first (f, k, t, p) whose
m x n matrix is torch's, exactly (fractions). 3 -> 7: f 2, k 2, t 1, p 1."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

_SEARCH = range(1, 5)          # kernel and stride up to 4 (scale: up to m, a 1 x 1 map broadcast)


@dataclass(frozen=True)
class UpPool:
    """One axis: nearest upsample by ``scale``, then an average pool (kernel, stride, padding)."""
    scale: int
    kernel: int
    stride: int
    padding: int


def adaptive_matrix(n: int, m: int) -> tuple[tuple[Fraction, ...], ...]:
    """torch's adaptive_avg_pool1d from n to m as an m x n matrix."""
    rows = []
    for i in range(m):
        lo, hi = (i * n) // m, -(-((i + 1) * n) // m)
        rows.append(tuple(Fraction(1, hi - lo) if lo <= j < hi else Fraction(0) for j in range(n)))
    return tuple(rows)


def up_pool_matrix(n: int, u: UpPool) -> tuple[tuple[Fraction, ...], ...] | None:
    """The matrix of ``u`` on n inputs (None: no output, or a window of padding only)."""
    size = n * u.scale
    out = (size + 2 * u.padding - u.kernel) // u.stride + 1
    if out < 1:
        return None
    rows = []
    for i in range(out):
        lo = i * u.stride - u.padding
        cover = [lo + d for d in range(u.kernel) if 0 <= lo + d < size]
        if not cover:
            return None
        row = [Fraction(0)] * n
        for q in cover:
            row[q // u.scale] += Fraction(1, len(cover))
        rows.append(tuple(row))
    return tuple(rows)


def as_up_pool(n: int, m: int) -> UpPool | None:
    """The smallest nearest-upsample + average-pool pair equal to torch's n -> m adaptive pool."""
    want = adaptive_matrix(n, m)
    for scale in range(1, max(m, 1) + 1):
        for kernel in _SEARCH:
            for stride in _SEARCH:
                for padding in range(kernel // 2 + 1):     # torch: padding <= kernel / 2
                    u = UpPool(scale, kernel, stride, padding)
                    if up_pool_matrix(n, u) == want:
                        return u
    return None
