//! `--tp`, `--dp`, `--pp`, `--ep`, `--sequence-parallel` and `--zero1`,
//! shared by the commands that build a step.

use hlatc::models::{EpExchange, Parallelism};
use hlatc::passes::Target;
use hlatc::pipeline::StageSend;
use hlatc::spmd::{RankSource, Spmd, SpmdError, SpmdForm};

#[derive(clap::Args)]
pub(super) struct ParallelArgs {
    /// Tensor-parallel degree, Megatron style as NxD does it: q/k/v and
    /// gate/up split by output columns (whole heads per rank; KV heads are
    /// replicated when there are fewer than --tp), o and down split by
    /// input rows and all-reduced, the embedding and LM head split by
    /// vocabulary rows (padded when --tp does not divide the vocabulary)
    /// with the cross-entropy computed without any rank holding a full row
    /// of logits. It must divide the query heads and the MLP width, and
    /// the KV heads must divide it or be divisible by it
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub tp: i64,
    /// Data-parallel degree: --batch-size stays the global batch, and each
    /// of the D replicas of a TP group takes batch/D sequences; gradients
    /// are averaged in f32. Ranks are numbered TP-major: rank r is TP rank
    /// r % T of replica r / T, so TP groups are runs of T ids
    #[arg(long, value_name = "D", default_value_t = 1)]
    pub dp: i64,
    /// Pipeline-parallel degree: the decoder layers divided into P stages
    /// of equal length (P must divide them), each stage on its own T x D
    /// ranks; rank r is on stage r / (T x D). A step runs --grad-accum M
    /// micro-batches through the stages on a 1F1B-ordered schedule of
    /// M + 2P - 1 ticks (bubble (P - 1) / (M + P - 1)), as four programs of
    /// one micro-batch on one stage each (warm-up, steady, cool-down, and
    /// the apply step). Each micro-batch in flight keeps what --remat
    /// keeps for its backward slot (--remat stage: only the stage's input,
    /// the forward run again); stages send as --pp-send says. See
    /// docs/src/pipeline.md
    #[arg(long, value_name = "P", default_value_t = 1)]
    pub pp: i64,
    /// Expert-parallel degree, for a mixture-of-experts model: its experts
    /// divided over E of the --dp replicas (E divides --dp and the expert
    /// count), NxD's [PP, DP_exp, EP, TP] layout: DP replica d is EP rank
    /// d % E and holds that run of the experts; tokens reach the experts
    /// of the other EP ranks as --ep-exchange says, and the experts'
    /// gradients are averaged over the D / E replicas that hold them. See
    /// docs/src/moe.md
    #[arg(long, value_name = "E", default_value_t = 1)]
    pub ep: i64,
    /// How tokens reach the experts of other EP ranks (needs --ep above
    /// 1). `all-to-all`: each rank lays its tokens out in per-expert
    /// buffers of the capacity (--capacity-factor, else every token of a
    /// sequence fits) and sends each EP rank its experts' buffers, the
    /// outputs coming back the same way (NxD training's form).
    /// `all-gather`: every rank gathers the group's tokens, runs its
    /// experts over all of them and reduce-scatters the outputs back
    /// (NxD Inference's and vLLM-Neuron's form). Both compute the same
    /// step
    #[arg(long, value_name = "FORM", default_value = "all-to-all", value_parser = parse_ep_exchange)]
    pub ep_exchange: EpExchange,
    /// Sequence parallelism (needs --tp above 1): norms and residuals on
    /// each rank's share of the tokens, all-gathered before q/k/v and
    /// gate/up and reduce-scattered after o and down, which cuts the
    /// activation memory of those ops by T
    #[arg(long)]
    pub sequence_parallel: bool,
    /// ZeRO-1 (needs --dp above 1): the Adam moments, and the master
    /// weights under --precision bf16-master, divided over the D replicas.
    /// Gradients are reduce-scattered (summed in f32, each replica keeping
    /// its 1/D of every tensor), each replica updates its shard, and the
    /// new parameters are all-gathered: optimizer memory per rank falls by
    /// D, at no extra communication
    #[arg(long)]
    pub zero1: bool,
    /// How a sharded step says it is one program for every rank.
    /// `replicas`: replica_count=N and replica-id, as torch-xla compiles
    /// it (NxD on torch-neuronx). `partitions`: num_partitions=N,
    /// partition-id, a channel_id and use_global_device_ids=true on every
    /// collective and sharding={manual} on the entry's parameters and
    /// root, as JAX compiles it (jax-neuronx included). The same step
    /// either way, proven equal on XLA CPU. Default: replicas
    #[arg(long, value_enum, value_name = "FORM")]
    pub spmd: Option<SpmdArg>,
    /// Where a sharded step's rank reads its number. `device`: replica-id
    /// (or partition-id). `input`: an extra s32[1] input named `rank`,
    /// fed r on rank r, as NxD's SPMDRank does, since replica-id in one
    /// program for all ranks is not known to compile on Neuron.
    /// Default: input for --target neuron, device for cpu
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub rank_source: Option<RankSourceArg>,
}

/// `--pp-send`, for the commands that build a pipeline's programs.
#[derive(clap::Args)]
pub(super) struct PpSendArg {
    /// How pipeline stages send activations and gradients (needs --pp 2 or
    /// more). `all-gather`: an all-gather over each pair of twin ranks on
    /// neighbouring stages, the receiver taking its partner's half, as
    /// neuronx-distributed's pipeline sends (twice the bytes; an odd --pp
    /// needs an even --tp x --dp). `permute`: one collective-permute from
    /// each rank to its twin, exactly the bytes sent, which NxD never
    /// emits. Both compute the same step. Default: all-gather for --target
    /// neuron, permute for cpu
    #[arg(long = "pp-send", value_name = "FORM", value_parser = parse_pp_send)]
    pub send: Option<StageSend>,
}

fn parse_ep_exchange(s: &str) -> Result<EpExchange, String> {
    EpExchange::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = EpExchange::ALL.iter().map(|f| f.name()).collect();
        format!("unknown exchange '{s}' (known: {})", known.join(", "))
    })
}

fn parse_pp_send(s: &str) -> Result<StageSend, String> {
    StageSend::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = StageSend::ALL.iter().map(|f| f.name()).collect();
        format!("unknown send form '{s}' (known: {})", known.join(", "))
    })
}

/// `--spmd`'s choices.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum SpmdArg {
    Replicas,
    Partitions,
}

/// `--rank-source`'s choices.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum RankSourceArg {
    Device,
    Input,
}

impl From<SpmdArg> for SpmdForm {
    fn from(a: SpmdArg) -> SpmdForm {
        match a {
            SpmdArg::Replicas => SpmdForm::Replicas,
            SpmdArg::Partitions => SpmdForm::Partitions,
        }
    }
}

impl From<RankSourceArg> for RankSource {
    fn from(a: RankSourceArg) -> RankSource {
        match a {
            RankSourceArg::Device => RankSource::Device,
            RankSourceArg::Input => RankSource::Input,
        }
    }
}

impl ParallelArgs {
    pub fn parallelism(&self) -> Parallelism {
        Parallelism {
            tp: self.tp,
            dp: self.dp,
            sequence_parallel: self.sequence_parallel,
            zero1: self.zero1,
            pp: self.pp,
            ep: self.ep,
            ep_exchange: self.ep_exchange,
        }
    }

    /// `--spmd` and `--rank-source` as given.
    pub fn spmd_choice(&self) -> (Option<SpmdForm>, Option<RankSource>) {
        (self.spmd.map(Into::into), self.rank_source.map(Into::into))
    }

    /// How the step is written for `target`: what was asked, else the
    /// target's default.
    pub fn spmd(&self, target: Target) -> Result<Spmd, SpmdError> {
        let (form, rank_source) = self.spmd_choice();
        Spmd::choose(form, rank_source, target, self.parallelism())
    }
}
