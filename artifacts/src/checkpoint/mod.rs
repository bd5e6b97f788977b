//! Checkpoints a run writes as it goes, and finds again after a crash.
//!
//! A checkpoint is a directory `step-NNNNNNNN` of files (the training
//! state, the loader's position, the metrics so far) and a `COMPLETE`
//! marker that lists each file's sha256. It is written under a temporary
//! name, each file synced, renamed into place, and only then marked
//! complete: a run killed at any point leaves either a complete checkpoint
//! or one without its marker, which the next run skips with a warning, as
//! it skips one whose files do not match their checksums. A save that
//! fails (a full disk) removes what it wrote and leaves the checkpoints
//! before it as they were; older checkpoints are removed only once a newer
//! one is complete.
//!
//! [`sharded`] is the per-rank checkpoint of a run whose processes each
//! hold some ranks (`hlatc.jax.Trainer`'s): the same directory names and
//! marker name, each process writing its own ranks' files.

pub mod sharded;

use crate::bundle::sha256_hex;
use hlatc_compiler::util::input_file;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The marker that makes a checkpoint directory complete.
pub const COMPLETE: &str = "COMPLETE";

/// What a training run's checkpoint holds, file by file (`hlatc train` and
/// the Python trainers write the same): the whole training state
/// (`Trainer::training_state`, safetensors), each DP replica's loader
/// position (a JSON array, absent for data without one), and the metrics
/// so far (CSV).
pub const STATE_FILE: &str = "state.safetensors";
pub const LOADER_FILE: &str = "loader.json";
pub const METRICS_FILE: &str = "metrics.csv";

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum CheckpointError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: '{name}' is not a file name a checkpoint holds", dir.display())]
    BadName { dir: PathBuf, name: String },
    #[error("{}: a run keeps at least its newest checkpoint", hlatc_models::option_name::OptionName::Keep.set(.keep))]
    KeepNone { keep: usize },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The name of the directory of the checkpoint at `step`: `step-NNNNNNNN`,
/// eight digits at least, so that the names sort as the steps do.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step:08}")
}

/// The step a checkpoint directory named `name` holds (None: not a
/// checkpoint's name).
pub fn step_of_dir_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("step-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What `COMPLETE` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    step: u64,
    /// Each file's sha256.
    files: BTreeMap<String, String>,
}

/// A complete checkpoint, read back and checked.
#[derive(Debug)]
pub struct Checkpoint {
    pub step: u64,
    pub path: PathBuf,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// A checkpoint directory that was passed over, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: SkipReason,
}

/// Why a checkpoint directory is not a complete checkpoint. The operating
/// system's errors are kept by kind and in words, so that a skip can be
/// cloned and compared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("no COMPLETE marker: the run stopped while saving it")]
    NoMarker,
    #[error("its COMPLETE marker cannot be read: {message}")]
    MarkerUnreadable {
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("its COMPLETE marker is not valid: {message}")]
    MarkerInvalid { message: String },
    #[error("it is not on this process's file system")]
    NotHere,
    #[error("its COMPLETE marker says step {marked}, its name step {named}")]
    StepMismatch { marked: u64, named: u64 },
    #[error("its file '{name}' cannot be read: {message}")]
    FileUnreadable {
        name: String,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("its file '{name}' is missing")]
    Missing { name: String },
    #[error("its file '{name}' does not match its checksum (corrupt)")]
    Corrupt { name: String },
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// The directory a run keeps its checkpoints in, and how many it keeps.
pub struct CheckpointDir {
    dir: PathBuf,
    keep: usize,
}

impl CheckpointDir {
    /// `dir` (made if missing), keeping the newest `keep` checkpoints.
    pub fn open(dir: &Path, keep: usize) -> Result<CheckpointDir, CheckpointError> {
        if keep == 0 {
            return Err(CheckpointError::KeepNone { keep });
        }
        // Said plainly: creating a directory where a file is fails with
        // `File exists`, which does not say which is wrong.
        if dir.exists() && !dir.is_dir() {
            return Err(CheckpointError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "is a file, not a directory: a checkpoint directory holds one directory per checkpoint",
                ),
            });
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        Ok(CheckpointDir {
            dir: dir.to_path_buf(),
            keep,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory of the checkpoint at `step`.
    pub fn step_dir(&self, step: u64) -> PathBuf {
        self.dir.join(step_dir_name(step))
    }

    /// Saves `files` (name, bytes) as the checkpoint at `step`, then
    /// removes the checkpoints past the newest `keep`. On failure nothing
    /// of it is left and the others are untouched.
    pub fn save(&self, step: u64, files: &[(&str, &[u8])]) -> Result<PathBuf, CheckpointError> {
        for (name, _) in files {
            if name.is_empty()
                || name.contains(['/', '\\'])
                || *name == COMPLETE
                || name.starts_with('.')
            {
                return Err(CheckpointError::BadName {
                    dir: self.dir.clone(),
                    name: name.to_string(),
                });
            }
        }
        let tmp = self
            .dir
            .join(format!(".step-{step:08}.partial-{}", std::process::id()));
        let written = self.write_partial(&tmp, files);
        let fin = self.step_dir(step);
        let placed = written.and_then(|sums| {
            if fin.exists() {
                std::fs::remove_dir_all(&fin).map_err(io(&fin))?;
            }
            std::fs::rename(&tmp, &fin).map_err(io(&fin))?;
            sync_dir(&self.dir)?;
            Ok(sums)
        });
        let sums = match placed {
            Ok(sums) => sums,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let marker = Marker { step, files: sums };
        let text = serde_json::to_string_pretty(&marker).expect("a marker serializes");
        let complete = fin.join(COMPLETE);
        if let Err(source) = hlatc_runtime::atomic_file::write_atomic(&complete, text.as_bytes()) {
            // Without its marker the directory is skipped; take it away so
            // it is not mistaken for a torn save of a crash.
            let _ = std::fs::remove_dir_all(&fin);
            return Err(CheckpointError::Io {
                path: complete,
                source,
            });
        }
        sync_dir(&fin)?;
        self.prune(step)?;
        Ok(fin)
    }

    /// Writes every file into `tmp`, synced; returns their sha256s.
    fn write_partial(
        &self,
        tmp: &Path,
        files: &[(&str, &[u8])],
    ) -> Result<BTreeMap<String, String>, CheckpointError> {
        if tmp.exists() {
            std::fs::remove_dir_all(tmp).map_err(io(tmp))?;
        }
        std::fs::create_dir(tmp).map_err(io(tmp))?;
        let mut sums = BTreeMap::new();
        for (name, bytes) in files {
            let path = tmp.join(name);
            hlatc_runtime::atomic_file::write_synced(&path, bytes).map_err(io(&path))?;
            sums.insert(name.to_string(), sha256_hex(bytes));
        }
        sync_dir(tmp)?;
        Ok(sums)
    }

    /// The checkpoint directories (complete or not) by step, and stale
    /// partial saves of crashed runs.
    fn entries(&self) -> Result<(BTreeMap<u64, PathBuf>, Vec<PathBuf>), CheckpointError> {
        let mut steps = BTreeMap::new();
        let mut partial = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(step) = step_of_dir_name(&name) {
                steps.insert(step, entry.path());
            } else if name.starts_with(".step-") && name.contains(".partial-") {
                partial.push(entry.path());
            }
        }
        Ok((steps, partial))
    }

    /// Removes every checkpoint but the newest `keep` complete ones (and
    /// every incomplete one before `newest`), and partial saves.
    fn prune(&self, newest: u64) -> Result<(), CheckpointError> {
        let (steps, partial) = self.entries()?;
        let mut kept = 0;
        for (&step, path) in steps.iter().rev() {
            let complete = path.join(COMPLETE).is_file();
            let keep = if complete && step <= newest {
                kept += 1;
                kept <= self.keep
            } else {
                step > newest
            };
            if !keep {
                std::fs::remove_dir_all(path).map_err(io(path))?;
            }
        }
        for p in partial {
            let _ = std::fs::remove_dir_all(p);
        }
        sync_dir(&self.dir)
    }

    /// The newest complete checkpoint whose files match their checksums,
    /// read whole, and every newer one that was skipped, with why.
    pub fn latest(&self) -> Result<(Option<Checkpoint>, Vec<Skipped>), CheckpointError> {
        let (steps, _) = self.entries()?;
        let mut skipped = Vec::new();
        for (&step, path) in steps.iter().rev() {
            match read_checkpoint(step, path) {
                Ok(c) => return Ok((Some(c), skipped)),
                Err(reason) => skipped.push(Skipped {
                    path: path.clone(),
                    reason,
                }),
            }
        }
        Ok((None, skipped))
    }
}

/// The checkpoint in `path`, checked against its marker.
fn read_checkpoint(step: u64, path: &Path) -> Result<Checkpoint, SkipReason> {
    // A device or FIFO in a checkpoint's place reads as an unreadable
    // file (the checkpoint is skipped), refused before it is read.
    let read = |p: &Path| input_file::read(p, std::convert::identity);
    let marker = read(&path.join(COMPLETE)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SkipReason::NoMarker,
        kind => SkipReason::MarkerUnreadable {
            kind,
            message: e.to_string(),
        },
    })?;
    let marker: Marker =
        serde_json::from_slice(&marker).map_err(|e| SkipReason::MarkerInvalid {
            message: e.to_string(),
        })?;
    if marker.step != step {
        return Err(SkipReason::StepMismatch {
            marked: marker.step,
            named: step,
        });
    }
    let mut files = BTreeMap::new();
    for (name, sum) in marker.files {
        let bytes = match read(&path.join(&name)) {
            Ok(b) => b,
            Err(e) => {
                return Err(SkipReason::FileUnreadable {
                    kind: e.kind(),
                    message: e.to_string(),
                    name,
                })
            }
        };
        if sha256_hex(&bytes) != sum {
            return Err(SkipReason::Corrupt { name });
        }
        files.insert(name, bytes);
    }
    Ok(Checkpoint {
        step,
        path: path.to_path_buf(),
        files,
    })
}

/// Waits until a directory's entries (a file created or renamed in it)
/// are on disk.
fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}
