//! `orient-dots`: a dot whose large operand XLA CPU would have to read
//! transposed, computed as the dot with its operands swapped and its
//! (smaller) result transposed back, so the large operand is read as it
//! lies.
//!
//! XLA CPU runs a dot as a (batched) matrix product of a `[batch, m, k]`
//! lhs and a `[batch, k, n]` rhs; an operand laid out otherwise is given a
//! transposed layout, and when that operand has another reader that wants
//! it as it is, XLA materializes it twice: a copy, or its producer's
//! fusion run a second time with the other layout. Attention's backward
//! is where that happens: the score gradient `dS [b, q, k]` feeds
//! `dQ = dS . K` as a `[b, q, k]` lhs, and `dK = dS^T . Q` (autodiff's
//! form: the cotangent is always the lhs) as a lhs contracted over its
//! middle dimension; XLA CPU wrote `dS` twice per layer, a `[b, H, S, S]`
//! f32 pass each time, where `dK^T = Q^T . dS` reads it as a `[b, q, k]`
//! rhs and only the `[b, k, d]` result is transposed (as JAX's own step
//! does, and as autodiff already computes `dV^T`).
//!
//! The rewrite applies to a dot whose larger operand has its batch
//! dimensions first, in order, and is laid out for the other side (an lhs
//! with its contracting dimensions before its free ones, or an rhs with
//! them after), is read by something else too (otherwise XLA gives its
//! producer the layout the dot wants, at no cost), and is larger than the
//! other operand and the result together. The products and the sum are
//! the same; the accumulation order inside the matrix kernel may differ,
//! within f32 rounding. Dots in the `cpu` default pipeline only: Neuron
//! chooses its own layouts.

use crate::infra::context::PassContext;
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use crate::infra::rewriter::{RewriteError, Rewriter};
use hlatc_compiler::ir::op::DotDims;
use hlatc_compiler::{Computation, InstrId, Module, Op, Shape};

pub struct OrientDots;

impl OrientDots {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "orient-dots";
}

/// Which operand of a dot sits on the wrong side for the matrix kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Lhs,
    Rhs,
}

impl Pass for OrientDots {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        rewrite_matches(
            m,
            ctx,
            Sweep::Dead,
            |_, c| -> Vec<InstrId> { c.ids().filter(|&id| misoriented(c, id)).collect() },
            |r, _, dot| swap(r, dot).map_err(PassError::rewrite(self.name())),
        )
    }
}

/// Swaps the operands of dot `dot` and transposes the result back into
/// its own shape; whether it did (a dot `misoriented` found always is one).
fn swap(r: &mut Rewriter<'_>, dot: InstrId) -> Result<bool, RewriteError> {
    let (dims, precision, algorithm) = match &r.comp().instr(dot).op {
        Op::Dot {
            dims,
            precision,
            algorithm,
        } => (dims.clone(), precision.clone(), *algorithm),
        _ => return Ok(false),
    };
    let (lhs, rhs) = match r.comp().operand_ids(dot) {
        &[l, rr] => (l, rr),
        _ => return Ok(false),
    };
    let Some(out) = r.shape(dot).as_array().cloned() else {
        return Ok(false);
    };
    let nb = dims.lhs_batch.len();
    let rank = |x: InstrId| r.shape(x).as_array().map_or(0, |a| a.dims.len());
    let lhs_free = rank(lhs) - nb - dims.lhs_contracting.len();
    let rhs_free = out.dims.len() - nb - lhs_free;
    let swapped_dims = DotDims {
        lhs_batch: dims.rhs_batch.clone(),
        lhs_contracting: dims.rhs_contracting.clone(),
        rhs_batch: dims.lhs_batch.clone(),
        rhs_contracting: dims.lhs_contracting.clone(),
    };
    // A precision per operand: they swap too.
    let precision = precision.iter().rev().cloned().collect();
    // [batch, rhs free, lhs free], in the dot's own result type
    // (an attribute of the dot, not its operands').
    let swapped_out: Vec<i64> = out.dims[..nb]
        .iter()
        .chain(&out.dims[nb + lhs_free..])
        .chain(&out.dims[nb..nb + lhs_free])
        .copied()
        .collect();
    r.provenance_of(dot);
    let swapped = r.add(
        Op::Dot {
            dims: swapped_dims,
            precision,
            algorithm,
        },
        &[rhs, lhs],
        Some(Shape::array(out.ty, swapped_out)),
    )?;
    // [batch, rhs free, lhs free] back to [batch, lhs free, rhs free].
    let permutation: Vec<i64> = (0..nb)
        .chain(nb + rhs_free..nb + rhs_free + lhs_free)
        .chain(nb..nb + rhs_free)
        .map(|d| d as i64)
        .collect();
    let back = r.add(Op::Transpose { permutation }, &[swapped], None)?;
    r.replace(dot, back)?;
    Ok(true)
}

/// Whether `id` is a dot the pass swaps (see the module documentation).
fn misoriented(c: &Computation, id: InstrId) -> bool {
    let Op::Dot { dims, .. } = &c.instr(id).op else {
        return false;
    };
    let &[lhs, rhs] = c.operand_ids(id) else {
        return false;
    };
    let rank = |x: InstrId| c.instr(x).shape.as_array().map(|a| a.dims.len());
    let (Some(lr), Some(rr)) = (rank(lhs), rank(rhs)) else {
        return false;
    };
    let bytes = |x: InstrId| c.instr(x).shape.byte_size();
    let (lb, rb, ob) = (bytes(lhs), bytes(rhs), bytes(id));
    // Only the large operand's layout counts: XLA transposes the small
    // one to its side's form (batch dimensions first) whatever it is.
    let leading = |batch: &[i64]| batch.iter().enumerate().all(|(i, &d)| d == i as i64);
    let (big, big_bytes, small_bytes) = match lb >= rb {
        true => (Side::Lhs, lb, rb),
        false => (Side::Rhs, rb, lb),
    };
    let misplaced = match big {
        Side::Lhs => {
            leading(&dims.lhs_batch)
                && contracting_first(dims.lhs_batch.len(), &dims.lhs_contracting, lr)
        }
        Side::Rhs => {
            leading(&dims.rhs_batch)
                && contracting_last(dims.rhs_batch.len(), &dims.rhs_contracting, rr)
        }
    };
    let operand = match big {
        Side::Lhs => lhs,
        Side::Rhs => rhs,
    };
    misplaced
        && lhs != rhs
        && c.users(operand).len() > 1
        && big_bytes > small_bytes.saturating_add(ob)
}

/// The contracting dimensions come right after the batch ones and before
/// at least one free dimension: the layout an rhs wants, not an lhs.
fn contracting_first(nb: usize, contracting: &[i64], rank: usize) -> bool {
    !contracting.is_empty()
        && nb + contracting.len() < rank
        && contracting
            .iter()
            .enumerate()
            .all(|(i, &d)| d == (nb + i) as i64)
}

/// The contracting dimensions are the trailing ones, after at least one
/// free dimension: the layout an lhs wants, not an rhs.
fn contracting_last(nb: usize, contracting: &[i64], rank: usize) -> bool {
    let first = rank.saturating_sub(contracting.len());
    !contracting.is_empty()
        && first > nb
        && contracting
            .iter()
            .enumerate()
            .all(|(i, &d)| d == (first + i) as i64)
}
