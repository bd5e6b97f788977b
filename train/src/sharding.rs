//! What a rank of a sharded step does between autodiff and AdamW: each
//! parameter's gradient summed over the ranks that hold it, and the global
//! gradient norm with every parameter counted once.
//!
//! Autodiff differentiates each rank's copy of the loss, scaled by
//! `1 / world` (every rank holds the same loss, so the copies average to
//! it). Through the forward pass's collectives that gives each rank its
//! share of every gradient, and the whole gradient of a value is the sum
//! of the shares of every rank that holds it: over the DP replicas for a
//! TP-sharded range, over the KV head's copies too for a replicated KV
//! head, over every rank for a replicated norm weight. Summing in f32 (the
//! gradients are f32 under every precision preset but fp64) is HLAT's
//! "FP32 for gradient accumulation and all-reduce".

use hlatc_compiler::build::builder::{BuildError, Builder};
use hlatc_compiler::build::collectives::replica_groups;
use hlatc_compiler::ir::op::BinaryOp;
use hlatc_compiler::InstrId;
use hlatc_models::parallel::split::holder_groups;
use hlatc_models::parallel::Fault;
use hlatc_models::{Parallelism, ParamSpec};
use std::collections::BTreeMap;

/// The contiguous ranges of a rank's tensor, along one dimension, each
/// held on `copies` ranks of its TP group (the same on every rank).
fn local_ranges(spec: &ParamSpec, par: &Parallelism) -> (usize, Vec<([i64; 2], i64)>) {
    let pieces = spec.tp.pieces(&spec.dims, 0, par);
    let local = spec.tp.local_dims(&spec.dims, par);
    let dim = pieces.first().map_or(0, |p| p.dim);
    if pieces.len() <= 1 {
        // The whole tensor (vocabulary padding included).
        let copies = pieces.first().map_or(1, |p| p.copies);
        return (dim, vec![([0, local[dim]], copies)]);
    }
    let ranges = pieces
        .iter()
        .map(|p| ([p.local, p.local + p.global[1] - p.global[0]], p.copies))
        .collect();
    (dim, ranges)
}

/// `x` summed over the holder groups of a range held `copies` times.
fn sum_over(
    b: &mut Builder,
    x: InstrId,
    copies: i64,
    par: &Parallelism,
) -> Result<InstrId, BuildError> {
    let groups = holder_groups(copies, par);
    if groups.first().map_or(1, Vec::len) == 1 {
        return Ok(x);
    }
    b.all_reduce(x, BinaryOp::Add, &replica_groups(&groups))
}

/// Each gradient summed over the ranks that hold its parameter's ranges.
pub fn sum_over_holders(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    fault: Option<Fault>,
) -> Result<Vec<InstrId>, BuildError> {
    b.push_scope("gradient_all_reduce");
    let mut out = Vec::with_capacity(grads.len());
    for (&g, spec) in grads.iter().zip(specs) {
        if fault == Some(Fault::MissingGradientAllReduce) {
            out.push(g);
            continue;
        }
        let (dim, ranges) = local_ranges(spec, par);
        let same = ranges.iter().all(|r| r.1 == ranges[0].1);
        let summed = if same {
            sum_over(b, g, ranges[0].1, par)?
        } else {
            let parts = ranges
                .iter()
                .map(|&([a, z], copies)| {
                    let part = b.slice_dim(g, dim, a, z)?;
                    sum_over(b, part, copies, par)
                })
                .collect::<Result<Vec<_>, _>>()?;
            b.concatenate(&parts, dim as i64)?
        };
        out.push(summed);
    }
    b.pop_scope();
    Ok(out)
}

/// The squared global gradient norm, from this rank's whole gradients:
/// a TP-sharded range's squares are added over the TP group, a range held
/// by `c` ranks of it counts `1 / c` on each, and a parameter every rank
/// holds is counted once, outside the sum.
pub fn norm_squared(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    fault: Option<Fault>,
) -> Result<InstrId, BuildError> {
    let ty = b.ty(grads[0]);
    let mut by_copies: BTreeMap<i64, InstrId> = BTreeMap::new();
    for (&g, spec) in grads.iter().zip(specs) {
        let (dim, ranges) = local_ranges(spec, par);
        for ([a, z], copies) in ranges {
            let part = if ranges_cover(b, g, dim, a, z) {
                g
            } else {
                b.slice_dim(g, dim, a, z)?
            };
            let sq = b.mul(part, part)?;
            let all: Vec<i64> = (0..b.dims(part).len() as i64).collect();
            let s = b.reduce_sum(sq, &all)?;
            let acc = match by_copies.get(&copies) {
                Some(&acc) => b.add2(acc, s)?,
                None => s,
            };
            by_copies.insert(copies, acc);
        }
    }
    let tp = par.tp;
    let mut shared = b.scalar(ty, 0.0);
    let mut replicated = b.scalar(ty, 0.0);
    for (copies, s) in by_copies {
        if copies == tp && fault != Some(Fault::ReplicatedCountedPerRank) {
            replicated = b.add2(replicated, s)?;
        } else {
            let weighted = if copies == 1 || copies == tp {
                s
            } else {
                b.scale(s, 1.0 / copies as f64)?
            };
            shared = b.add2(shared, weighted)?;
        }
    }
    let shared = if tp > 1 {
        b.all_reduce(shared, BinaryOp::Add, &replica_groups(&par.tp_groups()))?
    } else {
        shared
    };
    b.add2(shared, replicated)
}

fn ranges_cover(b: &Builder, g: InstrId, dim: usize, a: i64, z: i64) -> bool {
    a == 0 && z == b.dims(g)[dim]
}
