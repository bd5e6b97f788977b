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

#[cfg(test)]
mod tests {
    use super::*;
    use hlatc_compiler::{formats::text, verify};

    const COUNTING: &str = "HloModule m
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] constant(100)
  ROOT lt = pred[] compare(i, limit), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[2] get-tuple-element(s), index=1
  y = f32[2] add(x, x)
  ROOT t = (s32[], f32[2]) tuple(next, y)
}
ENTRY e {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body
}
";

    #[test]
    fn every_loop_gets_a_counted_state_and_still_verifies() {
        let mut m = text::parse_module(COUNTING).unwrap();
        assert_eq!(bound_loops(&mut m, 3).unwrap(), 1);
        verify(&m).unwrap();
        let e = m.entry();
        let root = e.instr(e.root().unwrap());
        assert_eq!(root.op, Op::GetTupleElement { index: 0 });
        assert_eq!(root.shape.to_string(), "(s32[], f32[2]{0})");
        let printed = text::print_module(&m);
        assert!(printed.contains("condition=w.bounded_condition, body=w.bounded_body"));
        assert!(printed.contains("s32[] constant(3)"), "{printed}");
        // Bounding again bounds the new loop (and leaves the old ones'
        // computations called from the new ones).
        assert_eq!(bound_loops(&mut m, 3).unwrap(), 1);
        verify(&m).unwrap();
        // A schedule does not hold the new instructions (XLA's test 05001).
        let scheduled = COUNTING.replace("HloModule m", "HloModule m, is_scheduled=true");
        let mut m = text::parse_module(&scheduled).unwrap();
        assert!(m.is_scheduled);
        bound_loops(&mut m, 3).unwrap();
        assert!(!m.is_scheduled);
    }

    #[test]
    fn a_module_without_loops_is_left_alone() {
        let src =
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n";
        let mut m = text::parse_module(src).unwrap();
        assert_eq!(bound_loops(&mut m, 3).unwrap(), 0);
        assert_eq!(
            text::print_module(&m),
            text::print_module(&text::parse_module(src).unwrap())
        );
    }
}
