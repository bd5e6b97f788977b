//! Backward rules of the reductions: `reduce` by a sum, max or min.

use super::{masked, not_differentiable, AutodiffError, Site};
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::*;

pub(super) fn reduce(
    b: &mut Builder,
    s: &Site,
    dimensions: &[i64],
    to_apply: ComputationId,
) -> Result<InstrId, AutodiffError> {
    let Site {
        n,
        out,
        ops,
        i,
        x,
        g,
        ..
    } = *s;
    if ops.len() != 2 {
        return not_differentiable(b, n, "variadic reduce");
    }
    if i == 1 {
        return not_differentiable(
            b,
            n,
            "the gradient of a reduce's initial value is not supported",
        );
    }
    let xd = b.dims(x);
    let kept: Vec<i64> = (0..xd.len() as i64)
        .filter(|d| !dimensions.contains(d))
        .collect();
    let gb = b.broadcast(g, &xd, &kept)?;
    let adjoint = match b.reducer_op(to_apply) {
        Some(BinaryOp::Add) => gb,
        Some(BinaryOp::Maximum | BinaryOp::Minimum) => {
            // Ties share the adjoint equally, as JAX does.
            let ob = b.broadcast(out, &xd, &kept)?;
            let hit = b.compare(x, ob, ComparisonDirection::Eq)?;
            let ones = b.full_like(x, 1.0)?;
            let ind = masked(b, hit, ones)?;
            let count = b.reduce_sum(ind, dimensions)?;
            let cb = b.broadcast(count, &xd, &kept)?;
            let share = b.div(gb, cb)?;
            b.mul(share, ind)?
        }
        _ => {
            return not_differentiable(
                b,
                n,
                format!(
                    "reducer '{}' is not a sum, max or min",
                    b.callee_name(to_apply)
                ),
            )
        }
    };
    Ok(adjoint)
}
