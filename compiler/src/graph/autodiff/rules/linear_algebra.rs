//! Backward rules of the linear algebra ops: `dot`.

use super::AutodiffError;
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::op::*;

/// Adjoint of a general dot for operand `i` (0 = lhs, 1 = rhs).
pub(super) fn dot_vjp(
    b: &mut Builder,
    dims: &DotDims,
    l: InstrId,
    r: InstrId,
    i: usize,
    g: InstrId,
) -> Result<InstrId, AutodiffError> {
    let (lr, rr) = (b.dims(l).len() as i64, b.dims(r).len() as i64);
    let free = |rank: i64, batch: &[i64], contracting: &[i64]| -> Vec<i64> {
        (0..rank)
            .filter(|d| !batch.contains(d) && !contracting.contains(d))
            .collect()
    };
    let lf = free(lr, &dims.lhs_batch, &dims.lhs_contracting);
    let rf = free(rr, &dims.rhs_batch, &dims.rhs_contracting);
    let nb = dims.lhs_batch.len() as i64;
    let g_batch: Vec<i64> = (0..nb).collect();
    // For the lhs adjoint, contract g's rhs-free dims with rhs's free dims;
    // for the rhs adjoint, g's lhs-free dims with lhs's free dims.
    let (
        other,
        my_batch,
        my_free,
        my_contracting,
        other_batch,
        other_free,
        other_contracting,
        g_free,
    ) = if i == 0 {
        let g_rf: Vec<i64> =
            (nb + lf.len() as i64..nb + lf.len() as i64 + rf.len() as i64).collect();
        (
            r,
            &dims.lhs_batch,
            &lf,
            &dims.lhs_contracting,
            &dims.rhs_batch,
            &rf,
            &dims.rhs_contracting,
            g_rf,
        )
    } else {
        let g_lf: Vec<i64> = (nb..nb + lf.len() as i64).collect();
        (
            l,
            &dims.rhs_batch,
            &rf,
            &dims.rhs_contracting,
            &dims.lhs_batch,
            &lf,
            &dims.lhs_contracting,
            g_lf,
        )
    };
    let t = b.dot(
        g,
        other,
        DotDims {
            lhs_batch: g_batch,
            lhs_contracting: g_free,
            rhs_batch: other_batch.clone(),
            rhs_contracting: other_free.clone(),
        },
    )?;
    // t's dims: batch, g's remaining free dims (= my free dims), then the
    // other operand's contracting dims in increasing order (= my contracting
    // dims, paired through the dot's contracting lists).
    let mut src: Vec<i64> = my_batch.clone();
    src.extend(my_free.iter().copied());
    let mut oc: Vec<(i64, i64)> = other_contracting
        .iter()
        .copied()
        .zip(my_contracting.iter().copied())
        .collect();
    oc.sort_unstable();
    src.extend(oc.into_iter().map(|(_, mine)| mine));
    let rank = src.len();
    let perm: Vec<i64> = (0..rank as i64)
        .map(|d| src.iter().position(|&s| s == d).unwrap() as i64)
        .collect();
    if perm.iter().enumerate().all(|(k, &p)| p == k as i64) {
        Ok(t)
    } else {
        Ok(b.transpose(t, &perm)?)
    }
}
