//! Backward rules of the collectives a sharded program differentiates
//! through. Each is the transpose of a linear map over every rank's value
//! at once: an all-reduce by sum sends each member the group's sum, so a
//! member's operand reaches every member's result and its adjoint is the
//! group's sum of adjoints (an all-reduce again); an all-gather's transpose
//! sums the adjoints and hands each member its own piece (a
//! reduce-scatter), and a reduce-scatter's is the all-gather. An
//! all-to-all that splits and joins one dimension is a permutation of the
//! group's pieces that undoes itself (member j's piece i goes to member
//! i's slot j), so its transpose is the same all-to-all. None saves a
//! forward value.

use super::{not_differentiable, AutodiffError, Site};
use crate::graph::builder::Builder;
use crate::ir::collective::Collective;
use crate::ir::computation::InstrId;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::BinaryOp;

/// A cross-partition collective (one with a channel) would need a fresh
/// channel for its transpose; hlatc's programs are cross-replica.
const CHANNEL: &str =
    "collectives over a channel (cross-partition) are not differentiated; hlatc's sharded programs are cross-replica";

fn cross_replica(b: &Builder, s: &Site, c: &Collective) -> Result<(), AutodiffError> {
    if c.channel_id.is_some() {
        return not_differentiable(b, s.n, CHANNEL);
    }
    if s.ops.len() != 1 {
        return not_differentiable(b, s.n, "collectives over several operands");
    }
    Ok(())
}

fn sum_only(b: &Builder, s: &Site, to_apply: ComputationId) -> Result<(), AutodiffError> {
    match b.reducer_op(to_apply) {
        Some(BinaryOp::Add) => Ok(()),
        _ => not_differentiable(
            b,
            s.n,
            format!("only a sum is differentiated through a collective ('{}' is not one); a max or min across ranks is a constant shift to stop the gradient at", b.callee_name(to_apply)),
        ),
    }
}

pub(super) fn all_reduce(
    b: &mut Builder,
    s: &Site,
    c: &Collective,
    to_apply: ComputationId,
) -> Result<InstrId, AutodiffError> {
    cross_replica(b, s, c)?;
    sum_only(b, s, to_apply)?;
    Ok(b.all_reduce(s.g, BinaryOp::Add, c)?)
}

pub(super) fn all_gather(
    b: &mut Builder,
    s: &Site,
    c: &Collective,
    dimension: i64,
) -> Result<InstrId, AutodiffError> {
    cross_replica(b, s, c)?;
    Ok(b.reduce_scatter_sum(s.g, dimension, c)?)
}

pub(super) fn reduce_scatter(
    b: &mut Builder,
    s: &Site,
    c: &Collective,
    dimension: i64,
    to_apply: ComputationId,
) -> Result<InstrId, AutodiffError> {
    cross_replica(b, s, c)?;
    sum_only(b, s, to_apply)?;
    Ok(b.all_gather(s.g, dimension, c)?)
}

pub(super) fn all_to_all(
    b: &mut Builder,
    s: &Site,
    c: &Collective,
    dimension: Option<i64>,
) -> Result<InstrId, AutodiffError> {
    cross_replica(b, s, c)?;
    let Some(dimension) = dimension else {
        return not_differentiable(
            b,
            s.n,
            "an all-to-all of a tuple is not differentiated; split one array along a dimension",
        );
    };
    Ok(b.all_to_all(s.g, dimension, c)?)
}
