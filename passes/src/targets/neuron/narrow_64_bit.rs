//! `narrow-64-bit-integers`: `s64` and `u64` values that provably fit in
//! 32 bits, computed in `s32` and `u32` instead. neuronx-cc narrows every
//! 64-bit integer to 32 bits on trn1 (and on trn2 under SDK 2.32's
//! defaults), losing what does not fit; where a value fits it loses
//! nothing, and computing it in 32 bits says so in the module (the
//! pre-flight stops warning about it) and spares trn2's native int64
//! datapath, which the SDK puts at 20-30% slower than int32.
//!
//! A value fits when an interval of its possible values, found from the
//! module alone, lies within the 32-bit type of the same signedness:
//! constants (their values), `iota` (0 to its length - 1), converts from a
//! narrower integer (that type's range), and what data movement (reshape,
//! broadcast, transpose, slice, reverse, copy, concatenate, pad, select,
//! dynamic-slice, gather) and interval arithmetic (add, subtract,
//! multiply, negate, abs, maximum, minimum, clamp) make of those. A value
//! whose interval is unknown (an entry parameter, a reduction, a loop's
//! state) stays 64-bit, and so does a value that reads one. A narrowed
//! value read by an instruction that stays 64-bit is converted back to its
//! type first (exactly: it fits); a `convert` or a `compare` of narrowed
//! operands reads the narrow value directly, which gives the same result.
//! Every value is bit for bit what it was.

use crate::infra::context::PassContext;
use crate::infra::intervals::{data_operands, interval, Interval};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{Computation, ElementType, InstrId, Instruction, Module, Op, Shape};
use std::collections::HashMap;

pub struct Narrow64BitIntegers;

impl Narrow64BitIntegers {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "narrow-64-bit-integers";
}

impl Pass for Narrow64BitIntegers {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut narrowed = 0usize;
        rewrite_matches(
            m,
            ctx,
            Sweep::Nothing,
            // One match a computation, its whole plan: an instruction is
            // narrowed only with the operands it reads.
            |_, c| Some(narrowable(c)).filter(|plan| !plan.is_empty()),
            |r, _, plan| -> Result<bool, PassError> {
                narrowed += plan.len();
                let (c, names) = r.parts();
                narrow(c, &plan, names);
                Ok(true)
            },
        )?;
        if narrowed > 0 {
            ctx.note(
                self.name(),
                format!("{narrowed} 64-bit integer values fit in 32 bits and are computed there"),
            );
        }
        Ok(narrowed > 0)
    }
}

/// The 32-bit type a 64-bit integer type narrows to.
fn narrow_type(ty: ElementType) -> Option<ElementType> {
    match ty {
        ElementType::S64 => Some(ElementType::S32),
        ElementType::U64 => Some(ElementType::U32),
        _ => None,
    }
}

/// The 64-bit array instructions of `c` whose values fit in 32 bits and
/// whose 64-bit data operands are narrowed too, with their new types.
fn narrowable(c: &Computation) -> HashMap<InstrId, ElementType> {
    let mut intervals: HashMap<InstrId, Interval> = HashMap::new();
    let mut plan = HashMap::new();
    let has_64 = c.ids().any(|id| {
        c.instr(id)
            .shape
            .as_array()
            .is_some_and(|a| narrow_type(a.ty).is_some())
    });
    if !has_64 {
        return plan;
    }
    for id in c.post_order() {
        let i = c.instr(id);
        let Some(a) = i.shape.as_array() else {
            continue;
        };
        let Some(to) = narrow_type(a.ty) else {
            continue;
        };
        let operands = c.operand_ids(id);
        // Every 64-bit value it reads must be narrowed with it.
        let data = data_operands(&i.op, operands);
        let reads_wide = data.iter().any(|o| {
            c.instr(*o)
                .shape
                .as_array()
                .is_some_and(|a| narrow_type(a.ty).is_some())
                && !plan.contains_key(o)
        });
        if reads_wide {
            continue;
        }
        let of = |o: InstrId| -> Option<Interval> {
            intervals
                .get(&o)
                .copied()
                .or_else(|| c.instr(o).shape.as_array()?.ty.integer_range())
        };
        let Some(range) = interval(i, &data, &of) else {
            continue;
        };
        if let Some((lo, hi)) = to.integer_range() {
            if range.0 >= lo && range.1 <= hi {
                intervals.insert(id, range);
                plan.insert(id, to);
            }
        }
    }
    // A value that reads no narrowed value and that only 64-bit readers
    // read (a constant added to a parameter) would be converted straight
    // back: it stays as it is. A chain of narrowed values keeps its one
    // convert back at its end.
    loop {
        let wide_only: Vec<InstrId> = plan
            .keys()
            .copied()
            .filter(|&id| {
                let i = c.instr(id);
                data_operands(&i.op, c.operand_ids(id))
                    .iter()
                    .all(|o| !plan.contains_key(o))
                    && c.users(id).iter().all(|&u| !reads_narrow(c, &plan, u))
            })
            .collect();
        if wide_only.is_empty() {
            return plan;
        }
        for id in wide_only {
            plan.remove(&id);
        }
    }
}

/// Rewrites `c`'s instructions in `plan` to their 32-bit types, in place,
/// and gives each reader that stays 64-bit a convert back.
fn narrow(
    c: &mut Computation,
    plan: &HashMap<InstrId, ElementType>,
    names: &mut crate::infra::names::Names,
) {
    let order: Vec<InstrId> = c
        .post_order()
        .into_iter()
        .filter(|id| plan.contains_key(id))
        .collect();
    for &id in &order {
        let to = plan[&id];
        let i = c.instr_mut(id);
        if let Shape::Array(a) = &mut i.shape {
            a.ty = to;
        }
        if let Op::Constant(l) = &i.op {
            if let Ok(narrow) = l.clone().converted(to) {
                i.op = Op::Constant(narrow);
            }
        }
    }
    for &id in &order {
        let readers: Vec<InstrId> = c
            .users(id)
            .into_iter()
            .filter(|&u| !reads_narrow(c, plan, u))
            .collect();
        let is_root = c.root() == Some(id);
        if readers.is_empty() && !is_root {
            continue;
        }
        let wide = {
            let i = c.instr(id);
            let mut shape = i.shape.clone();
            if let Shape::Array(a) = &mut shape {
                a.ty = if plan[&id] == ElementType::S32 {
                    ElementType::S64
                } else {
                    ElementType::U64
                };
            }
            let mut w =
                Instruction::new(names.fresh(&format!("{}.wide", i.name)), shape, Op::Convert);
            w.metadata = i.metadata.clone();
            w
        };
        let w = c.add(wide, &[id]);
        for u in readers {
            c.replace_uses_in(u, id, w);
        }
        if is_root {
            c.set_root(w);
        }
    }
}

/// Whether `user` may read narrowed operands as they are: it is narrowed
/// too, a convert (the same value converts to the same result), or a
/// compare whose operands are all narrowed.
fn reads_narrow(c: &Computation, plan: &HashMap<InstrId, ElementType>, user: InstrId) -> bool {
    plan.contains_key(&user)
        || match c.instr(user).op {
            Op::Convert => true,
            Op::Compare { .. } => c.operand_ids(user).iter().all(|o| plan.contains_key(o)),
            _ => false,
        }
}
