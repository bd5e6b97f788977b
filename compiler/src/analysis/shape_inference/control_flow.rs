//! Ops that run whole computations: `call`, `fusion`, `while`,
//! `conditional` and the async ops. Their result comes from a callee's
//! signature, and each callee must take exactly what the op hands it.

use super::custom_call::check_operand_aliasing;
use super::{
    refuse, CalleeError, CalleeSignature, DeclaredError, OperandError, OperandRule, ShapeError,
};
use crate::ir::op::{AsyncStep, Opcode, OperandAlias};
use crate::ir::shape::{ElementType, Shape};

/// A callee run on the op's operands as its parameters (`call`, `fusion`).
pub(super) fn call(
    opcode: Opcode,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    if sig.params.len() != operands.len() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::Exactly(sig.params.len()),
            got: operands.len(),
        });
    }
    for (index, (p, o)) in sig.params.iter().zip(operands).enumerate() {
        if !p.compatible(o) {
            return refuse(CalleeError::Operand {
                opcode,
                index,
                operand: (*o).clone(),
                callee: name.to_string(),
                parameter: p.clone(),
            });
        }
    }
    Ok(sig.result)
}

/// `while`: the body maps the loop state to itself, and the condition maps
/// it to a `pred[]`.
pub(super) fn while_loop(
    (condition, cond_sig): (&str, CalleeSignature),
    (body, body_sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let state = operands[0];
    let takes_state =
        |sig: &CalleeSignature| sig.params.len() == 1 && sig.params[0].compatible(state);
    if !takes_state(&body_sig) || !body_sig.result.compatible(state) {
        return refuse(CalleeError::WhileBody {
            callee: body.to_string(),
            state: state.clone(),
            signature: body_sig,
        });
    }
    let pred = Shape::scalar(ElementType::Pred);
    if !takes_state(&cond_sig) || !cond_sig.result.compatible(&pred) {
        return refuse(CalleeError::WhileCondition {
            callee: condition.to_string(),
            state: state.clone(),
            signature: cond_sig,
        });
    }
    Ok(state.clone())
}

/// `conditional`: operand 0 selects the branch (a `pred[]` between two, or
/// an `s32[]` index among any number), operand `i + 1` is branch `i`'s
/// argument, and every branch returns the same shape.
pub(super) fn conditional(
    branches: &[(&str, CalleeSignature)],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    if branches.is_empty() {
        return refuse(CalleeError::NoBranches);
    }
    if operands.len() != branches.len() + 1 {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::SelectorAndBranches {
                branches: branches.len(),
            },
            got: operands.len(),
        });
    }
    match operands[0] {
        s if s.is_scalar_of(ElementType::Pred) => {
            if branches.len() != 2 {
                return refuse(CalleeError::PredBranches(branches.len()));
            }
        }
        s if s.is_scalar_of(ElementType::S32) => {}
        s => return refuse(OperandError::Selector(s.clone())),
    }
    let (first, first_sig) = &branches[0];
    for (index, ((name, sig), arg)) in branches.iter().zip(&operands[1..]).enumerate() {
        if sig.params.len() != 1 || !sig.params[0].compatible(arg) {
            return refuse(CalleeError::BranchParameter {
                index,
                callee: name.to_string(),
                operand: (*arg).clone(),
                signature: sig.clone(),
            });
        }
        if !sig.result.compatible(&first_sig.result) {
            return refuse(CalleeError::BranchResult {
                index,
                callee: name.to_string(),
                result: sig.result.clone(),
                first: first.to_string(),
                first_result: first_sig.result.clone(),
            });
        }
    }
    Ok(first_sig.result.clone())
}

pub(super) fn fusion(
    callee: (&str, CalleeSignature),
    aliasing: &[OperandAlias],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let result = call(const { Opcode::new("fusion") }, callee, operands)?;
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
            let result = call(opcode(), (calls, callee), operands)?;
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
