//! `hlatc train`'s checkpoints: saved every N steps into a directory, and
//! taken up by a run started again with the same directory, with no flag
//! of its own (HLAT's automatic fault recovery): the library's
//! [`RunCheckpoints`], which `hlatc.Trainer.fit` opens too.

use super::console::note;
use hlatc::fit::checkpoints::{Notice, Opened, RunCheckpoints};
use hlatc::run_identity::RunIdentity;
use hlatc::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct CheckpointArgs {
    /// Save checkpoints here as the run goes (the whole training state, the
    /// loader's position and the metrics so far), each written whole
    /// before it counts. A run started with the same directory resumes
    /// from its newest complete checkpoint by itself, passing over (with a
    /// warning naming it) one that is torn or corrupt: the same command
    /// restarted after a crash goes on where the last checkpoint stopped,
    /// bit for bit as a run that never stopped
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Save a checkpoint every N steps, and after the last [default:
    /// steps/10]
    #[arg(long, value_name = "N", requires = "checkpoint_dir")]
    checkpoint_every: Option<u64>,
    /// Keep the newest K checkpoints (older ones are removed once a newer
    /// one is complete)
    #[arg(
        long,
        value_name = "K",
        default_value_t = 3,
        requires = "checkpoint_dir"
    )]
    keep: usize,
    /// Resume a checkpoint (or a --resume file) although FIELD of the run's
    /// identity differs from the one it recorded: a field (`model.rope_theta`,
    /// `precision`, `tokenizer`, `corpus`, `data.seed`, ...) or a group
    /// (`model`, `optimizer`, `schedule`, `data`). Repeatable. The change is recorded in
    /// every later checkpoint's run.json and printed as a warning
    #[arg(long, value_name = "FIELD")]
    pub allow_resume_change: Vec<String>,
}

impl CheckpointArgs {
    pub fn check(&self) -> Result<(), Error> {
        if self.checkpoint_every == Some(0) {
            return Err(Error::out_of_range("--checkpoint-every must be at least 1"));
        }
        Ok(())
    }

    /// Steps between checkpoints of a run of `steps` (`None` without
    /// --checkpoint-dir).
    pub fn every(&self, steps: u64) -> Option<u64> {
        self.checkpoint_dir.as_ref()?;
        Some(
            self.checkpoint_every
                .unwrap_or_else(|| hlatc::fit::default_checkpoint_every(steps)),
        )
    }

    /// The run's checkpoint directory (`None` without --checkpoint-dir),
    /// locked for this run, and what its newest complete checkpoint holds,
    /// if it has one, refused if it was written by a run other than
    /// `identity` (but for the fields --allow-resume-change names); what
    /// it found worth a warning printed.
    pub fn open(&self, identity: &RunIdentity) -> Result<Option<Opened>, Error> {
        let Some(path) = &self.checkpoint_dir else {
            return Ok(None);
        };
        let opened = RunCheckpoints::open(path, self.keep, identity, &self.allow_resume_change)?;
        for n in &opened.notices {
            note!("warning: {n}")?;
        }
        Ok(Some(opened))
    }
}

/// The identity a run resuming a --resume file of `saved` (at `step`, read
/// from `source`) records from now on; refused where it differs but for the
/// fields `allowed`, each allowed change printed as a warning.
pub fn resumed_identity(
    now: &RunIdentity,
    saved: &RunIdentity,
    allowed: &[String],
    step: u64,
    source: &str,
) -> Result<RunIdentity, Error> {
    let (next, changes) = now.check_resume(saved, allowed, step, source)?;
    for change in changes {
        let checkpoint = source.to_string();
        note!("warning: {}", Notice::AllowedChange { checkpoint, change })?;
    }
    Ok(next)
}
