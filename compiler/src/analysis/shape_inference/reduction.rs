//! `reduce` and the batch normalizations (statistics per entry of the
//! feature dimension, over every other dimension), and how a reducer's
//! signature is checked (also for `reduce-window`, `scatter` and the
//! collectives).

use super::{
    arr, array, check_dims_in_range, check_signature, check_signature_as, one_or_tuple, refuse,
    CalleeSignature, DimensionError, OperandError, OperandRule, ShapeError, ShapesError, TypeError,
};
use crate::ir::op::{BatchNormKind, Opcode};
use crate::ir::shape::{ArrayShape, Shape};

pub(super) fn reduce(
    dimensions: &[i64],
    (to_apply, callee): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let inputs = inputs_and_inits(const { Opcode::new("reduce") }, operands)?;
    check_dims_in_range(dimensions, inputs[0].rank(), "reduce")?;
    let tupled = check_reducer(to_apply, &callee, &inputs, FloatTypes::Exact)?;
    let results = inputs.iter().map(|x| {
        let kept = (0..x.rank() as i64)
            .filter(|d| !dimensions.contains(d))
            .map(|d| x.dims[d as usize])
            .collect();
        arr(x.ty, kept)
    });
    Ok(reduced(results.collect(), tupled))
}

/// A reduction's operands: inputs of one shape, then a scalar init of each
/// input's type. Returns the inputs.
pub(super) fn inputs_and_inits<'a>(
    opcode: Opcode,
    operands: &[&'a Shape],
) -> Result<Vec<&'a ArrayShape>, ShapeError> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::InputsThenInits,
            got: operands.len(),
        });
    }
    let n = operands.len() / 2;
    let first = array(operands, 0)?;
    let mut inputs = Vec::with_capacity(n);
    for i in 0..n {
        let (x, init) = (array(operands, i)?, array(operands, n + i)?);
        if x.dims != first.dims {
            return refuse(ShapesError::Differ {
                opcode,
                what: "inputs",
                lhs: x.clone(),
                rhs: first.clone(),
            });
        }
        if init.rank() != 0 || init.ty != x.ty {
            return refuse(OperandError::Init {
                opcode,
                init: init.clone(),
                ty: x.ty,
            });
        }
        inputs.push(x);
    }
    Ok(inputs)
}

/// How exactly a reducer's scalar types must match its inputs'.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum FloatTypes {
    /// `reduce` and `reduce-window`: XLA takes their result type from the
    /// reducer, so a reducer of another float type changes the result and
    /// XLA's verifier refuses the written one.
    Exact,
    /// `scatter` and the collectives keep their operands' types whatever
    /// float type the reducer computes in, as XLA's checks allow.
    AnyWidth,
}

/// A reducer over `inputs`: (T1.., T1..) -> T1, or a tuple for several.
/// One input's reducer may also return a one-element tuple, as XLA allows;
/// the op's result is then a one-element tuple too. Says whether the
/// reducer returns a tuple.
pub(super) fn check_reducer(
    name: &str,
    sig: &CalleeSignature,
    inputs: &[&ArrayShape],
    floats: FloatTypes,
) -> Result<bool, ShapeError> {
    let scalars: Vec<Shape> = inputs.iter().map(|x| Shape::scalar(x.ty)).collect();
    let params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
    let tupled = sig.result.is_tuple();
    let result = if tupled {
        Shape::Tuple(scalars)
    } else {
        one_or_tuple(scalars)
    };
    match floats {
        FloatTypes::Exact => check_signature(name, sig, &params, &result)?,
        FloatTypes::AnyWidth => check_reducer_signature(name, sig, &params, &result)?,
    }
    Ok(tupled)
}

/// The results of a reduction, as a tuple where its reducer returns one.
pub(super) fn reduced(mut results: Vec<Shape>, tupled: bool) -> Shape {
    if tupled && results.len() == 1 {
        Shape::Tuple(vec![results.pop().expect("one result")])
    } else {
        one_or_tuple(results)
    }
}

/// A reducer's signature up to which float type each scalar is (an f32
/// `max` may reduce bf16 values), as XLA compares those of `scatter` and
/// the collectives; XLA CPU runs such a scatter.
pub(super) fn check_reducer_signature(
    name: &str,
    sig: &CalleeSignature,
    params: &[Shape],
    result: &Shape,
) -> Result<(), ShapeError> {
    check_signature_as(
        name,
        sig,
        params,
        result,
        Shape::compatible_ignoring_fp_precision,
    )
}

/// A float operand with a `feature_index` dimension; every per-feature
/// operand a vector of that dimension's size and the operand's type. The
/// training op gives (normalized, mean, variance), the grad op (d operand,
/// d scale, d offset), the inference op the normalized operand.
pub(super) fn batch_norm(
    kind: BatchNormKind,
    feature_index: i64,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    // The opcode only for an error: `Opcode::new` searches the op table.
    let opcode = || Opcode::new(kind.opcode());
    // Which operands besides the operand are per feature (the count is
    // the kind's arity, checked before).
    let vectors: &[usize] = match kind {
        BatchNormKind::Training => &[1, 2],
        BatchNormKind::Inference => &[1, 2, 3, 4],
        BatchNormKind::Grad => &[1, 2, 3],
    };
    let x = array(operands, 0)?;
    if !x.ty.is_float() {
        return refuse(TypeError::BatchNorm {
            opcode: opcode(),
            operand: Box::new(x.clone()),
        });
    }
    let Some(&features) = usize::try_from(feature_index)
        .ok()
        .and_then(|i| x.dims.get(i))
    else {
        return refuse(DimensionError::NotADimension {
            opcode: opcode(),
            attribute: "feature_index",
            dimension: feature_index,
            shape: x.clone(),
        });
    };
    for &index in vectors {
        let v = array(operands, index)?;
        if v.ty != x.ty || v.dims != [features] {
            return refuse(ShapesError::PerFeature {
                opcode: opcode(),
                index,
                ty: x.ty,
                features,
                operand: v.clone(),
            });
        }
    }
    if kind == BatchNormKind::Grad {
        let grad = array(operands, 4)?;
        if !grad.same_dims_and_type(x) {
            return refuse(ShapesError::OutputGradient {
                opcode: opcode(),
                operand: x.clone(),
                gradient: grad.clone(),
            });
        }
    }
    let same = Shape::Array(ArrayShape::new(x.ty, x.dims.clone()));
    let vector = Shape::array(x.ty, vec![features]);
    Ok(match kind {
        BatchNormKind::Inference => same,
        BatchNormKind::Training | BatchNormKind::Grad => {
            Shape::Tuple(vec![same, vector.clone(), vector])
        }
    })
}
