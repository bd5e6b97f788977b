//! Random numbers: `rng`, `rng-bit-generator` and `rng-get-and-update-state`.

use super::{array, declared_array, refuse, DeclaredError, OperandError, ShapeError, TypeError};
use crate::ir::op::{RngAlgorithm, RngDistribution};
use crate::ir::shape::{ElementType, Shape};

/// `rng-get-and-update-state()`: the state, `u64[2]`.
pub(super) fn rng_state() -> Result<Shape, ShapeError> {
    Ok(Shape::array(ElementType::U64, [2]))
}

pub(super) fn rng(
    distribution: RngDistribution,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (a, b) = (array(operands, 0)?, array(operands, 1)?);
    let d = declared_array(declared)?;
    if a.rank() != 0 || b.rank() != 0 || a.ty != d.ty || b.ty != d.ty {
        return refuse(OperandError::RngParameters {
            ty: d.ty,
            a: a.clone(),
            b: b.clone(),
        });
    }
    let ok = match distribution {
        RngDistribution::Uniform => d.ty.is_float() || d.ty.is_integer(),
        RngDistribution::Normal => d.ty.is_float(),
    };
    if !ok {
        return refuse(TypeError::Rng {
            distribution,
            ty: d.ty,
        });
    }
    Ok(Shape::Array(d.clone()))
}

pub(super) fn rng_bit_generator(
    algorithm: RngAlgorithm,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let state = array(operands, 0)?;
    // The state is a u64 key and counter: two words, or three for
    // Philox, which is also what XLA CPU runs for the default algorithm
    // (measured: XLA's test of a u64[3] default state runs). XLA CPU aborts
    // on any other state, and refuses a third word for ThreeFry.
    let ok = state.ty == ElementType::U64
        && match algorithm {
            RngAlgorithm::Philox | RngAlgorithm::Default => {
                matches!(state.dims.as_slice(), [2] | [3])
            }
            _ => state.dims == [2],
        };
    if !ok {
        return refuse(OperandError::RngState {
            algorithm,
            state: state.clone(),
        });
    }
    match declared {
        Some(Shape::Tuple(elems)) if elems.len() == 2 => {
            if !elems[0].compatible(operands[0]) {
                return refuse(DeclaredError::RngState {
                    result: elems[0].clone(),
                    state: state.clone(),
                });
            }
            match &elems[1] {
                Shape::Array(o) if matches!(o.ty, ElementType::U32 | ElementType::U64) => {
                    Ok(Shape::Tuple(elems.clone()))
                }
                o => refuse(DeclaredError::RngOutput(o.clone())),
            }
        }
        Some(s) => refuse(DeclaredError::RngBitGenerator(s.clone())),
        None => Err(ShapeError::NeedsResultShape),
    }
}
