//! Ops that move or regroup elements without computing on them: `iota`,
//! `broadcast`, `reshape`, `bitcast`, `transpose`, `reverse`, the slices,
//! `concatenate`, `pad` and the asynchronous `copy-start`/`copy-done`.

use super::{
    arr, array, check_dims_in_range, declared_array, invalid, operand_and_declared, same_type,
    ShapeError,
};
use crate::ir::op::{PadDim, SliceDim};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

pub(super) fn iota(dimension: i64, declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    let d = declared_array(declared)?;
    if dimension < 0 || dimension as usize >= d.rank() {
        return invalid(format!(
            "iota_dimension {dimension} out of range for rank {}",
            d.rank()
        ));
    }
    if d.ty == ElementType::Pred {
        return invalid("iota cannot produce pred");
    }
    Ok(Shape::Array(d.clone()))
}

/// `(values, s32 indices)`, both the operand's dimensions with the last
/// cut to `k`.
pub(super) fn top_k(k: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let x = array(operands, 0)?;
    let Some(&last) = x.dims.last() else {
        return invalid(format!("topk needs an operand of rank 1 or more, got {x}"));
    };
    if k < 0 || k > last {
        return invalid(format!(
            "topk k={k} must be between 0 and the last dimension of {x}"
        ));
    }
    let mut dims = x.dims.clone();
    *dims.last_mut().expect("rank checked") = k;
    Ok(Shape::Tuple(vec![
        arr(x.ty, dims.clone()),
        arr(ElementType::S32, dims),
    ]))
}

pub(super) fn bitcast(operands: &[&Shape], declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    let (a, d) = operand_and_declared(operands, declared)?;
    let bytes = |s: &ArrayShape| s.element_count().saturating_mul(s.ty.byte_size() as i64);
    if bytes(a) != bytes(d) {
        return invalid(format!(
            "bitcast from {a} ({} bytes) to {d} ({} bytes) changes the byte size",
            bytes(a),
            bytes(d)
        ));
    }
    if (a.ty == ElementType::Pred) != (d.ty == ElementType::Pred) {
        return invalid("bitcast between pred and another type");
    }
    Ok(Shape::Array(d.clone()))
}

pub(super) fn broadcast(
    dimensions: &[i64],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (a, d) = operand_and_declared(operands, declared)?;
    if dimensions.len() != a.rank() {
        return invalid(format!(
            "broadcast dimensions {dimensions:?} must have one entry per operand dimension ({})",
            a.rank()
        ));
    }
    check_dims_in_range(dimensions, d.rank(), "broadcast")?;
    for (i, &od) in dimensions.iter().enumerate() {
        if a.dims[i] != d.dims[od as usize] {
            return invalid(format!(
                "broadcast operand dimension {i} (size {}) does not match result dimension {od} (size {})",
                a.dims[i], d.dims[od as usize]
            ));
        }
    }
    Ok(arr(a.ty, d.dims.clone()))
}

/// The declared shape, of as many elements (bounds counted); an inferred
/// dimension must be one of the result's.
pub(super) fn reshape(
    inferred_dimension: Option<i64>,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (a, d) = operand_and_declared(operands, declared)?;
    if a.element_count() != d.element_count() {
        return invalid(format!("reshape changes the element count: {a} to {d}"));
    }
    if let Some(i) =
        inferred_dimension.filter(|&i| usize::try_from(i).map_or(true, |i| i >= d.rank()))
    {
        return invalid(format!(
            "reshape's inferred_dimension {i} is not a dimension of {d}"
        ));
    }
    Ok(arr(a.ty, d.dims.clone()))
}

pub(super) fn transpose(permutation: &[i64], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    if permutation.len() != a.rank() {
        return invalid(format!(
            "transpose permutation {permutation:?} does not match rank {}",
            a.rank()
        ));
    }
    check_dims_in_range(permutation, a.rank(), "transpose")?;
    Ok(arr(
        a.ty,
        permutation.iter().map(|&p| a.dims[p as usize]).collect(),
    ))
}

pub(super) fn reverse(dimensions: &[i64], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    check_dims_in_range(dimensions, a.rank(), "reverse")?;
    Ok(arr(a.ty, a.dims.clone()))
}

pub(super) fn slice(slices: &[SliceDim], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    if slices.len() != a.rank() {
        return invalid(format!(
            "slice has {} ranges for rank {}",
            slices.len(),
            a.rank()
        ));
    }
    let mut dims = Vec::with_capacity(slices.len());
    for (i, s) in slices.iter().enumerate() {
        if s.start < 0 || s.start > s.limit || s.limit > a.dims[i] || s.stride < 1 {
            return invalid(format!(
                "slice range [{}:{}:{}] invalid for dimension {i} of size {}",
                s.start, s.limit, s.stride, a.dims[i]
            ));
        }
        // start <= limit was checked, so the span is non-negative.
        // XLA rounds up as (span + stride - 1) / stride, which must
        // not overflow either.
        let span = s.limit - s.start;
        if span.checked_add(s.stride - 1).is_none() {
            return invalid(format!(
                "slice stride {} of dimension {i} is too large",
                s.stride
            ));
        }
        dims.push(span / s.stride + i64::from(span % s.stride != 0));
    }
    Ok(arr(a.ty, dims))
}

pub(super) fn dynamic_slice(sizes: &[i64], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: "1 + rank".into(),
            got: 0,
        });
    }
    let a = array(operands, 0)?;
    check_start_indices(operands, 1, a.rank())?;
    if sizes.len() != a.rank() || sizes.iter().zip(&a.dims).any(|(s, d)| *s < 0 || s > d) {
        return invalid(format!("dynamic_slice_sizes {sizes:?} invalid for {a}"));
    }
    Ok(arr(a.ty, sizes.to_vec()))
}

pub(super) fn dynamic_update_slice(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.len() < 2 {
        return Err(ShapeError::OperandCount {
            expected: "2 + rank".into(),
            got: operands.len(),
        });
    }
    let (a, u) = (array(operands, 0)?, array(operands, 1)?);
    same_type(a, u, "dynamic-update-slice")?;
    if u.rank() != a.rank() || u.dims.iter().zip(&a.dims).any(|(x, y)| x > y) {
        return invalid(format!("update {u} does not fit in {a}"));
    }
    check_start_indices(operands, 2, a.rank())?;
    Ok(arr(a.ty, a.dims.clone()))
}

pub(super) fn concatenate(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: "at least 1".into(),
            got: 0,
        });
    }
    let first = array(operands, 0)?;
    let d = dimension;
    if d < 0 || d as usize >= first.rank() {
        return invalid(format!(
            "concatenate dimension {d} out of range for rank {}",
            first.rank()
        ));
    }
    let mut dims = first.dims.clone();
    dims[d as usize] = 0;
    for i in 0..operands.len() {
        let o = array(operands, i)?;
        same_type(first, o, "concatenate")?;
        if o.rank() != first.rank()
            || o.dims
                .iter()
                .zip(&first.dims)
                .enumerate()
                .any(|(k, (x, y))| k != d as usize && x != y)
        {
            return invalid(format!(
                "concatenate operand {i} {o} does not match {first}"
            ));
        }
        dims[d as usize] = dims[d as usize].saturating_add(o.dims[d as usize]);
    }
    Ok(arr(first.ty, dims))
}

pub(super) fn pad(config: &[PadDim], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (a, v) = (array(operands, 0)?, array(operands, 1)?);
    same_type(a, v, "pad")?;
    if v.rank() != 0 {
        return invalid(format!("padding value must be a scalar, got {v}"));
    }
    if config.len() != a.rank() {
        return invalid(format!(
            "padding has {} dimensions for rank {}",
            config.len(),
            a.rank()
        ));
    }
    let mut dims = Vec::with_capacity(a.rank());
    for (n, p) in a.dims.iter().zip(config) {
        if p.interior < 0 {
            return invalid("interior padding must be non-negative");
        }
        let out = (n - 1)
            .max(0)
            .checked_mul(p.interior)
            .and_then(|x| x.checked_add(*n))
            .and_then(|x| x.checked_add(p.low))
            .and_then(|x| x.checked_add(p.high))
            .unwrap_or(-1);
        if out < 0 {
            return invalid(format!(
                "padding {}_{}_{} makes dimension of size {n} negative",
                p.low, p.high, p.interior
            ));
        }
        dims.push(out);
    }
    Ok(arr(a.ty, dims))
}

/// `(destination, source, u32[])`: both the operand's shape up to layout,
/// as XLA's verifier compares them (the destination's memory space is its
/// own).
pub(super) fn copy_start(
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let x = operands[0];
    match declared {
        Some(Shape::Tuple(e))
            if e.len() == 3
                && e[0].compatible(x)
                && e[1].compatible(x)
                && e[2].is_scalar_of(ElementType::U32) =>
        {
            Ok(Shape::Tuple(e.clone()))
        }
        Some(s) => invalid(format!(
            "copy-start of {x} gives (destination, source, u32[]), both {x} up to layout; declared {s}"
        )),
        None => Err(ShapeError::NeedsResultShape),
    }
}

/// The destination of the copy a `copy-start` began.
pub(super) fn copy_done(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    match operands[0] {
        Shape::Tuple(e) if e.len() == 3 && e[2].is_scalar_of(ElementType::U32) => Ok(e[0].clone()),
        s => invalid(format!(
            "copy-done takes a copy-start's (destination, source, u32[]), got {s}"
        )),
    }
}

pub(super) fn check_start_indices(
    operands: &[&Shape],
    from: usize,
    rank: usize,
) -> Result<(), ShapeError> {
    // XLA still reads the first form: all start indices in one vector.
    if operands.len() == from + 1 {
        let v = array(operands, from)?;
        if v.rank() == 1 {
            if !v.ty.is_integer() || v.dims[0] != rank as i64 {
                return invalid(format!(
                    "a vector of start indices must be an integer array of the rank, {rank}, got {v}"
                ));
            }
            return Ok(());
        }
    }
    if operands.len() != from + rank {
        return Err(ShapeError::OperandCount {
            expected: format!("{} ({} + one start index per dimension)", from + rank, from),
            got: operands.len(),
        });
    }
    for i in from..operands.len() {
        let s = array(operands, i)?;
        if s.rank() != 0 || !s.ty.is_integer() {
            return invalid(format!(
                "start index {} must be an integer scalar, got {s}",
                i - from
            ));
        }
        let first = array(operands, from)?;
        if s.ty != first.ty {
            return invalid(format!(
                "start indices must all have one type: index 0 is {}, index {} is {}",
                first.ty,
                i - from,
                s.ty
            ));
        }
    }
    Ok(())
}
