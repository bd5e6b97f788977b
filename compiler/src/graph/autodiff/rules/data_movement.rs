//! Backward rules of the ops that move data without arithmetic: transposes,
//! reversals, broadcasts, concatenation, padding.

use super::{not_differentiable, AutodiffError, Site};
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::op::*;

/// The adjoint of `broadcast(x, dimensions)`: sum over the new dimensions,
/// then put the kept ones back in x's dimension order.
pub(super) fn unbroadcast(
    b: &mut Builder,
    g: InstrId,
    x: InstrId,
    dimensions: &[i64],
) -> Result<InstrId, AutodiffError> {
    let (xd, gd) = (b.dims(x), b.dims(g));
    let reduce: Vec<i64> = (0..gd.len() as i64)
        .filter(|d| !dimensions.contains(d))
        .collect();
    let mut r = if reduce.is_empty() {
        g
    } else {
        b.reduce_sum(g, &reduce)?
    };
    // Remaining dims are the kept out-dims in increasing order; map them back
    // to x's dimension order.
    let kept: Vec<i64> = (0..gd.len() as i64)
        .filter(|d| !reduce.contains(d))
        .collect();
    let x_order: Vec<i64> = dimensions
        .iter()
        .copied()
        .filter(|d| kept.contains(d))
        .collect();
    if x_order != kept {
        let perm: Vec<i64> = x_order
            .iter()
            .map(|d| kept.iter().position(|k| k == d).unwrap() as i64)
            .collect();
        r = b.transpose(r, &perm)?;
    }
    debug_assert_eq!(b.dims(r), xd);
    Ok(r)
}

/// The adjoint of a transpose is the inverse permutation.
pub(super) fn transpose(
    b: &mut Builder,
    g: InstrId,
    permutation: &[i64],
) -> Result<InstrId, AutodiffError> {
    let mut inverse = vec![0i64; permutation.len()];
    for (k, &p) in permutation.iter().enumerate() {
        inverse[p as usize] = k as i64;
    }
    Ok(b.transpose(g, &inverse)?)
}

pub(super) fn reverse(
    b: &mut Builder,
    g: InstrId,
    dimensions: &[i64],
) -> Result<InstrId, AutodiffError> {
    let reverse = Op::Reverse {
        dimensions: dimensions.to_vec(),
    };
    Ok(b.add(reverse, &[g], None)?)
}

/// Operand `i`'s part of the concatenation along `dimension`.
pub(super) fn concatenate(
    b: &mut Builder,
    s: &Site,
    dimension: i64,
) -> Result<InstrId, AutodiffError> {
    let Site { ops, i, x, g, .. } = *s;
    let d = dimension as usize;
    let start: i64 = ops[..i].iter().map(|&o| b.dims(o)[d]).sum();
    let len = b.dims(x)[d];
    Ok(b.slice_dim(g, d, start, start + len)?)
}

pub(super) fn pad(
    b: &mut Builder,
    s: &Site,
    config: &[PadDim],
) -> Result<Option<InstrId>, AutodiffError> {
    let Site { n, ops, i, g, .. } = *s;
    if config.iter().any(|p| p.low < 0 || p.high < 0) {
        return not_differentiable(b, n, "negative padding");
    }
    let dims = b.dims(ops[0]);
    let slices: Vec<SliceDim> = config
        .iter()
        .zip(&dims)
        .map(|(p, &len)| SliceDim {
            start: p.low,
            limit: p.low + (len - 1).max(0) * (p.interior + 1) + i64::from(len > 0),
            stride: p.interior + 1,
        })
        .collect();
    let gx = b.add(Op::Slice { slices }, &[g], None)?;
    if i == 0 {
        return Ok(Some(gx));
    }
    // The padding value's adjoint: everything the slice did not take.
    let rank: Vec<i64> = (0..dims.len() as i64).collect();
    let all = b.reduce_sum(g, &rank)?;
    let inner = b.reduce_sum(gx, &rank)?;
    Ok(Some(b.sub(all, inner)?))
}
