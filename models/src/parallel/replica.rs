//! A rank's place in the division, computed in the graph from its
//! `replica-id`, so one program serves every rank.

use super::Parallelism;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, Op};
use hlatc_compiler::{ElementType, InstrId};

/// This rank's replica (`s32[]`, its DP replica's and CP rank's place
/// among a stage's `dp * cp`), from its `replica-id`: rank `r` is replica
/// `(r / tp) % (dp * cp)` (the remainder only matters past the first
/// pipeline stage).
pub fn dp_replica_index(b: &mut Builder, par: &Parallelism) -> Result<InstrId, BuildError> {
    let id = b.add(Op::ReplicaId, &[], None)?;
    let id = b.convert(id, ElementType::S32)?;
    let tp = b.scalar(ElementType::S32, par.tp as f64);
    let replica = b.binary(BinaryOp::Divide, id, tp)?;
    match par.pp {
        1 => Ok(replica),
        _ => {
            let dp = b.scalar(ElementType::S32, par.replicas() as f64);
            b.binary(BinaryOp::Remainder, replica, dp)
        }
    }
}
