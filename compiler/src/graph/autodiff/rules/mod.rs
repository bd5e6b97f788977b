//! One backward rule per differentiable op: the vector-Jacobian product for
//! operand `i`, given the output's adjoint `g`, and the forward values the
//! rule reads ([`saves`], from the exhaustive table in [`gradient()`]).

use super::AutodiffError;
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::op::*;

// One module per op family with backward rules (see `OpFamily`), and
// `gradient`, the table that gives each op its rule and what it saves.
mod collective;
mod data_movement;
mod elementwise;
mod gradient;
mod indexing;
mod linear_algebra;
mod reduction;

pub use gradient::{gradient, saves, Gradient, Rule, Saved};

pub(super) fn not_differentiable<T>(
    b: &Builder,
    n: InstrId,
    reason: impl Into<String>,
) -> Result<T, AutodiffError> {
    let instr = b.computation().instr(n);
    Err(AutodiffError::NotDifferentiable {
        instruction: instr.name.clone(),
        opcode: instr.op.opcode(),
        reason: reason.into(),
    })
}

/// `g` masked by `p`: `p ? g : 0`.
pub(super) fn masked(b: &mut Builder, p: InstrId, g: InstrId) -> Result<InstrId, AutodiffError> {
    let z = b.full_like(g, 0.0)?;
    Ok(b.select(p, g, z)?)
}

/// Sums `g` (shaped like `target` after broadcasting) back to `target`'s
/// shape; identity when the shapes already agree.
pub(super) fn unbroadcast_scalar(
    b: &mut Builder,
    g: InstrId,
    target: InstrId,
) -> Result<InstrId, AutodiffError> {
    if b.dims(target).is_empty() && !b.dims(g).is_empty() {
        let all: Vec<i64> = (0..b.dims(g).len() as i64).collect();
        return Ok(b.reduce_sum(g, &all)?);
    }
    Ok(g)
}

fn as_operand_type(b: &mut Builder, g: InstrId, x: InstrId) -> Result<InstrId, AutodiffError> {
    let ty = b.ty(x);
    Ok(b.convert_unless_same(g, ty)?)
}

/// The adjoint a rule is asked for: operand `i` (the value `x`) of the
/// instruction `n`, whose operands are `ops` (as the rule reads them),
/// given `g` = d(loss)/d(n).
#[derive(Clone, Copy)]
pub(super) struct Site<'a> {
    pub n: InstrId,
    /// The value the rule reads for `n`'s output (see [`vjp_reading`]).
    pub out: InstrId,
    pub ops: &'a [InstrId],
    pub i: usize,
    pub x: InstrId,
    pub g: InstrId,
}

/// d(loss)/d(operand i of n), given d(loss)/d(n) = `g`. `None` when the
/// operand gets no contribution (zero almost everywhere, or not a float).
pub fn vjp(
    b: &mut Builder,
    n: InstrId,
    i: usize,
    g: InstrId,
) -> Result<Option<InstrId>, AutodiffError> {
    vjp_reading(b, n, i, g, &mut |_, v| Ok(v))
}

/// How a rule reads a forward value it saves: the value itself, or a
/// recomputation of it.
pub(super) type Read<'a> = dyn FnMut(&mut Builder, InstrId) -> Result<InstrId, AutodiffError> + 'a;

/// [`vjp`], with each forward value the rule saves (as [`saves`] lists
/// them) read through `read`. A product's rule for one factor reads only
/// the others, so that factor is not read.
pub(super) fn vjp_reading(
    b: &mut Builder,
    n: InstrId,
    i: usize,
    g: InstrId,
    read: &mut Read<'_>,
) -> Result<Option<InstrId>, AutodiffError> {
    let instr = b.computation().instr(n).clone();
    let mut ops = b.computation().operands(n);
    let complex = |s: &crate::ir::shape::Shape| s.as_array().is_some_and(|a| a.ty.is_complex());
    if complex(&instr.shape) || complex(&b.computation().instr(ops[i]).shape) {
        return not_differentiable(b, n, gradient::COMPLEX);
    }
    let rule = match gradient(&instr.op) {
        Gradient::Rule(rule) => rule,
        Gradient::Zero => return Ok(None),
        Gradient::Refused(reason) => return not_differentiable(b, n, reason),
    };
    let reducer = match &instr.op {
        Op::Reduce { to_apply, .. } => b.reducer_op(*to_apply),
        _ => None,
    };
    let product = matches!(instr.op, Op::Binary(BinaryOp::Multiply) | Op::Dot { .. });
    let mut out = n;
    for &saved in rule.reads(&instr.op, reducer) {
        let positions = match saved {
            Saved::Output => {
                out = read(b, n)?;
                continue;
            }
            Saved::Operand(j) if product && j == i => continue,
            Saved::Operand(j) => j..j + 1,
            Saved::OperandsFrom(j) => j..ops.len(),
        };
        for j in positions {
            ops[j] = read(b, ops[j])?;
        }
    }
    let x = ops[i];
    let site = Site {
        n,
        out,
        ops: &ops,
        i,
        x,
        g,
    };
    match rule.apply(b, &site)? {
        Some(v) => Ok(Some(as_operand_type(b, v, x)?)),
        None => Ok(None),
    }
}
