//! Ops that apply a scalar computation across whole arrays: `map` (to each
//! element) and `sort` (as the order of two elements of every operand).

use super::{array, check_signature, invalid, CalleeSignature, ShapeError};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// The operands as arrays of one shape.
fn same_dims<'a>(opcode: &str, operands: &[&'a Shape]) -> Result<Vec<&'a ArrayShape>, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: "at least 1".into(),
            got: 0,
        });
    }
    let arrays = (0..operands.len())
        .map(|i| array(operands, i))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(other) = arrays.iter().find(|a| a.dims != arrays[0].dims) {
        return invalid(format!(
            "{opcode} operands differ in dimensions: {} vs {other}",
            arrays[0]
        ));
    }
    Ok(arrays)
}

pub(super) fn map(
    dimensions: &[i64],
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let arrays = same_dims("map", operands)?;
    let rank = arrays[0].rank() as i64;
    if !dimensions.is_empty() && dimensions != (0..rank).collect::<Vec<_>>() {
        return invalid(format!(
            "map dimensions must be every dimension in order (0..{rank}), got {dimensions:?}"
        ));
    }
    let params: Vec<Shape> = arrays.iter().map(|a| Shape::scalar(a.ty)).collect();
    let result_ty = match &sig.result {
        Shape::Array(r) if r.rank() == 0 => r.ty,
        r => {
            return invalid(format!(
                "map computation '{name}' must return a scalar, returns {r}"
            ))
        }
    };
    check_signature(name, &sig, &params, &Shape::scalar(result_ty))?;
    Ok(Shape::array(result_ty, arrays[0].dims.clone()))
}

pub(super) fn sort(
    dimension: i64,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let arrays = same_dims("sort", operands)?;
    if dimension < 0 || dimension as usize >= arrays[0].rank() {
        return invalid(format!(
            "sort dimension {dimension} out of range for {}",
            arrays[0]
        ));
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
