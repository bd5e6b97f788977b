//! The search's memory order beside the remat ladders: a layout's lighter
//! twins, which differ from it in one choice that holds less, so that a
//! layout whose lighter twin does not fit a core is left uncompiled.
//!
//! Five choices order two twins' memory, whatever else the layouts are
//! (`tests/it/plan.rs` holds the order against a search compiled whole,
//! and it held on each of the 930 micro-batch pairs, 215 SP pairs, 194
//! ZeRO-1 pairs and 928 precision pairs of HLAT-70B's search on 32 trn1
//! nodes):
//!
//! - **A smaller micro-batch** keeps the same state and a smaller share of
//!   every activation; a pipeline keeps at most its stage count of them in
//!   flight, and `micro_batch x in flight` grows with the micro-batch. Only
//!   where both twins accumulate gradients (or neither does): a step of
//!   one micro-batch holds no accumulators, so it can hold less than its
//!   twin of two.
//! - **Sequence parallelism** divides the activations between the
//!   tensor-parallel regions over the TP ranks, which without it each
//!   rank holds whole.
//! - **ZeRO-1** divides the master weights and Adam's moments over the
//!   replicas, which a replicated layout holds whole. (FSDP is not on this
//!   order: it holds its gathered units beside its shards, and can hold
//!   more than ZeRO-1 does.)
//! - **FSDP over every replica** divides the weights, gradients and
//!   optimizer state over all of them, where HSDP divides them over the
//!   replicas of a shard group only; both gather the same units whole.
//! - **`bf16-pure`** keeps the weights and Adam's state in bf16, where
//!   `bf16-master` keeps f32 master weights and moments beside bf16
//!   weights, and `bf16-mixed` all of them in f32; the three compute
//!   alike ([Mixed precision](../../docs/src/precision.md)), so their
//!   activations are the same.
//!
//! The search evaluates layouts by their [`weight`], the number of these
//! choices they hold more by than their lightest twin, lightest first, so
//! each layout's lighter twins are decided before it.

use super::layout::Layout;
use crate::precision::Precision;

/// How many of the order's choices `l` holds more by: its micro-batch's
/// place in `micro_batches`, no SP where TP could divide, replicated
/// state where ZeRO-1 could divide it, HSDP where FSDP could span every
/// replica, and state wider than `bf16-pure`'s.
pub fn weight(l: &Layout, micro_batches: &[i64]) -> usize {
    let mb = micro_batches
        .iter()
        .position(|&m| m == l.micro_batch)
        .unwrap_or(0);
    let sp = usize::from(l.parallel.tp > 1 && !l.parallel.sequence_parallel);
    let zero1 = usize::from(replicated(l) && l.parallel.dp * l.parallel.cp > 1);
    let hsdp = usize::from(hsdp(l));
    mb + sp + zero1 + hsdp + usize::from(wider_than_pure(l.precision))
}

/// `l`'s lighter twins: one choice of the order lighter each, the next
/// smaller micro-batch of `micro_batches` where both accumulate alike over
/// `global_batch`.
pub fn lighter_twins(l: &Layout, micro_batches: &[i64], global_batch: i64) -> Vec<Layout> {
    let mut out = Vec::new();
    let at = micro_batches.iter().position(|&m| m == l.micro_batch);
    if let Some(smaller) = at.filter(|&k| k > 0).map(|k| micro_batches[k - 1]) {
        let accumulates = |mb: i64| global_batch / (l.parallel.dp * mb) > 1;
        if accumulates(smaller) == accumulates(l.micro_batch) {
            out.push(Layout {
                micro_batch: smaller,
                ..l.clone()
            });
        }
    }
    if l.parallel.tp > 1 && !l.parallel.sequence_parallel {
        let mut twin = l.clone();
        twin.parallel.sequence_parallel = true;
        out.push(twin);
    }
    if replicated(l) && l.parallel.dp * l.parallel.cp > 1 {
        let mut twin = l.clone();
        twin.parallel.zero1 = true;
        out.push(twin);
    }
    if hsdp(l) {
        let mut twin = l.clone();
        twin.parallel.fsdp = l.parallel.dp;
        out.push(twin);
    }
    if wider_than_pure(l.precision) {
        out.push(Layout {
            precision: Precision::Bf16Pure,
            ..l.clone()
        });
    }
    out
}

/// A precision that computes as `bf16-pure` does and keeps wider state.
fn wider_than_pure(p: Precision) -> bool {
    matches!(p, Precision::Bf16Master | Precision::Bf16Mixed)
}

/// Its weights and optimizer state whole on every replica: neither ZeRO-1
/// nor FSDP.
fn replicated(l: &Layout) -> bool {
    !l.parallel.zero1 && l.parallel.fsdp <= 1
}

/// FSDP over fewer than every replica: shard groups that replicate one
/// another.
fn hsdp(l: &Layout) -> bool {
    l.parallel.shards_weights() && l.parallel.fsdp < l.parallel.dp
}
