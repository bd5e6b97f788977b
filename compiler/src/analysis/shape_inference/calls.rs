//! Ops that call a computation or a target as a whole, and tuples:
//! `opt-barrier`, `get-tuple-element`, `fusion`, `custom-call`, and the
//! async ops.

use super::{
    control_flow, refuse, AttributeError, CalleeError, CalleeSignature, DeclaredError,
    OperandError, ShapeError,
};
use crate::ir::computation_id::ComputationId;
use crate::ir::op::{AsyncStep, CustomCall, Opcode, OperandAlias};
use crate::ir::shape::Shape;

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

pub(super) fn fusion(
    callee: (&str, CalleeSignature),
    aliasing: &[OperandAlias],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let result = control_flow::call(const { Opcode::new("fusion") }, callee, operands)?;
    check_operand_aliasing(aliasing, operands, &result)?;
    Ok(result)
}

/// An `async-start`'s value is ((operands), the callee's result,
/// context...), with the context (what the runtime keeps while it runs) as
/// written; an `async-update` passes that bundle on, and an `async-done`
/// gives its result. Whether an update's or done's operand is a start or
/// update of the same callee is the verifier's check.
pub(super) fn async_op(
    step: AsyncStep,
    (calls, callee): (&str, CalleeSignature),
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let opcode = || match step {
        AsyncStep::Start => const { Opcode::new(AsyncStep::Start.opcode()) },
        AsyncStep::Update => const { Opcode::new(AsyncStep::Update.opcode()) },
        AsyncStep::Done => const { Opcode::new(AsyncStep::Done.opcode()) },
    };
    let (bundle, result) = match step {
        AsyncStep::Start => {
            let result = control_flow::call(opcode(), (calls, callee), operands)?;
            (declared.ok_or(ShapeError::NeedsResultShape)?, result)
        }
        AsyncStep::Update | AsyncStep::Done => (operands[0], callee.result),
    };
    let parts = match bundle {
        Shape::Tuple(parts) if parts.len() >= 2 => parts,
        other => {
            return refuse(OperandError::AsyncBundle {
                opcode: opcode(),
                bundle: other.clone(),
            })
        }
    };
    if step == AsyncStep::Start {
        let given = Shape::Tuple(operands.iter().map(|&s| s.clone()).collect());
        if !parts[0].compatible(&given) {
            return refuse(DeclaredError::AsyncStartOperands {
                declared: parts[0].clone(),
                operands: given,
            });
        }
    }
    if !parts[1].compatible(&result) {
        return refuse(CalleeError::AsyncResult {
            opcode: opcode(),
            held: parts[1].clone(),
            callee: calls.to_string(),
            result,
        });
    }
    Ok(match step {
        AsyncStep::Start | AsyncStep::Update => bundle.clone(),
        AsyncStep::Done => parts[1].clone(),
    })
}

pub(super) fn custom_call<'c>(
    cc: &CustomCall,
    callee: &dyn Fn(ComputationId) -> Result<(&'c str, CalleeSignature), ShapeError>,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    if let Some(layouts) = &cc.operand_layouts {
        if layouts.len() != operands.len() {
            return refuse(AttributeError::OperandLayouts {
                layouts: layouts.len(),
                operands: operands.len(),
            });
        }
        if let Some((index, (l, o))) = layouts
            .iter()
            .zip(operands)
            .enumerate()
            .find(|(_, (l, o))| !l.compatible(o))
        {
            return refuse(AttributeError::OperandLayout {
                index,
                layout: l.clone(),
                operand: (*o).clone(),
            });
        }
    }
    for &id in &cc.called {
        callee(id)?;
    }
    let result = declared.cloned().ok_or(ShapeError::NeedsResultShape)?;
    if let Some(dims) = cc.convolution.as_ref().and_then(|c| c.dims.as_ref()) {
        // cuDNN's convolutions return (result, scratch): the first array.
        let output = match &result {
            Shape::Tuple(parts) => parts.first(),
            other => Some(other),
        };
        let rank = |s: Option<&Shape>| s.and_then(Shape::as_array).map(|a| a.rank());
        let ranks = [
            rank(operands.first().copied()),
            rank(operands.get(1).copied()),
            rank(output),
        ];
        dims.check_writable(ranks)?;
    }
    check_operand_aliasing(&cc.aliasing, operands, &result)?;
    Ok(result)
}

/// One shape up to layout, or an array and a buffer of it: a custom call
/// pins an array into a buffer, or unpins it, in place (`Pin`, `Unpin`).
fn same_storage(a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Buffer(x), Shape::Array(y)) | (Shape::Array(x), Shape::Buffer(y)) => {
            x.same_dims_and_type(y)
        }
        _ => a.compatible(b),
    }
}

/// Each aliased output and operand part exists, and the two have one shape
/// up to layout (or are an array and a buffer of it).
pub(super) fn check_operand_aliasing(
    aliasing: &[crate::ir::op::OperandAlias],
    operands: &[&Shape],
    result: &Shape,
) -> Result<(), ShapeError> {
    for a in aliasing {
        let operand = usize::try_from(a.operand)
            .ok()
            .and_then(|i| operands.get(i))
            .and_then(|s| s.subshape(&a.operand_index));
        let output = result.subshape(&a.output_index);
        match (output, operand) {
            (Some(o), Some(i)) if same_storage(o, i) => {}
            _ => return refuse(AttributeError::Aliasing(a.clone())),
        }
    }
    Ok(())
}
