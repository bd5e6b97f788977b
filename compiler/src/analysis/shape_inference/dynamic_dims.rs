//! The ops of dynamic dimensions (`f32[<=8]`): `set-dimension-size`,
//! `get-dimension-size` and `dynamic-reshape`. A dynamic dimension's size
//! in a shape is its bound, so every other op's rules hold unchanged.

use super::{arr, array, declared_array, invalid, ShapeError};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// The dimension an op names, checked against the operand's rank.
fn dimension_of(opcode: &str, a: &ArrayShape, dimension: i64) -> Result<usize, ShapeError> {
    match usize::try_from(dimension) {
        Ok(d) if d < a.rank() => Ok(d),
        _ => invalid(format!(
            "{opcode} dimension {dimension} out of range for {a}"
        )),
    }
}

fn s32_scalar(opcode: &str, what: &str, s: &Shape) -> Result<(), ShapeError> {
    if s.is_scalar_of(ElementType::S32) {
        Ok(())
    } else {
        invalid(format!("{opcode}'s {what} must be s32[], got {s}"))
    }
}

/// `set-dimension-size(operand, size)`: the operand with that dimension
/// dynamic, bounded by its size.
pub(super) fn set_dimension_size(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    let d = dimension_of("set-dimension-size", a, dimension)?;
    s32_scalar("set-dimension-size", "size (operand 1)", operands[1])?;
    let mut out = a.clone();
    out.set_dynamic(d, true);
    Ok(Shape::Array(out))
}

/// `get-dimension-size(operand)`: an `s32[]`, so the dimension's bound must
/// fit in one.
pub(super) fn get_dimension_size(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    let d = dimension_of("get-dimension-size", a, dimension)?;
    if a.dims[d] > i64::from(i32::MAX) {
        return invalid(format!(
            "get-dimension-size of dimension {d} of {a}: its size does not fit in s32"
        ));
    }
    Ok(arr(ElementType::S32, vec![]))
}

/// `dynamic-reshape(operand, sizes...)`: the declared shape, of the
/// operand's type, with one s32 size per dimension.
pub(super) fn dynamic_reshape(
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: "1 + one size per result dimension".into(),
            got: 0,
        });
    }
    let a = array(operands, 0)?;
    let d = declared_array(declared)?;
    if d.ty != a.ty {
        return invalid(format!("dynamic-reshape of {a} cannot give {}", d.ty));
    }
    if operands.len() != 1 + d.rank() {
        return Err(ShapeError::OperandCount {
            expected: format!("{} (1 + one size per result dimension)", 1 + d.rank()),
            got: operands.len(),
        });
    }
    for (i, s) in operands[1..].iter().enumerate() {
        s32_scalar("dynamic-reshape", &format!("size {i}"), s)?;
    }
    Ok(Shape::Array(d.clone()))
}
