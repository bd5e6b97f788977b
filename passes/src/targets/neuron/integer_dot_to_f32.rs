//! `integer-dot-to-f32`: an integer `dot` whose every sum provably stays
//! within f32's exact integers (|x| <= 2^24) computed as an f32 dot of its
//! operands converted, and the result converted back. neuronx-cc has no
//! integer matmul: it warns about (2.32) or refuses (trn2, and the next
//! SDK) a dot on 32- or 64-bit integers (`NCC_EVRF035`), and runs it in f32
//! where allowed, exact only below 2^24. Where this pass proves the values
//! small enough, the module says so itself and the pre-flight has nothing
//! to find.
//!
//! The bound: with the operands' values in intervals (`intervals.rs`:
//! constants, iotas, converts from narrower integers, ...) every product
//! is at most `max|lhs| * max|rhs|`, and every partial sum, in any order,
//! at most K times that, K the contracted extent. When that is at most
//! 2^24 and within the result's type, each operand value, product and sum
//! is an f32 integer computed exactly, so the f32 dot gives the integer
//! dot's values bit for bit. An operand of unknown range (an `s32`
//! parameter) gives no bound, and its dot is left alone. Exact on Neuron
//! only where neuronx-cc keeps the f32 matmul in f32 (`--auto-cast=none`,
//! which hlatc's bundles pass): its default auto-cast would take it to bf16.

use crate::infra::context::PassContext;
use crate::infra::convert::{retyped, widen};
use crate::infra::intervals::{integer_intervals, Interval};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{
    ArrayShape, Computation, ElementType, InstrId, Instruction, Module, Op, Shape,
};

pub struct IntegerDotToF32;

/// The largest integer f32 holds exactly together with every smaller one.
const F32_EXACT: i128 = 1 << 24;

impl IntegerDotToF32 {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "integer-dot-to-f32";
}

impl Pass for IntegerDotToF32 {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut rewritten = 0usize;
        rewrite_matches(
            m,
            ctx,
            Sweep::Nothing,
            |_, c| -> Vec<InstrId> {
                if !c.ids().any(|id| integer_dot(c, id)) {
                    return Vec::new();
                }
                let intervals = integer_intervals(c);
                c.ids()
                    .filter(|&id| {
                        integer_dot(c, id) && fits_f32(c, id, &|o| intervals.get(&o).copied())
                    })
                    .collect()
            },
            |r, _, dot| -> Result<bool, PassError> {
                let (c, names) = r.parts();
                let metadata = c.instr(dot).metadata.clone();
                let operands: Vec<InstrId> = c.operand_ids(dot).to_vec();
                // An integer dot's operands and result are arrays
                // (`integer_dot`).
                let shapes: Option<Vec<ArrayShape>> = operands
                    .iter()
                    .map(|&x| c.instr(x).shape.as_array().cloned())
                    .collect();
                let original = c.instr(dot).clone();
                let (Some(shapes), Some(result)) = (shapes, original.shape.as_array().cloned())
                else {
                    return Ok(false);
                };
                let floats: Vec<InstrId> = operands
                    .into_iter()
                    .zip(shapes)
                    .map(|(x, from)| widen(c, names, x, from, ElementType::F32, metadata.clone()))
                    .collect();
                let mut f32_dot = Instruction::new(
                    names.fresh(&format!("{}.f32", original.name)),
                    retyped(result, ElementType::F32),
                    original.op.clone(),
                );
                f32_dot.metadata = metadata.clone();
                let f = c.add(f32_dot, &floats);
                // The dot becomes the convert back: its name, type and
                // readers stay.
                let back = c.instr_mut(dot);
                back.op = Op::Convert;
                c.set_operands(dot, &[f]);
                rewritten += 1;
                Ok(true)
            },
        )?;
        if rewritten > 0 {
            ctx.note(
                self.name(),
                format!("{rewritten} integer dot(s) provably exact in f32 computed there"),
            );
        }
        Ok(rewritten > 0)
    }
}

/// Whether `id` is a dot of integer operands into an integer result.
fn integer_dot(c: &Computation, id: InstrId) -> bool {
    let int = |s: &Shape| s.as_array().is_some_and(|a| a.ty.is_integer());
    matches!(c.instr(id).op, Op::Dot { .. })
        && int(&c.instr(id).shape)
        && c.operand_ids(id).iter().all(|&o| int(&c.instr(o).shape))
}

/// Whether every partial sum of dot `id` is an integer f32 holds exactly
/// and its result type holds too, from its operands' intervals (`of`).
fn fits_f32(c: &Computation, id: InstrId, of: &dyn Fn(InstrId) -> Option<Interval>) -> bool {
    let Op::Dot { dims, .. } = &c.instr(id).op else {
        return false;
    };
    let &[lhs, rhs] = c.operand_ids(id) else {
        return false;
    };
    let Some(lhs_dims) = c.instr(lhs).shape.as_array().map(|a| a.dims.clone()) else {
        return false;
    };
    let k: i128 = dims
        .lhs_contracting
        .iter()
        .filter_map(|&d| lhs_dims.get(usize::try_from(d).ok()?))
        .map(|&n| i128::from(n))
        .product();
    let magnitude = |v: Interval| v.0.abs().max(v.1.abs());
    let (Some(a), Some(b)) = (of(lhs), of(rhs)) else {
        return false;
    };
    let bound = k.saturating_mul(magnitude(a)).saturating_mul(magnitude(b));
    let result = c
        .instr(id)
        .shape
        .as_array()
        .and_then(|s| s.ty.integer_range());
    let signed_ok = result.is_some_and(|(lo, hi)| {
        // The sums lie in [-bound, bound], or [0, bound] for unsigned
        // operands, which the result's type must hold.
        let low = if a.0 >= 0 && b.0 >= 0 { 0 } else { -bound };
        lo <= low && bound <= hi
    });
    bound <= F32_EXACT && signed_ok
}
