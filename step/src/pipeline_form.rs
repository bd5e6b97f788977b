//! How a pipeline's tick programs are written (`crate::pipeline` builds
//! them; a module of its own so that the step's errors can name a choice
//! without importing the pipeline, which imports them): what the forward slot
//! keeps for the backward slot (the remat policy) and how the stages send
//! to each other. Neither changes what a step computes; both change what
//! a stage holds and which collectives neuronx-cc is handed.

use hlatc_models::option_name::OptionName as O;
use hlatc_passes::{RematPolicy, Target};
use std::fmt;

/// How activations and gradients cross from stage to stage (`--pp-send`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StageSend {
    /// One `collective-permute` from each rank to its twin on the next
    /// stage: exactly the bytes sent. What XLA's CPU backend runs
    /// natively; whether neuronx-cc takes it is not established.
    #[default]
    Permute,
    /// An `all-gather` over 2-rank groups of twins on neighbouring stages,
    /// the receiver taking its neighbour's half, as neuronx-distributed's
    /// pipeline sends (`pipeline/comm.py`): twice the bytes per round, and
    /// the form Neuron's own stack runs. The default for `neuron`.
    AllGather,
}

impl StageSend {
    pub const ALL: [StageSend; 2] = [StageSend::AllGather, StageSend::Permute];

    /// The name `--pp-send`, Python's `pp_send=` and the manifest use.
    pub fn name(self) -> &'static str {
        match self {
            StageSend::Permute => "permute",
            StageSend::AllGather => "all-gather",
        }
    }

    pub fn from_name(s: &str) -> Option<StageSend> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The form a target gets when none is asked for.
    pub fn default_for(target: Target) -> StageSend {
        match target {
            Target::Neuron => StageSend::AllGather,
            Target::Cpu => StageSend::Permute,
        }
    }
}

impl fmt::Display for StageSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The choices a pipeline's tick programs are built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PipelineForm {
    /// What the forward slot keeps for the backward slot: every value the
    /// backward reads except those this policy recomputes (`stage`: the
    /// stage's input alone). The `remat` pass runs with the same policy.
    pub remat: RematPolicy,
    pub send: StageSend,
}

impl PipelineForm {
    /// The form `target` gets by default under `remat`.
    pub fn for_target(target: Target, remat: RematPolicy) -> PipelineForm {
        PipelineForm {
            remat,
            send: StageSend::default_for(target),
        }
    }

    /// The form of a step of `pp` stages for `target`: `remat`, and `send`
    /// or the target's. A choice only a pipeline has is refused without
    /// stages rather than ignored.
    pub fn choose(
        remat: RematPolicy,
        send: Option<StageSend>,
        target: Target,
        pp: i64,
    ) -> Result<PipelineForm, FormError> {
        if pp <= 1 {
            if let Some(send) = send {
                return Err(FormError::SendWithoutStages { send });
            }
            if remat.needs_stages() {
                return Err(FormError::RematWithoutStages { remat });
            }
        }
        Ok(PipelineForm {
            remat,
            send: send.unwrap_or(StageSend::default_for(target)),
        })
    }
}

/// A pipeline's choice made for a step without stages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    #[error("{} chooses how pipeline stages send to each other; it needs {} or more", O::PpSend.set(.send), O::Pp.set(2))]
    SendWithoutStages { send: StageSend },
    #[error("{} keeps only each pipeline stage's input; it needs {} or more (without stages, {} keeps the least)", O::Remat.set(.remat), O::Pp.set(2), O::Remat.set("full-layer"))]
    RematWithoutStages { remat: RematPolicy },
}
