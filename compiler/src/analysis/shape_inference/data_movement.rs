//! Ops that move or regroup elements without computing on them: `iota`,
//! `broadcast`, `reshape`, `bitcast`, `transpose`, `reverse`, the slices,
//! `concatenate`, `pad` and the asynchronous `copy-start`/`copy-done`.

use super::{
    arr, array, check_dims_in_range, declared_array, operand_and_declared, refuse, same_type,
    AttributeError, DeclaredError, DimensionError, OperandError, ShapeError, ShapesError,
    TypeError,
};
use crate::ir::op::{Opcode, PadDim, SliceDim};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

const CONCATENATE: Opcode = Opcode::new("concatenate");
const DYNAMIC_UPDATE_SLICE: Opcode = Opcode::new("dynamic-update-slice");
const PAD: Opcode = Opcode::new("pad");
const RESHAPE: Opcode = Opcode::new("reshape");
const TOPK: Opcode = Opcode::new("topk");

pub(super) fn iota(dimension: i64, declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    let d = declared_array(declared)?;
    if dimension < 0 || dimension as usize >= d.rank() {
        return refuse(DimensionError::Iota {
            dimension,
            rank: d.rank(),
        });
    }
    if d.ty == ElementType::Pred {
        return refuse(TypeError::IotaPred);
    }
    Ok(Shape::Array(d.clone()))
}

/// `(values, s32 indices)`, both the operand's dimensions with the last
/// cut to `k`.
pub(super) fn top_k(k: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let x = array(operands, 0)?;
    let Some(&last) = x.dims.last() else {
        return refuse(ShapesError::Scalar {
            opcode: TOPK,
            operand: x.clone(),
        });
    };
    if k < 0 || k > last {
        return refuse(AttributeError::TopK {
            k,
            operand: x.clone(),
        });
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
        return refuse(ShapesError::BitcastBytes {
            operand: a.clone(),
            operand_bytes: bytes(a),
            result: d.clone(),
            result_bytes: bytes(d),
        });
    }
    if (a.ty == ElementType::Pred) != (d.ty == ElementType::Pred) {
        return refuse(TypeError::BitcastPred {
            from: a.ty,
            to: d.ty,
        });
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
        return refuse(AttributeError::BroadcastDims {
            dimensions: dimensions.to_vec(),
            rank: a.rank(),
        });
    }
    check_dims_in_range(dimensions, d.rank(), "broadcast")?;
    for (i, &od) in dimensions.iter().enumerate() {
        if a.dims[i] != d.dims[od as usize] {
            return refuse(ShapesError::Broadcast {
                operand_dim: i,
                operand_size: a.dims[i],
                result_dim: od,
                result_size: d.dims[od as usize],
            });
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
        return refuse(ShapesError::ReshapeCount {
            operand: a.clone(),
            result: d.clone(),
        });
    }
    if let Some(i) =
        inferred_dimension.filter(|&i| usize::try_from(i).map_or(true, |i| i >= d.rank()))
    {
        return refuse(DimensionError::NotADimension {
            opcode: RESHAPE,
            attribute: "inferred_dimension",
            dimension: i,
            shape: d.clone(),
        });
    }
    Ok(arr(a.ty, d.dims.clone()))
}

pub(super) fn transpose(permutation: &[i64], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    if permutation.len() != a.rank() {
        return refuse(AttributeError::Permutation {
            permutation: permutation.to_vec(),
            rank: a.rank(),
        });
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
        return refuse(AttributeError::SliceRanges {
            ranges: slices.len(),
            rank: a.rank(),
        });
    }
    let mut dims = Vec::with_capacity(slices.len());
    for (i, s) in slices.iter().enumerate() {
        if s.start < 0 || s.start > s.limit || s.limit > a.dims[i] || s.stride < 1 {
            return refuse(AttributeError::SliceRange {
                start: s.start,
                limit: s.limit,
                stride: s.stride,
                dimension: i,
                size: a.dims[i],
            });
        }
        // start <= limit was checked, so the span is non-negative.
        // XLA rounds up as (span + stride - 1) / stride, which must
        // not overflow either.
        let span = s.limit - s.start;
        if span.checked_add(s.stride - 1).is_none() {
            return refuse(AttributeError::SliceStride {
                stride: s.stride,
                dimension: i,
            });
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
        return refuse(AttributeError::SliceSizes {
            attribute: "dynamic_slice_sizes",
            sizes: sizes.to_vec(),
            operand: a.clone(),
        });
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
    same_type(a, u, DYNAMIC_UPDATE_SLICE)?;
    if u.rank() != a.rank() || u.dims.iter().zip(&a.dims).any(|(x, y)| x > y) {
        return refuse(ShapesError::Update {
            update: u.clone(),
            operand: a.clone(),
        });
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
        return refuse(DimensionError::OutOfRange {
            what: "concatenate",
            dimension: d,
            rank: first.rank(),
        });
    }
    let mut dims = first.dims.clone();
    dims[d as usize] = 0;
    for i in 0..operands.len() {
        let o = array(operands, i)?;
        same_type(first, o, CONCATENATE)?;
        if o.rank() != first.rank()
            || o.dims
                .iter()
                .zip(&first.dims)
                .enumerate()
                .any(|(k, (x, y))| k != d as usize && x != y)
        {
            return refuse(ShapesError::Concatenate {
                index: i,
                operand: o.clone(),
                first: first.clone(),
            });
        }
        dims[d as usize] = dims[d as usize].saturating_add(o.dims[d as usize]);
    }
    Ok(arr(first.ty, dims))
}

pub(super) fn pad(config: &[PadDim], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (a, v) = (array(operands, 0)?, array(operands, 1)?);
    same_type(a, v, PAD)?;
    if v.rank() != 0 {
        return refuse(ShapesError::PaddingValue(v.clone()));
    }
    if config.len() != a.rank() {
        return refuse(AttributeError::PaddingDims {
            entries: config.len(),
            rank: a.rank(),
        });
    }
    let mut dims = Vec::with_capacity(a.rank());
    for (n, p) in a.dims.iter().zip(config) {
        if p.interior < 0 {
            return refuse(AttributeError::NegativeInterior {
                interior: p.interior,
            });
        }
        let out = (n - 1)
            .max(0)
            .checked_mul(p.interior)
            .and_then(|x| x.checked_add(*n))
            .and_then(|x| x.checked_add(p.low))
            .and_then(|x| x.checked_add(p.high))
            .unwrap_or(-1);
        if out < 0 {
            return refuse(AttributeError::NegativePadding {
                low: p.low,
                high: p.high,
                interior: p.interior,
                size: *n,
            });
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
        Some(s) => refuse(DeclaredError::CopyStart {
            operand: x.clone(),
            declared: s.clone(),
        }),
        None => Err(ShapeError::NeedsResultShape),
    }
}

/// The destination of the copy a `copy-start` began.
pub(super) fn copy_done(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    match operands[0] {
        Shape::Tuple(e) if e.len() == 3 && e[2].is_scalar_of(ElementType::U32) => Ok(e[0].clone()),
        s => refuse(OperandError::CopyDone(s.clone())),
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
                return refuse(OperandError::StartIndexVector {
                    rank,
                    vector: v.clone(),
                });
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
            return refuse(OperandError::StartIndex {
                index: i - from,
                shape: s.clone(),
            });
        }
        let first = array(operands, from)?;
        if s.ty != first.ty {
            return refuse(TypeError::StartIndices {
                first: first.ty,
                index: i - from,
                ty: s.ty,
            });
        }
    }
    Ok(())
}
