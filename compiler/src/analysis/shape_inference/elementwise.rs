//! Elementwise ops: `unary` and `binary` arithmetic, `compare`, `select`,
//! `clamp`, the conversions between element types, and `map` (a scalar
//! computation applied to each element).

use super::{
    arr, array, arrays_of_same_dims, check_signature, declared_array, operand_and_declared, refuse,
    same_type, AttributeError, CalleeError, CalleeSignature, ShapeError, ShapesError, TypeError,
};
use crate::ir::op::{BinaryOp, ComparisonDirection, ComparisonType, Opcode, UnaryOp};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

const COMPARE: Opcode = Opcode::new("compare");
const CLAMP: Opcode = Opcode::new("clamp");
const BITCAST_CONVERT: Opcode = Opcode::new("bitcast-convert");

/// An elementwise op's two operands, arrays of the same dimensions.
fn same_dims<'a>(
    opcode: Opcode,
    operands: &[&'a Shape],
) -> Result<(&'a ArrayShape, &'a ArrayShape), ShapeError> {
    let (x, y) = (array(operands, 0)?, array(operands, 1)?);
    if x.dims != y.dims {
        return refuse(ShapesError::OperandDims {
            opcode,
            lhs: x.clone(),
            rhs: y.clone(),
        });
    }
    Ok((x, y))
}

pub(super) fn unary(u: UnaryOp, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    // A copy of any shape is that shape, a tuple's included, as XLA's
    // inference has it (there is no copy opcode in its proto-level ops).
    if u == UnaryOp::Copy {
        return Ok(operands[0].clone());
    }
    let a = array(operands, 0)?;
    let (float, complex) = (a.ty.is_float(), a.ty.is_complex());
    // Which types each op takes, as XLA's inference says.
    let ok = match u {
        UnaryOp::Not => a.ty == ElementType::Pred || a.ty.is_integer(),
        UnaryOp::PopulationCount => a.ty.is_integer(),
        // XLA CPU has no abs or sign of an unsigned integer and
        // aborts on one.
        UnaryOp::Abs | UnaryOp::Sign => float || complex || a.ty.is_signed_int(),
        UnaryOp::Negate => a.ty != ElementType::Pred,
        // XLA CPU has no complex cbrt ("Failed after pipeline-start").
        UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::RoundNearestEven
        | UnaryOp::IsFinite
        | UnaryOp::Erf
        | UnaryOp::Cbrt => float,
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Tan
        | UnaryOp::Logistic
        | UnaryOp::Real
        | UnaryOp::Imag => float || complex,
        UnaryOp::Copy => true,
    };
    if !ok {
        return refuse(TypeError::NotAccepted {
            opcode: Opcode::new(u.opcode()),
            ty: a.ty,
        });
    }
    let ty = match u {
        UnaryOp::IsFinite => ElementType::Pred,
        // A complex value's magnitude and parts are of its part type.
        UnaryOp::Abs | UnaryOp::Real | UnaryOp::Imag if complex => {
            a.ty.complex_component().expect("complex")
        }
        _ => a.ty,
    };
    Ok(arr(ty, a.dims.clone()))
}

pub(super) fn binary(b: BinaryOp, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    // The opcode only for an error: `Opcode::new` searches the op table.
    let opcode = || Opcode::new(b.opcode());
    let (x, y) = (array(operands, 0)?, array(operands, 1)?);
    if x.dims != y.dims {
        return refuse(ShapesError::OperandDims {
            opcode: opcode(),
            lhs: x.clone(),
            rhs: y.clone(),
        });
    }
    if x.ty != y.ty {
        return refuse(TypeError::Differ {
            opcode: opcode(),
            lhs: x.ty,
            rhs: y.ty,
        });
    }
    let ok = match b {
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            x.ty == ElementType::Pred || x.ty.is_integer()
        }
        BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic => {
            x.ty.is_integer()
        }
        BinaryOp::Atan2 => x.ty.is_float() || x.ty.is_complex(),
        // A complex remainder takes XLA CPU down with a segfault.
        BinaryOp::Remainder => x.ty != ElementType::Pred && !x.ty.is_complex(),
        BinaryOp::Complex => x.ty.complex_of().is_some(),
        // XLA's verifier takes pred here (measured on XLA CPU), and only
        // here: its subtract, divide and power refuse pred.
        BinaryOp::Add | BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum => true,
        _ => x.ty != ElementType::Pred,
    };
    if !ok {
        return refuse(TypeError::NotAccepted {
            opcode: opcode(),
            ty: x.ty,
        });
    }
    let ty = match b {
        BinaryOp::Complex => x.ty.complex_of().expect("checked above"),
        _ => x.ty,
    };
    Ok(arr(ty, x.dims.clone()))
}

pub(super) fn compare(
    direction: ComparisonDirection,
    kind: Option<ComparisonType>,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let (x, y) = same_dims(COMPARE, operands)?;
    same_type(x, y, COMPARE)?;
    // Complex values have no order; XLA CPU's evaluator aborts on an
    // ordered comparison of them ("unhandled direction"), found by the
    // fuzzer.
    if x.ty.is_complex() && !matches!(direction, ComparisonDirection::Eq | ComparisonDirection::Ne)
    {
        return refuse(TypeError::UnorderedComplex {
            ty: x.ty,
            direction,
        });
    }
    if let Some(k) = kind {
        check_comparison_type(k, x.ty)?;
    }
    Ok(arr(ElementType::Pred, x.dims.clone()))
}

pub(super) fn select(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (p, t, f) = (
        array(operands, 0)?,
        array(operands, 1)?,
        array(operands, 2)?,
    );
    if p.ty != ElementType::Pred {
        return refuse(TypeError::Predicate(p.ty));
    }
    if !t.same_dims_and_type(f) {
        return refuse(ShapesError::SelectBranches {
            on_true: t.clone(),
            on_false: f.clone(),
        });
    }
    if p.dims != t.dims && !p.dims.is_empty() {
        return refuse(ShapesError::SelectPredicate {
            predicate: p.clone(),
            branches: t.clone(),
        });
    }
    Ok(Shape::Array(ArrayShape::new(t.ty, t.dims.clone())))
}

pub(super) fn clamp(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (lo, x, hi) = (
        array(operands, 0)?,
        array(operands, 1)?,
        array(operands, 2)?,
    );
    for (b, bound) in [(lo, "min"), (hi, "max")] {
        same_type(b, x, CLAMP)?;
        if b.dims != x.dims && !b.dims.is_empty() {
            return refuse(ShapesError::ClampBound {
                bound,
                shape: b.clone(),
                operand: x.clone(),
            });
        }
    }
    Ok(arr(x.ty, x.dims.clone()))
}

pub(super) fn convert(operands: &[&Shape], declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    let (a, d) = operand_and_declared(operands, declared)?;
    if a.dims != d.dims {
        return refuse(ShapesError::Convert {
            operand: a.clone(),
            result: d.clone(),
        });
    }
    // XLA has no conversion that drops an imaginary part: `real` says so.
    if a.ty.is_complex() && !d.ty.is_complex() {
        return refuse(TypeError::DropsImaginary {
            from: a.ty,
            to: d.ty,
        });
    }
    Ok(arr(d.ty, a.dims.clone()))
}

pub(super) fn stochastic_convert(
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (x, random) = (array(operands, 0)?, array(operands, 1)?);
    let d = declared_array(declared)?;
    if !x.ty.is_float() {
        return refuse(TypeError::StochasticConvert(x.ty));
    }
    if !random.ty.is_unsigned_int() || random.ty.bit_width() != x.ty.bit_width() {
        return refuse(TypeError::RandomBits {
            ty: x.ty,
            bits: random.ty,
        });
    }
    if random.dims != x.dims || d.dims != x.dims {
        return refuse(ShapesError::StochasticConvert {
            operand: x.clone(),
            random: random.clone(),
            result: d.clone(),
        });
    }
    Ok(arr(d.ty, x.dims.clone()))
}

/// Rounds within the operand's own float type, so the bits must fit it
/// (XLA's rule: an exponent of at least one bit, a non-negative mantissa).
pub(super) fn reduce_precision(
    (exponent_bits, mantissa_bits): (i32, i32),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let x = array(operands, 0)?;
    if !x.ty.is_float() {
        return refuse(TypeError::ReducePrecision(x.ty));
    }
    if exponent_bits < 1 || mantissa_bits < 0 {
        return refuse(AttributeError::PrecisionBits {
            exponent_bits,
            mantissa_bits,
        });
    }
    Ok(arr(x.ty, x.dims.clone()))
}

pub(super) fn bitcast_convert(
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (a, d) = operand_and_declared(operands, declared)?;
    let (wi, wo) = (a.ty.bit_width(), d.ty.bit_width());
    let dims = if wi == wo {
        a.dims.clone()
    } else if wi > wo {
        let mut v = a.dims.clone();
        v.push((wi / wo) as i64);
        v
    } else {
        match a.dims.split_last() {
            Some((&last, rest)) if last as usize == wo / wi => rest.to_vec(),
            _ => {
                return refuse(ShapesError::BitcastConvert {
                    operand: a.clone(),
                    to: d.ty,
                    size: wo / wi,
                })
            }
        }
    };
    if a.ty == ElementType::Pred || d.ty == ElementType::Pred {
        return refuse(TypeError::NotAccepted {
            opcode: BITCAST_CONVERT,
            ty: ElementType::Pred,
        });
    }
    if a.ty.is_complex() != d.ty.is_complex() {
        return refuse(TypeError::BitcastComplexReal {
            from: a.ty,
            to: d.ty,
        });
    }
    // XLA's inference allows c64 to c128 here, but XLA CPU's expander of
    // width-changing bitcasts aborts on a complex type ("unhandled type").
    if a.ty.is_complex() && wi != wo {
        return refuse(TypeError::BitcastComplexWidths {
            from: a.ty,
            to: d.ty,
        });
    }
    Ok(arr(d.ty, dims))
}

/// The comparison types XLA accepts for an element type: FLOAT or
/// TOTALORDER for floats, SIGNED for signed integers, UNSIGNED for unsigned
/// integers and pred. Any other pairing aborts XLA's compiler.
pub(super) fn check_comparison_type(
    kind: ComparisonType,
    ty: ElementType,
) -> Result<(), ShapeError> {
    let ok = match kind {
        // XLA's verifier wants FLOAT for complex operands.
        ComparisonType::Float => ty.is_float() || ty.is_complex(),
        ComparisonType::TotalOrder => ty.is_float(),
        ComparisonType::Signed => ty.is_signed_int(),
        ComparisonType::Unsigned => ty == ElementType::Pred || ty.is_unsigned_int(),
    };
    if !ok {
        return refuse(TypeError::Comparison { kind, ty });
    }
    Ok(())
}

pub(super) fn map(
    dimensions: &[i64],
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let arrays = arrays_of_same_dims(const { Opcode::new("map") }, operands)?;
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
