//! Literals: scalars (NaN payloads included), nested arrays and tuples.

use super::*;
use crate::ir::literal::LiteralEncoder;

/// Where a constant's value, as XLA's parser reads it, is not what its text
/// says at face value.
pub(super) enum LiteralReading {
    AsWritten,
    /// One value written for a whole array: XLA's parser takes it as the
    /// first element with every other element zero (`f32[3] constant(2)`
    /// is `{2, 0, 0}`).
    FirstOnly,
    /// A complex element with a NaN part, which XLA's parser reads its
    /// own way (see [`crate::ir::literal::complex_nans_as_xla_reads_them`]).
    ComplexNan,
}

/// A tuple constant's elements, `(a, b, ...)`, each read as a constant of
/// its element of `declared` (a pair of scalars parses as a complex
/// value's parts would, and is read here as two elements).
pub(super) fn tuple_elements(
    p: &syntax::Literal<'_>,
    elements: &[Shape],
    declared: &Shape,
    at: &Span<'_>,
) -> Result<Vec<LiteralTree>, ParseError> {
    let pair;
    let (values, written) = match p {
        syntax::Literal::Tuple(t) => (t.items.as_slice(), &t.at),
        syntax::Literal::Pair(two) => {
            pair = [
                syntax::Literal::Scalar(two.first),
                syntax::Literal::Scalar(two.second),
            ];
            (pair.as_slice(), &two.at)
        }
        other => {
            return err_at(
                &other.at(),
                format!("a constant of {declared} is written as a tuple, (a, b, ...)"),
            )
        }
    };
    if values.len() != elements.len() {
        return err_at(
            written,
            format!(
                "a constant of {declared} needs {} elements, got {}",
                elements.len(),
                values.len()
            ),
        );
    }
    values
        .iter()
        .zip(elements)
        .map(|(v, e)| match e {
            Shape::Tuple(inner) => tuple_elements(v, inner, e, at).map(LiteralTree::Tuple),
            _ => literal(v, e, at).map(|(l, _)| LiteralTree::Array(l)),
        })
        .collect()
}

/// A constant's value, read as XLA's parser reads it, and where that
/// differs from the text's face value.
pub(super) fn literal(
    p: &syntax::Literal<'_>,
    declared: &Shape,
    at: &Span<'_>,
) -> Result<(Literal, LiteralReading), ParseError> {
    let arr = match declared {
        Shape::Array(a) => a,
        Shape::Tuple(_) => return err_at(at, "tuple constants are not supported"),
        Shape::Token => return err_at(at, "a token has no value to write as a constant"),
        Shape::Buffer(_) => return err_at(at, "a buffer has no value to write as a constant"),
    };
    // A complex element is read as its two parts, each a value of the part
    // type, so the parts keep their NaN signs and payloads as a float does.
    let (part_ty, per_element) = match arr.ty.complex_component() {
        Some(part) => (part, 2),
        None => (arr.ty, 1),
    };
    let mut values = LiteralEncoder::new(part_ty);
    let mut nans = Vec::new();
    let whole = p.at();
    let first_only = arr.rank() > 0
        && arr.element_count() > 0
        && matches!(p, syntax::Literal::Scalar(_) | syntax::Literal::Pair(_));
    if first_only {
        let only = ArrayShape::scalar(arr.ty);
        collect_literal(p, &only, 0, &mut values, &mut nans)?;
        pad_with_zeros(&mut values, arr, part_ty, per_element, &whole)?;
    } else {
        collect_literal(p, arr, 0, &mut values, &mut nans)?;
    }
    let parts_dims = if per_element == 1 {
        arr.dims.clone()
    } else {
        vec![values.len() as i64]
    };
    let mut lit = values
        .finish(parts_dims)
        .or_else(|e| err_at(&whole, e.to_string()))?;
    // A NaN's sign and payload, which a value of the literal's scalars
    // does not carry, are set bit for bit.
    for (i, pair) in nans {
        let (negative, payload) = nan_spelling(&pair)?;
        lit.set_nan(i, negative, payload)
            .or_else(|e| err_at(&pair, e.to_string()))?;
    }
    let mut reading = if first_only {
        LiteralReading::FirstOnly
    } else {
        LiteralReading::AsWritten
    };
    if per_element != 1 {
        let mut bytes = lit.into_bytes();
        if crate::ir::literal::complex_nans_as_xla_reads_them(part_ty, &mut bytes) {
            reading = LiteralReading::ComplexNan;
        }
        lit = Literal::from_bytes(arr.ty, arr.dims.clone(), bytes)
            .or_else(|e| err_at(&whole, e.to_string()))?;
    }
    lit.shape.minor_to_major = arr.minor_to_major.clone();
    lit.shape.physical = arr.physical.clone();
    Ok((lit, reading))
}

/// `values` (one element's) followed by zeros for every other element of
/// `arr`, as XLA reads one value written for a whole array.
fn pad_with_zeros(
    values: &mut LiteralEncoder,
    arr: &ArrayShape,
    part_ty: ElementType,
    per_element: usize,
    at: &Span<'_>,
) -> Result<(), ParseError> {
    let zero = match part_ty {
        ElementType::Pred => Scalar::Bool(false),
        t if t.is_signed_int() => Scalar::Int(0),
        t if t.is_unsigned_int() => Scalar::UInt(0),
        _ => Scalar::Float(0.0),
    };
    // The shape is as written, not yet verified: a mistyped dimension
    // must be an error, not an allocation that aborts.
    let n = arr
        .checked_element_count()
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| n.checked_mul(per_element));
    let filled = match n {
        Some(n) => values
            .fill_to(n, zero)
            .or_else(|e| err_at(at, e.to_string()))?,
        None => false,
    };
    if !filled {
        return err_at(at, format!("a constant of {arr} does not fit in memory"));
    }
    Ok(())
}

/// The literal's values in row-major order into `out`, and each value
/// spelled as a NaN, by index, into `nans`.
pub(super) fn collect_literal<'i>(
    p: &syntax::Literal<'i>,
    arr: &ArrayShape,
    depth: usize,
    out: &mut LiteralEncoder,
    nans: &mut Vec<(usize, Span<'i>)>,
) -> Result<(), ParseError> {
    match p {
        syntax::Literal::List(list) => {
            let (at, items) = (&list.at, &list.items);
            let Some(&len) = arr.dims.get(depth) else {
                return err_at(
                    at,
                    format!("literal is nested deeper than the rank of {arr}"),
                );
            };
            if items.len() as i64 != len {
                return err_at(
                    at,
                    format!(
                        "literal has {} elements in dimension {depth}, {arr} needs {len}",
                        items.len(),
                    ),
                );
            }
            for it in items {
                collect_literal(it, arr, depth + 1, out, nans)?;
            }
            Ok(())
        }
        syntax::Literal::Scalar(s) => {
            if depth != arr.rank() {
                return err_at(s, format!("scalar value where {arr} needs nested braces"));
            }
            if arr.ty.is_complex() {
                return err_at(s, format!("a {} value is written (re, im)", arr.ty));
            }
            scalar_into(*s, arr.ty, out, nans)
        }
        syntax::Literal::Pair(pair) => {
            if depth != arr.rank() {
                return err_at(
                    &pair.at,
                    format!("scalar value where {arr} needs nested braces"),
                );
            }
            let Some(part) = arr.ty.complex_component() else {
                return err_at(
                    &pair.at,
                    format!("(re, im) is a complex value; {} is not complex", arr.ty),
                );
            };
            scalar_into(pair.first, part, out, nans)?;
            scalar_into(pair.second, part, out, nans)
        }
        syntax::Literal::Tuple(t) => err_at(
            &t.at,
            format!("a tuple of values where {arr} needs an array value"),
        ),
    }
}

/// One value, read as `ty`, onto `out`; noted in `nans` when it is one.
pub(super) fn scalar_into<'i>(
    p: Span<'i>,
    ty: ElementType,
    out: &mut LiteralEncoder,
    nans: &mut Vec<(usize, Span<'i>)>,
) -> Result<(), ParseError> {
    out.push(scalar(&p, ty)?)
        .or_else(|e| err_at(&p, e.to_string()))?;
    if spells_nan(p.as_str()) {
        nans.push((out.len() - 1, p));
    }
    Ok(())
}

/// `nan`, `-nan`, `nan(0x1)`, ...
pub(super) fn spells_nan(s: &str) -> bool {
    s.trim_start_matches('-').starts_with("nan")
}

/// `-nan(0x1)` as (negative, payload); `nan` has none.
pub(super) fn nan_spelling(p: &Span<'_>) -> Result<(bool, Option<u64>), ParseError> {
    let s = p.as_str();
    let payload = match s.split_once("(0x") {
        None => None,
        Some((_, rest)) => {
            let hex = rest.trim_end_matches(')');
            match u64::from_str_radix(hex, 16) {
                Ok(v) => Some(v),
                Err(_) => return err_at(p, format!("NaN payload 0x{hex} does not fit in 64 bits")),
            }
        }
    };
    Ok((s.starts_with('-'), payload))
}

pub(super) fn scalar(p: &Span<'_>, ty: ElementType) -> Result<Scalar, ParseError> {
    let s = p.as_str();
    let bad = || err_at(p, format!("'{s}' is not a valid {ty} value"));
    match s {
        "true" | "false" if ty == ElementType::Pred => return Ok(Scalar::Bool(s == "true")),
        "true" | "false" => return bad(),
        _ => {}
    }
    if ty.is_float() {
        let v = match s {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ if spells_nan(s) => f64::NAN,
            _ => match s.parse::<f64>() {
                Ok(v) => v,
                Err(_) => return bad(),
            },
        };
        return Ok(Scalar::Float(v));
    }
    // XLA's reader takes the 64-bit integers through their bits: a
    // negative u64 is its two's complement (`u64[] constant(-1)` is
    // 18446744073709551615) and an s64 past i64::MAX wraps (measured
    // through jaxlib). Narrower types are range-checked.
    if let Ok(v) = s.parse::<i64>() {
        return Ok(match ty {
            ElementType::U64 if v < 0 => Scalar::UInt(v as u64),
            _ => Scalar::Int(v),
        });
    }
    if let Ok(v) = s.parse::<u64>() {
        return Ok(match ty {
            ElementType::S64 => Scalar::Int(v as i64),
            _ => Scalar::UInt(v),
        });
    }
    bad()
}
