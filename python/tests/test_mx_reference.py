"""Tests of mx_reference, the numpy MXFP8 (E4M3) oracle.

Cross-checks: ml_dtypes.float8_e4m3fn / float8_e8m0fnu for the element and
scale encodings, and an independent scalar implementation in plain Python
(math.frexp for the scale, fractions.Fraction and a search over the E4M3
value list for the rounding) for whole blocks.
"""

import bisect
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import mx_reference as mx

F32 = np.float32


def f32_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def block_of(*vals, fill=0.0):
    """One 32-element float32 block starting with vals, the rest `fill`."""
    b = np.full(32, fill, dtype=F32)
    b[: len(vals)] = np.asarray(vals, dtype=F32)
    return b


def quant1(block):
    codes, scale = mx.quantize_mx(np.asarray(block, dtype=F32)[None, :], axis=1)
    assert codes.shape == (1, 32) and scale.shape == (1, 1)
    assert codes.dtype == np.uint8 and scale.dtype == np.uint8
    return codes[0], int(scale[0, 0])


# ---------------------------------------------------------------------------
# The independent scalar reference (plain Python)
# ---------------------------------------------------------------------------

# Non-negative finite E4M3 values; index == code (0x00 .. 0x7E).
PY_E4M3 = [
    Fraction(c & 7, 512) if (c >> 3) == 0 else Fraction(8 + (c & 7), 8) * Fraction(2) ** ((c >> 3) - 7)
    for c in range(0x7F)
]
assert PY_E4M3[0x7E] == 448 and PY_E4M3[1] == Fraction(1, 512) and PY_E4M3[8] == Fraction(1, 64)


def py_round_e4m3(v):
    """Code magnitude of exact v >= 0: nearest E4M3 value, ties to the even
    code (even mantissa), saturating at 448."""
    if v >= 448:
        return 0x7E
    i = bisect.bisect_left(PY_E4M3, v)
    if PY_E4M3[i] == v:
        return i
    lo, hi = i - 1, i
    dlo, dhi = v - PY_E4M3[lo], PY_E4M3[hi] - v
    if dlo < dhi:
        return lo
    if dhi < dlo:
        return hi
    return lo if lo % 2 == 0 else hi


def py_is_tie(v):
    """Whether exact v >= 0 lies exactly halfway between two E4M3 values."""
    i = bisect.bisect_left(PY_E4M3, v)
    if v >= 448 or PY_E4M3[i] == v:
        return False
    return v - PY_E4M3[i - 1] == PY_E4M3[i] - v


def py_quantize_block(vals):
    """(codes, scale) of one block of Python floats, element by element."""
    if any(math.isnan(v) or math.isinf(v) for v in vals):
        return [0x7F] * len(vals), 0xFF
    amax = max(abs(v) for v in vals)
    if amax == 0.0:
        s = -127
    else:
        _, e = math.frexp(amax)  # amax = m * 2^e, 0.5 <= m < 1
        s = max(e - 1 - 8, -127)
    assert s <= 127
    codes = []
    for v in vals:
        neg = math.copysign(1.0, v) < 0
        mag = py_round_e4m3(abs(Fraction(v)) / Fraction(2) ** s)
        codes.append((0x80 if neg else 0) | mag)
    return codes, s + 127


def test_the_scalar_reference_itself():
    # A few hand-checked answers, so the oracle's oracle can fail too.
    assert py_round_e4m3(Fraction(464)) == 0x7E
    assert py_round_e4m3(Fraction(1, 1024)) == 0  # tie between 0 and 2^-9: even
    assert py_round_e4m3(Fraction(3, 1024)) == 2  # tie between 1 and 2 (x 2^-9)
    assert py_round_e4m3(Fraction(17, 16)) == 0x38  # 1.0625 ties down to 1.0
    assert py_round_e4m3(Fraction(19, 16)) == 0x3A  # 1.1875 ties up to 1.25
    assert py_quantize_block([0.0] * 32) == ([0] * 32, 0)
    assert py_quantize_block([448.0] + [1.0] * 31) == ([0x7E] + [0x38] * 31, 127)


# ---------------------------------------------------------------------------
# Element encoding against ml_dtypes
# ---------------------------------------------------------------------------


def _dense_f32_sweep():
    """float32 values of |x| < 512: every sign, exponent field 0..135 and top
    8 mantissa bits, with low 15 bits at the patterns where E4M3 rounding can
    turn (its rounding point is bit 19 or above), plus every E4M3 value,
    every midpoint between neighbours and the float32 values either side."""
    sign = np.arange(2, dtype=np.uint32)[:, None, None, None] << 31
    exp = np.arange(136, dtype=np.uint32)[None, :, None, None] << 23
    top = np.arange(256, dtype=np.uint32)[None, None, :, None] << 15
    low = np.array([0, 1, 0x3FFF, 0x4000, 0x4001, 0x7FFF], dtype=np.uint32)[None, None, None, :]
    grid = f32_bits((sign | exp | top | low).ravel())

    pos = np.array([float(v) for v in PY_E4M3], dtype=np.float64)
    mids = ((pos[:-1] + pos[1:]) / 2).astype(F32)  # exact: 5 significant bits
    near = np.concatenate(
        [pos.astype(F32), mids, np.nextafter(mids, F32(0)), np.nextafter(mids, F32(np.inf))]
    )
    near = np.concatenate([near, -near])
    return np.concatenate([grid, near])


def test_e4m3_encoding_matches_ml_dtypes_on_a_dense_sweep_within_448():
    x = _dense_f32_sweep()
    x = x[np.abs(x) <= 448]
    assert x.size > 200_000
    got = mx.encode_e4m3(x)
    want = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), int(got[i]), int(want[i])) for i in bad[:10]]
    # The sweep reaches every finite code, both signs.
    assert set(np.unique(got).tolist()) == set(range(256)) - {0x7F, 0xFF}


def test_e4m3_encoding_matches_ml_dtypes_on_random_float32_within_448():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    x = f32_bits(bits)
    x = x[np.isfinite(x) & (np.abs(x) <= 448)]
    # Half the patterns are tiny; add uniformly spread magnitudes as well.
    x = np.concatenate([x, (rng.uniform(-448, 448, size=1 << 18)).astype(F32)])
    got = mx.encode_e4m3(x)
    want = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(got, want)


def test_every_bfloat16_value_matches_ml_dtypes_without_saturation():
    # Every bf16 bit pattern (as float32), the whole range: non-saturating
    # mode is what ml_dtypes does (beyond 464 and +-Inf -> NaN, sign kept).
    x = f32_bits(np.arange(1 << 16, dtype=np.uint32) << 16)
    got = mx.encode_e4m3(x, saturate=False)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(got, want)
    # And the saturating mode agrees wherever ml_dtypes does not give NaN.
    finite = (np.abs(x) <= 448) | np.isnan(x)
    assert np.array_equal(mx.encode_e4m3(x)[finite], want[finite])


def test_saturation_beyond_448():
    x = np.array([448.0, 449.0, 464.0, 464.00003, 479.0, 480.0, 511.9, 1e6, 3.4e38, np.inf], F32)
    assert mx.encode_e4m3(x).tolist() == [0x7E] * 10
    assert mx.encode_e4m3(-x).tolist() == [0xFE] * 10
    assert mx.encode_e4m3(x, saturate=False).tolist() == [0x7E] * 3 + [0x7F] * 7
    # ml_dtypes does not saturate: the difference the saturating test covers.
    assert x[3:].astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tolist() == [0x7F] * 7
    nan = f32_bits([0x7FC00000, 0xFFC00000, 0x7F800001])
    assert mx.encode_e4m3(nan).tolist() == [0x7F, 0xFF, 0x7F]


def test_decoders_match_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8)
    ours = mx.decode_e4m3(codes)
    theirs = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.isnan(ours).sum() == 2 and np.isnan(ours[[0x7F, 0xFF]]).all()
    ok = ~np.isnan(ours)
    assert np.array_equal(ours[ok], theirs[ok])
    assert np.array_equal(np.signbit(ours[ok]), np.signbit(theirs[ok]))
    assert ours[0x7E] == 448 and ours[0x01] == 2.0**-9 and ours[0x08] == 2.0**-6
    # E8M0 scale: 2^(e - 127), 0xFF NaN.
    s_ours = mx.decode_e8m0(codes)
    s_theirs = codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    assert np.isnan(s_ours[255]) and np.isnan(s_theirs[255])
    assert np.array_equal(s_ours[:255], s_theirs[:255])
    assert s_ours[0] == 2.0**-127 and s_ours[127] == 1.0 and s_ours[254] == 2.0**127


def test_encode_then_decode_is_the_identity_on_codes():
    codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], np.uint8)
    vals = mx.decode_e4m3(codes).astype(F32)
    assert np.array_equal(mx.encode_e4m3(vals), codes)


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

FINITE_CODES = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)


def test_round_trip_codes_and_scales_are_reproduced_exactly():
    # Blocks whose largest element sits in E4M3's top binade (exponent field
    # 15, mantissa 0..6) quantize back to the very same codes and scale.
    rng = np.random.default_rng(11)
    nblk = 400
    codes = rng.choice(FINITE_CODES, size=(nblk, 32))
    top = (0x78 + rng.integers(0, 7, size=nblk)) | (rng.integers(0, 2, size=nblk) << 7)
    where = rng.integers(0, 32, size=nblk)
    codes[np.arange(nblk), where] = top
    scales = rng.integers(0, 247, size=(nblk, 1)).astype(np.uint8)
    scales[:3, 0] = [0, 1, 246]  # the ends float32 can hold exactly
    x = mx.dequantize_mx(codes, scales, axis=1)
    assert x.dtype == np.float32 and np.all(np.isfinite(x))
    c2, s2 = mx.quantize_mx(x, axis=1)
    assert np.array_equal(s2, scales)
    assert np.array_equal(c2, codes)


def test_round_trip_values_are_exact_for_representable_inputs():
    # Any finite codes and scale: the values come back exactly (bits,
    # including -0), unless the block maximum has mantissa 111 below the top
    # binade (1.875 * 2^k would become 480, past 448), which is excluded.
    rng = np.random.default_rng(12)
    nblk = 600
    codes = rng.choice(FINITE_CODES, size=(nblk, 32))
    mag = codes & 0x7F
    top = mag.max(axis=1, keepdims=True)
    fix = (top & 7) == 7
    codes = np.where(fix & (mag == top), codes - 1, codes).astype(np.uint8)
    codes[:5] &= 0x80  # a few all-zero blocks, signed zeros
    scales = rng.integers(0, 247, size=(nblk, 1)).astype(np.uint8)
    x = mx.dequantize_mx(codes, scales, axis=1)
    c2, s2 = mx.quantize_mx(x, axis=1)
    back = mx.dequantize_mx(c2, s2, axis=1)
    assert np.array_equal(back.view(np.uint32), x.view(np.uint32))
    # Scales only ever move down (more precision), never up.
    assert np.all(s2 <= scales)
    assert np.any(s2 < scales)


def test_quantize_along_other_axes_and_shapes():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 64, 5)) * 100).astype(F32)
    c1, s1 = mx.quantize_mx(x, axis=1)
    assert c1.shape == x.shape and s1.shape == (3, 2, 5)
    ct, st = mx.quantize_mx(np.moveaxis(x, 1, -1), axis=-1)
    assert np.array_equal(np.moveaxis(ct, -1, 1), c1)
    assert np.array_equal(np.moveaxis(st, -1, 1), s1)
    c16, s16 = mx.quantize_mx(x, axis=1, block=16)
    assert s16.shape == (3, 4, 5)
    # Each 32-block's scale is the larger of its two 16-block scales.
    assert np.array_equal(s1, np.maximum(s16[:, 0::2], s16[:, 1::2]))
    y = mx.dequantize_mx(c1, s1, axis=1)
    assert y.shape == x.shape
    # E4M3 keeps 4 significant bits: relative error at most 2^-4 between
    # the smallest normal and the largest value (times X); beyond 448 * X
    # the block's top elements saturate.
    xs = np.ldexp(1.0, s1.astype(np.int64).repeat(32, axis=1) - 127)
    normal = (np.abs(x) >= xs * 2.0**-6) & (np.abs(x) <= xs * 448)
    assert normal.mean() > 0.9
    assert np.all(np.abs(y - x)[normal] <= np.abs(x)[normal] * 2.0**-4)
    sat = np.abs(x) > xs * 448
    assert np.all(np.abs(y[sat]) == xs[sat] * 448)


def test_axis_length_must_be_a_multiple_of_the_block():
    with pytest.raises(ValueError, match="multiple"):
        mx.quantize_mx(np.zeros((2, 48), F32), axis=1)
    with pytest.raises(ValueError, match="multiple"):
        mx.quantize_mx(np.zeros((31,), F32), axis=0)
    with pytest.raises(ValueError):
        mx.quantize_mx(np.zeros((4, 32), F32), axis=2)
    with pytest.raises(ValueError):
        mx.dequantize_mx(np.zeros((2, 64), np.uint8), np.zeros((2, 1), np.uint8), axis=1)
    with pytest.raises(ValueError):
        mx.quantize_mx(np.array([0.1] * 32, np.float64), axis=0)  # not exact in f32
    # float64 that is exactly float32 is accepted.
    c, s = mx.quantize_mx(np.array([0.5] * 32, np.float64), axis=0)
    assert s.tolist() == [126 - 8] and c.tolist() == [0x78] * 32


# ---------------------------------------------------------------------------
# Edge blocks
# ---------------------------------------------------------------------------


def test_all_zero_block_takes_the_smallest_scale():
    codes, scale = quant1(np.zeros(32, F32))
    assert scale == 0x00 and codes.tolist() == [0] * 32
    b = np.zeros(32, F32)
    b[::2] = -0.0
    codes, scale = quant1(b)
    assert scale == 0x00 and codes.tolist() == [0x80, 0x00] * 16
    y = mx.dequantize_mx(codes[None], np.array([[scale]], np.uint8), axis=1)[0]
    assert np.all(y == 0) and np.array_equal(np.signbit(y), np.signbit(b))


@pytest.mark.parametrize(
    "amax, scale, code",
    [
        (448.0, 127, 0x7E),  # floor(log2 448) = 8: X = 1
        (256.0, 127, 0x78),  # exactly 2^8: X = 1, top binade's first value
        (512.0, 128, 0x78),  # exactly 2^9: X = 2, 512 / 2 = 256
        (1.0, 119, 0x78),  # 2^0: X = 2^-8
        (480.0, 127, 0x7E),  # 480 is no E4M3 value: saturates
        (500.0, 127, 0x7E),
        (463.99997, 127, 0x7E),  # just below the 448 / 480 midpoint
        (np.float32(1023.99994), 128, 0x7E),  # largest f32 below 2^10: X = 2, not 4
        (np.float32(3.4028235e38), 127 + 119, 0x7E),  # largest f32
    ],
)
def test_block_amax_at_and_near_powers_of_two(amax, scale, code):
    codes, s = quant1(block_of(amax, -amax, amax / 2))
    assert s == scale
    assert codes[0] == code and codes[1] == code | 0x80
    assert codes[3:].tolist() == [0] * 29


def test_subnormal_elements():
    # amax 1.0 -> X = 2^-8; E4M3 subnormal step 2^-9 is 2^-17 before scaling.
    t = 2.0**-17
    vals = [1.0, t, 2 * t, 7 * t, 8 * t, 0.5 * t, 1.5 * t, 2.5 * t, 0.5 * t * (1 + 2.0**-20), -t, -0.25 * t, 7.5 * t]
    codes, s = quant1(block_of(*vals))
    assert s == 119
    assert codes[: len(vals)].tolist() == [
        0x78,  # 1.0 / 2^-8 = 256
        0x01,  # min subnormal 2^-9
        0x02,
        0x07,  # max subnormal 7 * 2^-9
        0x08,  # min normal 2^-6
        0x00,  # half of min subnormal: tie, to even (0)
        0x02,  # 1.5: tie, to even (2)
        0x02,  # 2.5: tie, to even (2)
        0x01,  # just above half: up
        0x81,
        0x80,  # -0.25 step: rounds to -0
        0x08,  # 7.5: tie between 7 (0x07) and 8 (0x08): even code
    ]
    y = mx.dequantize_mx(codes[None], np.array([[s]], np.uint8), axis=1)[0]
    assert y[1] == t and y[3] == 7 * t and y[4] == 8 * t


def test_one_huge_and_many_tiny():
    # amax 2^20 -> X = 2^12; tiny elements land on 2^-9 * 2^12 = 8 steps.
    vals = [2.0**20, 4.0, 4.0 * (1 + 2.0**-20), 8.0, 1.0, 12.0, 2.0**-30, -4.0, -8.0, 1e-45]
    codes, s = quant1(block_of(*vals))
    assert s == 127 + 12
    assert codes[: len(vals)].tolist() == [0x78, 0x00, 0x01, 0x01, 0x00, 0x02, 0x00, 0x80, 0x81, 0x00]
    assert codes[len(vals) :].tolist() == [0] * (32 - len(vals))


def test_float32_subnormal_amax_and_scale_below_e8m0_range():
    # amax below 2^-119: shared_exp clamps at -127 (code 0), and float32
    # subnormal elements are not flushed: V * 2^127 rounds as usual.
    cases = [
        (2.0**-126, 0x40),  # smallest normal f32 -> 2.0
        (2.0**-127, 0x38),  # f32 subnormal -> 1.0
        (2.0**-130, 0x20),  # -> 2^-3
        (2.0**-136, 0x01),  # -> 2^-9
        (2.0**-137, 0x00),  # -> 2^-10, ties to 0
        (3 * 2.0**-138, 0x01),  # -> 0.75 * 2^-9
        (float(f32_bits(0x007FFFFF)), 0x40),  # largest f32 subnormal -> 2 - 2^-22 -> 2.0
        (2.0**-149, 0x00),
    ]
    for v, code in cases:
        codes, s = quant1(block_of(v))
        assert s == 0, v
        assert codes[0] == code, (v, codes[0])
    codes, s = quant1(block_of(2.0**-120, 2.0**-130))
    assert s == 0 and codes[:2].tolist() == [0x70, 0x20]  # 128 and 2^-3
    codes, s = quant1(block_of(2.0**-119, 2.0**-131))
    assert s == 0 and codes[:2].tolist() == [0x78, 0x18]  # no clamp needed: 256, 2^-4
    codes, s = quant1(block_of(2.0**-118))
    assert s == 1 and codes[0] == 0x78


@pytest.mark.parametrize("bad", [np.nan, -np.nan, np.inf, -np.inf])
def test_nan_or_inf_makes_the_block_nan(bad):
    x = np.ones((3, 32), F32)
    x[1, 5] = bad
    codes, scale = mx.quantize_mx(x, axis=1)
    assert scale[:, 0].tolist() == [119, 0xFF, 119]
    assert codes[1].tolist() == [0x7F] * 32
    assert codes[0].tolist() == [0x78] * 32 and codes[2].tolist() == [0x78] * 32  # 1 / 2^-8 = 256
    y = mx.dequantize_mx(codes, scale, axis=1)
    assert np.all(np.isnan(y[1])) and np.all(y[[0, 2]] == 1)


def test_nan_scale_dequantizes_to_nan_whatever_the_codes():
    codes = np.zeros((1, 32), np.uint8)
    y = mx.dequantize_mx(codes, np.array([[0xFF]], np.uint8), axis=1)
    assert np.all(np.isnan(y))


# ---------------------------------------------------------------------------
# Random blocks against the scalar reference
# ---------------------------------------------------------------------------


def _random_blocks(rng):
    blocks = []
    # Gaussian blocks over the whole exponent range (float32 subnormal up).
    for e in rng.integers(-160, 121, size=120):
        blocks.append(rng.standard_normal(32) * 2.0 ** float(e))
    # Heavy tails: per-element exponents spread over 40 binades.
    for e in rng.integers(-130, 90, size=60):
        blocks.append(rng.choice([-1, 1], 32) * rng.random(32) * 2.0 ** (float(e) + rng.integers(0, 40, 32)))
    # Random bit patterns (finite), any magnitudes.
    for _ in range(40):
        b = f32_bits(rng.integers(0, 2**32, size=32, dtype=np.uint64).astype(np.uint32))
        blocks.append(np.where(np.isfinite(b), b, 0))
    # Exact ties: an anchor fixing X = 2^s, the rest midpoints between
    # neighbouring E4M3 values (times X), with zeros and -0 mixed in.
    pos = np.array([float(v) for v in PY_E4M3])
    mids = (pos[:-1] + pos[1:]) / 2
    for s in rng.integers(-127, 110, size=60):
        b = rng.choice(mids, 32) * rng.choice([-1.0, 1.0], 32)
        b[rng.integers(0, 32)] = 448.0 * rng.choice([-1.0, 1.0])
        b[rng.integers(0, 32, 3)] = rng.choice([0.0, -0.0])
        blocks.append(b * 2.0 ** float(s))
    # bf16-valued blocks (low 16 bits cleared), the common input.
    for e in rng.integers(-100, 100, size=40):
        b = (rng.standard_normal(32) * 2.0 ** float(e)).astype(F32)
        blocks.append(f32_bits(b.view(np.uint32) & 0xFFFF0000))
    x = np.stack([np.asarray(b, dtype=np.float64).astype(F32) for b in blocks])
    assert np.all(np.isfinite(x))
    return x


def test_random_blocks_match_the_scalar_reference():
    rng = np.random.default_rng(2024)
    x = _random_blocks(rng)
    # Blocks laid along axis 0 here, to exercise the axis handling too.
    codes_t, scale_t = mx.quantize_mx(np.ascontiguousarray(x.T), axis=0)
    codes, scale = codes_t.T, scale_t.T[:, 0]
    y = mx.dequantize_mx(codes_t, scale_t, axis=0).T
    seen_sub = seen_tie = 0
    for i in range(x.shape[0]):
        vals = [float(v) for v in x[i]]
        want_codes, want_scale = py_quantize_block(vals)
        assert int(scale[i]) == want_scale, (i, vals)
        assert codes[i].tolist() == want_codes, (i, vals)
        # Dequantized values: exact.
        for j, c in enumerate(want_codes):
            sign = -1 if c & 0x80 else 1
            exact = sign * PY_E4M3[c & 0x7F] * Fraction(2) ** (want_scale - 127)
            assert Fraction(float(y[i, j])) == exact
        seen_sub += sum(1 for c in want_codes if 0 < (c & 0x7F) < 8)
        seen_tie += sum(1 for v in vals if py_is_tie(abs(Fraction(v)) / Fraction(2) ** (want_scale - 127)))
    # The sample really covers subnormal results and exact ties.
    assert seen_sub > 100 and seen_tie > 1000, (seen_sub, seen_tie)
    assert len(set(scale.tolist())) > 100 and 0 in scale.tolist()


# ---------------------------------------------------------------------------
# mx_dot
# ---------------------------------------------------------------------------


def _representable(rng, shape, axis, scale_lo=120, scale_hi=134):
    """float32 values that MX-quantize (blocks along axis) exactly, with
    scales in a narrow range so float64 sums of their products are exact."""
    x = np.moveaxis(np.zeros(shape, F32), axis, -1)
    codes = rng.choice(FINITE_CODES, size=x.shape)
    codes[..., ::32] = 0x78 + rng.integers(0, 7, size=codes[..., ::32].shape)
    scales = rng.integers(scale_lo, scale_hi, size=x.shape[:-1] + (x.shape[-1] // 32,)).astype(np.uint8)
    vals = mx.dequantize_mx(codes, scales, axis=-1)
    return np.ascontiguousarray(np.moveaxis(vals, -1, axis))


def test_mx_dot_is_exact_on_representable_inputs():
    rng = np.random.default_rng(5)
    a = _representable(rng, (3, 64), axis=1)
    b = _representable(rng, (64, 5), axis=0)
    got = mx.mx_dot(a, b)
    assert got.dtype == np.float64 and got.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            exact = sum(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) for k in range(64))
            assert Fraction(float(got[i, j])) == exact


def test_mx_dot_quantizes_along_the_contracting_axes():
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((4, 64)) * 3).astype(F32)
    b = (rng.standard_normal((64, 6)) * 3).astype(F32)
    qa = mx.dequantize_mx(*mx.quantize_mx(a, 1), axis=1, dtype=np.float64)
    qb = mx.dequantize_mx(*mx.quantize_mx(b, 0), axis=0, dtype=np.float64)
    want = qa @ qb
    np.testing.assert_allclose(mx.mx_dot(a, b), want, rtol=1e-13, atol=0)
    # Transposed operands, contracting dims given explicitly: same numbers.
    np.testing.assert_allclose(mx.mx_dot(a.T, b.T, lhs_contracting=0, rhs_contracting=1), want, rtol=1e-13, atol=0)
    # A row of 2^20 next to rows of ones: blocks along K keep the ones;
    # blocks along M (the wrong axis) would flush them to zero.
    m = np.ones((32, 32), F32)
    m[0] = 2.0**20
    ones = np.ones((32, 1), F32)
    got = mx.mx_dot(m, ones)
    assert got[0, 0] == 32 * 2.0**20 and np.all(got[1:, 0] == 32)
    wrong = mx.dequantize_mx(*mx.quantize_mx(m, 0), axis=0, dtype=np.float64)
    assert np.all(wrong[1:] == 0)


def test_mx_dot_with_batch_dimensions():
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((2, 4, 64))).astype(F32)
    b = (rng.standard_normal((64, 2, 3))).astype(F32)
    got = mx.mx_dot(a, b, lhs_contracting=2, rhs_contracting=0, lhs_batch=(0,), rhs_batch=(1,))
    assert got.shape == (2, 4, 3)
    for n in range(2):
        np.testing.assert_allclose(got[n], mx.mx_dot(a[n], b[:, n, :]), rtol=1e-13, atol=0)
    with pytest.raises(ValueError):
        mx.mx_dot(a, b[:32], lhs_contracting=2, rhs_contracting=0)
