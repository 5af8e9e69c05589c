"""ttmodels.formats.quantize against ttnn's own host tile conversion, bit for bit.

ttnn's from_torch/to_torch run without a card thanks to the mock cluster descriptor that
conftest.py points TT_METAL_MOCK_CLUSTER_DESC_PATH at."""
from __future__ import annotations

import pytest
import torch

import ttnn  # noqa: E402  (a pinned dependency: a broken import must fail, not skip)

from ttmodels import formats  # noqa: E402
from ttmodels.errors import Error  # noqa: E402
from ttmodels.formats import quantize, quantize_2d  # noqa: E402

ALL = ["float32", "bfloat16", "bfloat8_b", "bfloat4_b"]
LOSSY = ["bfloat16", "bfloat8_b", "bfloat4_b"]
BFP = ["bfloat8_b", "bfloat4_b"]


def ttnn_roundtrip(t: torch.Tensor, dtype: str) -> torch.Tensor:
    tt = ttnn.from_torch(t, dtype=getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT)
    return ttnn.to_torch(tt).to(torch.float32)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def f32(*patterns: int) -> torch.Tensor:
    """float32 tensor from uint32 bit patterns."""
    return torch.tensor([p - (1 << 32) if p >= 1 << 31 else p for p in patterns],
                        dtype=torch.int64).to(torch.int32).view(torch.float32)


def assert_bit_exact(x: torch.Tensor, dtype: str) -> torch.Tensor:
    want = ttnn_roundtrip(x, dtype)
    got = quantize(x, dtype)
    assert got.dtype == torch.float32
    assert got.shape == x.shape == want.shape
    diff = bits(got) != bits(want)
    if diff.any():
        idx = diff.nonzero()[:5].tolist()
        lines = [f"{tuple(i)}: in {x[tuple(i)].item()!r} ttnn 0x{bits(want)[tuple(i)].item() & 0xFFFFFFFF:08x}"
                 f" ours 0x{bits(got)[tuple(i)].item() & 0xFFFFFFFF:08x}" for i in idx]
        pytest.fail(f"{dtype}: {int(diff.sum())} of {diff.numel()} values differ from ttnn:\n"
                    + "\n".join(lines))
    return got


def wide_range(shape, seed) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * torch.exp(3 * torch.randn(shape, generator=g))


def rows16(*rows) -> torch.Tensor:
    """[len(rows), 32] tensor: each row's values in its first shared-exponent group."""
    x = torch.zeros(len(rows), 32)
    for i, r in enumerate(rows):
        v = r if isinstance(r, torch.Tensor) else torch.tensor(r, dtype=torch.float32)
        x[i, :v.numel()] = v
    return x


# --- random data of many shapes -------------------------------------------------------------

SHAPES = [(1, 1, 64, 64), (2, 3, 45, 70), (5, 33), (7, 9, 17), (1, 1, 200, 96), (3, 1, 1, 40),
          (32, 16), (2, 31, 1), (1, 1, 100, 3)]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_bit_exact(dtype, shape):
    assert_bit_exact(wide_range(shape, seed=sum(shape)), dtype)


@pytest.mark.parametrize("dtype", LOSSY)
def test_activation_sized_tensor_bit_exact(dtype):
    # A ResNet stage-2 activation ([1, 1, N*H*W, C]) with post-ReLU statistics.
    g = torch.Generator().manual_seed(7)
    x = torch.relu(torch.randn(1, 1, 25088, 64, generator=g)) * 3
    assert_bit_exact(x, dtype)


@pytest.mark.parametrize("dtype", LOSSY)
def test_bfloat16_input_tensor(dtype):
    x = wide_range((2, 40, 48), seed=3).to(torch.bfloat16)
    assert_bit_exact(x, dtype)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(), (1,), (5,), (16,), (33,), (100,)], ids=str)
def test_0d_and_1d_are_one_row(dtype, shape):
    x = wide_range(shape, seed=11)
    got = assert_bit_exact(x, dtype)
    assert torch.equal(bits(got.reshape(1, -1)), bits(quantize(x.reshape(1, -1), dtype)))


# --- edge cases -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_mixed_magnitudes_in_one_row(dtype):
    x = rows16([1e-6, 1e3, -1e-6, 3.0, 0.1, -1e3, 5e-4, 100.0, 7.0, 0.0, -0.0, 1.0, 2.0, 4.0, 8.0, 16.0],
               [1e-6] * 15 + [1e3])
    got = assert_bit_exact(x, dtype)
    if dtype in BFP:  # the 1e-6 are 30 binades below the shared exponent
        assert got[0, 0].item() == 0.0 and got[1, 0].item() == 0.0


def test_shared_exponent_is_per_16_columns_and_per_row():
    x = torch.full((32, 64), 1.0 + 1 / 3)
    x[5, 20] = 1e4    # only columns 16..31 of row 5 share its exponent
    got = assert_bit_exact(x, "bfloat8_b")
    untouched = torch.ones_like(x, dtype=torch.bool)
    untouched[5, 16:32] = False
    assert (got[untouched] == quantize(torch.tensor([[1.0 + 1 / 3]]), "bfloat8_b").item()).all()
    assert (got[5, 16:32][torch.arange(16) != 4] == 0).all()


@pytest.mark.parametrize("dtype", ALL)
def test_negative_zero(dtype):
    x = rows16([-0.0] * 16, [-0.0, 1.0] + [-0.0] * 14, [1.0, -1e-9, -2.0 ** -20] + [0.0] * 13)
    got = assert_bit_exact(x, dtype)
    if dtype in BFP:  # q == 0 loses the sign
        assert (bits(got[:, 2:]) == 0).all() and bits(got[2, :2]).tolist() == [0x3F800000, 0]


@pytest.mark.parametrize("dtype", ALL)
def test_rounding_ties(dtype):
    q8, q4 = 1 / 64, 1 / 4     # value of one unit of q when the shared exponent is that of 1.0
    x = rows16(
        # bfloat8_b ties on 1.0's scale, both parities, both signs; then sticky bits lost by the
        # alignment shift (0.5 * (1 + 1/64 + 2**-23) sits just above a tie before alignment)
        [1.0, 1 + q8 / 2, 1 + 3 * q8 / 2, 1 + 5 * q8 / 2, -(1 + q8 / 2), -(1 + 3 * q8 / 2),
         0.5 + q8 / 4, 0.5 + 3 * q8 / 4, 0.5 * (1 + 1 / 64 + 2 ** -23), 1 + q8 / 2 + 2 ** -23,
         q8 / 2, 3 * q8 / 2, 1.99, 1.999, -1.999, 2 ** -7 + 2 ** -8],
        [1.0, 1 + q4 / 2, 1 + 3 * q4 / 2, 1 + 5 * q4 / 2, 1 + 7 * q4 / 2, -(1 + q4 / 2),
         0.5 + q4 / 4, 0.5 + 3 * q4 / 4, q4 / 2, 3 * q4 / 2, 1.9, 1.95, 0.0625, 0.09375, 0.03, 1.5],
        # bfloat16 ties: 0x3F808000 (even, down), 0x3F818000 (odd, up), one ulp above a tie
        f32(0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0xBF808000, 0xBF818000, 0x3F80FFFF,
            0x3F7F8000, 0x00008000, 0x00018000, 0x7F7F8000, 0x7F7F7FFF, 0xFF7F8000, 0x3F800001,
            0x3F807FFF, 0x3F7FFFFF),
    )
    assert_bit_exact(x, dtype)


def test_documented_bfloat8_rounding_model():
    x = rows16([1.0, 1 + 1 / 128, 1 + 3 / 128, 1.999, 0.5 * (1 + 1 / 64 + 2 ** -23), -(1 + 1 / 256)])
    got = assert_bit_exact(x, "bfloat8_b")[0, :6].tolist()
    # ties to even; saturation at 127/64 instead of carrying to 2; dropped sticky bits make a
    # near-tie a tie (rounds down to even); the sign survives when q != 0
    assert got == [1.0, 1.0, 1 + 2 / 64, 127 / 64, 0.5, -1.0]


def test_documented_bfloat16_rounds_to_nearest_even():
    x = f32(0x3F808000, 0x3F818000, 0x3F808001).reshape(1, 3)
    got = bits(assert_bit_exact(x, "bfloat16")).tolist()[0]
    assert got == [0x3F800000, 0x3F820000, 0x3F810000]


@pytest.mark.parametrize("dtype", ALL)
def test_subnormals(dtype):
    sub = f32(0x00000001, 0x00400000, 0x007FFFFF, 0x00800000, 0x00800001, 0x01000000, 0x02000000,
              0x03000000, 0x03800000, 0x80000001, 0x80400000, 0x00000100, 0x00010000, 0x00020000,
              0x00040000, 0x00000000)
    x = rows16(sub, sub[:3], [1.0, 2.0 ** -126] + sub[:3].tolist(), [1e-30] + sub.tolist()[:15])
    got = assert_bit_exact(x, dtype)
    if dtype in BFP:  # ttnn 0.81.1 flushes subnormal inputs
        assert (got[1] == 0).all()


@pytest.mark.parametrize("dtype", ALL)
def test_every_shared_exponent(dtype):
    # One group per exponent field 0..254, with neighbours 3 and 7 binades down and a subnormal,
    # so both the float fast path (s >= 24) and the integer path (s < 24) are compared with ttnn.
    e = torch.arange(255, dtype=torch.int64)
    g = torch.zeros(255, 16, dtype=torch.int64)
    g[:, 0] = (e << 23) | 0x123456
    g[:, 1] = ((e - 3).clamp(min=0) << 23) | 0x7FFFFF
    g[:, 2] = (1 << 31) | ((e - 7).clamp(min=0) << 23) | 0x555555
    g[:, 3] = 1
    g[:, 4] = (1 << 31) | ((e - 1).clamp(min=0) << 23) | 0x7FFFFF
    g[:, 5] = ((e - 8).clamp(min=0) << 23) | 0x000001
    x = g.to(torch.int32).view(torch.float32)
    assert_bit_exact(x, dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_inf_nan_and_huge(dtype):
    inf, nan = float("inf"), float("nan")
    x = rows16([inf, 1.0, -2.0, 3.0] + [0.5] * 12,
               [-inf, 1.0, 3e30, -1e38],
               [nan, 1.0, -2.0, 3.0] + [0.5] * 12,
               [3e38, -3.4e38, 1e38, 1.0] + [2e38] * 12,
               f32(0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA00000, 0x7FFFFFFF,
                   0xFFFFFFFF, 0x7F80FFFF, 0x7F808000, 0x7F830000, 0x7F7FFFFF, 0x7F7F8000,
                   0x7F7F7FFF, 0xFF7F8000, 0x3F808000, 0x3F818000),
               f32(0x7FFFFFFF, 0x3F800000, 0x7F7FFFFF, 0x80000001, 0xBF800000))
    got = assert_bit_exact(x, dtype)
    if dtype in BFP:  # inf/NaN set the shared exponent to 255, flushing the rest of the group
        assert got[0, 0].item() == inf and (got[0, 1:] == 0).all()
        assert torch.isnan(got[2, 0]) and (got[2, 1:] == 0).all()
        assert got[4, 2].item() == inf                       # NaN with a tiny payload -> inf
    if dtype == "bfloat16":                                  # one canonical quiet NaN
        assert bits(got[4, :10]).tolist() == [0x7FC00000] * 10


def test_float32_is_identity_and_a_copy():
    x = torch.cat([wide_range((3, 40), seed=5).reshape(-1),
                   f32(0x7FA00001, 0xFFC00001, 0x00000001, 0x80000000)]).reshape(4, 31)
    got = assert_bit_exact(x, "float32")
    assert torch.equal(bits(got), bits(x))
    assert got.data_ptr() != x.data_ptr()


# --- properties -----------------------------------------------------------------------------

def test_quantize_changes_values():
    x = wide_range((4, 64, 64), seed=1)
    b16, b8, b4 = (quantize(x, d) for d in ("bfloat16", "bfloat8_b", "bfloat4_b"))
    assert (b8 != x).float().mean() > 0.9
    err = [(q - x).abs().mean().item() for q in (b16, b8, b4)]
    assert err[0] < err[1] < err[2]


@pytest.mark.parametrize("dtype", ALL)
def test_idempotent(dtype):
    x = wide_range((3, 50, 70), seed=2)
    once = quantize(x, dtype)
    assert torch.equal(bits(quantize(once, dtype)), bits(once))


@pytest.mark.parametrize("dtype", LOSSY)
def test_input_not_modified(dtype):
    x = wide_range((2, 48, 40), seed=4)
    before = x.clone()
    quantize(x, dtype)
    quantize_2d(x.reshape(-1, 40), dtype)
    assert torch.equal(bits(x), bits(before))


@pytest.mark.parametrize("dtype", BFP)
def test_fast_path_matches_integer_model(dtype):
    # The float fast path against the integer replica of the C++ on 2M values spanning the
    # whole exponent range (ttnn is checked on smaller samples above).
    g = torch.Generator().manual_seed(9)
    raw = torch.randint(-(1 << 31), 1 << 31, (1 << 17, 16), generator=g, dtype=torch.int64)
    # bias groups towards realistic spreads: every group's exponents within 0..40 of each other
    expo = torch.randint(24, 255, (1 << 17, 1), generator=g) - torch.randint(0, 40, (1 << 17, 16), generator=g)
    raw = (raw & ~(0xFF << 23)) | (expo.clamp(min=0) << 23)
    x = raw.to(torch.int32).view(torch.float32)
    exact = formats._bfp_groups_exact(bits(x), formats._BFP_MANTISSA_BITS[dtype])
    assert torch.equal(bits(quantize_2d(x, dtype)), exact)


@pytest.mark.parametrize("dtype", BFP)
def test_zero_and_subnormal_groups_take_the_fast_path_exactly(dtype):
    # groups whose largest exponent field is 0 (zero padding, +-0, subnormals) are not sent to
    # the integer model; they must still give what it gives (all +0.0), alone or next to others
    g = torch.Generator().manual_seed(10)
    sub = torch.randint(0, 1 << 23, (64, 16), generator=g, dtype=torch.int32)
    sub |= torch.randint(0, 2, (64, 16), generator=g, dtype=torch.int32) << 31       # random signs
    rows = torch.cat([sub, torch.zeros(8, 16, dtype=torch.int32),
                      torch.full((8, 16), -(1 << 31), dtype=torch.int32),
                      bits(torch.randn(8, 16, generator=g))])
    x = rows.view(torch.float32)
    exact = formats._bfp_groups_exact(rows, formats._BFP_MANTISSA_BITS[dtype])
    assert torch.equal(bits(quantize_2d(x, dtype)), exact)
    assert torch.equal(bits(formats.quantize_owned_(x.clone(), dtype)), exact)


def test_quantize_owned_writes_in_place_and_matches():
    x = wide_range((6, 64), seed=11)
    for dtype in ALL:
        y = x.clone()
        out = formats.quantize_owned_(y, dtype)
        assert torch.equal(bits(out), bits(quantize(x, dtype)))
        assert out.data_ptr() == y.data_ptr()


def test_quantize_2d_matches_quantize():
    x = wide_range((3, 5, 48), seed=6)
    for dtype in ALL:
        assert torch.equal(bits(quantize_2d(x.reshape(15, 48), dtype)),
                           bits(quantize(x, dtype).reshape(15, 48)))


def test_dtype_helpers_and_errors():
    assert set(formats.SUPPORTED_DTYPES) == set(ALL) == set(formats.supported_dtypes())
    assert [d for d in ALL if formats.is_block_float(d)] == BFP
    for dt in ALL:  # every supported name is a real ttnn DataType
        assert isinstance(getattr(ttnn, dt), ttnn.DataType)
    with pytest.raises(Error, match="bfloat8"):
        quantize(torch.zeros(2, 2), "bfloat8")
    with pytest.raises(Error, match="uint8"):
        formats.is_block_float("uint8")
    with pytest.raises(Error, match="rows, cols"):
        quantize_2d(torch.zeros(2, 2, 2), "bfloat16")
    with pytest.raises(Error, match="torch.Tensor"):
        quantize([1.0, 2.0], "bfloat16")


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 40), (2, 0, 5)], ids=str)
def test_empty_tensors_keep_their_shape(dtype, shape):
    got = quantize(torch.zeros(shape), dtype)
    assert got.shape == shape and got.dtype == torch.float32
