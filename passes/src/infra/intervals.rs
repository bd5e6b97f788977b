//! Intervals of the values an integer array may hold, found from the
//! module alone: constants (their values), `iota` (0 to its length - 1),
//! converts (the operand's), and what data movement (reshape, broadcast,
//! transpose, slice, reverse, copy, concatenate, pad, select,
//! dynamic-slice, gather) and interval arithmetic (add, subtract, multiply,
//! negate, abs, maximum, minimum, clamp) make of those. Shared by the
//! passes that rewrite integer values which provably fit a narrower form:
//! `narrow-64-bit-integers` and `integer-dot-to-f32`.

use hlatc_compiler::ir::op::{BinaryOp, UnaryOp};
use hlatc_compiler::{Computation, InstrId, Instruction, Op, Scalar};
use std::collections::HashMap;

/// The values an integer array may hold, both ends included.
pub(crate) type Interval = (i128, i128);

/// The operands of `op` that carry its values (not a select's predicate,
/// a dynamic slice's or gather's indices).
pub(crate) fn data_operands(op: &Op, operands: &[InstrId]) -> Vec<InstrId> {
    let pick = |ks: &[usize]| {
        ks.iter()
            .filter_map(|&k| operands.get(k).copied())
            .collect()
    };
    match op {
        Op::Select => pick(&[1, 2]),
        Op::DynamicSlice { .. } | Op::Gather { .. } => pick(&[0]),
        Op::DynamicUpdateSlice => pick(&[0, 1]),
        _ => operands.to_vec(),
    }
}

/// The values `i` may hold, from those of its data operands (`of`), where
/// its op is one this pass can narrow.
pub(crate) fn interval(
    i: &Instruction,
    data: &[InstrId],
    of: &dyn Fn(InstrId) -> Option<Interval>,
) -> Option<Interval> {
    let all = || -> Option<Vec<Interval>> { data.iter().map(|&o| of(o)).collect() };
    let hull = |v: Vec<Interval>| v.into_iter().reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    match &i.op {
        Op::Constant(l) => (0..l.element_count())
            .map(|k| match l.get(k) {
                Scalar::Int(v) => Some(i128::from(v)),
                Scalar::UInt(v) => Some(i128::from(v)),
                _ => None,
            })
            .try_fold(None, |acc: Option<Interval>, v| {
                let v = v?;
                Some(Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))))
            })?,
        Op::Iota { dimension } => {
            let n = i
                .shape
                .as_array()?
                .dims
                .get(usize::try_from(*dimension).ok()?)?;
            Some((0, i128::from(*n).max(1) - 1))
        }
        // From a narrower integer: its type's range (`of` gives it).
        Op::Convert => of(*data.first()?),
        Op::Broadcast { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Reverse { .. }
        | Op::Unary(UnaryOp::Copy)
        | Op::Concatenate { .. }
        | Op::Pad { .. }
        | Op::Select
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::Gather { .. }
        | Op::Binary(BinaryOp::Maximum | BinaryOp::Minimum)
        | Op::Clamp => {
            let v = all()?;
            match &i.op {
                // Each element is one of its operands' at that place.
                Op::Binary(BinaryOp::Maximum) => Some((v[0].0.max(v[1].0), v[0].1.max(v[1].1))),
                Op::Binary(BinaryOp::Minimum) => Some((v[0].0.min(v[1].0), v[0].1.min(v[1].1))),
                _ => hull(v),
            }
        }
        Op::Binary(BinaryOp::Add) => {
            let v = all()?;
            Some((v[0].0 + v[1].0, v[0].1 + v[1].1))
        }
        Op::Binary(BinaryOp::Subtract) => {
            let v = all()?;
            Some((v[0].0 - v[1].1, v[0].1 - v[1].0))
        }
        Op::Binary(BinaryOp::Multiply) => {
            let v = all()?;
            let p = [
                v[0].0 * v[1].0,
                v[0].0 * v[1].1,
                v[0].1 * v[1].0,
                v[0].1 * v[1].1,
            ];
            Some((*p.iter().min()?, *p.iter().max()?))
        }
        Op::Unary(UnaryOp::Negate) => {
            let v = all()?;
            Some((-v[0].1, -v[0].0))
        }
        Op::Unary(UnaryOp::Abs) => {
            let v = all()?;
            let (lo, hi) = v[0];
            let top = lo.abs().max(hi.abs());
            Some((
                if lo <= 0 && hi >= 0 {
                    0
                } else {
                    lo.abs().min(hi.abs())
                },
                top,
            ))
        }
        _ => None,
    }
}

/// Every integer array value of `c` with the interval it lies in: what
/// [`interval`] finds where it finds one and that lies within the value's
/// type, else the type's whole range (a convert to a narrower integer, or
/// arithmetic that overflows, wraps within it).
pub(crate) fn integer_intervals(c: &Computation) -> HashMap<InstrId, Interval> {
    let mut found: HashMap<InstrId, Interval> = HashMap::new();
    for id in c.post_order() {
        let i = c.instr(id);
        let Some(range) = i.shape.as_array().and_then(|a| a.ty.integer_range()) else {
            continue;
        };
        let data = data_operands(&i.op, c.operand_ids(id));
        let of = |o: InstrId| found.get(&o).copied();
        let value = interval(i, &data, &of)
            .filter(|v| v.0 >= range.0 && v.1 <= range.1)
            .unwrap_or(range);
        found.insert(id, value);
    }
    found
}
