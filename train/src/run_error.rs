//! What does not fit between a run's programs, its state and what it is
//! given: a program that does not return its state or declares what the
//! run does not hold, an input the runner cannot feed, a batch packed
//! otherwise than the step. Most are a step built for another run; each
//! names the input, output or program.

use hlatc_step::train_step::Role;

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum RunError {
    #[error("the {program} does not return every piece of its state")]
    StateNotReturned { program: &'static str },
    #[error("{}", match compiled_packed {
        true => "the step was compiled for packed rows but the batch has no segment ids",
        false => "the step was compiled unpacked but the batch has segment ids",
    })]
    PackedMismatch { compiled_packed: bool },
    #[error("the step needs its {role:?} input '{input}'")]
    MissingInput { role: Role, input: String },
    #[error("no state '{input}' for the step's input")]
    NoStateFor { input: String },
    #[error("the step returns '{output}', which is no state of the run")]
    UnknownOutput { output: String },
    #[error("the step returned fewer outputs than it declares")]
    FewerOutputs,
    #[error("the step ran on no rank")]
    NoRanks,
    #[error("the step has no {role:?} output")]
    NoOutput { role: Role },
    #[error("a pipelined step has {want} programs, {got} were given")]
    ProgramCount { want: usize, got: usize },
    /// A state input's buffer was donated to a step that failed: the
    /// trainer no longer holds it.
    #[error("the state input '{input}' is gone: it was given to a step that failed (resume from a checkpoint)")]
    StateGone { input: String },
    /// A step's loss is not finite: the run stops before anything more is
    /// saved, its last checkpoint the one to resume from.
    #[error("step {step}: the loss is {loss}; training diverged")]
    Diverged { step: u64, loss: f64 },
    /// A step failed after its device took the state it updates.
    #[error("{source}; the {lost} state buffer(s) the step was given are gone with it (resume from a checkpoint)")]
    StepFailed {
        lost: usize,
        #[source]
        source: hlatc_runtime::RuntimeError,
    },
}

impl RunError {
    /// The divergence rule every training loop applies (`hlatc train`,
    /// `hlatc.Trainer.fit`, `hlatc.jax.Trainer.fit`): a loss that is not
    /// finite stops the run at `step`.
    pub fn check_loss(step: u64, loss: f64) -> Result<(), RunError> {
        if loss.is_finite() {
            Ok(())
        } else {
            Err(RunError::Diverged { step, loss })
        }
    }
}
