//! `reduce`, `reduce-window` and its gradient `select-and-scatter`, and
//! how a reducer's signature is checked (also for `scatter` and the
//! collectives).

use super::{
    arr, array, check_dims_in_range, check_signature, check_signature_as, one_or_tuple, refuse,
    windowed, CalleeSignature, OperandError, ShapeError, ShapesError,
};
use crate::ir::op::Opcode;
use crate::ir::shape::{ArrayShape, Shape};
use crate::ir::window::Window;

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

pub(super) fn reduce_window(
    window: &Window,
    (to_apply, callee): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let inputs = inputs_and_inits(const { Opcode::new("reduce-window") }, operands)?;
    let tupled = check_reducer(to_apply, &callee, &inputs, FloatTypes::Exact)?;
    match windowed::reduce_window(window, &inputs)? {
        Shape::Array(a) => Ok(reduced(vec![Shape::Array(a)], tupled)),
        several => Ok(several),
    }
}

/// `select-and-scatter(operand, source, init)`: `source` has the shape a
/// reduce-window of the operand with this window has, `init` is a scalar
/// of the operand's type, `select` compares two of its elements and
/// `scatter` combines two; the result has the operand's shape.
pub(super) fn select_and_scatter(
    window: &Window,
    (select, select_sig): (&str, CalleeSignature),
    (scatter, scatter_sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let (x, source, init) = (
        array(operands, 0)?,
        array(operands, 1)?,
        array(operands, 2)?,
    );
    // XLA's inference allows a rank-0 operand (an empty window), but XLA
    // CPU's select-and-scatter expander aborts on one ("parameter number 1
    // already allocated"), found by the fuzzer.
    if x.rank() == 0 {
        return refuse(ShapesError::Scalar {
            opcode: const { Opcode::new("select-and-scatter") },
            operand: x.clone(),
        });
    }
    let scalar = Shape::scalar(x.ty);
    if init.rank() != 0 || init.ty != x.ty {
        return refuse(OperandError::SelectAndScatterInit {
            expected: scalar,
            init: init.clone(),
        });
    }
    let windows = windowed::reduce_window(window, &[x])?;
    let expected = Shape::array(
        x.ty,
        windows
            .as_array()
            .map(|a| a.dims.clone())
            .unwrap_or_default(),
    );
    if !Shape::Array(source.clone()).compatible(&expected) {
        return refuse(ShapesError::SelectAndScatterSource {
            expected,
            source_operand: source.clone(),
        });
    }
    check_signature(
        select,
        &select_sig,
        &[scalar.clone(), scalar.clone()],
        &Shape::scalar(crate::ir::shape::ElementType::Pred),
    )?;
    check_signature(
        scatter,
        &scatter_sig,
        &[scalar.clone(), scalar.clone()],
        &scalar,
    )?;
    Ok(Shape::Array(ArrayShape::new(x.ty, x.dims.clone())))
}

/// A reduction's operands: inputs of one shape, then a scalar init of each
/// input's type. Returns the inputs.
pub(super) fn inputs_and_inits<'a>(
    opcode: Opcode,
    operands: &[&'a Shape],
) -> Result<Vec<&'a ArrayShape>, ShapeError> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return Err(ShapeError::OperandCount {
            expected: "an even number (inputs, then inits)".into(),
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
