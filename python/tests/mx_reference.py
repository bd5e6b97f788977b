"""Bit-exact numpy reference of OCP Microscaling (MX) v1.0 MXFP8 with E4M3
elements ("float8_e4m3fn" in XLA / ml_dtypes naming), for use as a test oracle.

Nothing here rounds in floating point: the encode step takes float32 inputs
apart into sign, integer significand and exponent and rounds with integer
shifts. ml_dtypes is not imported (the tests use it only as a cross-check).

The format (OCP MX v1.0):

* Block (section 5.1): k = 32 elements P_1..P_k of one element type share one
  scale X; element i stands for X * P_i. A NaN scale makes every value of the
  block NaN, whatever the P_i.
* Element type E4M3 (sections 5.3 / 5.3.1, which defer to the OCP 8-bit
  floating point spec, OFP8 v1.0): bias 7, no infinities, NaN = S.1111.111
  (0x7F / 0xFF), largest normal S.1111.110 = 448, smallest normal 2^-6,
  subnormals (exponent field 0) down to 2^-9. emax_elem = 8.
* Scale type E8M0 (section 5.4.1): unsigned biased exponent, bias 127, byte e
  means 2^(e - 127) for e = 0..254 (so 0x00 is 2^-127; there is no zero), 0xFF
  is NaN, no infinities.
* Conversion (section 6.3, the spec's "minimally supported" algorithm, which
  is Algorithm 1 of Rouhani et al., arXiv:2310.10537):
    1. shared_exp = floor(log2(max_i |V_i|)) - emax_elem; X = 2^shared_exp
       ("the largest power of two less than or equal to max |V_i|, divided by
       the largest power of two representable in the element data type").
    2. P_i = quantize_to_element_format(V_i / X), "clamping normal numbers":
       a finite value beyond the element type's largest magnitude saturates
       to +-448 keeping its sign (it never becomes NaN). Round to nearest,
       ties to even (roundTiesToEven is the mode the spec requires).

Rules this module implements, including the cases the spec leaves open:

* Scale: floor(log2(amax)) is taken exactly from the float32 bits (the
  exponent field, or the bit length of a subnormal's significand), never from
  a floating-point log2.
* All-zero block (+0 or -0 only): no power of two is <= 0, so the spec is
  silent. Following the reference code (microxcaling adds FP32_MIN_NORMAL
  before log2, giving -126 - 8, clamped; torchao reads exponent field 0;
  gfloat returns 2^-127 outright) the scale is the smallest one: E8M0 code
  0x00 (2^-127). Elements keep their sign: +0 -> 0x00, -0 -> 0x80.
* shared_exp below -127 (amax < 2^-119, including every float32-subnormal
  amax) is clamped to -127, code 0x00, as in the reference code (E8M0's range
  is -127..127). The elements are then V_i * 2^127 rounded as usual: float32
  subnormal inputs are NOT flushed (microxcaling's mx_flush_fp32_subnorms
  defaults to False).
* shared_exp above 127 would be a NaN scale (reference code); a finite float32
  amax gives at most 127 - 8 = 119 (code 246), so it cannot happen here.
* NaN anywhere in a block: the block's amax is NaN, the scale is NaN (0xFF).
* +-Inf anywhere in a block: floor(log2(Inf)) is not representable in E8M0,
  which has no infinity, so the scale is NaN (0xFF) as well. Both reference
  implementations do this (microxcaling: log2(Inf) - emax > scale_emax -> NaN;
  torchao: scale 0xFF when amax is not finite). The spec's own remark is only
  that Infs and NaNs are "not clamped" to the element's largest value.
* Element codes of a NaN-scale block are don't-care by section 5.1; this
  module writes 0x7F (E4M3 NaN) into every one of them.
* Subnormal elements: a scaled value below 2^-6 rounds onto the subnormal grid
  of step 2^-9; below 2^-10 it rounds to (signed) zero, exactly 2^-10 ties to
  zero (even), above it to 2^-9.

Where the sources differ (this module follows the spec's wording):

* microxcaling's default round="nearest" is floor(|x| + 0.5), ties AWAY from
  zero; its round="even" is ties to even, which is what is implemented here.
* microxcaling (PyTorch path) computes floor(log2(amax)) with a float32 log2,
  which rounds up to the next integer for the largest float32 values below a
  power of two 2^k, k >= 4 (e.g. 1023.99994 gets scale exponent 10 - 8
  instead of 9 - 8). Here the exponent is exact.
* torchao's to_mx (ScaleCalculationMode.FLOOR) reads the float32 exponent
  field: identical to the rule here for normal amax; for subnormal amax it
  gives -127 - 8, clamped to -127, the same result as here after the clamp.
  Its scale is also NaN for Inf or NaN in a block.

Sources: OCP Microscaling Formats (MX) v1.0 specification,
https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf
(section numbers as cited by torchao's mx_tensor.py and by a public
third-party note that quotes the text); OCP OFP8 v1.0 for E4M3;
github.com/microsoft/microxcaling mx/mx_ops.py (_shared_exponents,
_quantize_mx), mx/elemwise_ops.py (_quantize_elemwise_core, _round_mantissa),
mx/formats.py (fp8_e4m3: emax 8, max_norm 448); github.com/pytorch/ao
torchao/prototype/mx_formats/mx_tensor.py (to_mx);
github.com/graphcore-research/gfloat src/gfloat/block.py (compute_scale_amax).
"""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

BLOCK = 32
E4M3_EMAX = 8  # exponent of the largest normal, 448 = 1.75 * 2^8
E4M3_MAX = 448.0
E4M3_MAX_CODE = 0x7E  # S.1111.110
E4M3_NAN_CODE = 0x7F  # S.1111.111
E8M0_BIAS = 127
E8M0_NAN = 0xFF
SCALE_EXP_MIN = -127
SCALE_EXP_MAX = 127

# Far below any real exponent; stands for log2(0) in block maxima.
_NEG_EXP = -(1 << 20)


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2^32, by integer shifts."""
    v = v.copy()
    n = np.zeros_like(v)
    for shift in (16, 8, 4, 2, 1):
        big = v >= (1 << shift)
        n += np.where(big, shift, 0)
        v = np.where(big, v >> shift, v)
    return n + (v > 0)


def _f32_fields(x32: np.ndarray):
    """Split float32 values into exact integer parts.

    Returns (sign, sig, e2, flog2, zero, special): |x| = sig * 2^e2 with sig an
    integer < 2^24, flog2 = floor(log2 |x|) for finite non-zero x, zero marks
    +-0, special marks Inf and NaN.
    """
    u = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (u >> 31) & 1
    efield = (u >> 23) & 0xFF
    mfield = u & 0x7FFFFF
    normal = efield > 0
    sig = np.where(normal, mfield | 0x800000, mfield)
    e2 = np.where(normal, efield - 150, -149)
    flog2 = np.where(normal, efield - 127, _bit_length(mfield) - 1 - 149)
    zero = (efield == 0) & (mfield == 0)
    special = efield == 0xFF
    return sign, sig, e2, flog2, zero, special


def _encode_scaled(
    sign: np.ndarray,
    sig: np.ndarray,
    e2: np.ndarray,
    flog2: np.ndarray,
    s: np.ndarray,
    saturate: bool = True,
) -> np.ndarray:
    """E4M3 code of (-1)^sign * sig * 2^(e2 - s), round to nearest even.

    Finite magnitudes beyond 448 give +-448 when saturate, else NaN (0x7F).
    Only finite inputs; sig == 0 gives a signed zero.
    """
    # Binade of the scaled value, floored at E4M3's smallest normal exponent:
    # below 2^-6 the grid is the subnormal one, 2^-9 apart.
    k = np.maximum(flog2 - s, -6)
    ulp = k - 3  # three mantissa bits
    t = np.where(sig == 0, 0, e2 - s - ulp)  # q = sig * 2^t, before rounding
    # t >= 0 only when the value has at most 4 significant bits at this grid,
    # so q < 16 and the left shift is small.
    q_left = sig << np.clip(t, 0, 40)
    r = np.clip(-t, 0, 40)  # sig < 2^24: any r >= 25 already rounds to 0
    q_trunc = sig >> r
    rem = sig & ((np.int64(1) << r) - 1)
    half = np.where(r > 0, np.int64(1) << np.maximum(r - 1, 0), 0)
    up = (r > 0) & ((rem > half) | ((rem == half) & ((q_trunc & 1) == 1)))
    q = np.where(t >= 0, q_left, q_trunc + up)
    # For a normal result q is 8..16 and the code is (exponent field) * 8 +
    # (q - 8) = (k + 6) * 8 + q; for a subnormal one k = -6 and the code is q.
    # q == 16 (carry into the next binade) comes out right by the same sum.
    mag = (k + 6) * 8 + q
    over = mag > E4M3_MAX_CODE
    mag = np.where(over, E4M3_MAX_CODE if saturate else E4M3_NAN_CODE, mag)
    return ((sign << 7) | mag).astype(np.uint8)


def _as_f32(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == np.float32:
        return a
    if a.dtype == np.float64:
        a32 = a.astype(np.float32)
        same = (a32.astype(np.float64) == a) | (np.isnan(a) & np.isnan(a32))
        if not np.all(same):
            raise ValueError("quantize_mx takes float32 values; float64 input is not exact in float32")
        return a32
    # float16, ml_dtypes.bfloat16 and integers convert exactly (or are refused).
    return a.astype(np.float32)


def encode_e4m3(x: np.ndarray, saturate: bool = True) -> np.ndarray:
    """Round float32 values to E4M3 (OFP8 v1.0 E4M3, MX v1.0 section 5.3.1)
    codes, to nearest with ties to even, by integer arithmetic.

    saturate=True is the conversion MX uses (section 6.3, "clamping normal
    numbers"; OFP8's saturating mode): finite magnitudes beyond 448 give +-448
    and +-Inf gives +-448. saturate=False is OFP8's non-saturating mode, which
    is what ml_dtypes.float8_e4m3fn does: anything that rounds above 448, and
    +-Inf, gives NaN. NaN gives NaN (0x7F, or 0xFF when its sign bit is set).
    """
    x32 = _as_f32(x)
    sign, sig, e2, flog2, zero, special = _f32_fields(x32)
    sig = np.where(special, 0, sig)
    codes = _encode_scaled(sign, sig, e2, flog2, np.zeros_like(sig), saturate)
    isnan = np.isnan(x32).reshape(codes.shape)
    isinf = np.isinf(x32).reshape(codes.shape)
    inf_code = E4M3_MAX_CODE if saturate else E4M3_NAN_CODE
    codes = np.where(isinf, (sign << 7) | inf_code, codes)
    codes = np.where(isnan, (sign << 7) | E4M3_NAN_CODE, codes)
    return codes.astype(np.uint8).reshape(x32.shape)


def _e4m3_table() -> np.ndarray:
    c = np.arange(256, dtype=np.int64)
    sgn = np.where((c >> 7) == 1, -1.0, 1.0)
    e = (c >> 3) & 0xF
    m = c & 0x7
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), -9), np.ldexp((8 + m).astype(np.float64), e - 10))
    v = sgn * mag
    v[(e == 0xF) & (m == 0x7)] = np.nan
    return v


_E4M3_VALUES = _e4m3_table()


def decode_e4m3(codes: np.ndarray) -> np.ndarray:
    """E4M3 codes to exact float64 values (MX v1.0 section 5.3.1 / OFP8):
    S.0000.mmm = (-1)^S * mmm * 2^-9, S.eeee.mmm = (-1)^S * 1.mmm * 2^(eeee-7),
    S.1111.111 = NaN."""
    return _E4M3_VALUES[np.asarray(codes, dtype=np.uint8)]


def decode_e8m0(scale_exp: np.ndarray) -> np.ndarray:
    """E8M0 codes to exact float64 values (MX v1.0 section 5.4.1): 2^(e-127)
    for e = 0..254, NaN for 0xFF."""
    e = np.asarray(scale_exp, dtype=np.uint8).astype(np.int64)
    return np.where(e == E8M0_NAN, np.nan, np.ldexp(1.0, e - E8M0_BIAS))


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def quantize_mx(x: np.ndarray, axis: int, block: int = BLOCK) -> Tuple[np.ndarray, np.ndarray]:
    """Convert float32 values to MXFP8 E4M3 blocks (OCP MX v1.0 section 6.3).

    Blocks are `block` consecutive elements along `axis`, whose length must be
    a multiple of `block`. Per block:

    * scale: shared_exp = floor(log2(amax)) - 8, taken exactly from the bits;
      all-zero block -> shared_exp = -127; below -127 -> clamped to -127;
      any NaN or +-Inf in the block -> NaN scale. Stored as E8M0 (section
      5.4.1): shared_exp + 127, 0xFF = NaN.
    * elements: V_i / 2^shared_exp (exact) rounded to nearest even E4M3,
      subnormals kept, finite values beyond 448 saturated to +-448 (section
      6.3, "clamping normal numbers"). Every element of a NaN-scale block is
      written as 0x7F (don't-care under section 5.1).

    Returns (codes, scale_exp): uint8 arrays; codes has x's shape, scale_exp
    has x's shape with axis length divided by block.
    """
    x32 = _as_f32(x)
    if x32.ndim == 0:
        raise ValueError("quantize_mx needs at least one dimension")
    if not isinstance(block, (int, np.integer)) or block <= 0:
        raise ValueError(f"block must be a positive integer, got {block!r}")
    ax = _normalize_axis(axis, x32.ndim)
    n = x32.shape[ax]
    if n % block != 0:
        raise ValueError(f"axis {axis} has length {n}, not a multiple of the block size {block}")
    xm = np.moveaxis(x32, ax, -1)
    lead = xm.shape[:-1]
    xb = np.ascontiguousarray(xm).reshape(lead + (n // block, block))

    sign, sig, e2, flog2, zero, special = _f32_fields(xb)
    # floor(log2(amax)) is the largest floor(log2 |V_i|), log2 being monotone.
    exps = np.where(zero | special, _NEG_EXP, flog2)
    emax_blk = exps.max(axis=-1)
    all_zero = np.all(zero, axis=-1)
    nan_blk = np.any(special, axis=-1)
    s = np.where(all_zero, SCALE_EXP_MIN, emax_blk - E4M3_EMAX)
    s = np.maximum(s, SCALE_EXP_MIN)
    nan_blk = nan_blk | (s > SCALE_EXP_MAX)
    s = np.where(nan_blk, 0, s)
    scale = np.where(nan_blk, E8M0_NAN, s + E8M0_BIAS).astype(np.uint8)

    sig = np.where(special, 0, sig)
    codes = _encode_scaled(sign, sig, e2, flog2, s[..., None], saturate=True)
    codes = np.where(nan_blk[..., None], E4M3_NAN_CODE, codes).astype(np.uint8)

    codes = np.moveaxis(codes.reshape(lead + (n,)), -1, ax)
    scale = np.moveaxis(scale, -1, ax)
    return np.ascontiguousarray(codes), np.ascontiguousarray(scale)


def dequantize_mx(
    codes: np.ndarray,
    scale_exp: np.ndarray,
    axis: int,
    block: int = BLOCK,
    dtype: type = np.float32,
) -> np.ndarray:
    """MX block to values: X * P_i (OCP MX v1.0 section 5.1), with P_i decoded
    as E4M3 (section 5.3.1) and X = 2^(scale_exp - 127) as E8M0 (section
    5.4.1); a NaN scale (0xFF) makes the whole block NaN.

    The product is formed exactly in float64 and then cast to `dtype`. For
    float32 the cast is exact for every scale quantize_mx produces (codes up to
    246); larger scales can exceed float32's range and give +-Inf.
    """
    c = np.asarray(codes, dtype=np.uint8)
    sc = np.asarray(scale_exp, dtype=np.uint8)
    if c.ndim == 0:
        raise ValueError("dequantize_mx needs at least one dimension")
    ax = _normalize_axis(axis, c.ndim)
    n = c.shape[ax]
    if block <= 0 or n % block != 0:
        raise ValueError(f"axis {axis} has length {n}, not a multiple of the block size {block}")
    want = c.shape[:ax] + (n // block,) + c.shape[ax + 1 :]
    if sc.shape != want:
        raise ValueError(f"scale_exp has shape {sc.shape}, expected {want}")
    scale = np.repeat(decode_e8m0(sc), block, axis=ax)
    with np.errstate(over="ignore"):
        return (decode_e4m3(c) * scale).astype(dtype)


def mx_dot(
    lhs: np.ndarray,
    rhs: np.ndarray,
    lhs_contracting: int = -1,
    rhs_contracting: int = 0,
    lhs_batch: Sequence[int] = (),
    rhs_batch: Sequence[int] = (),
    block: int = BLOCK,
) -> np.ndarray:
    """Reference for a block-scaled (MXFP8 E4M3) dot: quantize lhs along its
    contracting axis and rhs along its contracting axis (OCP MX v1.0 section
    6.3; the scale is shared along the reduction dimension, as section 6.1's
    dot product of two MX vectors needs), dequantize both exactly (section
    5.1) and contract in float64.

    Output dimensions follow XLA's DotGeneral: batch dimensions (in lhs_batch
    order), then lhs's free dimensions, then rhs's, each in their order.
    Returns float64. The dequantized operands are exact; only the float64
    sum rounds, so a float32-accumulating implementation is compared within
    a float32 rounding bound of this.
    """
    a = np.asarray(lhs)
    b = np.asarray(rhs)
    lc = _normalize_axis(lhs_contracting, a.ndim)
    rc = _normalize_axis(rhs_contracting, b.ndim)
    lb = [_normalize_axis(i, a.ndim) for i in lhs_batch]
    rb = [_normalize_axis(i, b.ndim) for i in rhs_batch]
    if len(lb) != len(rb):
        raise ValueError("lhs_batch and rhs_batch differ in length")
    if a.shape[lc] != b.shape[rc]:
        raise ValueError(f"contracting dimensions differ: {a.shape[lc]} vs {b.shape[rc]}")
    aq, asc = quantize_mx(a, lc, block)
    bq, bsc = quantize_mx(b, rc, block)
    ad = dequantize_mx(aq, asc, lc, block, dtype=np.float64)
    bd = dequantize_mx(bq, bsc, rc, block, dtype=np.float64)

    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    la = [""] * a.ndim
    lbs = [""] * b.ndim
    la[lc] = lbs[rc] = next(letters)
    batch = []
    for i, j in zip(lb, rb):
        la[i] = lbs[j] = next(letters)
        batch.append(la[i])
    lfree = []
    for i in range(a.ndim):
        if not la[i]:
            la[i] = next(letters)
            lfree.append(la[i])
    rfree = []
    for j in range(b.ndim):
        if not lbs[j]:
            lbs[j] = next(letters)
            rfree.append(lbs[j])
    spec = "".join(la) + "," + "".join(lbs) + "->" + "".join(batch + lfree + rfree)
    return np.einsum(spec, ad, bd)
