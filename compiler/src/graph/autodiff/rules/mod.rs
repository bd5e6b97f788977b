//! One backward rule per differentiable op: the vector-Jacobian product for
//! operand `i`, given the output's adjoint `g`, and the forward values the
//! rule reads ([`saves`], from the exhaustive table in [`gradient()`]).

use super::AutodiffError;
use crate::graph::builder::Builder;
use crate::graph::module_markers::ModuleMarker;
use crate::ir::computation::InstrId;
use crate::ir::op::*;

// One module per op family with backward rules (see `OpFamily`), and
// `gradient`, the table of what each rule saves.
mod collective;
mod data_movement;
mod elementwise;
mod gradient;
mod indexing;
mod linear_algebra;
mod reduction;

pub use gradient::{gradient, saves, Gradient, Saved};

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
    Ok(if b.ty(g) == ty { g } else { b.convert(g, ty)? })
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
    match gradient(&instr.op) {
        Gradient::Rule { .. } => {}
        Gradient::Zero => return Ok(None),
        Gradient::Refused(reason) => return not_differentiable(b, n, reason),
    }
    let reducer = match &instr.op {
        Op::Reduce { to_apply, .. } => b.reducer_op(*to_apply),
        _ => None,
    };
    let product = matches!(instr.op, Op::Binary(BinaryOp::Multiply) | Op::Dot { .. });
    let mut out = n;
    for saved in saves(&instr.op, reducer) {
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
    let r = match &instr.op {
        Op::Unary(u) => elementwise::unary(b, *u, ops[0], out, g)?,
        Op::Binary(op) => elementwise::binary(b, *op, &ops, out, i, g)?,
        Op::Select => elementwise::select(b, &site)?,
        Op::Clamp => Some(elementwise::clamp(b, &site)?),
        Op::Convert => Some(b.convert(g, b.ty(x))?),
        Op::Reshape { .. } => Some(b.reshape(g, &b.dims(x))?),
        Op::Transpose { permutation } => Some(data_movement::transpose(b, g, permutation)?),
        Op::Reverse { dimensions } => Some(data_movement::reverse(b, g, dimensions)?),
        Op::Broadcast { dimensions } => Some(data_movement::unbroadcast(b, g, x, dimensions)?),
        Op::Slice { slices } => Some(indexing::slice_vjp(b, g, x, slices)?),
        Op::Concatenate { dimension } => Some(data_movement::concatenate(b, &site, *dimension)?),
        Op::Pad { config } => data_movement::pad(b, &site, config)?,
        Op::DynamicSlice { .. } => indexing::dynamic_slice(b, &site)?,
        Op::DynamicUpdateSlice => indexing::dynamic_update_slice(b, &site)?,
        Op::Dot { dims, .. } => Some(linear_algebra::dot_vjp(b, dims, ops[0], ops[1], i, g)?),
        Op::Reduce {
            dimensions,
            to_apply,
        } => Some(reduction::reduce(b, &site, dimensions, *to_apply)?),
        Op::Gather { dims, .. } => indexing::gather(b, &site, dims)?,
        Op::Scatter { dims, to_apply, .. } => indexing::scatter(b, &site, dims, *to_apply)?,
        Op::AllReduce {
            collective,
            to_apply,
        } => Some(collective::all_reduce(b, &site, collective, *to_apply)?),
        Op::AllGather {
            collective,
            dimension,
        } => Some(collective::all_gather(b, &site, collective, *dimension)?),
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => Some(collective::reduce_scatter(
            b, &site, collective, *dimension, *to_apply,
        )?),
        Op::CustomCall(_) => match ModuleMarker::of(&instr.op) {
            Some(marker) => Some(b.module_marker(marker.adjoint(), g)?),
            None => return not_differentiable(b, n, "a custom call has no gradient rule"),
        },
        // Declared without a rule in `gradient`, which refused them above.
        Op::Parameter(..)
        | Op::Constant(..)
        | Op::TupleConstant(..)
        | Op::Iota { .. }
        | Op::Compare { .. }
        | Op::StochasticConvert
        | Op::ReducePrecision { .. }
        | Op::BitcastConvert
        | Op::Bitcast
        | Op::SetDimensionSize { .. }
        | Op::GetDimensionSize { .. }
        | Op::DynamicReshape
        | Op::RaggedDot { .. }
        | Op::Convolution { .. }
        | Op::ReduceWindow { .. }
        | Op::SelectAndScatter { .. }
        | Op::Tuple
        | Op::OptBarrier
        | Op::GetTupleElement { .. }
        | Op::Call { .. }
        | Op::While { .. }
        | Op::Conditional { .. }
        | Op::Fusion { .. }
        | Op::Sort { .. }
        | Op::Map { .. }
        | Op::Rng { .. }
        | Op::RngGetAndUpdateState { .. }
        | Op::AllToAll { .. }
        | Op::BatchNorm { .. }
        | Op::RaggedAllToAll { .. }
        | Op::Domain { .. }
        | Op::TriangularSolve { .. }
        | Op::Cholesky { .. }
        | Op::Fft { .. }
        | Op::CollectiveBroadcast { .. }
        | Op::TopK { .. }
        | Op::CollectivePermute { .. }
        | Op::AllReduceStart { .. }
        | Op::AllGatherStart { .. }
        | Op::CollectivePermuteStart { .. }
        | Op::CollectiveDone(..)
        | Op::ReplicaId
        | Op::PartitionId
        | Op::RngBitGenerator { .. }
        | Op::AfterAll
        | Op::AddDependency
        | Op::Transfer(..)
        | Op::Async { .. }
        | Op::CopyStart { .. }
        | Op::CopyDone
        | Op::Infeed { .. }
        | Op::Outfeed { .. } => {
            return not_differentiable(
                b,
                n,
                format!("{} has no gradient rule in hlatc", instr.op.opcode()),
            )
        }
    };
    match r {
        Some(v) => Ok(Some(as_operand_type(b, v, x)?)),
        None => Ok(None),
    }
}
