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

use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::op::BinaryOp;
use hlatc_compiler::InstrId;
use hlatc_models::parallel::split::{across_stages, copy_groups, holder_groups};
use hlatc_models::parallel::Fault;
use hlatc_models::{Parallelism, ParamSpec};
use std::collections::BTreeMap;

/// The contiguous ranges of a rank's tensor along one dimension, each
/// held on `copies` ranks of its TP group (the same on every rank), as
/// few as the copies allow: neighbours held alike are one range, so a
/// tensor held alike throughout (vocabulary padding included) is one
/// range over all of it.
pub(crate) fn local_ranges(spec: &ParamSpec, par: &Parallelism) -> (usize, Vec<([i64; 2], i64)>) {
    let pieces = spec.tp.pieces(&spec.dims, 0, par);
    let local = par.local_dims(spec);
    let dim = pieces.first().map_or(0, |p| p.dim);
    let mut ranges: Vec<([i64; 2], i64)> = Vec::new();
    for p in &pieces {
        let end = p.local + p.global[1] - p.global[0];
        match ranges.last_mut() {
            Some((range, copies)) if *copies == p.copies => range[1] = end,
            _ => ranges.push(([p.local, end], p.copies)),
        }
    }
    match ranges.as_mut_slice() {
        [] => ranges.push(([0, local[dim]], 1)),
        [(range, _)] => *range = [0, local[dim]],
        _ => {}
    }
    (dim, ranges)
}

/// Elements per gradient all-reduce: ranges with the same holders are
/// packed into buckets of up to this many (Megatron-Core's default bucket,
/// 40 M parameters), so a step issues a few large all-reduces rather than
/// one per tensor (65 norm weights alone in 7B at TP 8). A range larger
/// than a bucket is reduced on its own.
pub const BUCKET_ELEMENTS: i64 = 40_000_000;

/// A contiguous range of one gradient, and the holders it is summed over.
struct Range {
    grad: usize,
    value: InstrId,
    holders: Holders,
}

/// Who holds a range: `copies` ranks of each TP group, on one pipeline
/// stage or (`every_stage`: the embedding, final norm and LM head under
/// pipeline parallelism) on every stage, in every DP replica or (`experts`
/// under expert parallelism) in those that hold the same experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Holders {
    copies: i64,
    every_stage: bool,
    experts: bool,
}

/// Whether every pipeline stage holds `spec` (and its gradient is summed
/// over the stages): the parameters outside the decoder layers, when there
/// is more than one stage.
pub fn held_by_every_stage(spec: &ParamSpec, par: &Parallelism) -> bool {
    par.pp > 1 && spec.layer.is_none()
}

/// Each gradient summed over the ranks that hold its parameter's ranges,
/// ranges with the same holders packed into buckets of
/// [`BUCKET_ELEMENTS`].
pub fn sum_over_holders(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    fault: Option<Fault>,
) -> Result<Vec<InstrId>, BuildError> {
    if fault == Some(Fault::MissingGradientAllReduce) {
        return Ok(grads.to_vec());
    }
    sum_ranges(b, grads, specs, par, "gradient_all_reduce", &|h| {
        stages_of(h, holder_groups(h.copies, h.experts, par), par)
    })
}

/// Each gradient summed over the copies of its ranges on the TP ranks of
/// one DP replica, the replicas apart: what ZeRO-1 sums before it
/// reduce-scatters over the replicas.
pub fn sum_over_tp_copies(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
) -> Result<Vec<InstrId>, BuildError> {
    sum_ranges(b, grads, specs, par, "gradient_tp_copies", &|h| {
        stages_of(h, copy_groups(h.copies, par), par)
    })
}

/// `groups` (one stage's each) joined across the stages for a range
/// every stage holds.
fn stages_of(h: Holders, groups: Vec<Vec<i64>>, par: &Parallelism) -> Vec<Vec<i64>> {
    match h.every_stage {
        true => across_stages(groups, par),
        false => groups,
    }
}

/// The ranks a range with these holders is summed over.
type GroupsOf<'a> = dyn Fn(Holders) -> Vec<Vec<i64>> + 'a;

/// Each gradient cut into its ranges, each range summed over
/// `groups_of(copies)`, and put back together, under scope `scope`.
fn sum_ranges(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    scope: &str,
    groups_of: &GroupsOf<'_>,
) -> Result<Vec<InstrId>, BuildError> {
    b.push_scope(scope);
    // Each gradient as its ranges, split where the holders change.
    let mut ranges = Vec::new();
    let mut dims = Vec::with_capacity(grads.len());
    for (k, (&g, spec)) in grads.iter().zip(specs).enumerate() {
        let (dim, local) = local_ranges(spec, par);
        let every_stage = held_by_every_stage(spec, par);
        let experts = par.divides_experts(spec);
        for (range, copies) in local {
            let value = b.slice_dim_unless_whole(g, dim, range[0], range[1])?;
            ranges.push(Range {
                grad: k,
                value,
                holders: Holders {
                    copies,
                    every_stage,
                    experts,
                },
            });
        }
        dims.push(dim);
    }
    let summed = sum_in_buckets(b, &ranges, groups_of)?;
    // Each gradient from its summed ranges, in order.
    let mut out = Vec::with_capacity(grads.len());
    for (k, &dim) in dims.iter().enumerate() {
        let parts: Vec<InstrId> = ranges
            .iter()
            .zip(&summed)
            .filter(|(r, _)| r.grad == k)
            .map(|(_, &s)| s)
            .collect();
        out.push(match parts.as_slice() {
            [one] => *one,
            _ => b.concatenate(&parts, dim as i64)?,
        });
    }
    b.pop_scope();
    Ok(out)
}

/// Every range summed over its holders: the ranges of one holder class,
/// in order, packed into buckets (flattened and concatenated), one
/// all-reduce each, and cut back into their shapes.
fn sum_in_buckets(
    b: &mut Builder,
    ranges: &[Range],
    groups_of: &GroupsOf<'_>,
) -> Result<Vec<InstrId>, BuildError> {
    let mut summed: Vec<InstrId> = ranges.iter().map(|r| r.value).collect();
    let classes: std::collections::BTreeSet<Holders> = ranges.iter().map(|r| r.holders).collect();
    for holders in classes {
        let groups = groups_of(holders);
        if groups.first().map_or(1, Vec::len) == 1 {
            continue;
        }
        let groups = replica_groups(&groups);
        let members: Vec<usize> = (0..ranges.len())
            .filter(|&i| ranges[i].holders == holders)
            .collect();
        for bucket in buckets(b, ranges, &members) {
            if let [only] = bucket.as_slice() {
                summed[*only] = b.all_reduce(ranges[*only].value, BinaryOp::Add, &groups)?;
                continue;
            }
            let flat = bucket
                .iter()
                .map(|&i| {
                    let v = ranges[i].value;
                    let n = b.dims(v).iter().product::<i64>();
                    b.reshape_unless_same(v, &[n])
                })
                .collect::<Result<Vec<_>, _>>()?;
            let packed = b.concatenate(&flat, 0)?;
            let reduced = b.all_reduce(packed, BinaryOp::Add, &groups)?;
            let mut at = 0;
            for &i in &bucket {
                let shape = b.dims(ranges[i].value);
                let n = shape.iter().product::<i64>();
                let piece = b.slice_dim(reduced, 0, at, at + n)?;
                summed[i] = b.reshape_unless_same(piece, &shape)?;
                at += n;
            }
        }
    }
    Ok(summed)
}

/// `members` (indices into `ranges`) in order, cut into runs of at most
/// [`BUCKET_ELEMENTS`] elements (a larger range alone).
fn buckets(b: &Builder, ranges: &[Range], members: &[usize]) -> Vec<Vec<usize>> {
    let sizes: Vec<i64> = members
        .iter()
        .map(|&i| b.dims(ranges[i].value).iter().product())
        .collect();
    bucket_runs(&sizes)
        .into_iter()
        .map(|run| run.into_iter().map(|k| members[k]).collect())
        .collect()
}

/// Indices into `sizes` (elements each), in order, cut into runs of at
/// most [`BUCKET_ELEMENTS`] elements (a larger one alone).
pub(crate) fn bucket_runs(sizes: &[i64]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut filled = 0;
    for (i, &n) in sizes.iter().enumerate() {
        match out.last_mut() {
            Some(bucket) if filled + n <= BUCKET_ELEMENTS => {
                bucket.push(i);
                filled += n;
            }
            _ => {
                out.push(vec![i]);
                filled = n;
            }
        }
    }
    out
}

/// The squared global gradient norm, from this rank's whole gradients:
/// a TP-sharded range's squares are added over the TP group, a range held
/// by `c` ranks of it counts `1 / c` on each, and a parameter every rank
/// holds is counted once, outside the sum. Under expert parallelism each
/// rank's experts' squares are first added over its EP group, which
/// together holds every expert.
pub fn norm_squared(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    fault: Option<Fault>,
) -> Result<InstrId, BuildError> {
    let ty = b.ty(grads[0]);
    // By copies, and whether the range is this rank's experts.
    let mut by_holders: BTreeMap<(i64, bool), InstrId> = BTreeMap::new();
    for (&g, spec) in grads.iter().zip(specs) {
        let (dim, ranges) = local_ranges(spec, par);
        for (range, copies) in ranges {
            let part = b.slice_dim_unless_whole(g, dim, range[0], range[1])?;
            let sq = b.mul(part, part)?;
            let all: Vec<i64> = (0..b.dims(part).len() as i64).collect();
            let s = b.reduce_sum(sq, &all)?;
            let key = (copies, par.divides_experts(spec));
            let acc = match by_holders.get(&key) {
                Some(&acc) => b.add2(acc, s)?,
                None => s,
            };
            by_holders.insert(key, acc);
        }
    }
    let mut by_copies: BTreeMap<i64, InstrId> = BTreeMap::new();
    for ((copies, experts), s) in by_holders {
        let s = match experts {
            true => b.all_reduce(s, BinaryOp::Add, &replica_groups(&par.ep_groups()))?,
            false => s,
        };
        let acc = match by_copies.get(&copies) {
            Some(&acc) => b.add2(acc, s)?,
            None => s,
        };
        by_copies.insert(copies, acc);
    }
    let tp = par.tp;
    let (mut shared, mut replicated) = (Vec::new(), Vec::new());
    for (copies, s) in by_copies {
        if copies == tp && fault != Some(Fault::ReplicatedCountedPerRank) {
            replicated.push(s);
        } else {
            let weighted = if copies == 1 || copies == tp {
                s
            } else {
                b.scale(s, 1.0 / copies as f64)?
            };
            shared.push(weighted);
        }
    }
    // A part with nothing in it is left out, not added as a zero.
    let shared = match (shared.is_empty(), tp > 1) {
        (true, _) => None,
        (false, false) => Some(b.sum_of(shared, ty)?),
        (false, true) => {
            let mine = b.sum_of(shared, ty)?;
            Some(b.all_reduce(mine, BinaryOp::Add, &replica_groups(&par.tp_groups()))?)
        }
    };
    let replicated = match replicated.is_empty() {
        true => None,
        false => Some(b.sum_of(replicated, ty)?),
    };
    b.sum_of(shared.into_iter().chain(replicated), ty)
}

/// The squared gradient norm of some parameters over one stage's ranks.
pub type StageNorm<'a> =
    dyn Fn(&mut Builder, &[InstrId], &[ParamSpec]) -> Result<InstrId, BuildError> + 'a;

/// The squared global gradient norm under pipeline parallelism: `norm`
/// (the norm of one stage's ranks) of the layers' gradients summed over
/// the stages, each of which holds its own layers, plus `norm` of the
/// rest, which every stage holds alike and which counts once. Without
/// pipeline parallelism, `norm` of every gradient.
pub fn norm_squared_over_stages(
    b: &mut Builder,
    grads: &[InstrId],
    specs: &[ParamSpec],
    par: &Parallelism,
    norm: &StageNorm<'_>,
) -> Result<InstrId, BuildError> {
    if par.pp == 1 {
        return norm(b, grads, specs);
    }
    let (mut own, mut shared) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for (&g, spec) in grads.iter().zip(specs) {
        let part = match held_by_every_stage(spec, par) {
            true => &mut shared,
            false => &mut own,
        };
        part.0.push(g);
        part.1.push(spec.clone());
    }
    let layers = norm(b, &own.0, &own.1)?;
    b.push_scope("grad_norm_over_stages");
    let layers = b.all_reduce(layers, BinaryOp::Add, &replica_groups(&par.pp_groups()))?;
    b.pop_scope();
    let rest = norm(b, &shared.0, &shared.1)?;
    b.add2(layers, rest)
}
