//! Whether a `while` loop runs a number of trips known before it starts,
//! the only loops Neuron runs. Read as XLA's own loop analysis reads the
//! common case, narrower than it: the loop says so in its backend config
//! (`known_trip_count`, which XLA writes once it knows), or it counts an
//! induction variable from a constant by a constant step and its
//! condition compares that variable with a constant. A loop this does not
//! recognize may still be static; the rule that uses it only warns.

use hlatc_compiler::ir::op::BinaryOp;
use hlatc_compiler::{Computation, InstrId, Module, Op, Scalar};

/// Whether while loop `w` of computation `c` has a static trip count.
pub fn has_static_trip_count(m: &Module, c: &Computation, w: InstrId) -> bool {
    let Op::While { condition, body } = &c.instr(w).op else {
        return false;
    };
    if c.instr(w).backend_config.contains("\"known_trip_count\"") {
        return true;
    }
    let (Some(cond), Some(body)) = (m.get_computation(*condition), m.get_computation(*body)) else {
        return false;
    };
    let Some(index) = compared_with_constant(cond) else {
        return false;
    };
    let Some(&init) = c.operand_ids(w).first() else {
        return false;
    };
    is_constant_element(c, init, index) && steps_by_constant(body, index)
}

/// The tuple index of the loop state the condition's root compares with a
/// constant.
fn compared_with_constant(cond: &Computation) -> Option<i64> {
    let root = cond.root()?;
    if !matches!(cond.instr(root).op, Op::Compare { .. }) {
        return None;
    }
    let ops = cond.operand_ids(root);
    let (a, b) = (*ops.first()?, *ops.get(1)?);
    let state_index = |x: InstrId| match cond.instr(x).op {
        Op::GetTupleElement { index } => {
            let from = *cond.operand_ids(x).first()?;
            matches!(cond.instr(from).op, Op::Parameter(0)).then_some(index)
        }
        _ => None,
    };
    if is_integer_constant(cond, b) {
        state_index(a)
    } else if is_integer_constant(cond, a) {
        state_index(b)
    } else {
        None
    }
}

/// Whether element `index` of the loop's initial state is a constant.
fn is_constant_element(c: &Computation, init: InstrId, index: i64) -> bool {
    if !matches!(c.instr(init).op, Op::Tuple) {
        return false;
    }
    usize::try_from(index)
        .ok()
        .and_then(|k| c.operand_ids(init).get(k).copied())
        .is_some_and(|e| is_integer_constant(c, e))
}

/// Whether the body's next state holds, at `index`, that element plus a
/// constant.
fn steps_by_constant(body: &Computation, index: i64) -> bool {
    let Some(root) = body.root() else {
        return false;
    };
    if !matches!(body.instr(root).op, Op::Tuple) {
        return false;
    }
    let Some(next) = usize::try_from(index)
        .ok()
        .and_then(|k| body.operand_ids(root).get(k).copied())
    else {
        return false;
    };
    if !matches!(
        body.instr(next).op,
        Op::Binary(BinaryOp::Add | BinaryOp::Subtract)
    ) {
        return false;
    }
    let is_state = |x: InstrId| match body.instr(x).op {
        Op::GetTupleElement { index: i } if i == index => body
            .operand_ids(x)
            .first()
            .is_some_and(|&p| matches!(body.instr(p).op, Op::Parameter(0))),
        _ => false,
    };
    match body.operand_ids(next) {
        [a, b] => {
            (is_state(*a) && is_integer_constant(body, *b))
                || (is_state(*b) && is_integer_constant(body, *a))
        }
        _ => false,
    }
}

fn is_integer_constant(c: &Computation, id: InstrId) -> bool {
    match &c.instr(id).op {
        Op::Constant(l) => {
            l.element_count() == 1 && matches!(l.get(0), Scalar::Int(_) | Scalar::UInt(_))
        }
        _ => false,
    }
}

/// How many trips while loop `w` of computation `c` runs, when its form
/// says so plainly: a counter from a constant, stepped by 1, that the
/// condition compares `<` a constant (the loops hlatc builds, and a
/// scan's). `None` for any other loop, static or not.
pub fn trip_count(m: &Module, c: &Computation, w: InstrId) -> Option<i64> {
    if !has_static_trip_count(m, c, w) {
        return None;
    }
    let Op::While { condition, body } = &c.instr(w).op else {
        return None;
    };
    let (cond, body) = (m.get_computation(*condition)?, m.get_computation(*body)?);
    let root = cond.root()?;
    let Op::Compare { direction, .. } = &cond.instr(root).op else {
        return None;
    };
    let ops = cond.operand_ids(root);
    if *direction != hlatc_compiler::ir::op::ComparisonDirection::Lt {
        return None;
    }
    let limit = integer_value(cond, *ops.get(1)?)?;
    let index = compared_with_constant(cond)?;
    let init = *c.operand_ids(w).first()?;
    let start = integer_value(c, *c.operand_ids(init).get(usize::try_from(index).ok()?)?)?;
    let next = *body
        .operand_ids(body.root()?)
        .get(usize::try_from(index).ok()?)?;
    if !matches!(body.instr(next).op, Op::Binary(BinaryOp::Add)) {
        return None;
    }
    let step = body
        .operand_ids(next)
        .iter()
        .find_map(|&o| integer_value(body, o))?;
    (step == 1).then(|| (limit - start).max(0))
}

/// The value of an integer scalar constant.
fn integer_value(c: &Computation, id: InstrId) -> Option<i64> {
    match &c.instr(id).op {
        Op::Constant(l) if l.element_count() == 1 => match l.get(0) {
            Scalar::Int(v) => Some(v),
            Scalar::UInt(v) => i64::try_from(v).ok(),
            _ => None,
        },
        _ => None,
    }
}
