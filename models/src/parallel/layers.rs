//! The pieces of the forward pass that differ on a rank of a sharded
//! step: the collectives around the projections, the vocabulary-parallel
//! embedding and cross-entropy, and the loss averaged over data-parallel
//! replicas. Everything else is the single-device graph over the rank's
//! share of heads and columns.
//!
//! Gradients come from autodiff through these collectives (an all-reduce's
//! transpose is an all-reduce, an all-gather's a reduce-scatter): each
//! rank's copy of the loss is differentiated, and a parameter's gradient is
//! the sum over the ranks that hold it (see `hlatc-train`).

use super::context::CpPositions;
use super::expert_exchange::ExpertGroup;
use super::{Fault, Parallelism};
use crate::config::ModelConfig;
use crate::token_ops::{counted_total, gather_rows};
use hlatc_compiler::graph::autodiff::GradHints;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::graph::scope;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, Op, UnaryOp};
use hlatc_compiler::{ElementType, InstrId};

/// What one rank's forward pass knows about the division.
pub struct RankContext {
    pub par: Parallelism,
    tp: Collective,
    dp: Collective,
    vocab: i64,
    vocab_local: i64,
    /// The first vocabulary row this rank holds (`s32[]`), from its
    /// `replica-id`: the one thing that differs between ranks, computed
    /// rather than passed, so one program serves every rank.
    vocab_offset: Option<InstrId>,
    fault: Option<Fault>,
    /// Under expert parallelism, this rank's EP group.
    experts: Option<ExpertGroup>,
    /// Under context parallelism, this rank's CP group and the positions
    /// of its tokens and of the keys it gathers.
    context: Option<(Collective, CpPositions)>,
}

impl RankContext {
    /// The context of a rank of `par` over sequences of `sequence` tokens
    /// (the whole sequence, not the rank's chunks of it).
    pub fn new(
        b: &mut Builder,
        par: Parallelism,
        cfg: &ModelConfig,
        sequence: i64,
        fault: Option<Fault>,
    ) -> Result<Self, BuildError> {
        let vocab_local = par.padded_vocab(cfg) / par.tp;
        let vocab_offset = if par.tp > 1 {
            b.push_scope("tp_rank");
            let id = b.add(Op::ReplicaId, &[], None)?;
            let id = b.convert(id, ElementType::S32)?;
            let tp = b.scalar(ElementType::S32, par.tp as f64);
            let t = b.binary(BinaryOp::Remainder, id, tp)?;
            let rows = b.scalar(ElementType::S32, vocab_local as f64);
            let offset = b.mul(t, rows)?;
            b.pop_scope();
            Some(offset)
        } else {
            None
        };
        let experts = match &cfg.moe {
            Some(moe) => ExpertGroup::new(b, par, moe.num_experts)?,
            None => None,
        };
        let context = match par.cp {
            1 => None,
            _ => Some((
                replica_groups(&par.cp_groups()),
                CpPositions::new(b, &par, sequence, fault)?,
            )),
        };
        Ok(RankContext {
            experts,
            context,
            par,
            tp: replica_groups(&par.tp_groups()),
            dp: replica_groups(&par.dp_groups()),
            vocab: cfg.vocab_size,
            vocab_local,
            vocab_offset,
            fault,
        })
    }

    /// Query and key/value heads on this rank.
    pub fn local_heads(&self, cfg: &ModelConfig) -> (i64, i64) {
        let tp = self.par.tp;
        (
            cfg.num_attention_heads / tp,
            (cfg.num_key_value_heads / tp).max(1),
        )
    }

    fn tp_sum(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        if self.par.tp == 1 {
            return Ok(x);
        }
        b.all_reduce(x, BinaryOp::Add, &self.tp)
    }

    /// This rank's EP group, under expert parallelism.
    pub(crate) fn experts(&self) -> Option<&ExpertGroup> {
        self.experts.as_ref()
    }

    /// `x` summed over the replicas, DP and CP (the ranks whose tokens together
    /// are the global batch's, with tensor parallelism off).
    pub(crate) fn dp_sum(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        if self.par.replicas() == 1 {
            return Ok(x);
        }
        b.all_reduce(x, BinaryOp::Add, &self.dp)
    }

    /// Under context parallelism, the global positions of this rank's
    /// tokens and of the keys it gathers.
    pub fn cp_positions(&self) -> Option<CpPositions> {
        self.context.as_ref().map(|(_, positions)| *positions)
    }

    /// `x` (`[B, S / cp, ...]`, this rank's chunks) with every CP rank's
    /// chunks along dimension 1, in rank order (`[B, S, ...]`): keys and
    /// values, at their own head count, before attention reads them; its
    /// transpose reduce-scatters their gradients back. `x` itself without
    /// context parallelism.
    pub fn gather_context(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        match &self.context {
            None => Ok(x),
            Some((groups, _)) => {
                b.push_scope(scope::CONTEXT_GATHER);
                let all = b.all_gather(x, 1, groups);
                b.pop_scope();
                all
            }
        }
    }

    /// A row-parallel projection's partial sums (`[N, D]`) made whole: the
    /// full rows on every rank, or with sequence parallelism this rank's
    /// run of them.
    pub fn reduce_partial(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        if self.par.sequence_parallel {
            return b.reduce_scatter_sum(x, 0, &self.tp);
        }
        self.tp_sum(b, x)
    }

    /// The input of a column-parallel projection: with sequence
    /// parallelism every rank's run of rows gathered, in a
    /// [`scope::SEQUENCE_GATHER`] scope (so `remat` keeps the run and
    /// gathers again in the backward pass); otherwise `x`.
    pub fn full_sequence(&self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        if !self.par.sequence_parallel {
            return Ok(x);
        }
        b.push_scope(scope::SEQUENCE_GATHER);
        let full = b.all_gather(x, 0, &self.tp);
        b.pop_scope();
        full
    }

    /// The embedding rows of `tokens` (`s32[N]`) from this rank's run of
    /// the vocabulary: a token another rank holds reads row 0 and is
    /// zeroed, and the ranks' rows are summed (or reduce-scattered).
    pub fn embedding(
        &self,
        b: &mut Builder,
        embed: InstrId,
        tokens: InstrId,
    ) -> Result<InstrId, BuildError> {
        let n = b.dims(tokens)[0];
        let d = b.dims(embed)[1];
        let (index, held) = match self.vocab_offset {
            None => (tokens, None),
            Some(offset) => {
                let off = b.broadcast(offset, &[n], &[])?;
                let local = b.sub(tokens, off)?;
                let zero = b.full(ElementType::S32, &[n], 0.0)?;
                let rows = b.full(ElementType::S32, &[n], self.vocab_local as f64)?;
                let from = b.compare(local, zero, ComparisonDirection::Ge)?;
                let below = b.compare(local, rows, ComparisonDirection::Lt)?;
                let held = b.binary(BinaryOp::And, from, below)?;
                (b.select(held, local, zero)?, Some(held))
            }
        };
        let index = b.reshape(index, &[n, 1])?;
        let rows = gather_rows(b, embed, index, d)?;
        let Some(held) = held else {
            return Ok(rows);
        };
        let held = b.broadcast(held, &[n, d], &[0])?;
        let zeros = b.full_like(rows, 0.0)?;
        let rows = b.select(held, rows, zeros)?;
        self.reduce_partial(b, rows)
    }

    /// Mean cross-entropy over the global batch's counted tokens, from
    /// this rank's logits over its run of the vocabulary (`[N, V / tp]`):
    /// no rank holds a full row of logits. The max and the sum of
    /// exponentials are all-reduced over the TP group; padding columns are
    /// `-inf` before either, so they never take part in the softmax nor get
    /// gradient. Each DP replica sums its tokens' losses over the global
    /// count, and the replicas' sums are added: every rank returns the
    /// same global loss. A `token_count` given is that global count (a
    /// micro-batch's loss is its share of the whole step's).
    pub fn cross_entropy(
        &self,
        b: &mut Builder,
        hints: &mut GradHints,
        logits: InstrId,
        targets: InstrId,
        ty: ElementType,
        token_count: Option<InstrId>,
    ) -> Result<InstrId, BuildError> {
        let [n, v] = [b.dims(logits)[0], b.dims(logits)[1]];
        let mut column = b.iota(ElementType::S32, &[n, v], 1)?;
        let mut logits = logits;
        if let Some(offset) = self.vocab_offset {
            let padding_in = self.fault == Some(Fault::PaddingInSoftmax);
            let off = b.broadcast(offset, &[n, v], &[])?;
            column = b.add2(column, off)?;
            let vocab = b.full(ElementType::S32, &[n, v], self.vocab as f64)?;
            let real = b.compare(column, vocab, ComparisonDirection::Lt)?;
            if !padding_in {
                let never = b.full_like(logits, f64::NEG_INFINITY)?;
                logits = b.select(real, logits, never)?;
            }
        }
        let local_max = b.reduce_max(logits, &[1])?;
        let m = if self.par.tp > 1 {
            b.all_reduce(local_max, BinaryOp::Maximum, &self.tp)?
        } else {
            local_max
        };
        hints.stop.push(m);
        let mb = b.broadcast(m, &[n, v], &[0])?;
        let z = b.sub(logits, mb)?;
        let e = b.unary(UnaryOp::Exp, z)?;
        let se = b.reduce_sum(e, &[1])?;
        let se = self.tp_sum(b, se)?;
        let lse = b.unary(UnaryOp::Log, se)?;
        let t = b.reshape(targets, &[n])?;
        let tb = b.broadcast(t, &[n, v], &[0])?;
        let hit = b.compare(column, tb, ComparisonDirection::Eq)?;
        let zeros = b.full_like(z, 0.0)?;
        let picked = b.select(hit, z, zeros)?;
        let tl = b.reduce_sum(picked, &[1])?;
        let tl = self.tp_sum(b, tl)?;
        let nll = b.sub(lse, tl)?;
        let (total, count) = counted_total(b, nll, t, ty)?;
        let count = match token_count {
            Some(c) => b.convert(c, ty)?,
            None => self.dp_sum(b, count)?,
        };
        let one = b.full_like(count, 1.0)?;
        let count = b.binary(BinaryOp::Maximum, count, one)?;
        let local = b.div(total, count)?;
        self.dp_sum(b, local)
    }
}
