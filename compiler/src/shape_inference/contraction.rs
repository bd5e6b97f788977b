//! `dot` and the result type of a contraction (shared with `convolution`).

use super::{arity, arr, array, check_dims_in_range, invalid, ShapeError};
use crate::op::{DotDims, Precision};
use crate::types::{ArrayShape, ElementType, Shape};

pub(super) fn dot(
    dims: &DotDims,
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    arity(operands, 2)?;
    let (l, r) = (array(operands, 0)?, array(operands, 1)?);
    if !precision.is_empty() && precision.len() != 2 {
        return invalid("operand_precision needs one entry per operand");
    }
    let ty = contraction_type("dot", l, r, declared)?;
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contracting.len() != dims.rhs_contracting.len()
    {
        return invalid("dot needs as many lhs as rhs batch and contracting dimensions");
    }
    let lhs_all: Vec<i64> = dims
        .lhs_batch
        .iter()
        .chain(&dims.lhs_contracting)
        .copied()
        .collect();
    let rhs_all: Vec<i64> = dims
        .rhs_batch
        .iter()
        .chain(&dims.rhs_contracting)
        .copied()
        .collect();
    check_dims_in_range(&lhs_all, l.rank(), "lhs")?;
    check_dims_in_range(&rhs_all, r.rank(), "rhs")?;
    for (a, b) in dims
        .lhs_batch
        .iter()
        .zip(&dims.rhs_batch)
        .chain(dims.lhs_contracting.iter().zip(&dims.rhs_contracting))
    {
        if l.dims[*a as usize] != r.dims[*b as usize] {
            return invalid(format!(
                "dot dimension sizes differ: lhs dim {a} is {}, rhs dim {b} is {}",
                l.dims[*a as usize], r.dims[*b as usize]
            ));
        }
    }
    let mut out: Vec<i64> = dims.lhs_batch.iter().map(|&d| l.dims[d as usize]).collect();
    out.extend(
        (0..l.rank() as i64)
            .filter(|d| !lhs_all.contains(d))
            .map(|d| l.dims[d as usize]),
    );
    out.extend(
        (0..r.rank() as i64)
            .filter(|d| !rhs_all.contains(d))
            .map(|d| r.dims[d as usize]),
    );
    Ok(arr(ty, out))
}

/// The element type of a dot or convolution of `l` and `r`: the written
/// one (an accumulation type), else the operands'. Integer weights may meet
/// float activations (`s4` x `bf16`), as XLA allows; the result is then a
/// float type, written.
pub(super) fn contraction_type(
    opcode: &str,
    l: &ArrayShape,
    r: &ArrayShape,
    declared: Option<&Shape>,
) -> Result<ElementType, ShapeError> {
    let mixed = l.ty.is_float() != r.ty.is_float();
    if l.ty == ElementType::Pred || r.ty == ElementType::Pred {
        return invalid(format!(
            "{opcode} operand types {} and {} are incompatible",
            l.ty, r.ty
        ));
    }
    Ok(match declared {
        Some(Shape::Array(d))
            if (d.ty.is_float() == l.ty.is_float() || mixed && d.ty.is_float())
                && d.ty != ElementType::Pred =>
        {
            d.ty
        }
        _ if mixed => {
            return invalid(format!(
                "a {opcode} of {} and {} gives a float type, written as its result",
                l.ty, r.ty
            ))
        }
        _ => l.ty,
    })
}
