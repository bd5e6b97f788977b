//! Collectives over replica groups, as the sharded training step writes
//! them: one program every rank runs, groups of global replica ids, no
//! channel (cross-replica, as NxD hands neuronx-cc its programs).

use crate::graph::builder::{BuildError, Builder};
use crate::ir::collective::{Collective, ReplicaGroups};
use crate::ir::computation::InstrId;
use crate::ir::module::Module;
use crate::ir::op::{BinaryOp, Op};
use crate::ir::shape::Shape;

/// Replica groups by their members' global ids, e.g. `{{0,1},{2,3}}`.
pub fn replica_groups(groups: &[Vec<i64>]) -> Collective {
    Collective {
        replica_groups: ReplicaGroups::List(groups.to_vec().into()),
        ..Collective::default()
    }
}

/// Writes every explicit replica-group list in `m` that an iota lays out
/// (a sharded step's TP, DP and PP groups all are) in XLA's iota form,
/// `[64,32]<=[2048]` for 2,048 ids; how many collectives changed. The
/// groups are the same; each distinct list is converted once.
pub fn iota_replica_groups(m: &mut Module) -> usize {
    let mut seen: Vec<(ReplicaGroups, Option<ReplicaGroups>)> = Vec::new();
    let mut changed = 0;
    for c in &mut m.computations {
        let ids: Vec<InstrId> = c.ids().collect();
        for id in ids {
            let Some(coll) = c.instr_mut(id).op.collective_mut() else {
                continue;
            };
            let iota = match seen.iter().find(|(g, _)| *g == coll.replica_groups) {
                Some((_, iota)) => iota.clone(),
                None => {
                    let iota = coll.replica_groups.to_iota();
                    seen.push((coll.replica_groups.clone(), iota.clone()));
                    iota
                }
            };
            if let Some(iota) = iota {
                coll.replica_groups = iota;
                changed += 1;
            }
        }
    }
    changed
}

impl Builder {
    /// Every member of `x`'s group gets `op` over the group's values.
    pub fn all_reduce(
        &mut self,
        x: InstrId,
        op: BinaryOp,
        groups: &Collective,
    ) -> Result<InstrId, BuildError> {
        let to_apply = self.reducer(op, self.ty(x));
        self.add(
            Op::AllReduce {
                collective: groups.clone(),
                to_apply,
            },
            &[x],
            None,
        )
    }

    /// The group's values concatenated along `dimension`, in group order.
    pub fn all_gather(
        &mut self,
        x: InstrId,
        dimension: i64,
        groups: &Collective,
    ) -> Result<InstrId, BuildError> {
        let shape = self.resized(x, dimension, groups, |d, n| d * n);
        self.add(
            Op::AllGather {
                collective: groups.clone(),
                dimension,
            },
            &[x],
            shape,
        )
    }

    /// The group's sum split along `dimension`: member k keeps piece k.
    pub fn reduce_scatter_sum(
        &mut self,
        x: InstrId,
        dimension: i64,
        groups: &Collective,
    ) -> Result<InstrId, BuildError> {
        let to_apply = self.reducer(BinaryOp::Add, self.ty(x));
        let shape = self.resized(x, dimension, groups, |d, n| d / n);
        self.add(
            Op::ReduceScatter {
                collective: groups.clone(),
                dimension,
                to_apply,
            },
            &[x],
            shape,
        )
    }

    /// `x` cut into as many pieces along `dimension` as the group has
    /// members, piece k sent to member k, and the pieces each member
    /// receives laid along `dimension` in sender order: the shape is
    /// unchanged.
    pub fn all_to_all(
        &mut self,
        x: InstrId,
        dimension: i64,
        groups: &Collective,
    ) -> Result<InstrId, BuildError> {
        self.add(
            Op::AllToAll {
                collective: groups.clone(),
                dimension: Some(dimension),
            },
            &[x],
            None,
        )
    }

    /// `x` sent from each replica to its partner in `pairs` (source,
    /// target); a replica nobody sends to receives zeros.
    pub fn collective_permute(
        &mut self,
        x: InstrId,
        pairs: &[(i64, i64)],
    ) -> Result<InstrId, BuildError> {
        self.add(
            Op::CollectivePermute {
                channel_id: None,
                pairs: pairs.to_vec(),
                slice_sizes: Vec::new(),
            },
            &[x],
            None,
        )
    }

    /// `x`'s shape with `dimension` resized by the group size (which the
    /// shape inference cannot know from an empty group list); `None` lets
    /// inference say what is wrong.
    fn resized(
        &self,
        x: InstrId,
        dimension: i64,
        groups: &Collective,
        resize: impl Fn(i64, i64) -> i64,
    ) -> Option<Shape> {
        let n = groups.replica_groups.group_size()?;
        let mut dims = self.dims(x);
        let d = dims.get_mut(usize::try_from(dimension).ok()?)?;
        *d = resize(*d, n);
        Some(Shape::array(self.ty(x), dims))
    }
}
