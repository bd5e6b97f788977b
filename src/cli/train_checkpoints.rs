//! `hlatc train`'s checkpoints: saved every N steps into a directory, and
//! taken up by a run started again with the same directory, with no flag
//! of its own (HLAT's automatic fault recovery).

use super::console::note;
use hlatc::checkpoint::{CheckpointDir, LOADER_FILE, METRICS_FILE, STATE_FILE};
use hlatc::checkpoint_lock::DirLock;
use hlatc::loader::{positions_from_json, positions_to_json, LoaderPosition};
use hlatc::metrics::MetricsLog;
use hlatc::run_identity::{RunIdentity, IDENTITY_FILE};
use hlatc::runtime::{safetensors_bytes, safetensors_from_bytes};
use hlatc::trainer::Trainer;
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

/// What a checkpoint gives a run to go on from.
pub struct Restored {
    pub step: u64,
    pub positions: Option<Vec<LoaderPosition>>,
    pub metrics: MetricsLog,
}

/// The checkpoints of a run.
pub struct Checkpoints {
    dir: CheckpointDir,
    /// Held for the run: one run saves into a directory at a time.
    _lock: DirLock,
    /// What each checkpoint records as the run's identity.
    identity: RunIdentity,
    every: u64,
    /// The newest checkpoint's state, until the trainer takes it.
    state: Option<(String, Vec<u8>)>,
}

impl CheckpointArgs {
    pub fn check(&self) -> Result<(), Error> {
        if self.checkpoint_every == Some(0) {
            return Err(Error::usage("--checkpoint-every must be at least 1"));
        }
        Ok(())
    }

    /// The run's checkpoint directory (`None` without --checkpoint-dir),
    /// locked for this run, and what its newest complete checkpoint holds,
    /// if it has one, refused if it was written by a run other than
    /// `identity` (but for the fields --allow-resume-change names).
    pub fn open(
        &self,
        steps: u64,
        identity: &RunIdentity,
    ) -> Result<Option<(Checkpoints, Option<Restored>)>, Error> {
        let Some(path) = &self.checkpoint_dir else {
            return Ok(None);
        };
        identity.check_allowed_names(&self.allow_resume_change)?;
        let dir = CheckpointDir::open(path, self.keep)?;
        let (lock, stale) = DirLock::acquire(path)?;
        if let Some(h) = stale {
            note!(
                "warning: {}: taking over the lock of a run that is gone ({h})",
                path.display()
            )?;
        }
        let (latest, skipped) = dir.latest()?;
        for s in &skipped {
            note!("warning: skipping checkpoint {s}")?;
        }
        let mut checkpoints = Checkpoints {
            dir,
            _lock: lock,
            identity: identity.clone(),
            every: self.checkpoint_every.unwrap_or((steps / 10).max(1)),
            state: None,
        };
        let Some(mut c) = latest else {
            return Ok(Some((checkpoints, None)));
        };
        let source = c.path.display().to_string();
        checkpoints.identity = match c.files.remove(IDENTITY_FILE) {
            Some(bytes) => {
                let saved = RunIdentity::from_json(
                    &String::from_utf8_lossy(&bytes),
                    &format!("{source}/{IDENTITY_FILE}"),
                )?;
                resumed_identity(identity, &saved, &self.allow_resume_change, c.step, &source)?
            }
            None => {
                note!(
                    "warning: checkpoint {source} records no run identity (an older hlatc wrote it); \
                     its model, precision and data are not checked"
                )?;
                identity.clone()
            }
        };
        let missing = |file: &str| Error::usage(format!("checkpoint {source} has no {file}"));
        let state = c
            .files
            .remove(STATE_FILE)
            .ok_or_else(|| missing(STATE_FILE))?;
        // A checkpoint without metrics (of a run that kept none) resumes
        // with none, as Python's `fit` does.
        let metrics = match c.files.remove(METRICS_FILE) {
            None => MetricsLog::default(),
            Some(bytes) => MetricsLog::parse(
                &String::from_utf8_lossy(&bytes),
                &format!("{source}/{METRICS_FILE}"),
            )?,
        };
        let positions = match c.files.remove(LOADER_FILE) {
            None => None,
            Some(bytes) => Some(positions_from_json(&String::from_utf8_lossy(&bytes))?),
        };
        checkpoints.state = Some((format!("{source}/{STATE_FILE}"), state));
        Ok(Some((
            checkpoints,
            Some(Restored {
                step: c.step,
                positions,
                metrics,
            }),
        )))
    }
}

impl Checkpoints {
    /// Puts the restored checkpoint's state into `trainer`.
    pub fn restore(&mut self, trainer: &mut Trainer) -> Result<(), Error> {
        if let Some((source, bytes)) = self.state.take() {
            let tensors = safetensors_from_bytes(&bytes, &source)?;
            trainer.resume(tensors, &source)?;
        }
        Ok(())
    }

    /// Saves a checkpoint after step `done` when it is due: every
    /// --checkpoint-every steps and at `last`.
    pub fn after_step(
        &self,
        done: u64,
        last: u64,
        trainer: &Trainer,
        positions: Option<Vec<LoaderPosition>>,
        metrics: &MetricsLog,
    ) -> Result<(), Error> {
        if done % self.every != 0 && done != last {
            return Ok(());
        }
        let state = safetensors_bytes(&trainer.try_training_state()?, STATE_FILE)?;
        let loader = positions.map(|p| positions_to_json(&p).into_bytes());
        let csv = metrics.to_csv();
        let identity = self.identity.to_json();
        let mut files: Vec<(&str, &[u8])> = vec![
            (STATE_FILE, &state),
            (METRICS_FILE, csv.as_bytes()),
            (IDENTITY_FILE, identity.as_bytes()),
        ];
        if let Some(l) = &loader {
            files.push((LOADER_FILE, l));
        }
        self.dir.save(done, &files)?;
        Ok(())
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The identity the run records: its own, with the changes resumes
    /// were allowed to make.
    pub fn identity(&self) -> &RunIdentity {
        &self.identity
    }
}

/// The identity a run resuming a checkpoint of `saved` (at `step`, read
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
    for c in &changes {
        note!("warning: resuming {source} with a change it allows: {c}")?;
    }
    Ok(next)
}
