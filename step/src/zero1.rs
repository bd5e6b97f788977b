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
//!
//! Under context parallelism the replicas are every DP replica's CP ranks
//! (`dp * cp`, [`Parallelism::replicas`]): they hold the same weights and
//! different tokens, so they divide the state as DP replicas do, and an
//! FSDP shard group spans `fsdp * cp` of them
//! ([`Parallelism::shard_group`]).
//!
//! Under expert parallelism the experts a rank holds are held by only the
//! `dp / ep` replicas of its EP rank: their state is divided over those
//! ([`Parallelism::zero1_degree`]), each the `d / ep`-th of them, and
//! their collectives run over those replicas, in buckets of their own.
//! Under HSDP they are divided within each shard group (`ep` divides it),
//! and the shard groups' copies summed as the rest are.

use crate::sharding::{self, bucket_runs, local_ranges};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::graph::scope;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection};
use hlatc_compiler::{ElementType, InstrId, Op};
use hlatc_models::parallel::replica::dp_replica_index;
use hlatc_models::parallel::split::{expert_shard_groups, holder_groups};
use hlatc_models::parallel::Fault;
use hlatc_models::{Parallelism, ParamSpec};

/// What FSDP gathers as one: torchtitan's units, the embedding, each
/// decoder layer, and the final norm with the LM head.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GatherUnit {
    Embedding,
    Layer(i64),
    Head,
}

impl GatherUnit {
    pub(crate) fn of(spec: &ParamSpec) -> GatherUnit {
        match (spec.layer, spec.role) {
            (Some(l), _) => GatherUnit::Layer(l),
            (None, hlatc_models::weights::ParamRole::Embedding) => GatherUnit::Embedding,
            (None, _) => GatherUnit::Head,
        }
    }

    /// Its place in the forward of a model whose last decoder layer among
    /// `specs` is `last`: the embedding first, the head after `last`.
    pub(crate) fn place(self, last: i64) -> usize {
        match self {
            GatherUnit::Embedding => 0,
            GatherUnit::Layer(l) => (l + 1) as usize,
            GatherUnit::Head => (last + 2) as usize,
        }
    }

    /// The last decoder layer `specs` hold (-1 for none).
    pub(crate) fn last_layer(specs: &[ParamSpec]) -> i64 {
        specs.iter().filter_map(|s| s.layer).max().unwrap_or(-1)
    }
}

/// [`bucket_runs`] of `sizes`, within each unit when `by_unit` (a
/// weight gathered again in the backward is gathered with its unit alone,
/// so that the rest of the model need not be whole beside it).
fn unit_runs(sizes: &[i64], units: &[GatherUnit], by_unit: bool) -> Vec<Vec<usize>> {
    if !by_unit {
        return bucket_runs(sizes);
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < sizes.len() {
        let end = (start..sizes.len())
            .find(|&i| units[i] != units[start])
            .unwrap_or(sizes.len());
        for run in bucket_runs(&sizes[start..end]) {
            out.push(run.into_iter().map(|r| r + start).collect());
        }
        start = end;
    }
    out
}

/// Elements of each DP replica's shard of a tensor of `dims`: the tensor
/// flattened and padded to a multiple of `dp`, then divided.
pub fn shard_len(dims: &[i64], dp: i64) -> i64 {
    let n: i64 = dims.iter().product();
    (n + dp - 1) / dp.max(1)
}

/// The replicas that divide some parameters' optimizer state: how many,
/// which of them this rank is, and the groups their collectives run over.
struct Division {
    dp: i64,
    /// This rank's place among them (`s32[]`), from its `replica-id`.
    index: InstrId,
    groups: Collective,
    /// Under HSDP, the ranks holding the same shard in the other shard
    /// groups: a shard of a gradient's sum within the group is summed over
    /// them too. `None` where one group holds every replica.
    replicas: Option<Collective>,
}

/// The one thing that differs between a step's DP replicas (its index,
/// from `replica-id`), and the groups its collectives run over.
pub struct Zero1 {
    par: Parallelism,
    /// Every DP replica: what divides every parameter but the experts.
    whole: Division,
    /// The replicas of one EP rank, under expert parallelism.
    experts: Option<Division>,
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
        // An EP rank's experts: divided over the replicas that hold them,
        // within each shard group under HSDP (the shard groups then
        // replicate one another's expert shards as they do the rest).
        let experts = match (par.ep, par.fsdp_replicas()) {
            (1, _) => None,
            (ep, 1) => {
                let ep = b.scalar(ElementType::S32, ep as f64);
                Some(Division {
                    dp: par.replicas() / par.ep,
                    index: b.binary(BinaryOp::Divide, dp_index, ep)?,
                    groups: replica_groups(&holder_groups(1, true, &par)),
                    replicas: None,
                })
            }
            (ep, _) => {
                let ep = b.scalar(ElementType::S32, ep as f64);
                let n = b.scalar(ElementType::S32, par.shard_group() as f64);
                let place = b.binary(BinaryOp::Remainder, dp_index, n)?;
                Some(Division {
                    dp: par.shard_group() / par.ep,
                    index: b.binary(BinaryOp::Divide, place, ep)?,
                    groups: replica_groups(&expert_shard_groups(&par)),
                    replicas: Some(replica_groups(&par.fsdp_replica_groups())),
                })
            }
        };
        // FSDP's shard groups (HSDP: several, replicating one another),
        // or every replica.
        let whole = match par.fsdp_replicas() {
            1 => Division {
                dp: par.replicas(),
                index: dp_index,
                groups: replica_groups(&par.dp_groups()),
                replicas: None,
            },
            _ => {
                let n = b.scalar(ElementType::S32, par.shard_group() as f64);
                Division {
                    dp: par.shard_group(),
                    index: b.binary(BinaryOp::Remainder, dp_index, n)?,
                    groups: replica_groups(&par.fsdp_groups()),
                    replicas: Some(replica_groups(&par.fsdp_replica_groups())),
                }
            }
        };
        b.pop_scope();
        Ok(Zero1 {
            par,
            whole,
            experts,
            fault,
        })
    }

    /// The replicas that divide `spec`'s state.
    fn division(&self, spec: &ParamSpec) -> &Division {
        match (&self.experts, self.par.divides_experts(spec)) {
            (Some(experts), true) => experts,
            _ => &self.whole,
        }
    }

    /// `x` flattened and padded with zeros to `dp * k` elements.
    fn padded(&self, b: &mut Builder, x: InstrId, dv: &Division) -> Result<InstrId, BuildError> {
        let dims = b.dims(x);
        let n: i64 = dims.iter().product();
        let k = shard_len(&dims, dv.dp);
        let flat = b.reshape_unless_same(x, &[n])?;
        if k * dv.dp == n {
            return Ok(flat);
        }
        let padding = b.full(b.ty(x), &[k * dv.dp - n], 0.0)?;
        b.concatenate(&[flat, padding], 0)
    }

    /// `x` as the `[dp, k]` block of its shards: [`Zero1::padded`] cut
    /// into rows, or `x` reshaped straight to them when it needs no
    /// padding.
    fn blocked(
        &self,
        b: &mut Builder,
        x: InstrId,
        k: i64,
        dv: &Division,
    ) -> Result<InstrId, BuildError> {
        let whole = match b.dims(x).iter().product::<i64>() == dv.dp * k {
            true => x,
            false => self.padded(b, x, dv)?,
        };
        b.reshape_unless_same(whole, &[dv.dp, k])
    }

    /// The first element of shard `d * k` for this rank, `(d + shift) %
    /// dp` with a shift (the deliberately misplaced shard of a fault).
    fn shard_start(
        &self,
        b: &mut Builder,
        k: i64,
        shift: i64,
        dv: &Division,
    ) -> Result<InstrId, BuildError> {
        let mut d = dv.index;
        if shift != 0 {
            let s = b.scalar(ElementType::S32, shift as f64);
            let dp = b.scalar(ElementType::S32, dv.dp as f64);
            let moved = b.add2(d, s)?;
            d = b.binary(BinaryOp::Remainder, moved, dp)?;
        }
        let k = b.scalar(ElementType::S32, k as f64);
        b.mul(d, k)
    }

    /// This rank's shard of `x` (its local tensor of `spec`), named `name`.
    pub fn shard(
        &self,
        b: &mut Builder,
        x: InstrId,
        spec: &ParamSpec,
        name: &str,
    ) -> Result<InstrId, BuildError> {
        let dv = self.division(spec);
        let k = shard_len(&b.dims(x), dv.dp);
        let padded = self.padded(b, x, dv)?;
        let start = self.shard_start(b, k, 0, dv)?;
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
            self.reduce_scatter(b, &summed, specs)?
        };
        b.pop_scope();
        Ok(shards)
    }

    /// The indices of `specs` by the replicas that divide them: every
    /// parameter's, or the experts' apart under expert parallelism, each
    /// in order.
    fn by_division<'a>(&'a self, specs: &[ParamSpec]) -> Vec<(&'a Division, Vec<usize>)> {
        let (experts, rest): (Vec<usize>, Vec<usize>) =
            (0..specs.len()).partition(|&i| match &self.experts {
                Some(_) => self.par.divides_experts(&specs[i]),
                None => false,
            });
        let mut out = vec![(&self.whole, rest)];
        if let Some(dv) = &self.experts {
            out.push((dv, experts));
        }
        out
    }

    /// Every tensor's shard of its sum over the replicas that divide it, in
    /// buckets: each tensor as a `[dp, k]` block, a bucket's blocks side by
    /// side, one reduce-scatter of dimension 0 each; within each unit when
    /// FSDP reshards, as the gathers are.
    fn reduce_scatter(
        &self,
        b: &mut Builder,
        xs: &[InstrId],
        specs: &[ParamSpec],
    ) -> Result<Vec<InstrId>, BuildError> {
        let mut out = xs.to_vec();
        for (dv, indices) in self.by_division(specs) {
            let mut blocks = Vec::with_capacity(indices.len());
            for &i in &indices {
                let k = shard_len(&b.dims(xs[i]), dv.dp);
                blocks.push((self.blocked(b, xs[i], k, dv)?, k));
            }
            let sizes: Vec<i64> = blocks.iter().map(|&(_, k)| k * dv.dp).collect();
            // Resharded, a unit's gradients are summed in buckets of their
            // own, as the backward leaves the unit, so the rest of the
            // model's gradients need not be whole beside them.
            let units: Vec<GatherUnit> =
                indices.iter().map(|&i| GatherUnit::of(&specs[i])).collect();
            for run in unit_runs(&sizes, &units, self.par.reshards()) {
                let parts: Vec<InstrId> = run.iter().map(|&r| blocks[r].0).collect();
                let packed = match parts.as_slice() {
                    [one] => *one,
                    _ => b.concatenate(&parts, 1)?,
                };
                // One replica holds the whole sum already.
                let mine = match dv.dp {
                    1 => packed,
                    _ => b.reduce_scatter_sum(packed, 0, &dv.groups)?,
                };
                // HSDP: each group's shard of its sum, summed over the
                // groups (torchtitan's all-reduce over dp_replicate).
                let mine = match &dv.replicas {
                    Some(_) if self.fault == Some(Fault::ShardGroupsNotSummed) => mine,
                    Some(replicas) => b.all_reduce(mine, BinaryOp::Add, replicas)?,
                    None => mine,
                };
                let mut at = 0;
                for &r in &run {
                    let k = blocks[r].1;
                    let piece = b.slice_dim_unless_whole(mine, 1, at, at + k)?;
                    out[indices[r]] = b.reshape(piece, &[k])?;
                    at += k;
                }
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
                let dv = &self.whole;
                let total = b.all_reduce(x, BinaryOp::Add, &dv.groups)?;
                let k = shard_len(&b.dims(x), dv.dp);
                let padded = self.padded(b, total, dv)?;
                let start = self.shard_start(b, k, 1, dv)?;
                b.add(Op::DynamicSlice { sizes: vec![k] }, &[padded, start], None)
            })
            .collect()
    }

    /// Each rank's share of `specs` (its TP and EP share, at
    /// [`Parallelism::local_dims`]) from this rank's shard of it: the
    /// shards all-gathered over the replicas that divide it (in buckets, as
    /// `Zero1::reduce_scatter` packs them), the padding cut off.
    pub fn gather(
        &self,
        b: &mut Builder,
        shards: &[InstrId],
        specs: &[ParamSpec],
    ) -> Result<Vec<InstrId>, BuildError> {
        let dims: Vec<Vec<i64>> = specs.iter().map(|p| self.par.local_dims(p)).collect();
        b.push_scope(scope::PARAMETER_ALL_GATHER);
        let last = GatherUnit::last_layer(specs);
        let mut out = shards.to_vec();
        for (dv, indices) in self.by_division(specs) {
            let dp = dv.dp;
            let ks: Vec<i64> = indices.iter().map(|&i| b.dims(shards[i])[0]).collect();
            let sizes: Vec<i64> = ks.iter().map(|k| k * dp).collect();
            let units: Vec<GatherUnit> =
                indices.iter().map(|&i| GatherUnit::of(&specs[i])).collect();
            for run in unit_runs(&sizes, &units, self.par.reshards()) {
                // Gathered unit by unit, each run is one unit's, named so
                // that the backward's gathers of it are known by unit.
                let unit = self.par.reshards().then(|| units[run[0]].place(last));
                if let Some(u) = unit {
                    b.push_scope(&scope::gather_unit(u));
                }
                let rows = run
                    .iter()
                    .map(|&r| b.reshape(shards[indices[r]], &[1, ks[r]]))
                    .collect::<Result<Vec<_>, _>>()?;
                let packed = match rows.as_slice() {
                    [one] => *one,
                    _ => b.concatenate(&rows, 1)?,
                };
                let all = match (dp, self.fault) {
                    (1, _) => packed,
                    (_, Some(Fault::ShardsNotGathered)) => {
                        b.concatenate(&vec![packed; dp as usize], 0)?
                    }
                    _ => b.all_gather(packed, 0, &dv.groups)?,
                };
                let mut at = 0;
                for &r in &run {
                    let i = indices[r];
                    let block = b.slice_dim_unless_whole(all, 1, at, at + ks[r])?;
                    let n: i64 = dims[i].iter().product();
                    let whole = match n == dp * ks[r] {
                        true => block,
                        false => {
                            let flat = b.reshape(block, &[dp * ks[r]])?;
                            b.slice_dim(flat, 0, 0, n)?
                        }
                    };
                    out[i] = b.reshape_unless_same(whole, &dims[i])?;
                    at += ks[r];
                }
                if unit.is_some() {
                    b.pop_scope();
                }
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
                    let dv = self.division(spec);
                    let w = self.range_weights(b, &local, dim, &ranges, ty, dv)?;
                    let ws = b.mul(sq, w)?;
                    b.reduce_sum(ws, &[0])?
                }
            };
            // Under HSDP every shard group holds the shard: count it once.
            let weighted = match self.division(spec).replicas {
                Some(_) => scaled(b, weighted, self.par.fsdp_replicas())?,
                None => weighted,
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
        dv: &Division,
    ) -> Result<InstrId, BuildError> {
        let k = shard_len(local, dv.dp);
        let stride: i64 = local[dim + 1..].iter().product();
        let i32_at = |b: &mut Builder, v: i64| b.full(ElementType::S32, &[k], v as f64);
        let offset = self.shard_start(b, k, 0, dv)?;
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
