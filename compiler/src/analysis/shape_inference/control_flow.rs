//! Ops that run whole computations: `call`, `fusion`, `while` and
//! `conditional`. Their result comes from a callee's signature, and each
//! callee must take exactly what the op hands it.

use super::{invalid, CalleeSignature, ShapeError};
use crate::ir::shape::{ElementType, Shape};

/// A callee run on the op's operands as its parameters (`call`, `fusion`).
pub(super) fn call(
    opcode: &str,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    if sig.params.len() != operands.len() {
        return Err(ShapeError::OperandCount {
            expected: sig.params.len().to_string(),
            got: operands.len(),
        });
    }
    for (i, (p, o)) in sig.params.iter().zip(operands).enumerate() {
        if !p.compatible(o) {
            return invalid(format!(
                "{opcode} operand {i} is {o} but '{name}' expects {p}"
            ));
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
        return invalid(format!(
            "while body '{body}' must map the loop state {state} to itself, has signature {}",
            body_sig.text()
        ));
    }
    let pred = Shape::scalar(ElementType::Pred);
    if !takes_state(&cond_sig) || !cond_sig.result.compatible(&pred) {
        return invalid(format!(
            "while condition '{condition}' must map the loop state {state} to pred[], has signature {}",
            cond_sig.text()
        ));
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
        return invalid("conditional needs at least one branch computation");
    }
    if operands.len() != branches.len() + 1 {
        return Err(ShapeError::OperandCount {
            expected: format!("{} (the selector and one per branch)", branches.len() + 1),
            got: operands.len(),
        });
    }
    match operands[0] {
        s if s.is_scalar_of(ElementType::Pred) => {
            if branches.len() != 2 {
                return invalid(format!(
                    "a conditional on a pred[] needs 2 branches, got {}",
                    branches.len()
                ));
            }
        }
        s if s.is_scalar_of(ElementType::S32) => {}
        s => {
            return invalid(format!(
                "conditional selector must be pred[] or s32[], got {s}"
            ))
        }
    }
    let (first, first_sig) = &branches[0];
    for (i, ((name, sig), arg)) in branches.iter().zip(&operands[1..]).enumerate() {
        if sig.params.len() != 1 || !sig.params[0].compatible(arg) {
            return invalid(format!(
                "conditional branch {i} '{name}' must take its operand {arg}, has signature {}",
                sig.text()
            ));
        }
        if !sig.result.compatible(&first_sig.result) {
            return invalid(format!(
                "conditional branch {i} '{name}' returns {} but branch 0 '{first}' returns {}",
                sig.result, first_sig.result
            ));
        }
    }
    Ok(first_sig.result.clone())
}
