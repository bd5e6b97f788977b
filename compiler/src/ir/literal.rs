//! Dense host values: constants in the IR and tensors moved to and from a device.
//!
//! The payload is little-endian bytes in row-major order, so one type serves
//! constants, proto literals, safetensors and PJRT buffers without conversion.

use crate::ir::shape::{f8_types, ArrayShape, ElementType};
use half::{bf16, f16};
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, strum::IntoStaticStr, strum::VariantNames)]
pub enum LiteralError {
    #[error("{ty}{dims:?} needs {expected} bytes, got {actual}")]
    ByteCount {
        ty: ElementType,
        dims: Vec<i64>,
        expected: usize,
        actual: usize,
    },
    #[error("pred element {index} is the byte {byte}; a bool must be 0 or 1")]
    BadBool { index: usize, byte: u8 },
    #[error("{ty} element {index} is the byte {byte:#04x}; only its low {bits} bits may be set")]
    WideByte {
        ty: ElementType,
        index: usize,
        byte: u8,
        bits: usize,
    },
    #[error("negative dimension in {0:?}")]
    NegativeDim(Vec<i64>),
    #[error("value {value} is not representable as {ty}")]
    OutOfRange { value: String, ty: ElementType },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Literal {
    pub shape: ArrayShape,
    data: Vec<u8>,
}

/// A scalar read out of a literal, widened losslessly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// A `c64` or `c128` element: (real, imaginary).
    Complex(f64, f64),
}

impl Literal {
    /// Wraps raw little-endian bytes; the byte count must match the shape.
    pub fn from_bytes(
        ty: ElementType,
        dims: Vec<i64>,
        data: Vec<u8>,
    ) -> Result<Self, LiteralError> {
        if dims.iter().any(|&d| d < 0) {
            return Err(LiteralError::NegativeDim(dims));
        }
        let expected = dims
            .iter()
            .try_fold(ty.byte_size(), |acc, &d| acc.checked_mul(d as usize))
            .unwrap_or(usize::MAX);
        if expected != data.len() {
            return Err(LiteralError::ByteCount {
                ty,
                dims,
                expected,
                actual: data.len(),
            });
        }
        // XLA reads a pred byte as a C++ bool: anything but 0 or 1 is
        // undefined behaviour there, so such bytes never become a literal.
        if ty == ElementType::Pred {
            if let Some(index) = data.iter().position(|&b| b > 1) {
                return Err(LiteralError::BadBool {
                    index,
                    byte: data[index],
                });
            }
        }
        let bits = ty.bit_width();
        if bits < 8 {
            if let Some(index) = data.iter().position(|&b| b >> bits != 0) {
                return Err(LiteralError::WideByte {
                    ty,
                    index,
                    byte: data[index],
                    bits,
                });
            }
        }
        Ok(Literal {
            shape: ArrayShape::new(ty, dims),
            data,
        })
    }

    pub fn zeros(ty: ElementType, dims: Vec<i64>) -> Self {
        let n = ArrayShape::new(ty, dims.clone()).element_count().max(0) as usize * ty.byte_size();
        Literal {
            shape: ArrayShape::new(ty, dims),
            data: vec![0; n],
        }
    }

    pub fn ty(&self) -> ElementType {
        self.shape.ty
    }

    pub fn dims(&self) -> &[i64] {
        &self.shape.dims
    }

    pub fn element_count(&self) -> usize {
        self.data.len() / self.ty().byte_size()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    pub fn from_f32(dims: Vec<i64>, values: &[f32]) -> Result<Self, LiteralError> {
        Self::from_bytes(
            ElementType::F32,
            dims,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn from_f64(dims: Vec<i64>, values: &[f64]) -> Result<Self, LiteralError> {
        Self::from_bytes(
            ElementType::F64,
            dims,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn from_s32(dims: Vec<i64>, values: &[i32]) -> Result<Self, LiteralError> {
        Self::from_bytes(
            ElementType::S32,
            dims,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn from_u32(dims: Vec<i64>, values: &[u32]) -> Result<Self, LiteralError> {
        Self::from_bytes(
            ElementType::U32,
            dims,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    pub fn from_pred(dims: Vec<i64>, values: &[bool]) -> Result<Self, LiteralError> {
        Self::from_bytes(
            ElementType::Pred,
            dims,
            values.iter().map(|&v| v as u8).collect(),
        )
    }

    pub fn scalar_f32(v: f32) -> Self {
        Self::from_f32(vec![], &[v]).expect("one f32 is four bytes")
    }

    /// Builds a literal of any element type from scalars, rounding floats to
    /// nearest-even and range-checking integers.
    pub fn from_scalars(
        ty: ElementType,
        dims: Vec<i64>,
        values: &[Scalar],
    ) -> Result<Self, LiteralError> {
        Self::from_scalar_iter(ty, dims, values.iter().copied())
    }

    /// [`Literal::from_scalars`] from scalars made one at a time: each is
    /// encoded as it comes, so a large literal (XLA's test modules take
    /// arrays of 10^8 elements) never holds its values twice.
    pub fn from_scalar_iter(
        ty: ElementType,
        dims: Vec<i64>,
        values: impl IntoIterator<Item = Scalar>,
    ) -> Result<Self, LiteralError> {
        let values = values.into_iter();
        let mut encoder = LiteralEncoder::with_capacity(ty, values.size_hint().0);
        for v in values {
            encoder.push(v)?;
        }
        encoder.finish(dims)
    }

    /// The same values as `ty` (floats rounded to nearest even); `self`
    /// when it already is.
    pub fn converted(self, ty: ElementType) -> Result<Self, LiteralError> {
        if self.ty() == ty {
            return Ok(self);
        }
        let values: Vec<Scalar> = (0..self.element_count()).map(|i| self.get(i)).collect();
        Self::from_scalars(ty, self.dims().to_vec(), &values)
    }

    /// Element `i` in row-major order.
    pub fn get(&self, i: usize) -> Scalar {
        let w = self.ty().byte_size();
        let b = &self.data[i * w..(i + 1) * w];
        let ty = self.ty();
        if ty.is_complex() {
            let parts = self.complex_parts(i);
            return Scalar::Complex(parts.get(0).as_f64(), parts.get(1).as_f64());
        }
        let mut buf = [0u8; 8];
        buf[..w].copy_from_slice(b);
        if let Some(format) = ty.minifloat() {
            return Scalar::Float(format.decode(b[0]));
        }
        match ty {
            ElementType::Pred => Scalar::Bool(b[0] != 0),
            // The low bits of the byte, sign-extended (`ml_dtypes` keeps a
            // sub-byte integer in the low bits, as XLA's literals do).
            ElementType::S2 | ElementType::S4 => {
                let unused = 8 - ty.bit_width() as u32;
                Scalar::Int(i64::from(((b[0] << unused) as i8) >> unused))
            }
            ElementType::S8 => Scalar::Int(b[0] as i8 as i64),
            ElementType::S16 => Scalar::Int(i16::from_le_bytes([b[0], b[1]]) as i64),
            ElementType::S32 => Scalar::Int(i32::from_le_bytes(b.try_into().unwrap()) as i64),
            ElementType::S64 => Scalar::Int(i64::from_le_bytes(buf)),
            ElementType::U2
            | ElementType::U4
            | ElementType::U8
            | ElementType::U16
            | ElementType::U32
            | ElementType::U64 => Scalar::UInt(u64::from_le_bytes(buf)),
            ElementType::F16 => Scalar::Float(f16::from_le_bytes([b[0], b[1]]).to_f64()),
            ElementType::Bf16 => Scalar::Float(bf16::from_le_bytes([b[0], b[1]]).to_f64()),
            ElementType::F32 => Scalar::Float(f32::from_le_bytes(b.try_into().unwrap()) as f64),
            ElementType::F64 => Scalar::Float(f64::from_le_bytes(buf)),
            f8_types!() | ElementType::C64 | ElementType::C128 => unreachable!("decoded above"),
        }
    }

    /// Element `i` of a complex literal as a literal of its two parts
    /// (real, imaginary) in the component type, bit for bit.
    fn complex_parts(&self, i: usize) -> Literal {
        self.parts_of(i..i + 1)
    }

    /// Elements `range` of a complex literal as a vector of their parts,
    /// real then imaginary, in the component type, bit for bit.
    fn parts_of(&self, range: std::ops::Range<usize>) -> Literal {
        let part = self
            .ty()
            .complex_component()
            .expect("parts are asked of complex literals");
        let w = self.ty().byte_size();
        Literal {
            shape: ArrayShape::new(part, vec![2 * range.len() as i64]),
            data: self.data[range.start * w..range.end * w].to_vec(),
        }
    }

    /// Every element widened to f64 (booleans as 0/1; a complex element as
    /// its real and then its imaginary part, as it lies in memory). For
    /// comparisons in tests and summaries; integers beyond 2^53 lose
    /// precision.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        if self.ty().is_complex() {
            return self.parts_of(0..self.element_count()).to_f64_vec();
        }
        (0..self.element_count())
            .map(|i| self.get(i).as_f64())
            .collect()
    }

    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.to_f64_vec().into_iter().map(|v| v as f32).collect()
    }

    pub fn to_i64_vec(&self) -> Vec<i64> {
        (0..self.element_count())
            .map(|i| match self.get(i) {
                Scalar::Bool(b) => b as i64,
                Scalar::Int(v) => v,
                Scalar::UInt(v) => v as i64,
                Scalar::Float(v) | Scalar::Complex(v, _) => v as i64,
            })
            .collect()
    }

    /// The same values with a new shape of equal element count.
    pub fn reshaped(&self, dims: Vec<i64>) -> Result<Self, LiteralError> {
        Self::from_bytes(self.ty(), dims, self.data.clone())
    }
}

impl Scalar {
    /// The value as f64; a complex value's real part.
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(v) => v as f64,
            Scalar::UInt(v) => v as f64,
            Scalar::Float(v) | Scalar::Complex(v, _) => v,
        }
    }

    /// The value as (real, imaginary): a real value's imaginary part is 0.
    pub fn as_complex(self) -> (f64, f64) {
        match self {
            Scalar::Complex(re, im) => (re, im),
            v => (v.as_f64(), 0.0),
        }
    }
}

/// A literal's bytes, appended a value at a time: what a reader of large
/// literals (the text parser) holds instead of their values as
/// [`Scalar`]s, at 24 bytes each (an f32 is 4).
#[derive(Debug)]
pub struct LiteralEncoder {
    ty: ElementType,
    data: Vec<u8>,
}

impl LiteralEncoder {
    pub fn new(ty: ElementType) -> Self {
        Self::with_capacity(ty, 0)
    }

    /// Room for `values` values to start with.
    pub fn with_capacity(ty: ElementType, values: usize) -> Self {
        LiteralEncoder {
            ty,
            data: Vec::with_capacity(values.saturating_mul(ty.byte_size())),
        }
    }

    /// Appends `v` as the encoder's type: floats rounded to nearest even,
    /// integers range-checked.
    pub fn push(&mut self, v: Scalar) -> Result<(), LiteralError> {
        encode_scalar(self.ty, v, &mut self.data)
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.data.len() / self.ty.byte_size()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Appends `value` until it holds `count` values. False, with nothing
    /// appended, when they would not fit in memory: a count read from a
    /// shape as written must be refused, not abort an allocation.
    pub fn fill_to(&mut self, count: usize, value: Scalar) -> Result<bool, LiteralError> {
        let mut one = Vec::new();
        encode_scalar(self.ty, value, &mut one)?;
        let more = count.saturating_sub(self.len());
        let Some(bytes) = more.checked_mul(one.len()) else {
            return Ok(false);
        };
        if self.data.try_reserve_exact(bytes).is_err() {
            return Ok(false);
        }
        if one.iter().all(|&b| b == 0) {
            self.data.resize(self.data.len() + bytes, 0);
        } else {
            for _ in 0..more {
                self.data.extend_from_slice(&one);
            }
        }
        Ok(true)
    }

    /// The literal of these values, with `dims`.
    pub fn finish(self, dims: Vec<i64>) -> Result<Literal, LiteralError> {
        Literal::from_bytes(self.ty, dims, self.data)
    }
}

fn encode_scalar(ty: ElementType, v: Scalar, out: &mut Vec<u8>) -> Result<(), LiteralError> {
    let out_of_range = || LiteralError::OutOfRange {
        value: format!("{v}"),
        ty,
    };
    let as_int = |v: Scalar| -> Option<i128> {
        match v {
            Scalar::Bool(b) => Some(b as i128),
            Scalar::Int(x) => Some(x as i128),
            Scalar::UInt(x) => Some(x as i128),
            Scalar::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(f as i128),
            Scalar::Float(_) | Scalar::Complex(..) => None,
        }
    };
    match ty {
        ElementType::Pred => match v {
            Scalar::Bool(b) => out.push(b as u8),
            _ => match as_int(v) {
                Some(0) => out.push(0),
                Some(1) => out.push(1),
                _ => return Err(out_of_range()),
            },
        },
        ElementType::F16 => out.extend(f16::from_f64(v.as_f64()).to_le_bytes()),
        ElementType::Bf16 => out.extend(bf16::from_f64(v.as_f64()).to_le_bytes()),
        ElementType::F32 => out.extend((v.as_f64() as f32).to_le_bytes()),
        ElementType::F64 => out.extend(v.as_f64().to_le_bytes()),
        ElementType::C64 => {
            let (re, im) = v.as_complex();
            out.extend((re as f32).to_le_bytes());
            out.extend((im as f32).to_le_bytes());
        }
        ElementType::C128 => {
            let (re, im) = v.as_complex();
            out.extend(re.to_le_bytes());
            out.extend(im.to_le_bytes());
        }
        _ if ty.is_float() => {
            let format = ty
                .minifloat()
                .expect("every other float type is matched above");
            out.push(format.encode(v.as_f64()).ok_or_else(out_of_range)?);
        }
        _ => {
            let x = as_int(v).ok_or_else(out_of_range)?;
            let (lo, hi) = ty.integer_range().ok_or_else(out_of_range)?;
            if x < lo || x > hi {
                return Err(out_of_range());
            }
            if ty.bit_width() < 8 {
                // Only the low bits, as `ml_dtypes` keeps them.
                out.push((x as u8) & ((1u8 << ty.bit_width()) - 1));
            } else {
                out.extend_from_slice(&x.to_le_bytes()[..ty.byte_size()]);
            }
        }
    }
    Ok(())
}

impl fmt::Display for Scalar {
    /// XLA-parsable spelling: `true`, `-3`, `1.5`, `1e-08`, `inf`, `nan`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(v) => write_float(f, v, v),
            Scalar::Complex(re, im) => {
                f.write_str("(")?;
                write_float(f, re, re)?;
                f.write_str(", ")?;
                write_float(f, im, im)?;
                f.write_str(")")
            }
        }
    }
}

/// XLA-parsable float spelling of `v` (printed at its own precision `T`):
/// plain decimals in the usual range, exponents outside it.
pub(crate) fn write_float<T: fmt::Display + fmt::LowerExp>(
    f: &mut fmt::Formatter<'_>,
    v: T,
    wide: f64,
) -> fmt::Result {
    if wide.is_nan() {
        return f.write_str("nan");
    }
    if wide.is_infinite() {
        return f.write_str(if wide < 0.0 { "-inf" } else { "inf" });
    }
    let a = wide.abs();
    if wide == 0.0 && wide.is_sign_negative() {
        // XLA's parser reads `-0` as the integer 0 and loses the sign.
        f.write_str("-0.0")
    } else if a == 0.0 || (1e-4..1e15).contains(&a) {
        write!(f, "{v}")
    } else {
        write!(f, "{v:e}")
    }
}

/// An IEEE-style float type's mantissa and total width in bits: where its
/// NaNs keep their sign and payload.
fn ieee_layout(ty: ElementType) -> Option<(u32, u32)> {
    match ty {
        ElementType::F16 => Some((10, 16)),
        ElementType::Bf16 => Some((7, 16)),
        ElementType::F32 => Some((23, 32)),
        ElementType::F64 => Some((52, 64)),
        _ => None,
    }
}

impl Literal {
    fn element_bits(&self, i: usize) -> u64 {
        let w = self.ty().byte_size();
        let mut buf = [0u8; 8];
        buf[..w].copy_from_slice(&self.data[i * w..(i + 1) * w]);
        u64::from_le_bytes(buf)
    }

    /// Element `i`'s sign and payload, when it is a NaN: the payload is
    /// `None` for the quiet NaN without one (what `nan` means in HLO text).
    pub fn nan_parts(&self, i: usize) -> Option<(bool, Option<u64>)> {
        let ty = self.ty();
        if !matches!(self.get(i), Scalar::Float(v) if v.is_nan()) {
            return None;
        }
        let Some((mantissa, width)) = ieee_layout(ty) else {
            // The narrow floats have one NaN (two in FN formats, by sign).
            let negative = ty.minifloat().is_some_and(|f| {
                self.data[i] & f.sign_mask() != 0
                    && f.specials != crate::ir::shape::minifloat::Specials::FiniteNegativeZeroNan
            });
            return Some((negative, None));
        };
        let bits = self.element_bits(i);
        let payload = bits & ((1u64 << mantissa) - 1);
        let quiet = 1u64 << (mantissa - 1);
        Some((
            bits >> (width - 1) & 1 == 1,
            (payload != quiet).then_some(payload),
        ))
    }

    /// Makes element `i` a NaN of the given sign and payload (`None`: the
    /// quiet NaN without one), as HLO text's `-nan(0x1)` says.
    pub fn set_nan(
        &mut self,
        i: usize,
        negative: bool,
        payload: Option<u64>,
    ) -> Result<(), LiteralError> {
        let ty = self.ty();
        let spelled = || LiteralError::OutOfRange {
            value: format!(
                "{}nan{}",
                if negative { "-" } else { "" },
                payload.map_or(String::new(), |p| format!("(0x{p:x})"))
            ),
            ty,
        };
        let Some((mantissa, width)) = ieee_layout(ty) else {
            let format = ty.minifloat().ok_or_else(spelled)?;
            if payload.is_some() {
                return Err(spelled());
            }
            let nan = if negative { -f64::NAN } else { f64::NAN };
            self.data[i] = format.encode(nan).ok_or_else(spelled)?;
            return Ok(());
        };
        let p = payload.unwrap_or(1u64 << (mantissa - 1));
        if p == 0 || p >> mantissa != 0 {
            return Err(spelled());
        }
        let exponent = ((1u64 << (width - 1 - mantissa)) - 1) << mantissa;
        let bits = (u64::from(negative) << (width - 1)) | exponent | p;
        let w = ty.byte_size();
        self.data[i * w..(i + 1) * w].copy_from_slice(&bits.to_le_bytes()[..w]);
        Ok(())
    }

    /// Element `i` as HLO text spells it (shortest round-trip decimal for
    /// its own precision).
    pub fn element_string(&self, i: usize) -> String {
        self.display_scalar(i).to_string()
    }

    /// Element `i` widened for printing: floats narrower than f64 print their
    /// own shortest round-trip decimal rather than the f64 one.
    fn display_scalar(&self, i: usize) -> DisplayScalar {
        if self.ty().is_complex() {
            let parts = self.complex_parts(i);
            return DisplayScalar::Complex(Box::new([
                parts.display_scalar(0),
                parts.display_scalar(1),
            ]));
        }
        if let Some((negative, payload)) = self.nan_parts(i) {
            return DisplayScalar::Nan(negative, payload);
        }
        match (self.ty(), self.get(i)) {
            // XLA reads f8e8m0fnu's smallest value, 2^-127, as the next
            // one up when it is written a hair above it (as f32's shortest
            // spelling is): it is written exactly.
            (ElementType::F64 | ElementType::F8E8M0FNU, s) => DisplayScalar::Wide(s),
            (_, Scalar::Float(v)) => DisplayScalar::Narrow(v as f32),
            (_, s) => DisplayScalar::Wide(s),
        }
    }
}

/// XLA's parser, measured through jaxlib: a NaN real part is copied, sign
/// and payload, into the imaginary part (`(nan, 2)` is `(nan, nan)`); an
/// imaginary NaN of a c64 goes through f64, so its sign stays and its
/// payload becomes the quiet NaN's (`(1, nan(0x5))` is `(1, nan)`). `parts`
/// holds (re, im) pairs of `part` (f32 or f64), little-endian. Says whether
/// a value changed.
pub(crate) fn complex_nans_as_xla_reads_them(part: ElementType, parts: &mut [u8]) -> bool {
    let w = part.byte_size();
    let (nan_exponent, quiet) = if part == ElementType::F32 {
        (0x7f80_0000u64, 0x0040_0000u64)
    } else {
        (0x7ff0_0000_0000_0000, 0x0008_0000_0000_0000)
    };
    let mantissa = 2 * quiet - 1;
    let is_nan = |b: u64| b & nan_exponent == nan_exponent && b & mantissa != 0;
    let bits = |b: &[u8]| {
        let mut buf = [0u8; 8];
        buf[..w].copy_from_slice(b);
        u64::from_le_bytes(buf)
    };
    let mut changed = false;
    for pair in parts.chunks_exact_mut(2 * w) {
        let (re, im) = pair.split_at_mut(w);
        if is_nan(bits(re)) {
            changed |= re != im;
            im.copy_from_slice(re);
        } else if part == ElementType::F32 && is_nan(bits(im)) {
            let sign = bits(im) & 0x8000_0000;
            let read = (sign | nan_exponent | quiet).to_le_bytes();
            // `changed` compares the bytes as written with XLA's.
            changed |= im != &read[..w];
            im.copy_from_slice(&read[..w]);
        }
    }
    changed
}

impl Literal {
    /// Whether XLA's text reader (and hlatc's, which reads as XLA does)
    /// takes this literal's printed text for another value: a complex
    /// value with a NaN part other than one XLA's reader makes (see
    /// `complex_nans_as_xla_reads_them`). Only the proto carries such a
    /// value.
    pub fn text_reads_otherwise(&self) -> bool {
        let Some(part) = self.ty().complex_component() else {
            return false;
        };
        complex_nans_as_xla_reads_them(part, &mut self.data.clone())
    }
}

enum DisplayScalar {
    Wide(Scalar),
    Narrow(f32),
    /// XLA's `nan`, `-nan`, `nan(0x1)`.
    Nan(bool, Option<u64>),
    /// `(re, im)`, each part spelled as its component type's value.
    Complex(Box<[DisplayScalar; 2]>),
}

impl fmt::Display for DisplayScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisplayScalar::Wide(s) => s.fmt(f),
            DisplayScalar::Narrow(v) => write_float(f, *v, *v as f64),
            DisplayScalar::Nan(negative, payload) => {
                if *negative {
                    f.write_str("-")?;
                }
                f.write_str("nan")?;
                match payload {
                    Some(p) => write!(f, "(0x{p:x})"),
                    None => Ok(()),
                }
            }
            DisplayScalar::Complex(parts) => write!(f, "({}, {})", parts[0], parts[1]),
        }
    }
}

/// Writes a literal's elements in order. Large constants repeat one value
/// (zeros, mostly, in XLA's tests: one holds 5 × 10^7 of them): an element
/// whose bytes are its predecessor's is written as its spelling was, rather
/// than decoded and formatted again. A spelling depends on the bytes alone.
struct ElementWriter<'l> {
    lit: &'l Literal,
    next: usize,
    spelled: Option<usize>,
    spelling: String,
}

impl<'l> ElementWriter<'l> {
    fn new(lit: &'l Literal) -> Self {
        ElementWriter {
            lit,
            next: 0,
            spelled: None,
            spelling: String::new(),
        }
    }

    fn bytes(&self, i: usize) -> &'l [u8] {
        let w = self.lit.ty().byte_size();
        &self.lit.data[i * w..(i + 1) * w]
    }

    fn write_next(&mut self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.next;
        self.next += 1;
        if !matches!(self.spelled, Some(s) if self.bytes(s) == self.bytes(i)) {
            use fmt::Write as _;
            self.spelling.clear();
            write!(self.spelling, "{}", self.lit.display_scalar(i))?;
            self.spelled = Some(i);
        }
        f.write_str(&self.spelling)
    }

    /// Dimensions `dim..` as nested braces.
    fn write_from(&mut self, f: &mut fmt::Formatter<'_>, dim: usize) -> fmt::Result {
        let dims = self.lit.dims();
        if dim == dims.len() {
            return self.write_next(f);
        }
        f.write_str("{")?;
        for i in 0..dims[dim] {
            if i > 0 {
                f.write_str(", ")?;
            }
            self.write_from(f, dim + 1)?;
        }
        f.write_str("}")
    }
}

impl fmt::Display for Literal {
    /// The payload of `constant(...)`: a bare scalar, or nested braces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ElementWriter::new(self).write_from(f, 0)
    }
}

/// A tuple constant's element: an array's values, or a tuple of elements
/// (`((f32[], f32[]), f32[2]) constant(((1, 2), {3, 4}))`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LiteralTree {
    Array(Literal),
    Tuple(Vec<LiteralTree>),
}

impl LiteralTree {
    pub fn shape(&self) -> crate::ir::shape::Shape {
        match self {
            LiteralTree::Array(l) => crate::ir::shape::Shape::Array(l.shape.clone()),
            LiteralTree::Tuple(elems) => {
                crate::ir::shape::Shape::Tuple(elems.iter().map(LiteralTree::shape).collect())
            }
        }
    }
}

impl fmt::Display for LiteralTree {
    /// XLA's spelling: `(a, b)` around the elements' own.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiteralTree::Array(l) => l.fmt(f),
            LiteralTree::Tuple(elems) => crate::ir::shape::write_parenthesized(f, elems),
        }
    }
}
