//! Shapes, and the lists of integers their dims, layouts and indices are
//! written as.

use super::*;

pub(super) fn shape(s: &syntax::Shape<'_>) -> Result<Shape, ParseError> {
    match s {
        syntax::Shape::Tuple { elements, .. } => Ok(Shape::Tuple(
            elements.iter().map(shape).collect::<Result<_, _>>()?,
        )),
        syntax::Shape::Buffer { held, .. } => match shape(held)? {
            Shape::Array(a) => Ok(Shape::Buffer(a)),
            other => err_at(&held.at(), format!("a buffer holds an array, not {other}")),
        },
        syntax::Shape::Array(a) => array_shape(a),
    }
}

fn array_shape(written: &syntax::ArrayShape<'_>) -> Result<Shape, ParseError> {
    let ty_pair = &written.element_type;
    if ty_pair.as_str() == "token" {
        return match (written.dims.as_str().trim(), &written.layout) {
            ("", None) => Ok(Shape::Token),
            _ => err_at(
                ty_pair,
                "a token is written token[], with no dimensions or layout",
            ),
        };
    }
    let Some(ty) = ElementType::from_name(ty_pair.as_str()) else {
        let known: Vec<&str> = ElementType::ALL.iter().map(|t| t.name()).collect();
        return err_at(
            ty_pair,
            format!(
                "unsupported element type '{}' (supported: {}, and token[])",
                ty_pair.as_str(),
                known.join(", ")
            ),
        );
    };
    let (dims, dynamic) = dims_in(&written.dims)?;
    // `?` reads as XLA's unbounded size, the one negative allowed.
    if dims.iter().any(|&d| d < 0) {
        if let Some(d) = dims.iter().enumerate().find_map(|(i, &d)| {
            (d < 0 && !(d == crate::ir::shape::UNBOUNDED && dynamic >> i & 1 == 1)).then_some(d)
        }) {
            return err_at(&written.dims, format!("negative dimension {d}"));
        }
    }
    let mut a = ArrayShape::new(ty, dims);
    a.dynamic = dynamic;
    if let Some(layout) = &written.layout {
        with_layout(&mut a, layout)?;
    }
    Ok(Shape::Array(a))
}

/// `a` with the layout written for it: the dimensions' order (none
/// written keeps the default) and what follows the `:`.
fn with_layout(a: &mut ArrayShape, layout: &syntax::Layout<'_>) -> Result<(), ParseError> {
    let m2m = ints_of(layout.minor_to_major.as_str(), &layout.at)?;
    if let Some(tail) = &layout.tail {
        a.physical = read_text_at(tail, "layout", || {
            crate::formats::text::layout::parse_physical_layout(tail.as_str())
        })?;
    }
    if !m2m.is_empty() || a.rank() == 0 {
        if m2m.len() != a.rank() {
            return err_at(
                &layout.at,
                format!("layout has {} entries for rank {}", m2m.len(), a.rank()),
            );
        }
        a.minor_to_major = m2m;
    }
    Ok(())
}

/// An array shape's dimensions, and which of them are bounds (`<=8`), one
/// bit each as `ArrayShape::dynamic` holds them.
pub(super) fn dims_in(p: &Span<'_>) -> Result<(Vec<i64>, u32), ParseError> {
    let text = p.as_str();
    if !text.bytes().any(|b| b == b'<' || b == b'?') {
        return Ok((ints_of(text, p)?, 0));
    }
    let mut dynamic = 0u32;
    let mut dims = Vec::new();
    for (i, d) in text.split(',').enumerate() {
        let d = d.trim();
        let bound = d.strip_prefix("<=");
        if bound.is_some() || d == "?" {
            if i > crate::ir::shape::MAX_DYNAMIC_DIMENSION {
                return err_at(
                    p,
                    format!(
                        "dimension {i} is dynamic; hlatc keeps dynamic dimensions up to {} only",
                        crate::ir::shape::MAX_DYNAMIC_DIMENSION
                    ),
                );
            }
            dynamic |= 1 << i;
        }
        match d {
            "?" => dims.push(crate::ir::shape::UNBOUNDED),
            _ => dims.extend(ints_of(bound.unwrap_or(d), p)?),
        }
    }
    Ok((dims, dynamic))
}

/// The comma-separated integers of `body` (part of `p`'s text), read
/// by hand: every shape's dims and layout come through here.
pub(super) fn ints_of(body: &str, p: &Span<'_>) -> Result<Vec<i64>, ParseError> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.iter().filter(|&&b| b == b',').count() + 1);
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_space(&mut i);
    if i == bytes.len() {
        return Ok(out);
    }
    loop {
        let start = i;
        let negative = bytes.get(i) == Some(&b'-');
        i += usize::from(negative);
        let mut value: Option<i64> = Some(0);
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            let digit = i64::from(bytes[i] - b'0');
            value = value.and_then(|v| v.checked_mul(10)).and_then(|v| {
                if negative {
                    v.checked_sub(digit)
                } else {
                    v.checked_add(digit)
                }
            });
            i += 1;
        }
        match value {
            Some(v) if i > digits_start => out.push(v),
            Some(_) => return err_at(p, format!("expected an integer, found `{}`", body.trim())),
            None => {
                let token = &body[start..i];
                return err_at(p, format!("integer {token} is out of range"));
            }
        }
        skip_space(&mut i);
        if i == bytes.len() {
            return Ok(out);
        }
        if bytes[i] != b',' {
            return err_at(p, format!("expected an integer, found `{}`", body.trim()));
        }
        i += 1;
        skip_space(&mut i);
    }
}

pub(super) fn shape_index(index: &[syntax::Int<'_>]) -> Result<Vec<i64>, ParseError> {
    index.iter().map(int).collect()
}
