//! A run's checkpoint directory as the run sees it: locked for the run,
//! its newest complete checkpoint taken up (refused if another run wrote
//! it, but for the changes the user allows), and a checkpoint saved when
//! the loop says one is due. `hlatc train --checkpoint-dir` and
//! `hlatc.Trainer.fit(checkpoint_dir=...)` both open it here, so each
//! resumes the other's.
//!
//! A checkpoint is the train crate's ([`CheckpointDir`]): the whole
//! training state ([`STATE_FILE`], safetensors), the loader's position
//! ([`LOADER_FILE`], for data that has one), the metrics so far
//! ([`METRICS_FILE`]) and the run's identity ([`IDENTITY_FILE`]).

use crate::metrics::{MetricsError, MetricsLog};
use hlatc_artifacts::checkpoint::{
    CheckpointDir, CheckpointError, Skipped, LOADER_FILE, METRICS_FILE, STATE_FILE,
};
use hlatc_artifacts::checkpoint_lock::{DirLock, LockError, LockHolder};
use hlatc_artifacts::run_identity::{FieldChange, RunIdentity, RunIdentityError, IDENTITY_FILE};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum RunCheckpointError {
    /// A complete checkpoint without the training state to go on from.
    #[error("checkpoint {checkpoint} has no {STATE_FILE}, so nothing to resume from")]
    NoState { checkpoint: String },
    #[error(transparent)]
    Dir(#[from] CheckpointError),
    #[error(transparent)]
    Lock(#[from] LockError),
    /// Another run's checkpoint, an identity that cannot be read, or an
    /// allowed change that names no field.
    #[error(transparent)]
    Identity(#[from] RunIdentityError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

/// What opening the directory found that the user should hear of; each
/// front end says it its own way (a warning line, a Python warning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// The lock of a run that is gone, taken over.
    StaleLock { dir: PathBuf, holder: LockHolder },
    /// A newer checkpoint passed over: torn by a crash, or corrupt.
    Skipped(Skipped),
    /// The checkpoint records no run identity (an older hlatc wrote it),
    /// so nothing of the run is checked.
    NoIdentity { checkpoint: String },
    /// A field of the run's identity that differs, resumed anyway because
    /// the user allowed it.
    AllowedChange {
        checkpoint: String,
        change: FieldChange,
    },
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::StaleLock { dir, holder } => write!(
                f,
                "{}: taking over the lock of a run that is gone ({holder})",
                dir.display()
            ),
            Notice::Skipped(s) => write!(f, "skipping checkpoint {s}"),
            Notice::NoIdentity { checkpoint } => write!(
                f,
                "checkpoint {checkpoint} records no run identity (an older hlatc wrote it); \
                 its model, precision and data are not checked"
            ),
            Notice::AllowedChange { checkpoint, change } => {
                write!(f, "resuming {checkpoint} with a change it allows: {change}")
            }
        }
    }
}

/// What the newest complete checkpoint gives a run to go on from.
#[derive(Debug)]
pub struct Restored {
    pub step: u64,
    /// The checkpoint's directory, as errors and notes name it.
    pub checkpoint: String,
    /// The whole training state, as safetensors bytes.
    pub state: Vec<u8>,
    /// The loader's position (JSON), for data that records one.
    pub loader: Option<Vec<u8>>,
    /// Every step's metrics up to the checkpoint (none if the run that
    /// saved it kept none).
    pub metrics: MetricsLog,
}

impl Restored {
    /// Where the state came from, as errors name it.
    pub fn state_source(&self) -> String {
        format!("{}/{STATE_FILE}", self.checkpoint)
    }
}

/// The checkpoints of one run, its directory locked while they are open.
pub struct RunCheckpoints {
    dir: CheckpointDir,
    /// Held for the run: one run saves into a directory at a time.
    _lock: DirLock,
    /// What each checkpoint records as the run's identity.
    identity: RunIdentity,
}

/// The directory opened: the run's checkpoints, what the newest complete
/// one holds (if there is one) and what to tell the user.
pub struct Opened {
    pub checkpoints: RunCheckpoints,
    pub restored: Option<Restored>,
    pub notices: Vec<Notice>,
}

impl RunCheckpoints {
    /// Opens (and makes, if missing) the checkpoint directory at `path` for
    /// a run of `identity`, keeping its newest `keep` checkpoints, and
    /// takes up the newest complete one: refused if another run wrote it
    /// but for the fields (or groups) `allowed` names.
    pub fn open(
        path: &Path,
        keep: usize,
        identity: &RunIdentity,
        allowed: &[String],
    ) -> Result<Opened, RunCheckpointError> {
        identity.check_allowed_names(allowed)?;
        let dir = CheckpointDir::open(path, keep)?;
        let (lock, stale) = DirLock::acquire(path)?;
        let mut notices: Vec<Notice> = stale
            .map(|holder| Notice::StaleLock {
                dir: path.to_path_buf(),
                holder,
            })
            .into_iter()
            .collect();
        let (latest, skipped) = dir.latest()?;
        notices.extend(skipped.into_iter().map(Notice::Skipped));
        let mut checkpoints = RunCheckpoints {
            dir,
            _lock: lock,
            identity: identity.clone(),
        };
        let Some(mut c) = latest else {
            return Ok(Opened {
                checkpoints,
                restored: None,
                notices,
            });
        };
        let checkpoint = c.path.display().to_string();
        checkpoints.identity = match c.files.remove(IDENTITY_FILE) {
            Some(bytes) => {
                let saved = RunIdentity::from_json(
                    &String::from_utf8_lossy(&bytes),
                    &format!("{checkpoint}/{IDENTITY_FILE}"),
                )?;
                let (next, changes) =
                    identity.check_resume(&saved, allowed, c.step, &checkpoint)?;
                notices.extend(changes.into_iter().map(|change| Notice::AllowedChange {
                    checkpoint: checkpoint.clone(),
                    change,
                }));
                next
            }
            None => {
                notices.push(Notice::NoIdentity {
                    checkpoint: checkpoint.clone(),
                });
                identity.clone()
            }
        };
        let Some(state) = c.files.remove(STATE_FILE) else {
            return Err(RunCheckpointError::NoState { checkpoint });
        };
        let metrics = match c.files.remove(METRICS_FILE) {
            None => MetricsLog::default(),
            Some(bytes) => MetricsLog::parse(
                &String::from_utf8_lossy(&bytes),
                &format!("{checkpoint}/{METRICS_FILE}"),
            )?,
        };
        let restored = Restored {
            step: c.step,
            checkpoint,
            state,
            loader: c.files.remove(LOADER_FILE),
            metrics,
        };
        Ok(Opened {
            checkpoints,
            restored: Some(restored),
            notices,
        })
    }

    /// Saves the checkpoint of step `done`: the whole training `state`
    /// (safetensors bytes), the `loader`'s position where the data has one
    /// and the `metrics` so far, with the run's identity; then prunes to
    /// the newest `keep`. Its directory.
    pub fn save(
        &self,
        done: u64,
        state: &[u8],
        loader: Option<&[u8]>,
        metrics: &MetricsLog,
    ) -> Result<PathBuf, RunCheckpointError> {
        let csv = metrics.to_csv();
        let identity = self.identity.to_json();
        let mut files: Vec<(&str, &[u8])> = vec![
            (STATE_FILE, state),
            (METRICS_FILE, csv.as_bytes()),
            (IDENTITY_FILE, identity.as_bytes()),
        ];
        if let Some(l) = loader {
            files.push((LOADER_FILE, l));
        }
        Ok(self.dir.save(done, &files)?)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The identity the run records: its own, with the changes resumes
    /// were allowed to make.
    pub fn identity(&self) -> &RunIdentity {
        &self.identity
    }
}
