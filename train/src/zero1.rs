//! ZeRO-1: the optimizer state divided over the data-parallel replicas.
//!
//! Every rank of a TP group holds its share of each parameter (its "local"
//! tensor); under ZeRO-1 the DP replicas of that share divide its optimizer
//! state. The local tensor is flattened (row-major) and padded with zeros
//! to a multiple of `dp`, and DP replica `d` keeps the `k = ceil(n / dp)`
//! elements from `d * k`: its shard. The Adam moments (and master weights)
//! it carries are that shard's, so the optimizer's memory per rank falls by
//! `dp`.
//!
//! A step then differs from the replicated one between autodiff and the
//! new parameters: each gradient's copies on the TP ranks are summed
//! within the replica, the replicas' sums reduce-scattered (each keeps its
//! shard of the total, summed in f32), the grad norm summed from the
//! shards, AdamW applied to the shard, and the updated shards all-gathered
//! into the new parameter. The communication is that of the all-reduce it
//! replaces (a reduce-scatter and an all-gather), and the update of every
//! element is computed once, by its owner, so DP replicas cannot drift.
//! Reduce-scatters and all-gathers are packed in buckets of
//! [`sharding::BUCKET_ELEMENTS`], each tensor keeping its own shard: the
//! tensors are laid side by side as `[dp, k]` blocks, so piece `d` of the
//! bucket is every tensor's shard `d`.

use crate::sharding::{self, bucket_runs, local_ranges};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection};
use hlatc_compiler::{ElementType, InstrId, Op};
use hlatc_models::parallel::replica::dp_replica_index;
use hlatc_models::parallel::Fault;
use hlatc_models::{Parallelism, ParamSpec};

/// Elements of each DP replica's shard of a tensor of `dims`: the tensor
/// flattened and padded to a multiple of `dp`, then divided.
pub fn shard_len(dims: &[i64], dp: i64) -> i64 {
    let n: i64 = dims.iter().product();
    (n + dp - 1) / dp.max(1)
}

/// The one thing that differs between a step's DP replicas (its index,
/// from `replica-id`), and the groups its collectives run over.
pub struct Zero1 {
    par: Parallelism,
    /// This rank's DP replica (`s32[]`).
    dp_index: InstrId,
    dp_groups: Collective,
    fault: Option<Fault>,
}

impl Zero1 {
    pub fn new(
        b: &mut Builder,
        par: Parallelism,
        fault: Option<Fault>,
    ) -> Result<Self, BuildError> {
        b.push_scope("dp_rank");
        let dp_index = dp_replica_index(b, &par)?;
        b.pop_scope();
        Ok(Zero1 {
            par,
            dp_index,
            dp_groups: replica_groups(&par.dp_groups()),
            fault,
        })
    }

    /// `x` flattened and padded with zeros to `dp * k` elements.
    fn padded(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        let dims = b.dims(x);
        let n: i64 = dims.iter().product();
        let k = shard_len(&dims, self.par.dp);
        let flat = b.reshape_unless_same(x, &[n])?;
        if k * self.par.dp == n {
            return Ok(flat);
        }
        let padding = b.full(b.ty(x), &[k * self.par.dp - n], 0.0)?;
        b.concatenate(&[flat, padding], 0)
    }

    /// `x` as the `[dp, k]` block of its shards: [`Zero1::padded`] cut
    /// into rows, or `x` reshaped straight to them when it needs no
    /// padding.
    fn blocked(&self, b: &mut Builder, x: InstrId, k: i64) -> Result<InstrId, BuildError> {
        let dp = self.par.dp;
        let whole = match b.dims(x).iter().product::<i64>() == dp * k {
            true => x,
            false => self.padded(b, x)?,
        };
        b.reshape_unless_same(whole, &[dp, k])
    }

    /// The first element of shard `d * k` for this rank, `(d + shift) %
    /// dp` with a shift (the deliberately misplaced shard of a fault).
    fn shard_start(&self, b: &mut Builder, k: i64, shift: i64) -> Result<InstrId, BuildError> {
        let mut d = self.dp_index;
        if shift != 0 {
            let s = b.scalar(ElementType::S32, shift as f64);
            let dp = b.scalar(ElementType::S32, self.par.dp as f64);
            let moved = b.add2(d, s)?;
            d = b.binary(BinaryOp::Remainder, moved, dp)?;
        }
        let k = b.scalar(ElementType::S32, k as f64);
        b.mul(d, k)
    }

    /// This rank's shard of `x` (a local tensor), named `name`.
    pub fn shard(&self, b: &mut Builder, x: InstrId, name: &str) -> Result<InstrId, BuildError> {
        let k = shard_len(&b.dims(x), self.par.dp);
        let padded = self.padded(b, x)?;
        let start = self.shard_start(b, k, 0)?;
        b.add_named(
            name,
            Op::DynamicSlice { sizes: vec![k] },
            &[padded, start],
            None,
        )
    }

    /// Each gradient's shard of its sum over every rank that holds it: the
    /// copies on the TP ranks summed first (an all-reduce within the
    /// replica), then the replicas' sums reduce-scattered.
    pub fn scatter_gradients(
        &self,
        b: &mut Builder,
        grads: &[InstrId],
        specs: &[ParamSpec],
    ) -> Result<Vec<InstrId>, BuildError> {
        let summed = sharding::sum_over_tp_copies(b, grads, specs, &self.par)?;
        b.push_scope("gradient_reduce_scatter");
        let shards = if self.fault == Some(Fault::ShardUpdatedWithAnothersGradient) {
            self.misplaced_shards(b, &summed)?
        } else {
            self.reduce_scatter(b, &summed)?
        };
        b.pop_scope();
        Ok(shards)
    }

    /// Every tensor's shard of its sum over the DP replicas, in buckets:
    /// each tensor as a `[dp, k]` block, a bucket's blocks side by side,
    /// one reduce-scatter of dimension 0 each.
    fn reduce_scatter(&self, b: &mut Builder, xs: &[InstrId]) -> Result<Vec<InstrId>, BuildError> {
        let dp = self.par.dp;
        let mut blocks = Vec::with_capacity(xs.len());
        for &x in xs {
            let k = shard_len(&b.dims(x), dp);
            blocks.push((self.blocked(b, x, k)?, k));
        }
        let sizes: Vec<i64> = blocks.iter().map(|&(_, k)| k * dp).collect();
        let mut out = xs.to_vec();
        for run in bucket_runs(&sizes) {
            let parts: Vec<InstrId> = run.iter().map(|&i| blocks[i].0).collect();
            let packed = match parts.as_slice() {
                [one] => *one,
                _ => b.concatenate(&parts, 1)?,
            };
            let mine = b.reduce_scatter_sum(packed, 0, &self.dp_groups)?;
            let mut at = 0;
            for &i in &run {
                let k = blocks[i].1;
                let piece = b.slice_dim_unless_whole(mine, 1, at, at + k)?;
                out[i] = b.reshape(piece, &[k])?;
                at += k;
            }
        }
        Ok(out)
    }

    /// The bug [`Fault::ShardUpdatedWithAnothersGradient`] builds: the
    /// whole sum taken, and the next replica's shard of it kept.
    fn misplaced_shards(
        &self,
        b: &mut Builder,
        xs: &[InstrId],
    ) -> Result<Vec<InstrId>, BuildError> {
        xs.iter()
            .map(|&x| {
                let total = b.all_reduce(x, BinaryOp::Add, &self.dp_groups)?;
                let k = shard_len(&b.dims(x), self.par.dp);
                let padded = self.padded(b, total)?;
                let start = self.shard_start(b, k, 1)?;
                b.add(Op::DynamicSlice { sizes: vec![k] }, &[padded, start], None)
            })
            .collect()
    }

    /// Each local tensor of `dims` from this rank's updated shard of it:
    /// the shards all-gathered over the replicas (in buckets, as
    /// `Zero1::reduce_scatter` packs them), the padding cut off.
    pub fn gather(
        &self,
        b: &mut Builder,
        shards: &[InstrId],
        dims: &[Vec<i64>],
    ) -> Result<Vec<InstrId>, BuildError> {
        let dp = self.par.dp;
        b.push_scope("parameter_all_gather");
        let ks: Vec<i64> = shards.iter().map(|&s| b.dims(s)[0]).collect();
        let sizes: Vec<i64> = ks.iter().map(|k| k * dp).collect();
        let mut out = shards.to_vec();
        for run in bucket_runs(&sizes) {
            let rows = run
                .iter()
                .map(|&i| b.reshape(shards[i], &[1, ks[i]]))
                .collect::<Result<Vec<_>, _>>()?;
            let packed = match rows.as_slice() {
                [one] => *one,
                _ => b.concatenate(&rows, 1)?,
            };
            let all = b.all_gather(packed, 0, &self.dp_groups)?;
            let mut at = 0;
            for &i in &run {
                let block = b.slice_dim_unless_whole(all, 1, at, at + ks[i])?;
                let n: i64 = dims[i].iter().product();
                let whole = match n == dp * ks[i] {
                    true => block,
                    false => {
                        let flat = b.reshape(block, &[dp * ks[i]])?;
                        b.slice_dim(flat, 0, 0, n)?
                    }
                };
                out[i] = b.reshape_unless_same(whole, &dims[i])?;
                at += ks[i];
            }
        }
        b.pop_scope();
        Ok(out)
    }

    /// The squared global gradient norm from this rank's gradient shards:
    /// each element's square weighted by one over the number of TP ranks
    /// that hold its copy (every element then counts once over the world),
    /// and summed over every rank of the stage.
    pub fn norm_squared(
        &self,
        b: &mut Builder,
        shards: &[InstrId],
        specs: &[ParamSpec],
    ) -> Result<InstrId, BuildError> {
        let ty = b.ty(shards[0]);
        let mut parts = Vec::with_capacity(shards.len());
        for (&g, spec) in shards.iter().zip(specs) {
            let sq = b.mul(g, g)?;
            let weighted = match local_ranges(spec, &self.par) {
                (_, ranges) if ranges.len() == 1 => {
                    let s = b.reduce_sum(sq, &[0])?;
                    scaled(b, s, ranges[0].1)?
                }
                (dim, ranges) => {
                    let local = self.par.local_dims(spec);
                    let w = self.range_weights(b, &local, dim, &ranges, ty)?;
                    let ws = b.mul(sq, w)?;
                    b.reduce_sum(ws, &[0])?
                }
            };
            parts.push(weighted);
        }
        let total = b.sum_of(parts, ty)?;
        let everyone = replica_groups(&self.par.everyone());
        b.all_reduce(total, BinaryOp::Add, &everyone)
    }

    /// For each element of this rank's shard of a local tensor of `local`
    /// dims, one over the copies of the range (along `dim`) it lies in.
    /// The padding past the tensor is zero, whatever its weight.
    fn range_weights(
        &self,
        b: &mut Builder,
        local: &[i64],
        dim: usize,
        ranges: &[([i64; 2], i64)],
        ty: ElementType,
    ) -> Result<InstrId, BuildError> {
        let k = shard_len(local, self.par.dp);
        let stride: i64 = local[dim + 1..].iter().product();
        let i32_at = |b: &mut Builder, v: i64| b.full(ElementType::S32, &[k], v as f64);
        let offset = self.shard_start(b, k, 0)?;
        let offset = b.broadcast(offset, &[k], &[])?;
        let iota = b.iota(ElementType::S32, &[k], 0)?;
        let flat = b.add2(offset, iota)?;
        let stride = i32_at(b, stride)?;
        let size = i32_at(b, local[dim])?;
        let row = b.div(flat, stride)?;
        let coord = b.binary(BinaryOp::Remainder, row, size)?;
        let mut w = b.full(ty, &[k], 0.0)?;
        for &([lo, hi], copies) in ranges {
            let lo = i32_at(b, lo)?;
            let hi = i32_at(b, hi)?;
            let above = b.compare(coord, lo, ComparisonDirection::Ge)?;
            let below = b.compare(coord, hi, ComparisonDirection::Lt)?;
            let inside = b.binary(BinaryOp::And, above, below)?;
            let c = b.full(ty, &[k], 1.0 / copies as f64)?;
            w = b.select(inside, c, w)?;
        }
        Ok(w)
    }
}

/// `s` over `copies`.
fn scaled(b: &mut Builder, s: InstrId, copies: i64) -> Result<InstrId, BuildError> {
    match copies {
        1 => Ok(s),
        c => b.scale(s, 1.0 / c as f64),
    }
}
