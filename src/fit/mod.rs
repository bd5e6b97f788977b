//! The training loop every front end runs: `hlatc train` on XLA CPU,
//! `hlatc.Trainer.fit` and `hlatc.jax.Trainer.fit` in Python.
//!
//! The loop holds the run's policy, written once: where it stops (the
//! step to reach, the data's end, the caller's word), the divergence rule,
//! and when a checkpoint is due (every N steps, and after the last step
//! once, however the run stopped). What a step is, where its batch comes
//! from, what a checkpoint holds and what is printed is the engine's
//! ([`FitEngine`]), as Burn's `Learner` leaves them to its strategies.
//! Resuming a run's checkpoint directory is [`checkpoints`].

pub mod checkpoints;

use hlatc_train::run_error::RunError;

/// What the loop drives: one front end's trainer, data and reports.
pub trait FitEngine {
    /// What a step, a save or a report can fail with; a diverged loss
    /// reaches it through `From<RunError>`.
    type Error: From<RunError>;

    /// Optimizer steps done so far (a resumed run's count from step 0).
    fn steps_done(&mut self) -> Result<u64, Self::Error>;

    /// One optimizer step on the next batch: its loss, or `None` when the
    /// data ended before it.
    fn step(&mut self) -> Result<Option<f64>, Self::Error>;

    /// Records (and reports) the step just done, numbered `done`, once
    /// its loss is known to be finite.
    fn record(&mut self, done: u64) -> Result<(), Self::Error>;

    /// Saves a checkpoint after step `done`.
    fn save(&mut self, done: u64) -> Result<(), Self::Error>;

    /// Whether the run goes on after step `done` (and its checkpoint, when
    /// one was due): a caller's hook may stop it.
    fn go_on(&mut self, done: u64) -> Result<bool, Self::Error>;
}

/// Where a run stops and when it saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitPolicy {
    /// The step count to reach, counted from step 0 as `steps_done` counts
    /// (a resumed run goes on to the same end).
    pub stop: u64,
    /// Steps between checkpoints; `None` saves none. A checkpoint also
    /// follows the last step, however the run stopped.
    pub checkpoint_every: Option<u64>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FitEnd {
    /// It reached the step to stop at (or was there already).
    Reached,
    /// The data ended after step `at`, before the step to stop at.
    DataEnded { at: u64 },
    /// The engine's [`FitEngine::go_on`] stopped it after step `at`.
    Stopped { at: u64 },
}

/// `hlatc train --checkpoint-every`'s and `fit(checkpoint_every=None)`'s
/// default: a tenth of the run, at least every step.
pub fn default_checkpoint_every(steps: u64) -> u64 {
    (steps / 10).max(1)
}

impl FitPolicy {
    /// Runs `engine` from its steps done to [`FitPolicy::stop`]. A loss
    /// that is not finite stops the run with [`RunError::Diverged`] before
    /// the step is recorded or anything more is saved.
    pub fn run<E: FitEngine>(&self, engine: &mut E) -> Result<FitEnd, E::Error> {
        let mut done = engine.steps_done()?;
        let mut saved = done;
        let mut end = FitEnd::Reached;
        while done < self.stop {
            let Some(loss) = engine.step()? else {
                end = FitEnd::DataEnded { at: done };
                break;
            };
            done = engine.steps_done()?;
            RunError::check_loss(done, loss)?;
            engine.record(done)?;
            if self.checkpoint_every.is_some_and(|n| done % n == 0) {
                engine.save(done)?;
                saved = done;
            }
            if !engine.go_on(done)? {
                end = FitEnd::Stopped { at: done };
                break;
            }
        }
        if self.checkpoint_every.is_some() && done != saved {
            engine.save(done)?;
        }
        Ok(end)
    }
}
