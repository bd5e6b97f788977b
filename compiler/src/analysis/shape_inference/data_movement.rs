//! Ops that move or regroup elements without computing on them:
//! `broadcast`, `reshape`, `bitcast`, `transpose`, `reverse`, `concatenate`,
//! `pad`, the orderings (`sort` by a comparator, `topk`) and the
//! asynchronous `copy-start`/`copy-done`.

use super::{
    arr, array, arrays_of_same_dims, check_dims_in_range, check_signature, operand_and_declared,
    refuse, same_type, AttributeError, CalleeSignature, DeclaredError, DimensionError,
    OperandError, OperandRule, ShapeError, ShapesError, TypeError,
};
use crate::ir::op::{Opcode, PadDim};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

const CONCATENATE: Opcode = Opcode::new("concatenate");
const PAD: Opcode = Opcode::new("pad");
const RESHAPE: Opcode = Opcode::new("reshape");
const SORT: Opcode = Opcode::new("sort");
const TOPK: Opcode = Opcode::new("topk");

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

pub(super) fn concatenate(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::AtLeastOne,
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

pub(super) fn sort(
    dimension: i64,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let arrays = arrays_of_same_dims(SORT, operands)?;
    if dimension < 0 || dimension as usize >= arrays[0].rank() {
        return refuse(DimensionError::OutOfRangeOf {
            opcode: SORT,
            dimension,
            operand: arrays[0].clone(),
        });
    }
    // Two scalars per operand: the elements compared.
    let params: Vec<Shape> = arrays
        .iter()
        .flat_map(|a| [Shape::scalar(a.ty), Shape::scalar(a.ty)])
        .collect();
    check_signature(name, &sig, &params, &Shape::scalar(ElementType::Pred))?;
    Ok(match operands {
        [one] => (*one).clone(),
        _ => Shape::Tuple(operands.iter().map(|s| (*s).clone()).collect()),
    })
}
