//! Values given or regrouped, not computed: `parameter`, `constant`,
//! `iota`, `tuple`, `get-tuple-element`, and `opt-barrier` and `domain`,
//! whose value is their operand's.

use super::{
    declared_array, refuse, AttributeError, DimensionError, OperandError, ShapeError, TypeError,
};
use crate::ir::literal::{Literal, LiteralTree};
use crate::ir::shape::{ElementType, Shape};

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

pub(super) fn opt_barrier(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    Ok(operands[0].clone())
}

pub(super) fn get_tuple_element(index: i64, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    match operands[0] {
        Shape::Tuple(elems) => usize::try_from(index)
            .ok()
            .and_then(|i| elems.get(i))
            .cloned()
            .ok_or_else(|| {
                OperandError::TupleIndex {
                    index,
                    tuple: operands[0].clone(),
                }
                .into()
            }),
        s => refuse(OperandError::NotTuple(s.clone())),
    }
}

pub(super) fn parameter(number: i64, declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    if number < 0 {
        return refuse(AttributeError::NegativeParameter(number));
    }
    declared.cloned().ok_or(ShapeError::NeedsResultShape)
}

pub(super) fn constant(lit: &Literal) -> Result<Shape, ShapeError> {
    Ok(Shape::Array(lit.shape.clone()))
}

pub(super) fn tuple_constant(elems: &[LiteralTree]) -> Result<Shape, ShapeError> {
    Ok(Shape::Tuple(elems.iter().map(LiteralTree::shape).collect()))
}

pub(super) fn tuple(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    Ok(Shape::Tuple(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}
