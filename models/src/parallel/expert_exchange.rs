//! How a token reaches the experts of the other ranks of its EP group,
//! in the two forms Neuron's stacks use (neuronx-distributed's
//! `parallel_layers/mappings.py` for training; NxD Inference and
//! vLLM-Neuron for the gather form):
//!
//! - `all-to-all` (NxD training): each rank lays its tokens out in every
//!   expert's buffer of slots ([`crate::expert_slots`]), sends each EP
//!   rank the buffers of the experts it holds, runs its experts over what
//!   it received, and sends the outputs back the same way. What moves is
//!   `E * C` slots per sequence, each way.
//! - `all-gather` (NxD Inference, vLLM-Neuron): every rank gathers the
//!   group's tokens and routing weights, runs its experts over all of
//!   them, and the partial outputs are summed back to their tokens' ranks
//!   by a reduce-scatter. What moves is every token of the group.
//!
//! Both compute what one device computes with every expert: the experts a
//! rank holds are one EP rank's run of them, and every token's output is
//! the sum over its experts wherever they are.

use super::replica::dp_replica_index;
use super::{EpExchange, Parallelism};
use crate::experts::{experts, experts_by_slot, Routing};
use crate::moe::MoeConfig;
use crate::weights::SparseMlp;
use hlatc_compiler::graph::autodiff::GradHints;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, DotDims};
use hlatc_compiler::{ElementType, InstrId};

/// What one rank of an expert-parallel step knows about its EP group.
pub(crate) struct ExpertGroup {
    exchange: EpExchange,
    ep: i64,
    groups: Collective,
    /// The first expert this rank holds (`s32[]`), from its `replica-id`.
    first: InstrId,
    /// Experts each rank holds.
    local: i64,
}

impl ExpertGroup {
    /// The group of a step divided by `par` over `experts` experts; `None`
    /// without expert parallelism.
    pub(crate) fn new(
        b: &mut Builder,
        par: Parallelism,
        experts: i64,
    ) -> Result<Option<Self>, BuildError> {
        if par.ep == 1 {
            return Ok(None);
        }
        let local = experts / par.ep;
        b.push_scope("ep_rank");
        let replica = dp_replica_index(b, &par)?;
        let ep = b.scalar(ElementType::S32, par.ep as f64);
        let per = b.scalar(ElementType::S32, local as f64);
        let ep_rank = b.binary(BinaryOp::Remainder, replica, ep)?;
        let first = b.mul(ep_rank, per)?;
        b.pop_scope();
        Ok(Some(ExpertGroup {
            exchange: par.ep_exchange,
            ep: par.ep,
            groups: replica_groups(&par.ep_groups()),
            first,
            local,
        }))
    }

    /// The routed experts' output for this rank's tokens `x` (`[T, H]`),
    /// routed by `routing`; `w` holds this rank's experts.
    pub(crate) fn run(
        &self,
        b: &mut Builder,
        hints: &mut GradHints,
        moe: &MoeConfig,
        x: InstrId,
        w: &SparseMlp<InstrId>,
        routing: &Routing,
    ) -> Result<InstrId, BuildError> {
        let batch = routing.batch;
        b.push_scope(self.exchange.name());
        let out = match self.exchange {
            EpExchange::AllGather => self.gathered(b, hints, x, w, routing.weights),
            EpExchange::AllToAll => {
                let slots = routing.slots(b, moe)?;
                let buffers = slots.dispatch(b, x, batch)?;
                let received = self.to_holders(b, buffers)?;
                let y = experts_by_slot(b, hints, received, w)?;
                let returned = self.back_to_senders(b, y)?;
                slots.combine(b, returned, routing.weights, batch)
            }
        };
        b.pop_scope();
        out
    }

    /// The all-gather form: every rank's tokens and weights gathered, this
    /// rank's experts run over all of them, the sums scattered back.
    fn gathered(
        &self,
        b: &mut Builder,
        hints: &mut GradHints,
        x: InstrId,
        w: &SparseMlp<InstrId>,
        weights: InstrId,
    ) -> Result<InstrId, BuildError> {
        let x = b.all_gather(x, 0, &self.groups)?;
        let weights = b.all_gather(weights, 0, &self.groups)?;
        let weights = self.own_columns(b, weights)?;
        let y = experts(b, hints, x, w, weights)?;
        b.reduce_scatter_sum(y, 0, &self.groups)
    }

    /// The columns of `weights` (`[N, E]`) for this rank's experts: `[N,
    /// E / ep]`, by a one-hot matmul (the run's start is data, not a
    /// static slice).
    fn own_columns(&self, b: &mut Builder, weights: InstrId) -> Result<InstrId, BuildError> {
        let e = b.dims(weights)[1];
        let dims = [e, self.local];
        let expert = b.iota(ElementType::S32, &dims, 0)?;
        let column = b.iota(ElementType::S32, &dims, 1)?;
        let first = b.broadcast(self.first, &dims, &[])?;
        let column = b.add2(column, first)?;
        let own = b.compare(expert, column, ComparisonDirection::Eq)?;
        let select = b.convert(own, b.ty(weights))?;
        b.dot(
            weights,
            select,
            DotDims {
                lhs_contracting: vec![1],
                rhs_contracting: vec![0],
                ..Default::default()
            },
        )
    }

    /// Every rank's buffers for this rank's experts (`[E, N, H]` of every
    /// expert on each rank in): `[E / ep, ep * N, H]`, by sender.
    fn to_holders(&self, b: &mut Builder, buffers: InstrId) -> Result<InstrId, BuildError> {
        let [e, n, h] = three(b, buffers);
        let received = b.all_to_all(buffers, 0, &self.groups)?;
        let by_sender = b.reshape(received, &[self.ep, self.local, n, h])?;
        let by_expert = b.transpose(by_sender, &[1, 0, 2, 3])?;
        debug_assert_eq!(e, self.ep * self.local);
        b.reshape(by_expert, &[self.local, self.ep * n, h])
    }

    /// [`ExpertGroup::to_holders`] undone: this rank's experts' outputs
    /// (`[E / ep, ep * N, H]`) sent back to their tokens' ranks, each rank
    /// getting every expert's outputs for its own buffers: `[E, N, H]`.
    fn back_to_senders(&self, b: &mut Builder, y: InstrId) -> Result<InstrId, BuildError> {
        let [_, m, h] = three(b, y);
        let n = m / self.ep;
        let by_expert = b.reshape(y, &[self.local, self.ep, n, h])?;
        let by_receiver = b.transpose(by_expert, &[1, 0, 2, 3])?;
        let out = b.reshape(by_receiver, &[self.ep * self.local, n, h])?;
        b.all_to_all(out, 0, &self.groups)
    }
}

fn three(b: &Builder, x: InstrId) -> [i64; 3] {
    let d = b.dims(x);
    [d[0], d[1], d[2]]
}
