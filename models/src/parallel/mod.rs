//! Tensor, sequence, context, data and pipeline parallelism: how a
//! training step is divided over `tp * cp * dp * pp` ranks, as NxD divides
//! it for neuronx-cc and torchtitan orders its mesh (`[pp, dp, cp, tp]`).
//! Rank `r` is TP rank `r % tp` of replica `(r / tp) % (dp * cp)` of
//! pipeline stage `r / (tp * cp * dp)`; replica `q` is CP rank `q % cp` of
//! DP replica `q / cp`. So each TP group is a run of consecutive ids
//! (`{{0,1,2,3}, {4,5,6,7}}` for TP 4 over DP 2), which keeps
//! tensor-parallel traffic inside a node, the CP ranks of a sequence come
//! next, and a stage is a run of `tp * cp * dp` ranks (pipeline outermost,
//! as Megatron and NxD order it). Every group of a collective lies within
//! one stage, except the [`Parallelism::pp_groups`] that join a rank's
//! twins across stages.
//!
//! A *replica* is a rank's place among the ranks that hold the same share
//! of every parameter and different tokens: its DP replica's rows, and its
//! CP rank's chunks of each sequence ([`context`]). Gradients are summed,
//! and ZeRO-1 divides the optimizer state, over all `dp * cp` of them;
//! the batch's rows are divided over the `dp` DP replicas only.
//!
//! Expert parallelism divides a mixture of experts' experts over `ep`
//! consecutive DP replicas (NxD's `[PP, DP_exp, EP, TP]`, `DP_exp * EP =
//! DP`): DP replica `d` is EP rank `d % ep` of expert-data-parallel
//! replica `d / ep`, and holds experts `(d % ep) * E / ep` onwards.
//!
//! Which part of each parameter a rank holds is [`split`]'s; which layers
//! each stage holds is [`stages`]'.

pub mod context;
pub mod expert_exchange;
pub mod layers;
pub mod replica;
pub mod reshard;
pub mod split;
pub mod stages;

use crate::config::{BatchShape, ModelConfig};
use crate::moe::MoeConfig;
use crate::params::ParamSpec;
use hlatc_compiler::graph::ring_attention::Ring;
use serde::Serialize;

use crate::option_name::OptionName as O;
pub use context::{CpBalance, CpExchange};
pub use reshard::Reshard;
pub use split::{Piece, TpSplit, Units};

/// How a step is divided. `tp = dp = 1` is the single-device step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parallelism {
    /// Tensor-parallel degree: heads, MLP columns and the vocabulary are
    /// split over this many ranks (Megatron style).
    pub tp: i64,
    /// Data-parallel degree: the global batch is split over this many
    /// replicas of the TP group, and gradients are averaged over them.
    pub dp: i64,
    /// Norms and residuals on sequence shards (all-gather before the
    /// column-parallel projections, reduce-scatter after the row-parallel
    /// ones); only meaningful with `tp > 1`.
    pub sequence_parallel: bool,
    /// ZeRO-1: the optimizer state (the Adam moments, and the master
    /// weights where the precision keeps them) divided over the DP
    /// replicas, each updating its shard of every parameter; only
    /// meaningful with `dp > 1`. Absent from a manifest when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zero1: bool,
    /// FSDP (ZeRO-3): the weights too, with the gradients' sums, the
    /// master weights and the Adam moments, divided over a shard group of
    /// this many DP replicas. Each step all-gathers the weights before the
    /// forward, reduce-scatters the gradients, and updates its shards; no
    /// rank keeps a whole weight between steps. 1 is off; above 1 it
    /// divides `dp`: below `dp` it is HSDP, `dp / fsdp` shard groups of
    /// consecutive replicas (replica `d` is shard `d % fsdp` of group
    /// `d / fsdp`, torchtitan's mesh order), each holding every weight in
    /// shards and replicating the others. Absent from a manifest when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub fsdp: i64,
    /// Pipeline-parallel degree: the decoder layers divided into this many
    /// stages, each on its own `tp * dp` ranks (see [`stages`]). Absent
    /// from a manifest when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub pp: i64,
    /// Expert-parallel degree: a mixture of experts' experts divided over
    /// this many DP replicas (it divides `dp`), each running its own
    /// experts on the tokens of all of them. Absent from a manifest when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ep: i64,
    /// How tokens reach the experts of the other EP ranks. Absent from a
    /// manifest when it is the default.
    #[serde(default, skip_serializing_if = "EpExchange::is_default")]
    pub ep_exchange: EpExchange,
    /// Context-parallel degree: each sequence divided over this many ranks
    /// (see [`context`]), which all-gather one another's keys and values
    /// for attention. Absent from a manifest when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub cp: i64,
    /// Which chunks of a sequence each CP rank holds. Absent from a
    /// manifest when it is the default.
    #[serde(default, skip_serializing_if = "CpBalance::is_default")]
    pub cp_balance: CpBalance,
    /// How the CP ranks exchange keys and values. Absent from a manifest
    /// when it is the default.
    #[serde(default, skip_serializing_if = "CpExchange::is_default")]
    pub cp_exchange: CpExchange,
    /// Whether FSDP gathers the weights again in the backward. Absent
    /// from a manifest when it is the default.
    #[serde(default, skip_serializing_if = "Reshard::is_default")]
    pub reshard: Reshard,
}

/// How an expert-parallel step exchanges tokens over its EP groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EpExchange {
    /// Each token sent to the ranks of the experts it is routed to, in
    /// per-expert buffers of the capacity (`all-to-all`), and the outputs
    /// sent back the same way (NxD training's form).
    #[default]
    AllToAll,
    /// Every rank's tokens gathered on every rank of the group
    /// (`all-gather`), each rank's experts run over all of them, and the
    /// outputs summed back to their tokens' ranks (`reduce-scatter`): NxD
    /// Inference's and vLLM-Neuron's form.
    AllGather,
}

impl EpExchange {
    pub const ALL: [EpExchange; 2] = [EpExchange::AllToAll, EpExchange::AllGather];

    /// The word `--ep-exchange` takes and a manifest writes.
    pub const fn name(self) -> &'static str {
        match self {
            EpExchange::AllToAll => "all-to-all",
            EpExchange::AllGather => "all-gather",
        }
    }

    /// The exchange named `word`, if any.
    pub fn from_name(word: &str) -> Option<EpExchange> {
        EpExchange::ALL.into_iter().find(|e| e.name() == word)
    }

    fn is_default(&self) -> bool {
        *self == EpExchange::default()
    }
}

impl std::fmt::Display for EpExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn one() -> i64 {
    1
}

fn is_one(n: &i64) -> bool {
    *n == 1
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism::SINGLE
    }
}

/// Deliberate mistakes a sharded step can be built with, each a bug
/// sharded training has shipped with. Only the tests that prove the
/// sharded-equals-unsharded checks catch them build these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Gradients not all-reduced over the data-parallel replicas.
    MissingGradientAllReduce,
    /// Gradients summed over data-parallel replicas, not averaged.
    GradientSummedNotAveraged,
    /// A replicated parameter counted once per TP rank in the grad norm.
    ReplicatedCountedPerRank,
    /// The vocabulary padding left in the softmax.
    PaddingInSoftmax,
    /// Under ZeRO-1, each DP rank's shard updated with the next rank's
    /// gradient shard.
    ShardUpdatedWithAnothersGradient,
    /// Under ZeRO-1 or FSDP, the shards never all-gathered: each replica
    /// takes its own shard for every replica's, and builds its weights
    /// from copies of it.
    ShardsNotGathered,
    /// Under HSDP, each shard group's gradient shards never summed over
    /// the other groups: every group trains on its own replicas' batch.
    ShardGroupsNotSummed,
    /// Under stochastic rounding, each rank's rounding RNG seeded with its
    /// rank, so copies of a replicated weight round differently.
    RoundingSeededPerRank,
    /// Under gradient accumulation, each micro-batch's gradient (already
    /// its share of the step's mean) averaged again over the micro-batches.
    AccumulationAveragedTwice,
    /// Under pipeline parallelism, the gradient of a stage's input never
    /// sent to the stage before it (every stage but the last then trains
    /// on nothing but its own weight decay).
    StageGradientDropped,
    /// Under context parallelism, CP ranks 0 and 1 given each other's
    /// positions: their tokens rotated, and masked, as if they sat where
    /// the other rank's do.
    ChunkPositionsSwapped,
    /// Under head-tail context parallelism, each rank's targets cut as
    /// contiguous chunks while its tokens are cut head and tail: labels
    /// the load-balancing order was not applied to.
    LabelsNotBalanced,
}

/// `TP 8 x DP 1, sequence parallel`: how summaries name a division.
impl std::fmt::Display for Parallelism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TP {} x DP {}", self.tp, self.dp)?;
        if self.pp > 1 {
            write!(f, " x PP {}", self.pp)?;
        }
        if self.cp > 1 {
            write!(f, ", CP {} ({}", self.cp, self.cp_balance)?;
            if self.cp_exchange != CpExchange::default() {
                write!(f, ", {}", self.cp_exchange)?;
            }
            f.write_str(")")?;
        }
        if self.ep > 1 {
            write!(f, ", EP {} ({})", self.ep, self.ep_exchange)?;
        }
        if self.sequence_parallel {
            f.write_str(", sequence parallel")?;
        }
        if self.zero1 {
            f.write_str(", ZeRO-1")?;
        }
        match self.fsdp_replicas() {
            _ if !self.shards_weights() => {}
            1 => write!(f, ", FSDP {}", self.fsdp)?,
            groups => write!(f, ", HSDP {groups} x FSDP {}", self.fsdp)?,
        }
        if self.reshards() {
            f.write_str(", resharded")?;
        }
        Ok(())
    }
}

/// One of a layout's degrees, by a typed name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Degree {
    Tp,
    Dp,
    Pp,
    Ep,
    Fsdp,
    Cp,
}

impl Degree {
    /// The option that sets it.
    pub fn option(self) -> O {
        match self {
            Degree::Tp => O::Tp,
            Degree::Dp => O::Dp,
            Degree::Pp => O::Pp,
            Degree::Ep => O::Ep,
            Degree::Fsdp => O::Fsdp,
            Degree::Cp => O::Cp,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Degree::Tp => "tp",
            Degree::Dp => "dp",
            Degree::Pp => "pp",
            Degree::Ep => "ep",
            Degree::Fsdp => "fsdp",
            Degree::Cp => "cp",
        }
    }
}

impl std::fmt::Display for Degree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A degree the model or the batch cannot be divided by.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParallelError {
    #[error("{} must be at least 1, got {got}", .degree.option().named())]
    Degree { degree: Degree, got: i64 },
    #[error("{} does not divide the {what} ({count}); use a {} that divides it", O::Tp.set(.tp), O::Tp.named())]
    Indivisible {
        tp: i64,
        what: &'static str,
        count: i64,
    },
    #[error("{} and the {kv} key/value heads: one must divide the other (each rank holds whole KV heads, replicated when there are fewer than {})", O::Tp.set(.tp), O::Tp.named())]
    KvHeads { tp: i64, kv: i64 },
    #[error("{} does not divide the global batch of {batch} sequences", O::Dp.set(.dp))]
    Batch { dp: i64, batch: i64 },
    #[error("{} splits each rank's {tokens} tokens ({per_rank} sequences of {seq}) over {}, which does not divide them", O::SequenceParallel.named(), O::Tp.set(.tp))]
    SequenceShards {
        tp: i64,
        tokens: i64,
        per_rank: i64,
        seq: i64,
    },
    #[error("{} needs {} above 1 (there is nothing to shard the sequence over)", O::SequenceParallel.named(), O::Tp.named())]
    SequenceWithoutTp,
    #[error("{} shards the optimizer state over the data-parallel replicas (DP x CP), and {} has one: use {} or more, or leave {} out", O::Zero1.named(), O::Dp.set(1), O::Dp.set(2), O::Zero1.named())]
    Zero1WithoutDp,
    #[error("{} does not divide {}: the replicas are divided into shard groups of {} (HSDP when there are several); use an {} that divides {}", O::Fsdp.set(.fsdp), O::Dp.set(.dp), O::Fsdp.named(), O::Fsdp.named(), O::Dp.named())]
    FsdpIndivisibleDp { fsdp: i64, dp: i64 },
    #[error("{} below {} with {}: each shard group of HSDP must hold every EP rank's experts alike, so {} must divide the shard group's {group} replicas; use an {} that {} divides", O::Fsdp.set(.fsdp), O::Dp.set(.dp), O::Ep.set(.ep), O::Ep.named(), O::Fsdp.named(), O::Ep.named())]
    HsdpSplitsExperts {
        fsdp: i64,
        dp: i64,
        ep: i64,
        group: i64,
    },
    #[error("{} with {}: FSDP divides the optimizer state already, with the weights; leave {} out", O::Zero1.named(), O::Fsdp.set(.fsdp), O::Zero1.named())]
    Zero1WithFsdp { fsdp: i64 },
    #[error("a world of {tp} x {cp} x {dp} x {pp} ranks (TP x CP x DP x PP) is too large")]
    World { tp: i64, cp: i64, dp: i64, pp: i64 },
    #[error("{} with {} cuts each sequence into {chunks} equal chunks, and {} does not divide into {chunks}: use a {} that is a multiple of {chunks}, or a smaller {}", O::Cp.set(.cp), O::CpBalance.set(.balance), O::SeqLen.set(.seq), O::SeqLen.named(), O::Cp.named())]
    CpIndivisibleSequence {
        cp: i64,
        balance: CpBalance,
        chunks: i64,
        seq: i64,
    },
    #[error("{} needs {} above 1 (with one CP rank the sequence is not divided)", O::CpBalance.set(.balance), O::Cp.named())]
    BalanceWithoutCp { balance: CpBalance },
    #[error("{} needs {} above 1 (with one CP rank there is nothing to exchange)", O::CpExchange.set(.exchange), O::Cp.named())]
    ExchangeWithoutCp { exchange: CpExchange },
    #[error("{} needs {} above 1 (without FSDP every rank keeps its weights whole)", O::Reshard.set(.reshard), O::Fsdp.named())]
    ReshardWithoutFsdp { reshard: Reshard },
    #[error("{} with {}: a pipeline's tick programs gather each stage's weights every tick and keep them to the backward slot (torchtitan does not reshard under PP either); leave {} out, or give {}", O::Reshard.set(.reshard), O::Pp.set(.pp), O::Reshard.named(), O::Reshard.set(Reshard::UnlessPp))]
    ReshardWithStages { reshard: Reshard, pp: i64 },
    #[error("{} does not divide the {replicas} replicas of {} x {}: the experts are divided over EP ranks within them (use an {} that divides {replicas})", O::Ep.set(.ep), O::Dp.set(.dp), O::Cp.set(.cp), O::Ep.named())]
    EpIndivisibleReplicas {
        ep: i64,
        dp: i64,
        cp: i64,
        replicas: i64,
    },
    #[error("{} does not divide the {layers} decoder layers: every stage holds the same number of layers (use a {} among {divisors})", O::Pp.set(.pp), O::Pp.named())]
    UnevenStages {
        pp: i64,
        layers: i64,
        divisors: String,
    },
    #[error("{} needs {} to divide each DP replica's {per_replica} sequences into micro-batches (got {micro_batches})", O::Pp.set(.pp), O::GradAccum.named())]
    MicroBatches {
        pp: i64,
        per_replica: i64,
        micro_batches: i64,
    },
    #[error("{}: the load-balancing loss of {model_type} (output_router_logits, router_aux_loss_coef) pools the routing of every layer, which pipeline stages hold apart, and is not divided into stages yet; train the stages without it (\"output_router_logits\": false in config.json), or divide the model over {} and {}, its experts over {}", O::Pp.set(.pp), O::Tp.named(), O::Dp.named(), O::Ep.named())]
    RouterLossInStages { pp: i64, model_type: &'static str },
    #[error("{}: every stage runs one program, so its layers must be sparse and dense alike, and {model_type}'s are not (layer {layer} is {is}, layer {twin} of stage 0 is not; decoder_sparse_step and mlp_only_layers decide): use a {} whose stages repeat the pattern, or leave {} out", O::Pp.set(.pp), O::Pp.named(), O::Pp.named())]
    MixedStages {
        pp: i64,
        model_type: &'static str,
        layer: i64,
        twin: i64,
        is: &'static str,
    },
    #[error("{}: {model_type} is a dense model, with no experts to divide (expert parallelism is for mixture-of-experts models)", O::Ep.set(.ep))]
    EpWithoutExperts { ep: i64, model_type: &'static str },
    #[error("{} does not divide {}: the experts are divided over EP ranks within the data-parallel replicas (use an {} that divides {})", O::Ep.set(.ep), O::Dp.set(.dp), O::Ep.named(), O::Dp.named())]
    EpIndivisibleDp { ep: i64, dp: i64 },
    #[error("{} does not divide the {experts} experts: every EP rank holds the same number (use an {} among {divisors})", O::Ep.set(.ep), O::Ep.named())]
    EpIndivisibleExperts {
        ep: i64,
        experts: i64,
        divisors: String,
    },
    #[error("{} needs {} above 1 (with one EP rank no token leaves its rank)", O::EpExchange.set(.exchange), O::Ep.named())]
    ExchangeWithoutEp { exchange: EpExchange },
    #[error("{} does not take packed rows yet ({}): each tick would need the segment ids of two micro-batches; pack with {}, or leave {} out", O::Pp.named(), O::Packed.named(), O::Packing.set("concat"), O::Pp.named())]
    PackedStages,
}

impl Parallelism {
    /// One device: the step hlatc has always emitted.
    pub const SINGLE: Parallelism = Parallelism {
        tp: 1,
        dp: 1,
        sequence_parallel: false,
        zero1: false,
        fsdp: 1,
        pp: 1,
        ep: 1,
        ep_exchange: EpExchange::AllToAll,
        cp: 1,
        cp_balance: CpBalance::HeadTail,
        cp_exchange: CpExchange::AllGather,
        reshard: Reshard::Never,
    };

    /// Whether the weights themselves are divided over the DP replicas
    /// (FSDP), not only their optimizer state.
    pub fn shards_weights(&self) -> bool {
        self.fsdp > 1
    }

    /// Whether FSDP frees the gathered weights after the forward and
    /// gathers them again, unit by unit, in the backward.
    pub fn reshards(&self) -> bool {
        self.shards_weights() && self.reshard.frees_after_forward(self.pp)
    }

    /// How many shard groups of FSDP replicate one another (HSDP above 1).
    pub fn fsdp_replicas(&self) -> i64 {
        match self.shards_weights() {
            true => self.replicas() / self.shard_group(),
            false => 1,
        }
    }

    /// The replicas one FSDP shard group spans: `fsdp` DP replicas and,
    /// under context parallelism, all their CP ranks (torchtitan's
    /// `dp_shard x cp`), consecutive in the replicas' order.
    pub fn shard_group(&self) -> i64 {
        self.fsdp.max(1) * self.cp
    }

    /// The DP replicas' ranks by FSDP shard group: each group's replicas,
    /// the same TP rank of each (every DP group when there is one shard
    /// group).
    pub fn fsdp_groups(&self) -> Vec<Vec<i64>> {
        let (n, tp) = (self.shard_group(), self.tp);
        self.on_every_stage(
            (0..self.replicas() / n)
                .flat_map(|g| (0..tp).map(move |t| (0..n).map(|s| (g * n + s) * tp + t).collect()))
                .collect(),
        )
    }

    /// The ranks holding the same FSDP shard in each shard group (HSDP's
    /// replicas of it): shard `s` of every group, the same TP rank.
    pub fn fsdp_replica_groups(&self) -> Vec<Vec<i64>> {
        let (n, tp) = (self.shard_group(), self.tp);
        let groups = self.replicas() / n;
        self.on_every_stage(
            (0..n)
                .flat_map(|s| {
                    (0..tp).map(move |t| (0..groups).map(|g| (g * n + s) * tp + t).collect())
                })
                .collect(),
        )
    }

    /// Whether the optimizer state (master weights and Adam moments) is
    /// divided over the DP replicas: under ZeRO-1 and under FSDP.
    pub fn shards_optimizer_state(&self) -> bool {
        self.zero1 || self.shards_weights()
    }

    /// `self` with `--fsdp N` given alone read as `--dp N --fsdp N`: a
    /// shard group of N is N data-parallel replicas.
    pub fn with_fsdp_replicas(self) -> Self {
        match (self.fsdp, self.dp) {
            (n, 1) if n > 1 => Parallelism { dp: n, ..self },
            _ => self,
        }
    }

    /// Every rank, over all stages.
    pub fn world(&self) -> i64 {
        self.stage_world() * self.pp
    }

    /// The ranks of one pipeline stage: the world when there is one stage.
    pub fn stage_world(&self) -> i64 {
        self.tp * self.replicas()
    }

    /// The replicas of a stage (see the module doc): each DP replica's CP
    /// ranks, `dp * cp` in all.
    pub fn replicas(&self) -> i64 {
        self.dp * self.cp
    }

    /// This division with one pipeline stage: what each stage's ranks do
    /// among themselves.
    pub fn one_stage(&self) -> Parallelism {
        Parallelism { pp: 1, ..*self }
    }

    /// The pipeline stage of global rank `r`.
    pub fn stage(&self, r: i64) -> i64 {
        r / self.stage_world()
    }

    pub fn is_single(&self) -> bool {
        self.world() == 1
    }

    /// The shape one rank holds of `spec`: its TP share, of its EP rank's
    /// experts.
    pub fn local_dims(&self, spec: &ParamSpec) -> Vec<i64> {
        let mut local = spec.tp.local_dims(&spec.dims, self);
        if self.divides_experts(spec) {
            local[0] /= self.ep;
        }
        local
    }

    /// Whether expert parallelism divides `spec`: it stacks experts and
    /// each EP rank holds a run of them (some DP replicas only).
    pub fn divides_experts(&self, spec: &ParamSpec) -> bool {
        self.ep > 1 && spec.holds_experts()
    }

    /// The experts `[first, end)` EP rank `ep_rank` holds of `spec`, when
    /// expert parallelism divides it.
    pub fn experts_of(&self, spec: &ParamSpec, ep_rank: i64) -> Option<[i64; 2]> {
        let per = spec.dims[0] / self.ep;
        self.divides_experts(spec)
            .then_some([ep_rank * per, (ep_rank + 1) * per])
    }

    /// How many DP replicas divide `spec`'s optimizer state under ZeRO-1
    /// (and its weights under FSDP): every replica, or FSDP's shard group;
    /// for experts expert parallelism divides, the replicas among those
    /// that hold the same experts (`/ ep`).
    pub fn zero1_degree(&self, spec: &ParamSpec) -> i64 {
        let replicas = self.dividing_replicas();
        match self.divides_experts(spec) {
            true => replicas / self.ep,
            false => replicas,
        }
    }

    /// Which of [`Parallelism::zero1_degree`]'s replicas global rank `r`
    /// is, for `spec`: its place among the dividing replicas, or among
    /// those of them that hold its experts (replica `d` is EP rank
    /// `d % ep`, the `d / ep`-th of them).
    pub fn zero1_index(&self, spec: &ParamSpec, r: i64) -> i64 {
        let place = self.replica(r) % self.dividing_replicas();
        match self.divides_experts(spec) {
            true => place / self.ep,
            false => place,
        }
    }

    /// The replicas one copy of the divided state spans: FSDP's shard
    /// group, or every replica.
    fn dividing_replicas(&self) -> i64 {
        match self.shards_weights() {
            true => self.shard_group(),
            false => self.replicas(),
        }
    }

    /// The EP rank of global rank `r`: which run of the experts it holds.
    pub fn ep_rank(&self, r: i64) -> i64 {
        self.replica(r) % self.ep
    }

    /// The TP rank of global rank `r`.
    pub fn tp_rank(&self, r: i64) -> i64 {
        r % self.tp
    }

    /// The replica of global rank `r` (see the module doc).
    pub fn replica(&self, r: i64) -> i64 {
        (r / self.tp) % self.replicas()
    }

    /// The DP replica of global rank `r`: which rows of the batch it takes.
    pub fn dp_rank(&self, r: i64) -> i64 {
        self.replica(r) / self.cp
    }

    /// The CP rank of global rank `r`: which chunks of each sequence it
    /// takes.
    pub fn cp_rank(&self, r: i64) -> i64 {
        self.replica(r) % self.cp
    }

    /// The first rank of each pipeline stage: the groups of one stage are
    /// its ranks' numbers within the stage plus this.
    fn stage_offsets(&self) -> impl Iterator<Item = i64> {
        let w = self.stage_world();
        (0..self.pp).map(move |s| s * w)
    }

    /// `groups` (numbered within one stage) repeated on every stage.
    pub fn on_every_stage(&self, groups: Vec<Vec<i64>>) -> Vec<Vec<i64>> {
        self.stage_offsets()
            .flat_map(|o| {
                groups
                    .iter()
                    .map(move |g| g.iter().map(|r| r + o).collect())
            })
            .collect()
    }

    /// The ranks that share activations: `{{0..tp-1}, {tp..2tp-1}, ...}`.
    pub fn tp_groups(&self) -> Vec<Vec<i64>> {
        self.on_every_stage(
            (0..self.replicas())
                .map(|d| (0..self.tp).map(|t| d * self.tp + t).collect())
                .collect(),
        )
    }

    /// Each rank with its twins on the other stages (the same TP rank of
    /// the same DP replica): the ranks a stage sends its activations to
    /// and over which the weights every stage holds are summed.
    pub fn pp_groups(&self) -> Vec<Vec<i64>> {
        let w = self.stage_world();
        (0..w)
            .map(|r| (0..self.pp).map(|s| s * w + r).collect())
            .collect()
    }

    /// The ranks that hold the same shard of every parameter, one per
    /// replica (each DP replica's CP ranks): `{{0, tp, 2tp, ...}, {1, tp+1,
    /// ...}, ...}`. Gradients and the loss are summed over these.
    pub fn dp_groups(&self) -> Vec<Vec<i64>> {
        self.on_every_stage(
            (0..self.tp)
                .map(|t| (0..self.replicas()).map(|d| d * self.tp + t).collect())
                .collect(),
        )
    }

    /// The ranks that hold the chunks of the same sequences: the CP ranks
    /// of one DP replica, the same TP rank of each (`{{0, tp, .., (cp-1)
    /// tp}, ...}`), which exchange keys and values.
    pub fn cp_groups(&self) -> Vec<Vec<i64>> {
        let (cp, tp) = (self.cp, self.tp);
        self.on_every_stage(
            (0..self.dp)
                .flat_map(|d| {
                    (0..tp).map(move |t| (0..cp).map(|c| (d * cp + c) * tp + t).collect())
                })
                .collect(),
        )
    }

    /// The ring over the CP groups: a CP rank passes to the next, `tp`
    /// replica ids on ([`Parallelism::cp_groups`] in ring order).
    pub fn cp_ring(&self) -> Ring {
        Ring {
            size: self.cp,
            stride: self.tp,
            replicas: self.world(),
        }
    }

    /// The ranks that exchange tokens for their experts: the same TP rank
    /// of `ep` consecutive DP replicas (`{{0, tp, .., (ep-1) tp}, ...}`).
    pub fn ep_groups(&self) -> Vec<Vec<i64>> {
        self.on_every_stage(
            (0..self.replicas() / self.ep)
                .flat_map(|g| {
                    (0..self.tp).map(move |t| {
                        (0..self.ep)
                            .map(|j| (g * self.ep + j) * self.tp + t)
                            .collect()
                    })
                })
                .collect(),
        )
    }

    /// The replicas that hold the same experts (one per
    /// expert-data-parallel replica), by their index among a stage's
    /// replicas: all of them without expert parallelism.
    pub fn expert_replicas(&self) -> Vec<Vec<i64>> {
        self.expert_holders(self.replicas())
    }

    /// [`Parallelism::expert_replicas`] within each FSDP shard group: the
    /// replicas that divide one copy of an EP rank's experts (every
    /// holder when there is one shard group).
    pub fn expert_shard_replicas(&self) -> Vec<Vec<i64>> {
        self.expert_holders(self.dividing_replicas())
    }

    /// The holders of each EP rank's experts within each run of `span`
    /// consecutive replicas (`ep` divides `span`).
    fn expert_holders(&self, span: i64) -> Vec<Vec<i64>> {
        let ep = self.ep;
        (0..self.replicas() / span)
            .flat_map(|s| {
                (0..ep).map(move |j| (0..span / ep).map(|g| s * span + g * ep + j).collect())
            })
            .collect()
    }

    /// Every rank of a stage, one group per stage (every rank, one group,
    /// without pipeline parallelism).
    pub fn everyone(&self) -> Vec<Vec<i64>> {
        self.on_every_stage(vec![(0..self.stage_world()).collect()])
    }

    /// What of the global batch each rank takes: its DP replica's
    /// sequences, and of each its CP rank's tokens.
    pub fn local_batch(&self, batch: BatchShape) -> BatchShape {
        BatchShape {
            batch_size: batch.batch_size / self.dp,
            seq_len: batch.seq_len / self.cp,
        }
    }

    /// The vocabulary rounded up to a multiple of `tp`: each rank holds
    /// `padded_vocab / tp` rows of the embedding and LM head, the rows past
    /// the real vocabulary zero, masked out of the softmax and never given
    /// gradient.
    pub fn padded_vocab(&self, cfg: &ModelConfig) -> i64 {
        ceil_div(cfg.vocab_size, self.tp) * self.tp
    }

    /// Whether every degree is at least one.
    pub fn check_degrees(&self) -> Result<(), ParallelError> {
        let degrees = [
            (Degree::Tp, self.tp),
            (Degree::Dp, self.dp),
            (Degree::Pp, self.pp),
            (Degree::Ep, self.ep),
            (Degree::Fsdp, self.fsdp),
            (Degree::Cp, self.cp),
        ];
        match degrees.into_iter().find(|(_, got)| *got < 1) {
            Some((degree, got)) => Err(ParallelError::Degree { degree, got }),
            None => Ok(()),
        }
    }

    /// Whether `cfg` over the global `batch` divides as asked.
    pub fn validate(&self, cfg: &ModelConfig, batch: BatchShape) -> Result<(), ParallelError> {
        self.check_degrees()?;
        let world = self
            .tp
            .checked_mul(self.dp)
            .and_then(|w| w.checked_mul(self.cp))
            .and_then(|w| w.checked_mul(self.pp));
        if !matches!(world, Some(w) if w <= MAX_WORLD) {
            return Err(ParallelError::World {
                tp: self.tp,
                cp: self.cp,
                dp: self.dp,
                pp: self.pp,
            });
        }
        self.validate_context(batch)?;
        stages::Stages::new(cfg, self.pp)?;
        self.validate_experts(cfg)?;
        let tp = self.tp;
        let indivisible = |what, count: i64| match count % tp {
            0 => Ok(()),
            _ => Err(ParallelError::Indivisible { tp, what, count }),
        };
        indivisible("query heads", cfg.num_attention_heads)?;
        let kv = cfg.num_key_value_heads;
        if kv % tp != 0 && tp % kv != 0 {
            return Err(ParallelError::KvHeads { tp, kv });
        }
        indivisible("MLP width (intermediate_size)", cfg.intermediate_size)?;
        if let Some(moe) = &cfg.moe {
            indivisible(
                "experts' MLP width (moe_intermediate_size)",
                moe.expert_intermediate_size,
            )?;
            if let Some(shared) = moe.shared_expert_intermediate_size {
                indivisible(
                    "shared expert's MLP width (shared_expert_intermediate_size)",
                    shared,
                )?;
            }
        }
        if batch.batch_size % self.dp != 0 {
            return Err(ParallelError::Batch {
                dp: self.dp,
                batch: batch.batch_size,
            });
        }
        if self.zero1 && self.replicas() == 1 {
            return Err(ParallelError::Zero1WithoutDp);
        }
        self.validate_fsdp()?;
        if self.sequence_parallel {
            if tp == 1 {
                return Err(ParallelError::SequenceWithoutTp);
            }
            let local = self.local_batch(batch);
            let (per_rank, seq) = (local.batch_size, local.seq_len);
            let tokens = per_rank * seq;
            if tokens % tp != 0 {
                return Err(ParallelError::SequenceShards {
                    tp,
                    tokens,
                    per_rank,
                    seq,
                });
            }
        }
        Ok(())
    }
}

impl Parallelism {
    /// Whether the sequence divides into the chunks `cp` deals, and context
    /// parallelism composes with the rest as asked.
    fn validate_context(&self, batch: BatchShape) -> Result<(), ParallelError> {
        let (cp, balance, exchange) = (self.cp, self.cp_balance, self.cp_exchange);
        if cp == 1 {
            if !exchange.is_default() {
                return Err(ParallelError::ExchangeWithoutCp { exchange });
            }
            return match balance.is_default() {
                true => Ok(()),
                false => Err(ParallelError::BalanceWithoutCp { balance }),
            };
        }
        if !self.divides_sequence(batch) {
            return Err(ParallelError::CpIndivisibleSequence {
                cp,
                balance,
                chunks: balance.chunks(cp),
                seq: batch.seq_len,
            });
        }
        Ok(())
    }

    /// Whether FSDP's shard groups are ones this build divides: groups of
    /// DP replicas that divide them, without ZeRO-1 (which FSDP subsumes).
    fn validate_fsdp(&self) -> Result<(), ParallelError> {
        let (fsdp, reshard) = (self.fsdp, self.reshard);
        if !reshard.is_default() && fsdp == 1 {
            return Err(ParallelError::ReshardWithoutFsdp { reshard });
        }
        if reshard == Reshard::Always && self.pp > 1 {
            return Err(ParallelError::ReshardWithStages {
                reshard,
                pp: self.pp,
            });
        }
        if fsdp == 1 {
            return Ok(());
        }
        if self.dp % fsdp != 0 {
            return Err(ParallelError::FsdpIndivisibleDp { fsdp, dp: self.dp });
        }
        if fsdp < self.dp && self.shard_group() % self.ep != 0 {
            return Err(ParallelError::HsdpSplitsExperts {
                fsdp,
                dp: self.dp,
                ep: self.ep,
                group: self.shard_group(),
            });
        }
        if self.zero1 {
            return Err(ParallelError::Zero1WithFsdp { fsdp });
        }
        Ok(())
    }

    /// Whether a mixture of experts divides into `self.pp` stages: without
    /// the load-balancing loss, and with every stage's layers sparse where
    /// stage 0's are (stages share one program). Whether `pp` divides the
    /// layers is [`stages::Stages::new`]'s to say.
    fn validate_expert_stages(
        &self,
        cfg: &ModelConfig,
        moe: &MoeConfig,
    ) -> Result<(), ParallelError> {
        let model_type = cfg.model_type.name();
        if moe.aux_loss() {
            return Err(ParallelError::RouterLossInStages {
                pp: self.pp,
                model_type,
            });
        }
        // Called once `pp` divides the layers and the world is bounded.
        // Sparsity is periodic in `decoder_sparse_step` but for the listed
        // dense layers, so a stage differs from stage 0 within one period
        // past it or at a listed layer's place on some stage.
        let per_stage = cfg.num_hidden_layers / self.pp;
        let period = per_stage..(per_stage + moe.decoder_sparse_step.max(1));
        let listed = moe.mlp_only_layers.iter().flat_map(|&l| {
            (0..self.pp).map(move |stage| l.rem_euclid(per_stage) + stage * per_stage)
        });
        let odd = period
            .chain(listed)
            .filter(|&l| (per_stage..cfg.num_hidden_layers).contains(&l))
            .find(|&l| moe.is_sparse(l) != moe.is_sparse(l % per_stage));
        match odd {
            None => Ok(()),
            Some(layer) => Err(ParallelError::MixedStages {
                pp: self.pp,
                model_type,
                layer,
                twin: layer % per_stage,
                is: match moe.is_sparse(layer) {
                    true => "sparse",
                    false => "dense",
                },
            }),
        }
    }

    /// Whether the experts of `cfg` (if it has any) divide as asked: a
    /// mixture of experts over TP, DP, EP and pipeline stages, EP within
    /// DP and over whole experts.
    fn validate_experts(&self, cfg: &ModelConfig) -> Result<(), ParallelError> {
        let model_type = cfg.model_type.name();
        let Some(moe) = &cfg.moe else {
            if self.ep > 1 {
                return Err(ParallelError::EpWithoutExperts {
                    ep: self.ep,
                    model_type,
                });
            }
            return Ok(());
        };
        if self.pp > 1 {
            self.validate_expert_stages(cfg, moe)?;
        }
        if self.ep == 1 {
            return match self.ep_exchange == EpExchange::default() {
                true => Ok(()),
                false => Err(ParallelError::ExchangeWithoutEp {
                    exchange: self.ep_exchange,
                }),
            };
        }
        if self.dp % self.ep != 0 && self.cp == 1 {
            return Err(ParallelError::EpIndivisibleDp {
                ep: self.ep,
                dp: self.dp,
            });
        }
        if self.replicas() % self.ep != 0 {
            return Err(ParallelError::EpIndivisibleReplicas {
                ep: self.ep,
                dp: self.dp,
                cp: self.cp,
                replicas: self.replicas(),
            });
        }
        let experts = moe.num_experts;
        if experts % self.ep != 0 {
            let divisors: Vec<String> = (1..=experts)
                .filter(|d| experts % d == 0)
                .map(|d| d.to_string())
                .collect();
            return Err(ParallelError::EpIndivisibleExperts {
                ep: self.ep,
                experts,
                divisors: divisors.join(", "),
            });
        }
        Ok(())
    }
}

/// More ranks than any machine has: a world this size is a typo.
const MAX_WORLD: i64 = 1 << 20;

/// `a / b` rounded up, for positive `b` (`i64::div_ceil` is unstable).
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}
