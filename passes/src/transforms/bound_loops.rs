//! Stopping every `while` loop after a number of trips, for running a
//! module on inputs it was not written for. XLA's own test modules loop
//! until a condition over their inputs holds; random inputs may never make
//! it hold, and a PJRT run cannot be cut short. This is not an
//! optimization: the bounded program computes what the original does only
//! where no loop runs past the bound. Two readings of one module bounded
//! alike still compute the same values, which is what comparing them needs.
//!
//! Each loop `while(init)` becomes `get-tuple-element(while((init, 0)), 0)`
//! over a state that carries a trip count beside the original one: the new
//! condition is the original (called) and the count below the bound, the
//! new body the original (called) and the count plus one.

use crate::infra::rewriter::{ModuleRewriter, RewriteError};
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, ComparisonType};
use hlatc_compiler::{
    Computation, ComputationId, ElementType, InstrId, Literal, Module, Op, Shape,
};

/// Bounds every `while` loop of `m` (in every computation, nested ones
/// too) to at most `max_trips` trips; returns how many loops it bounded.
/// A scheduled module that had loops is no longer scheduled.
pub fn bound_loops(m: &mut Module, max_trips: u32) -> Result<usize, RewriteError> {
    let loops: Vec<(usize, InstrId)> = m
        .computations
        .iter()
        .enumerate()
        .flat_map(|(ci, c)| {
            c.ids()
                .filter(|&id| matches!(c.instr(id).op, Op::While { .. }))
                .map(move |id| (ci, id))
        })
        .collect();
    if loops.is_empty() {
        return Ok(0);
    }
    let bound = i32::try_from(max_trips).unwrap_or(i32::MAX);
    let mut mr = ModuleRewriter::new(m);
    for &(ci, w) in &loops {
        let (condition, body) = match &m.computations[ci].instr(w).op {
            Op::While { condition, body } => (*condition, *body),
            _ => unreachable!("collected as a while"),
        };
        let state = m.computations[ci].instr(w).shape.clone();
        let counted = Shape::Tuple(vec![state, Shape::scalar(ElementType::S32)]);
        let stem = m.computations[ci].instr(w).name.clone();
        let condition = counted_condition(&mut mr, m, &stem, &counted, condition, bound)?;
        let body = counted_body(&mut mr, m, &stem, &counted, body)?;
        let mut r = mr.on(&mut m.computations[ci]);
        r.provenance_of(w);
        let init = r.comp().operand_ids(w)[0];
        let zero = r.add(Op::Constant(s32(0)), &[], None)?;
        let init = r.add(Op::Tuple, &[init, zero], None)?;
        let counted_loop = r.add(Op::While { condition, body }, &[init], None)?;
        let result = r.add(Op::GetTupleElement { index: 0 }, &[counted_loop], None)?;
        r.replace(w, result)?;
        r.remove_orphans();
    }
    // The new instructions are in no schedule; XLA schedules the module
    // again, and the order does not change what it computes.
    m.is_scheduled = false;
    Ok(loops.len())
}

fn s32(v: i32) -> Literal {
    Literal::from_s32(vec![], &[v]).expect("one value for a scalar")
}

/// A computation over the counted state `(state, s32[])`, its parameter
/// and the two parts of it, built by `finish` and added to `m`.
fn over_counted_state(
    mr: &mut ModuleRewriter,
    m: &mut Module,
    name: String,
    counted: &Shape,
    finish: impl FnOnce(
        &mut crate::infra::rewriter::Rewriter<'_>,
        InstrId,
        InstrId,
    ) -> Result<InstrId, RewriteError>,
) -> Result<ComputationId, RewriteError> {
    let mut c = Computation::new(name);
    let mut r = mr.on(&mut c);
    let p = r.add_named("counted", Op::Parameter(0), &[], Some(counted.clone()))?;
    let state = r.add(Op::GetTupleElement { index: 0 }, &[p], None)?;
    let trips = r.add(Op::GetTupleElement { index: 1 }, &[p], None)?;
    let root = finish(&mut r, state, trips)?;
    r.set_root(root);
    Ok(mr.add_computation(m, c))
}

/// The original condition, and fewer than `bound` trips so far.
fn counted_condition(
    mr: &mut ModuleRewriter,
    m: &mut Module,
    stem: &str,
    counted: &Shape,
    condition: ComputationId,
    bound: i32,
) -> Result<ComputationId, RewriteError> {
    let name = format!("{stem}.bounded_condition");
    over_counted_state(mr, m, name, counted, |r, state, trips| {
        let call = Op::Call {
            to_apply: condition,
            is_composite: false,
        };
        let go_on = r.add(call, &[state], None)?;
        let bound = r.add(Op::Constant(s32(bound)), &[], None)?;
        let below = Op::Compare {
            direction: ComparisonDirection::Lt,
            kind: Some(ComparisonType::Signed),
        };
        let below = r.add(below, &[trips, bound], None)?;
        r.add(Op::Binary(BinaryOp::And), &[go_on, below], None)
    })
}

/// The original body, and one trip more.
fn counted_body(
    mr: &mut ModuleRewriter,
    m: &mut Module,
    stem: &str,
    counted: &Shape,
    body: ComputationId,
) -> Result<ComputationId, RewriteError> {
    let name = format!("{stem}.bounded_body");
    over_counted_state(mr, m, name, counted, |r, state, trips| {
        let call = Op::Call {
            to_apply: body,
            is_composite: false,
        };
        let next = r.add(call, &[state], None)?;
        let one = r.add(Op::Constant(s32(1)), &[], None)?;
        let trips = r.add(Op::Binary(BinaryOp::Add), &[trips, one], None)?;
        r.add(Op::Tuple, &[next, trips], None)
    })
}
