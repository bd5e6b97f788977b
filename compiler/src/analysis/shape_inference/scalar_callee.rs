//! Ops that apply a scalar computation across whole arrays: `map` (to each
//! element) and `sort` (as the order of two elements of every operand).

use super::{
    array, check_signature, refuse, AttributeError, CalleeError, CalleeSignature, DimensionError,
    ShapeError, ShapesError,
};
use crate::ir::op::Opcode;
use crate::ir::shape::{ArrayShape, ElementType, Shape};

const SORT: Opcode = Opcode::new("sort");

/// The operands as arrays of one shape.
fn same_dims<'a>(
    opcode: Opcode,
    operands: &[&'a Shape],
) -> Result<Vec<&'a ArrayShape>, ShapeError> {
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
        return refuse(ShapesError::Differ {
            opcode,
            what: "operands",
            lhs: arrays[0].clone(),
            rhs: (*other).clone(),
        });
    }
    Ok(arrays)
}

pub(super) fn map(
    dimensions: &[i64],
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let arrays = same_dims(const { Opcode::new("map") }, operands)?;
    let rank = arrays[0].rank() as i64;
    if !dimensions.is_empty() && dimensions != (0..rank).collect::<Vec<_>>() {
        return refuse(AttributeError::MapDimensions {
            dimensions: dimensions.to_vec(),
            rank,
        });
    }
    let params: Vec<Shape> = arrays.iter().map(|a| Shape::scalar(a.ty)).collect();
    let result_ty = match &sig.result {
        Shape::Array(r) if r.rank() == 0 => r.ty,
        r => {
            return refuse(CalleeError::MapResult {
                callee: name.to_string(),
                result: r.clone(),
            })
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
    let arrays = same_dims(SORT, operands)?;
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
