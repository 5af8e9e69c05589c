"""Host model of TTNN's tile data formats: ``quantize(t, dtype)``.

``quantize(t, dtype)`` returns ``t`` as float32 after a round trip through ``dtype`` in TILE
layout, bit-exact with ``ttnn.to_torch(ttnn.from_torch(t, dtype=..., layout=ttnn.TILE_LAYOUT))``
(ttnn 0.81.1; ``tests/test_formats.py`` checks this against ttnn itself). The sim backend calls it
on every activation and weight, so it is vectorised torch (chunks of 2**20 values, no per-tile
loops).

Layout. TILE layout pads the last two dims to multiples of 32 with zeros and stores each 32x32
tile as four 16x16 faces (top-left, top-right, bottom-left, bottom-right), each face row-major.
For the block-float formats one 8-bit exponent is shared by each row of 16 values of a face,
i.e. by columns [16k, 16k + 16) of one row of the tensor. Padding zeros never raise a shared
exponent, so only the grouping along the last dim matters: the result does not depend on the
other dims, and the padded values are cropped again. Leading dims are flattened; a 0-D or 1-D
input is one row ``[1, n]`` (ttnn gives the same values for them) and keeps its shape.

bfloat8_b / bfloat4_b (tt-metal ``convert_u32_to_bfp`` / ``convert_bfp_to_u32``), per group:
- shared exponent ``s`` = the largest 8-bit biased float32 exponent field in the group
  (inf/NaN count as 255);
- each value keeps a sign bit and an M-bit magnitude q (M = 7 for bfloat8_b, 3 for bfloat4_b)
  that *includes* the leading one: the 24-bit significand ``1.m`` (hidden one made explicit) is
  shifted right by ``s - e`` (bits shifted out are dropped, no sticky bit), then its top M bits
  are rounded to nearest, ties to even, on the remaining low bits, and saturate at 2**M - 1
  (no carry into the exponent: 1.999 in bfloat8_b gives 127/64 = 1.984375, not 2);
- value = (-1)**sign * q * 2**(s - 127 - (M - 1)). Hence the group max keeps M significant
  bits, a value whose exponent is k below s keeps M - k, and one M + 1 or more below becomes 0
  (a row holding 1e3 and 1e-6 returns the 1e-6 as 0);
- q == 0 gives +0.0: negative zero, and negative values that round to 0, come back as +0.0;
- float32 subnormals (exponent field 0) are read as zero (ttnn 0.81.1 flushes them; the
  tt-metal source would add a hidden one to them);
- inf stays inf and every other value of its group becomes 0 (they are 2**128 smaller);
  a NaN keeps its sign and its payload is rounded like any mantissa to M - 1 bits, so a NaN
  with a small payload (e.g. 0x7F800001) comes back as inf; finite values near FLT_MAX in a group
  with inf/NaN round up to q = 2**(M-1) and decode as inf.
Every decoded value is a float32 normal: with subnormals flushed, a value of exponent e has
q >= 2**(M-1-(s-e)), so the unpacker's exponent ``s - shift`` is >= e >= 1 and its unchecked
int32 arithmetic never wraps (``_bfp_groups_exact`` mirrors that arithmetic anyway).

bfloat16: round to nearest, ties to even (not truncation); overflow rounds to inf; subnormals
are kept (rounded like normals); every NaN becomes the canonical quiet NaN 0x7FC00000 (torch's
own conversion would give 0xFFFF0000 for some, so we fix NaNs up).

float32: identity (bit for bit, NaN payloads and -0.0 included); a copy is returned.

Checked against tt-metal's ``tt_metal/impl/data_format/blockfloat_common.cpp``
(``get_max_exp``, ``convert_u32_to_bfp``, ``convert_bfp_to_u32``, ``pack_fp32_vec_as_bfp_tiles``),
``tt_metal/api/tt-metalium/bfloat8.hpp`` and ``bfloat4.hpp`` (``unpack_bfp{8,4}_tiles_into_float_vec``:
normalisation by leading-zero shift, exponent ``s - shift`` without an underflow check) and,
empirically, ttnn 0.81.1's host conversion (older tt-metal rounded half-up; 0.81.1 rounds
ties to even, and flushes subnormal inputs, which the sources read here do not).

Implementation: groups whose shared exponent is in [24, 254] (finite, |max| >= 2**-103) use
four exact float32 passes (``_bfp_chunk``: truncating division by the aligned last bit's weight,
a magic-number addition that rounds to nearest even, a clamp, the scale back); the rest go
through an integer replica of the C++ (``_bfp_groups_exact``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily so that ``import ttmodels`` stays light
    import torch

__all__ = ["SUPPORTED_DTYPES", "BLOCK_FLOAT_DTYPES", "supported_dtypes", "is_block_float",
           "quantize", "quantize_2d", "quantize_owned_"]

SUPPORTED_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "bfloat8_b", "bfloat4_b")
# dtype -> bits of magnitude stored per value (the leading one included, see module docstring)
_BFP_MANTISSA_BITS = {"bfloat8_b": 7, "bfloat4_b": 3}
BLOCK_FLOAT_DTYPES: tuple[str, ...] = tuple(_BFP_MANTISSA_BITS)

_BLOCK = 16           # values sharing one exponent: one row of a 16x16 face
# Elements per pass: keeps each in-place pass over a chunk cache-friendly (measured faster than
# whole-tensor passes on 50M values); a multiple of _BLOCK so groups never straddle chunks.
_CHUNK = 1 << 20


def supported_dtypes() -> tuple[str, ...]:
    return SUPPORTED_DTYPES


def is_block_float(dtype: str) -> bool:
    """True for the shared-exponent formats (``bfloat8_b``, ``bfloat4_b``)."""
    _check_dtype(dtype)
    return dtype in _BFP_MANTISSA_BITS


def _check_dtype(dtype) -> None:
    if dtype not in SUPPORTED_DTYPES:
        from .errors import Error
        raise Error(f"unsupported dtype {dtype!r}: expected one of {', '.join(SUPPORTED_DTYPES)}")


def quantize(t: "torch.Tensor", dtype: str) -> "torch.Tensor":
    """``t`` as float32 (same shape) after a round trip through TTNN's ``dtype`` in TILE layout.

    Bit-exact with ``ttnn.to_torch(ttnn.from_torch(t, dtype=..., layout=ttnn.TILE_LAYOUT))``.
    Other real dtypes are first converted to float32 by torch. 0-D and 1-D inputs are treated
    as one row (``[1, n]``). ``t`` is never modified; the result never aliases it."""
    import torch

    _check_dtype(dtype)
    if not isinstance(t, torch.Tensor):
        from .errors import Error
        raise Error(f"quantize expects a torch.Tensor, got {type(t).__name__}")
    if t.is_complex():
        from .errors import Error
        raise Error(f"quantize expects a real tensor, got {t.dtype}")
    shape = t.shape
    x = t.detach().to(torch.float32)
    if x.numel() == 0:
        return x.clone()
    if x.dim() < 2:
        x = x.reshape(1, -1)
    out = quantize_2d(x.reshape(-1, x.shape[-1]), dtype)
    return out.reshape(shape)


def quantize_2d(t2d: "torch.Tensor", dtype: str) -> "torch.Tensor":
    """``quantize`` for a ``[rows, cols]`` tensor (any real dtype); returns float32 ``[rows, cols]``."""
    import torch

    _check_dtype(dtype)
    if t2d.dim() != 2:
        from .errors import Error
        raise Error(f"quantize_2d expects a [rows, cols] tensor, got shape {tuple(t2d.shape)}")
    x = t2d.detach().to(torch.float32)
    if x.numel() == 0 or dtype == "float32":
        return x.clone() if x.data_ptr() == t2d.data_ptr() else x
    if dtype == "bfloat16":
        return _bfloat16(x)
    rows, cols = x.shape
    # A shared-exponent group is 16 consecutive values of one row of a face, i.e. columns
    # [16k, 16k+16) of one tensor row; tile padding adds zeros (exponent 0, never the group max),
    # so only the last dim needs padding, and only up to a multiple of 16.
    pad = (-cols) % _BLOCK
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    groups = x.contiguous().reshape(-1, _BLOCK)
    out = _bfp_groups(groups, dtype, torch.empty_like(groups))
    out = out.reshape(rows, cols + pad)
    return out[:, :cols].contiguous() if pad else out


def quantize_owned_(t: "torch.Tensor", dtype: str) -> "torch.Tensor":
    """``quantize(t, dtype)`` written into ``t`` itself when it is a contiguous float32 tensor
    whose rows are whole exponent groups (last dim a multiple of 16, or bfloat16/float32, which
    have no groups); otherwise ``quantize(t, dtype)``. For fresh results nobody else holds: it
    saves the allocation (and the page faults) of a second tensor. Same values, bit for bit."""
    import torch

    _check_dtype(dtype)
    if t.dtype != torch.float32 or not t.is_contiguous() or t.numel() == 0 or t.dim() < 2:
        return quantize(t, dtype)
    if dtype == "float32":
        return t
    if dtype == "bfloat16":
        return _bfloat16(t, out=t)
    if t.shape[-1] % _BLOCK:
        return quantize(t, dtype)
    groups = t.view(-1, _BLOCK)
    _bfp_groups(groups, dtype, groups)
    return t


def _bfp_groups(groups: "torch.Tensor", dtype: str, out: "torch.Tensor") -> "torch.Tensor":
    m_bits = _BFP_MANTISSA_BITS[dtype]
    step = _CHUNK // _BLOCK
    for start in range(0, groups.shape[0], step):
        _bfp_chunk(groups[start:start + step], m_bits, out[start:start + step])
    return out


def _bfloat16(x: "torch.Tensor", out: "torch.Tensor | None" = None) -> "torch.Tensor":
    """float32 -> bfloat16 (round to nearest, ties to even) -> float32; every NaN -> 0x7FC00000.
    ``out``: a contiguous float32 tensor of ``x``'s size to write into (may be ``x``)."""
    import torch

    flat = x.contiguous().reshape(-1)
    out = torch.empty_like(flat) if out is None else out.view(-1)
    for start in range(0, flat.numel(), _CHUNK):
        o = out[start:start + _CHUNK]
        o.copy_(flat[start:start + _CHUNK].to(torch.bfloat16))
        nan = torch.isnan(o)
        if bool(nan.any()):  # torch's own NaN pattern differs from tt-metal's canonical quiet NaN
            o.view(torch.int32).masked_fill_(nan, 0x7FC00000)
    return out.reshape(x.shape)


def _bfp_chunk(x: "torch.Tensor", m_bits: int, out: "torch.Tensor") -> None:
    """Round trip of float32 groups ``x [g, 16]`` (one shared exponent per row) into ``out``
    (which may be ``x`` itself).

    A few passes over the values for groups whose shared exponent ``s`` is in [24, 254], each step
    exact in float32 (T = 2**(s - 150), the weight of the aligned significand's last bit, is a
    normal float there):
    1. ``z = trunc(x / T)``: the sign and the 24-bit significand aligned to ``s``, the bits shifted
       out dropped (values 24+ binades under the max, zeros and subnormals give 0);
    2. ``t = z + C`` with C = 1.5 * 2**(47 - M): the sum lies in [2**(46 - M), 2**(47 - M)),
       whose spacing is 2**(24 - M), so float addition rounds z to the kept M bits, to nearest
       with ties to even (C's own bits are even there);
    3. clamp t to C -+ (2**M - 1) * 2**(24 - M): saturation instead of a carry into the exponent;
    4. ``(t - C) * T``: q * 2**(s - 127 - (M - 1)); q == 0 gives +0.0 whatever the sign.
    The shared exponent is read from the bits of the row's largest magnitude (an integer max
    over the sign-cleared bits). The rare rest (inf/NaN, or 0 < |max| < 2**-103) goes through
    the integer model of the C++ (``_bfp_groups_exact``)."""
    import torch

    # |x| as int32 bits orders like |x| as a float (NaN above inf): its max's exponent field
    shared = torch.bitwise_and(x.view(torch.int32), 0x7FFFFFFF).amax(dim=1, keepdim=True) >> 23
    # shared == 0 (all zeros/subnormals, e.g. padding) needs no special case: clamped to 24,
    # x / T < 1 truncates to 0 and the group comes back as +0.0, as the integer model gives.
    odd = ((shared > 0) & (shared < 24)) | (shared == 255)
    step = ((shared.clamp_(24, 254) - 23) << 23).view(torch.float32)       # T = 2**(s - 150)
    c = 1.5 * 2.0 ** (47 - m_bits)
    qmax = float((1 << m_bits) - 1) * 2.0 ** (24 - m_bits)
    exact = None
    if bool(odd.any()):                           # before ``out`` (maybe ``x``) is overwritten
        rows = odd.reshape(-1).nonzero().reshape(-1)
        exact = _bfp_groups_exact(x[rows].view(torch.int32), m_bits).view(torch.float32)
    torch.div(x, step, rounding_mode="trunc", out=out)
    out.add_(c)
    out.clamp_(c - qmax, c + qmax)
    out.sub_(c).mul_(step)
    if exact is not None:
        out[rows] = exact


def _bfp_groups_exact(bits: "torch.Tensor", m_bits: int) -> "torch.Tensor":
    """Integer model of tt-metal's pack/unpack on int32 float bits ``[g, 16]``; returns int32 bits."""
    import torch

    shift = 24 - m_bits
    exp = (bits >> 23) & 0xFF
    shared = exp.amax(dim=1, keepdim=True)
    # Hidden one added for every value with a non-zero exponent field; shifts past the mantissa
    # width give zero, as the C++ loop of 31-bit shifts does.
    mant = (bits & 0x7FFFFF) | 0x800000
    mant >>= (shared - exp).clamp_(max=31)
    rem = mant & ((1 << shift) - 1)
    q = mant >> shift
    tie = 1 << (shift - 1)
    q += (rem > tie) | ((rem == tie) & ((q & 1) == 1))
    q.clamp_(max=(1 << m_bits) - 1)
    q.masked_fill_(exp == 0, 0)                   # zeros and subnormals: denormals-are-zero
    # decode: shift q up until its top bit is the hidden one, lowering the exponent to match
    lead = (q.to(torch.float32).view(torch.int32) >> 23) - 127          # floor(log2 q), q >= 1
    sc = (m_bits - 1) - lead
    man_out = (q << (sc + 1)) & ((1 << m_bits) - 1)
    exp_out = (shared - sc) << 23                 # int32 wrap-around, as in the C++ unpack
    sign = bits & torch.iinfo(torch.int32).min
    res = sign | exp_out | (man_out << (23 - m_bits))
    return torch.where(q != 0, res, torch.zeros((), dtype=torch.int32))
