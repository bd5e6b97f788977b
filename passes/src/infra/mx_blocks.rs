//! Microscaling (OCP MX v1.0) in plain HLO: an operand quantized to 8-bit
//! floats in blocks along one dimension, each block sharing a power-of-two
//! scale, and read back as the values the block-scaled dot multiplies.
//! `amp` calls this on the operands of the dots an MX policy quantizes, so
//! XLA CPU computes what a block-scaled matmul computes: the products of
//! the dequantized values, accumulated in f32.
//!
//! The rules, and where they come from (OCP MX v1.0, section 6.3, and its
//! reference code, as `python/tests/mx_reference.py` states them):
//!
//! - The shared scale of a block is `2^(floor(log2(amax)) - emax)`, where
//!   `amax` is the block's largest magnitude and `emax` the element
//!   format's largest exponent (8 for E4M3). It is stored as E8M0, a
//!   biased exponent, so `floor(log2(amax))` is read from `amax`'s own
//!   exponent bits: no float `log2` rounds it one binade up.
//! - A block of zeros, or whose `amax` is below E8M0's range (an f32
//!   subnormal among them), takes the smallest scale, `2^-127`.
//! - A NaN or an infinity anywhere in a block makes its scale NaN (E8M0
//!   has no infinity), and so every value of the block.
//! - Each element is `V / X` rounded to nearest, ties to even, to the
//!   element format; a finite value beyond its largest normal (448 for
//!   E4M3) saturates to it, keeping its sign.
//!
//! XLA CPU flushes f32 subnormals to zero, as operands and as results: a
//! value below 2^-126 reads as zero there, before the blocks and after,
//! where the spec's arithmetic keeps it. Nothing else differs
//! (`python/tests/test_mx.py` compares both bit for bit).

use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use hlatc_compiler::{ArrayShape, ElementType, InstrId, Module, Op, Shape};

/// An MX element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MxFormat {
    /// The element type (`f8e4m3fn`).
    pub element: ElementType,
    /// Its largest exponent, `emax_elem` in the spec.
    pub emax: i32,
    /// Its largest normal value, where finite values saturate.
    pub max_normal: u32,
    /// Elements per shared scale along the quantized dimension.
    pub block: i64,
}

impl MxFormat {
    /// MXFP8 with E4M3 elements: what neuronx-cc's `QuantizeMX` writes for
    /// `float8_e4m3fn` (block size 32, the only one it takes, NCC_EVRF039).
    pub const E4M3: MxFormat = MxFormat {
        element: ElementType::F8E4M3FN,
        emax: 8,
        max_normal: 448,
        block: 32,
    };

    /// Whether an operand whose quantized dimension has `extent` elements
    /// can be divided into whole blocks.
    pub fn blocks(self, extent: i64) -> bool {
        extent > 0 && extent % self.block == 0
    }
}

/// The frontend attribute that marks a value read back from MX blocks (its
/// value: the element type and block size): a dot whose operands all carry
/// it is quantized already, so `amp` run again leaves it as it is.
pub const MX_ATTRIBUTE: &str = "hlatc_mx_blocks";

impl MxFormat {
    /// [`MX_ATTRIBUTE`]'s value: `f8e4m3fn/32`.
    pub fn attribute_value(self) -> String {
        format!("{}/{}", self.element, self.block)
    }
}

/// The f32 exponent field's bias and its place in the bits.
const F32_BIAS: i64 = 127;
const F32_MANTISSA_BITS: i64 = 23;
/// E8M0's NaN: an all-ones exponent.
const E8M0_NAN: i64 = 255;

/// A module whose entry takes an f32 array of `shape` and returns its
/// values quantized in `format`'s blocks along `axis` and read back as f32
/// (exactly: every element value times its power-of-two scale is an f32).
pub fn qdq_module(shape: &ArrayShape, axis: i64, format: MxFormat) -> Result<Module, BuildError> {
    let mut b = Builder::new("mx_qdq");
    let x = b.parameter("x", Shape::Array(shape.clone()));
    let y = qdq(&mut b, x, axis, format)?;
    Ok(b.into_module("mx_qdq", y))
}

/// `x` (f32) quantized and dequantized along `axis`; see the module's
/// documentation for the rules.
fn qdq(b: &mut Builder, x: InstrId, axis: i64, format: MxFormat) -> Result<InstrId, BuildError> {
    let dims = b.dims(x);
    let blocks = quantize(b, x, axis, format)?;
    dequantize(b, blocks, axis, &dims)
}

/// An operand in MX blocks along one dimension: its element values and
/// each block's scale.
#[derive(Clone, Copy, Debug)]
pub struct Blocks {
    /// The elements, in the format's element type, with the quantized
    /// dimension `a` split in two, `[.., K / block, block, ..]`: a block
    /// is one row of dimension `a + 1`.
    pub elements: InstrId,
    /// Each block's E8M0 code (the scale's biased exponent, 255 for NaN),
    /// as s32, `[.., K / block, ..]`.
    pub codes: InstrId,
}

/// `x` (any float type; read as f32) in `format`'s blocks along `axis`;
/// see the module's documentation for the rules.
pub fn quantize(
    b: &mut Builder,
    x: InstrId,
    axis: i64,
    format: MxFormat,
) -> Result<Blocks, BuildError> {
    use ComparisonDirection::Eq;
    let x = b.convert_unless_same(x, ElementType::F32)?;
    let dims = b.dims(x);
    let a = axis as usize;
    // [.., K, ..] as [.., K / block, block, ..]: a block is one row of
    // the new dimension a + 1.
    let mut split = dims.clone();
    split[a] = dims[a] / format.block;
    split.insert(a + 1, format.block);
    let xs = b.reshape(x, &split)?;
    let magnitude = b.unary(UnaryOp::Abs, xs)?;
    let amax = b.reduce_max(magnitude, &[axis + 1])?;
    let scale_dims = b.dims(amax);
    // The biased exponent of amax: 0 for zeros and subnormals, 255 for
    // NaN and infinity; floor(log2(amax)) + 127 otherwise.
    let bits = b.add(
        Op::BitcastConvert,
        &[amax],
        Some(Shape::array(ElementType::S32, scale_dims.clone())),
    )?;
    let shift = b.full(ElementType::S32, &scale_dims, F32_MANTISSA_BITS as f64)?;
    let shifted = b.binary(BinaryOp::ShiftRightLogical, bits, shift)?;
    let field_mask = b.full(ElementType::S32, &scale_dims, 255.0)?;
    let exponent = b.binary(BinaryOp::And, shifted, field_mask)?;
    // The E8M0 code: floor(log2(amax)) - emax + 127, at least 0.
    let emax = b.full(ElementType::S32, &scale_dims, f64::from(format.emax))?;
    let floor = b.binary(BinaryOp::Maximum, exponent, emax)?;
    let code = b.sub(floor, emax)?;
    let nan_code = b.full(ElementType::S32, &scale_dims, E8M0_NAN as f64)?;
    let infinite_amax = b.compare(exponent, nan_code, Eq)?;
    // A NaN is found element by element: XLA CPU's reduce of maximum does
    // not carry a NaN through (it returned a block's other values).
    let inf = b.full(ElementType::F32, &split, f64::INFINITY)?;
    let finite = b.compare(magnitude, inf, ComparisonDirection::Lt)?;
    let one_f32 = b.full(ElementType::F32, &split, 1.0)?;
    let zero_f32 = b.full(ElementType::F32, &split, 0.0)?;
    let not_finite = b.select(finite, zero_f32, one_f32)?;
    let not_finite = b.reduce_max(not_finite, &[axis + 1])?;
    let half = b.full(ElementType::F32, &scale_dims, 0.5)?;
    let has_nan = b.compare(not_finite, half, ComparisonDirection::Gt)?;
    let nan_block = b.binary(BinaryOp::Or, infinite_amax, has_nan)?;
    // 1 / scale = 2^(127 - code), a normal f32 for every code a finite
    // amax gives (0 to 246): its exponent field is 254 - code. A NaN
    // block's is any normal one; its code says NaN.
    let unit = b.full(ElementType::S32, &scale_dims, (2 * F32_BIAS) as f64)?;
    let one = b.full(ElementType::S32, &scale_dims, F32_BIAS as f64)?;
    let finite_code = b.select(nan_block, one, code)?;
    let inverse_field = b.sub(unit, finite_code)?;
    let inverse_bits = b.binary(BinaryOp::ShiftLeft, inverse_field, shift)?;
    let inverse = b.add(
        Op::BitcastConvert,
        &[inverse_bits],
        Some(Shape::array(ElementType::F32, scale_dims.clone())),
    )?;
    let per_element = per_element(&split, axis);
    let inverse = b.broadcast(inverse, &split, &per_element)?;
    // V / X is exact in f32 (a power of two times a value, in range), then
    // saturated and rounded to nearest even by the convert.
    let scaled = b.mul(xs, inverse)?;
    let high = b.full(ElementType::F32, &split, f64::from(format.max_normal))?;
    let low = b.full(ElementType::F32, &split, -f64::from(format.max_normal))?;
    let saturated = b.binary(BinaryOp::Minimum, scaled, high)?;
    let saturated = b.binary(BinaryOp::Maximum, saturated, low)?;
    let elements = b.convert(saturated, format.element)?;
    let codes = b.select(nan_block, nan_code, code)?;
    Ok(Blocks { elements, codes })
}

/// The values `blocks` (quantized along `axis`) hold, as f32 of `dims`
/// (the quantized operand's): each element times its block's scale, NaN
/// throughout a block whose code is E8M0's NaN.
pub fn dequantize(
    b: &mut Builder,
    blocks: Blocks,
    axis: i64,
    dims: &[i64],
) -> Result<InstrId, BuildError> {
    let split = b.dims(blocks.elements);
    let scale_dims = b.dims(blocks.codes);
    let per_element = per_element(&split, axis);
    let nan_code = b.full(ElementType::S32, &scale_dims, E8M0_NAN as f64)?;
    let nan_block = b.compare(blocks.codes, nan_code, ComparisonDirection::Eq)?;
    let one = b.full(ElementType::S32, &scale_dims, F32_BIAS as f64)?;
    let finite_code = b.select(nan_block, one, blocks.codes)?;
    let element = b.convert(blocks.elements, ElementType::F32)?;
    // Times the scale, 2^(code - 127), added to the element's exponent
    // field: no float multiply, which XLA CPU may reassociate through the
    // subnormal 2^-127 and flush (it did: an element of 128 at code 0
    // read back as zero). A product below f32's normals is zero, as XLA
    // CPU would have it.
    let values = times_power_of_two(b, element, finite_code, &split, &per_element)?;
    let nan = b.full(ElementType::F32, &split, f64::NAN)?;
    let nan_block = b.broadcast(nan_block, &split, &per_element)?;
    let values = b.select(nan_block, nan, values)?;
    b.reshape(values, dims)
}

/// The dimensions of a split operand (`[.., K / block, block, ..]`, the
/// quantized dimension `axis`) that a block's scale spans: all but the
/// one within a block.
fn per_element(split: &[i64], axis: i64) -> Vec<i64> {
    (0..split.len() as i64).filter(|&d| d != axis + 1).collect()
}

/// `element` (f32, of `dims`) times `2^(code - 127)`, `code` one per
/// block (broadcast to `dims` by `per_element`), by integer arithmetic on
/// the exponent field: exact where the product is a normal f32, a zero of
/// the element's sign where it is not (or the element is zero).
fn times_power_of_two(
    b: &mut Builder,
    element: InstrId,
    code: InstrId,
    dims: &[i64],
    per_element: &[i64],
) -> Result<InstrId, BuildError> {
    use ComparisonDirection::{Gt, Ne};
    let s32 = |d: &[i64]| Some(Shape::array(ElementType::S32, d.to_vec()));
    let bits = b.add(Op::BitcastConvert, &[element], s32(dims))?;
    let code = b.broadcast(code, dims, per_element)?;
    let bias = b.full(ElementType::S32, dims, F32_BIAS as f64)?;
    let delta = b.sub(code, bias)?;
    let shift = b.full(ElementType::S32, dims, F32_MANTISSA_BITS as f64)?;
    let field = b.binary(BinaryOp::ShiftRightLogical, bits, shift)?;
    let field_mask = b.full(ElementType::S32, dims, 255.0)?;
    let field = b.binary(BinaryOp::And, field, field_mask)?;
    let moved = b.add2(field, delta)?;
    let zero = b.full(ElementType::S32, dims, 0.0)?;
    let nonzero = b.compare(field, zero, Ne)?;
    let normal = b.compare(moved, zero, Gt)?;
    let keep = b.binary(BinaryOp::And, nonzero, normal)?;
    let step = b.binary(BinaryOp::ShiftLeft, delta, shift)?;
    let scaled = b.add2(bits, step)?;
    let sign_mask = b.full(ElementType::S32, dims, f64::from(i32::MIN))?;
    let signed_zero = b.binary(BinaryOp::And, bits, sign_mask)?;
    let out = b.select(keep, scaled, signed_zero)?;
    b.add(
        Op::BitcastConvert,
        &[out],
        Some(Shape::array(ElementType::F32, dims.to_vec())),
    )
}
