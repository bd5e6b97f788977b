//! The ops of dynamic dimensions (`f32[<=8]`): `set-dimension-size`,
//! `get-dimension-size` and `dynamic-reshape`. A dynamic dimension's size
//! in a shape is its bound, so every other op's rules hold unchanged.

use super::{
    arr, array, declared_array, refuse, DimensionError, OperandError, OperandRule, ShapeError,
    ShapesError, TypeError,
};
use crate::ir::op::Opcode;
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// The dimension an op names, checked against the operand's rank.
fn dimension_of(opcode: Opcode, a: &ArrayShape, dimension: i64) -> Result<usize, ShapeError> {
    match usize::try_from(dimension) {
        Ok(d) if d < a.rank() => Ok(d),
        _ => refuse(DimensionError::OutOfRangeOf {
            opcode,
            dimension,
            operand: a.clone(),
        }),
    }
}

/// A size operand, an `s32[]`; `refused` says which one is not.
fn s32_scalar(s: &Shape, refused: impl FnOnce(Shape) -> OperandError) -> Result<(), ShapeError> {
    if s.is_scalar_of(ElementType::S32) {
        Ok(())
    } else {
        refuse(refused(s.clone()))
    }
}

/// `set-dimension-size(operand, size)`: the operand with that dimension
/// dynamic, bounded by its size.
pub(super) fn set_dimension_size(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    let d = dimension_of(const { Opcode::new("set-dimension-size") }, a, dimension)?;
    s32_scalar(operands[1], OperandError::SetDimensionSize)?;
    let mut out = a.clone();
    out.set_dynamic(d, true);
    Ok(Shape::Array(out))
}

/// `get-dimension-size(operand)`: an `s32[]`, so the dimension's bound must
/// fit in one.
pub(super) fn get_dimension_size(dimension: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    let d = dimension_of(const { Opcode::new("get-dimension-size") }, a, dimension)?;
    if a.dims[d] > i64::from(i32::MAX) {
        return refuse(ShapesError::DimensionSize {
            dimension: d,
            operand: a.clone(),
        });
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
            expected: OperandRule::OneSizePerDimension,
            got: 0,
        });
    }
    let a = array(operands, 0)?;
    let d = declared_array(declared)?;
    if d.ty != a.ty {
        return refuse(TypeError::DynamicReshape {
            operand: Box::new(a.clone()),
            ty: d.ty,
        });
    }
    if operands.len() != 1 + d.rank() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::OneSizePerDimensionOf { rank: d.rank() },
            got: operands.len(),
        });
    }
    for (index, s) in operands[1..].iter().enumerate() {
        s32_scalar(s, |shape| OperandError::DynamicReshapeSize { index, shape })?;
    }
    Ok(Shape::Array(d.clone()))
}
