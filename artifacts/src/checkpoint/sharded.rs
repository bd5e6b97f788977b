//! Per-rank ("sharded") checkpoints: `hlatc.jax.Trainer`'s, whose
//! processes each hold some of a step's ranks and write only their own.
//!
//! A checkpoint is a directory of `hlatc shard`'s rank files
//! (`rank-NNNNN.safetensors`, which `hlatc unshard` joins), each DP
//! replica's loader position (`loader-replica-NNNNN.json`, written by the
//! process that reads that replica), files every process writes alike (the
//! metrics), and a `COMPLETE` marker ([`Marker`]: the format, the steps
//! done, the world size, the step's config, the run's identity and each
//! file's sha256) that process 0 writes last, once every process has put
//! its files in place. The processes meet between these steps through the
//! caller's collectives (a barrier after [`prepare_save`], a gather of the
//! digests before [`Marker::write`]); this module is what each process
//! does on its own file system.
//!
//! In `fit`'s checkpoint directory they are named as a run's checkpoints
//! are ([`step_dir_name`]), and pruned as [`prune`] says.

use super::{step_dir_name, step_of_dir_name, SkipReason, COMPLETE};
use crate::bundle::{sha256_file_hex, sha256_hex};
use crate::run_identity::RunIdentity;
use crate::state_shards::rank_file_name;
use hlatc_compiler::Literal;
use hlatc_runtime::atomic_file::{temp_beside, write_synced};
use hlatc_runtime::TensorFileError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a marker's `format` says: the layout this module writes and reads.
pub const FORMAT: &str = "hlatc-checkpoint/1";

/// The file of DP replica `replica`'s loader position: a JSON array of that
/// one position (a run's `loader.json`, one replica a file, so that each
/// process writes only its own).
pub fn loader_file_name(replica: usize) -> String {
    format!("loader-replica-{replica:05}.json")
}

/// What a per-rank checkpoint cannot be, or could not do. Each names the
/// file or directory it is about. Its case names its code
/// (`hlatc::error_code`), as every error hlatc raises is coded.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum ShardedCheckpointError {
    #[error(
        "{}: a checkpoint is a directory, and this is a file: give a directory's path (made if missing)",
        dir.display()
    )]
    SaveIntoFile { dir: PathBuf },
    #[error("{}: cannot make the checkpoint's directory: {source}", dir.display())]
    MakeDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no such checkpoint directory", dir.display())]
    NoDirectory { dir: PathBuf },
    #[error(
        "{}: not a directory, so not a checkpoint (Trainer.save writes a directory)",
        dir.display()
    )]
    NotDirectory { dir: PathBuf },
    #[error(
        "{}: no {COMPLETE} marker, so not a complete checkpoint (a save cut short, or not written by hlatc.jax.Trainer.save)",
        dir.display()
    )]
    NoMarker { dir: PathBuf, marker: PathBuf },
    #[error("{}: not a checkpoint marker: {message}", marker.display())]
    NotMarker { marker: PathBuf, message: String },
    /// `found`: the marker's `format`, as JSON (None: it has none).
    #[error("{}: format {}, not {FORMAT}", marker.display(), found.as_deref().unwrap_or("none"))]
    Format {
        marker: PathBuf,
        found: Option<String>,
    },
    #[error(
        "{}: a checkpoint of {recorded} ranks; this step runs on {world} (join it with hlatc unshard and resume() the whole state)",
        dir.display()
    )]
    WorldSize {
        dir: PathBuf,
        recorded: usize,
        world: usize,
    },
    #[error("{}: missing, though {COMPLETE} lists it", file.display())]
    Missing { file: PathBuf },
    #[error(
        "{}: its sha256 is not the one {COMPLETE} records (changed since, or from another save)",
        file.display()
    )]
    Changed { file: PathBuf },
    #[error("{}: '{name}' is not a file name a checkpoint holds", dir.display())]
    BadName { dir: PathBuf, name: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

type Result<T> = std::result::Result<T, ShardedCheckpointError>;

fn io(path: &Path) -> impl Fn(std::io::Error) -> ShardedCheckpointError + '_ {
    move |source| ShardedCheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `COMPLETE` holds, in this order on disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// [`FORMAT`].
    pub format: String,
    pub steps_done: u64,
    pub world_size: usize,
    /// The step's config, as the step gives it.
    #[serde(default)]
    pub config: serde_json::Value,
    /// The run's identity, with the changes allowed; None in a
    /// checkpoint of an hlatc older than identities.
    #[serde(default)]
    pub identity: Option<RunIdentity>,
    /// Each file's sha256, by name.
    pub files: BTreeMap<String, String>,
}

impl Marker {
    /// The marker of a checkpoint after `steps_done` steps of `world_size`
    /// ranks, vouching for `files` (name, sha256).
    pub fn new(
        steps_done: u64,
        world_size: usize,
        config: serde_json::Value,
        identity: Option<RunIdentity>,
        files: BTreeMap<String, String>,
    ) -> Marker {
        Marker {
            format: FORMAT.to_string(),
            steps_done,
            world_size,
            config,
            identity,
            files,
        }
    }

    /// Writes the marker into `dir` last: under a temporary name, synced,
    /// renamed, and the directory synced, so that the rank files renamed
    /// into it before are on disk with it.
    pub fn write(&self, dir: &Path) -> Result<()> {
        // One space a level, as the Python that wrote it first indented it.
        let mut text = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut text, formatter);
        self.serialize(&mut ser)
            .expect("a marker of JSON values serializes");
        place(dir, COMPLETE, &text)?;
        sync_dir(dir)
    }

    /// The marker of the checkpoint in `dir`, read: `NoMarker` without
    /// one, `NotMarker` or `Format` for a file that is not one of this
    /// format's.
    pub fn read(dir: &Path) -> Result<Marker> {
        let marker = dir.join(COMPLETE);
        let not_marker = |message: String| ShardedCheckpointError::NotMarker {
            marker: marker.clone(),
            message,
        };
        let bytes = hlatc_compiler::util::input_file::read(&marker, |e| match e.kind() {
            std::io::ErrorKind::NotFound => ShardedCheckpointError::NoMarker {
                dir: dir.to_path_buf(),
                marker: marker.clone(),
            },
            _ => not_marker(e.to_string()),
        })?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| not_marker(e.to_string()))?;
        // The format first: a marker of another format may hold anything.
        let format = value.get("format");
        if format.and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(ShardedCheckpointError::Format {
                marker,
                found: format.map(|f| f.to_string()),
            });
        }
        serde_json::from_value(value).map_err(|e| not_marker(e.to_string()))
    }

    /// `WorldSize` unless the checkpoint in `dir` is of `world` ranks.
    pub fn check_world(&self, dir: &Path, world: usize) -> Result<()> {
        if self.world_size != world {
            return Err(ShardedCheckpointError::WorldSize {
                dir: dir.to_path_buf(),
                recorded: self.world_size,
                world,
            });
        }
        Ok(())
    }
}

/// Makes `dir` ready for a save of `world` ranks (each process calls it;
/// `first`: process 0). Process 0 removes the old marker, so that no
/// process overwrites a file an old marker vouches for (the caller's
/// barrier follows), and the rank files of ranks `world` and above, an
/// earlier save's of a larger world (`hlatc unshard` refuses a directory
/// with more ranks' files than the step has).
pub fn prepare_save(dir: &Path, world: usize, first: bool) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(ShardedCheckpointError::SaveIntoFile {
            dir: dir.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| ShardedCheckpointError::MakeDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    if !first {
        return Ok(());
    }
    let marker = dir.join(COMPLETE);
    match std::fs::remove_file(&marker) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&marker)(e)),
        _ => {}
    }
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if rank_of_file_name(&name).is_some_and(|r| r >= world) {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
        }
    }
    Ok(())
}

/// The rank whose file is named `name` (None: not a rank file's name).
fn rank_of_file_name(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("rank-")?.strip_suffix(".safetensors")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Writes rank `rank`'s `tensors` (in the order given) as its file in
/// `dir`, synced under a temporary name and renamed; its sha256.
pub fn write_rank_file(dir: &Path, rank: usize, tensors: &[(String, Literal)]) -> Result<String> {
    let name = rank_file_name(rank);
    let path = dir.join(&name);
    let bytes = hlatc_runtime::safetensors_bytes(tensors, &path.display().to_string())?;
    place(dir, &name, &bytes)?;
    Ok(sha256_hex(&bytes))
}

/// Writes `bytes` as the file `name` of the checkpoint in `dir`, synced
/// under a temporary name and renamed; its sha256.
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<String> {
    if name.is_empty() || name.contains(['/', '\\']) || name == COMPLETE || name.starts_with('.') {
        return Err(ShardedCheckpointError::BadName {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        });
    }
    place(dir, name, bytes)?;
    Ok(sha256_hex(bytes))
}

/// `bytes` as `dir/name`: written under a temporary name, synced, renamed.
fn place(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = temp_beside(&path, "tmp");
    let placed = write_synced(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path));
    placed.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(&path)(e)
    })
}

/// Waits until `dir`'s entries (files renamed into it) are on disk.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// The checkpoint in `dir` as a load of `world` ranks finds it: the
/// directory, its marker ([`Marker::read`]), its world size, and the files
/// of `ranks` (this process's) against the sha256s it records. Its marker.
pub fn open_for_load(dir: &Path, world: usize, ranks: &[usize]) -> Result<Marker> {
    if !dir.exists() {
        return Err(ShardedCheckpointError::NoDirectory {
            dir: dir.to_path_buf(),
        });
    }
    if !dir.is_dir() {
        return Err(ShardedCheckpointError::NotDirectory {
            dir: dir.to_path_buf(),
        });
    }
    let marker = Marker::read(dir)?;
    marker.check_world(dir, world)?;
    for &rank in ranks {
        let name = rank_file_name(rank);
        let file = dir.join(&name);
        if !file.is_file() {
            return Err(ShardedCheckpointError::Missing { file });
        }
        let sum = sha256_file_hex(&file, io(&file))?;
        if marker.files.get(&name) != Some(&sum) {
            return Err(ShardedCheckpointError::Changed { file });
        }
    }
    Ok(marker)
}

/// Why this process cannot resume from the checkpoint in `dir` of a
/// checkpoint directory (None: it can): no marker, a marker of another
/// step than the directory's name, or one of this process's files (the
/// rank files of `ranks`, the loader files of `replicas` the marker lists,
/// the files every process writes) missing or not matching its sha256.
/// A checkpoint of another world size than `world` is an error, not a
/// reason to pass it over: every older one would be refused too.
pub fn problem(
    dir: &Path,
    world: usize,
    ranks: &[usize],
    replicas: &[usize],
) -> Result<Option<SkipReason>> {
    if !dir.is_dir() {
        return Ok(Some(SkipReason::NotHere));
    }
    let marker = match Marker::read(dir) {
        Ok(m) => m,
        Err(ShardedCheckpointError::NoMarker { .. }) => return Ok(Some(SkipReason::NoMarker)),
        Err(ShardedCheckpointError::NotMarker { message, .. }) => {
            return Ok(Some(SkipReason::MarkerInvalid { message }))
        }
        Err(ShardedCheckpointError::Format { found, .. }) => {
            let found = found.as_deref().unwrap_or("none");
            return Ok(Some(SkipReason::MarkerInvalid {
                message: format!("format {found}, not {FORMAT}"),
            }));
        }
        Err(e) => return Err(e),
    };
    marker.check_world(dir, world)?;
    let named = dir
        .file_name()
        .and_then(|n| step_of_dir_name(&n.to_string_lossy()));
    if let Some(named) = named.filter(|&n| n != marker.steps_done) {
        return Ok(Some(SkipReason::StepMismatch {
            marked: marker.steps_done,
            named,
        }));
    }
    let loader_files: Vec<String> = replicas.iter().map(|&r| loader_file_name(r)).collect();
    let mut names: Vec<String> = ranks.iter().map(|&r| rank_file_name(r)).collect();
    names.extend(
        loader_files
            .iter()
            .filter(|n| marker.files.contains_key(*n))
            .cloned(),
    );
    // Files of neither a rank nor a replica: every process writes them.
    names.extend(
        marker
            .files
            .keys()
            .filter(|n| rank_of_file_name(n).is_none() && !n.starts_with("loader-replica-"))
            .cloned(),
    );
    for name in names {
        let sum = match sha256_file_hex(&dir.join(&name), std::convert::identity) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Some(SkipReason::Missing { name }))
            }
            Err(e) => {
                return Ok(Some(SkipReason::FileUnreadable {
                    kind: e.kind(),
                    message: e.to_string(),
                    name,
                }))
            }
        };
        if marker.files.get(&name) != Some(&sum) {
            return Ok(Some(SkipReason::Corrupt { name }));
        }
    }
    Ok(None)
}

/// The steps of the checkpoint directories in `root` on this process's file
/// system, complete or not, oldest first.
pub fn steps(root: &Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).map_err(io(root))? {
        let entry = entry.map_err(io(root))?;
        let step = step_of_dir_name(&entry.file_name().to_string_lossy());
        if let Some(step) = step.filter(|_| entry.path().is_dir()) {
            out.push(step);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// After the save of step `saved` in `root`: removes the checkpoints before
/// it past the newest `keep` complete ones (`saved` counts as complete:
/// its marker may not have reached this process's disk), and, on process
/// 0 (`first`, which writes every marker, so sees one wherever there is
/// one), the incomplete ones before it. Newer ones are left alone. A
/// directory that cannot be removed stays, to go another time.
pub fn prune(root: &Path, saved: u64, keep: usize, first: bool) -> Result<()> {
    let mut complete = 0;
    for step in steps(root)?.into_iter().rev().filter(|&s| s <= saved) {
        let dir = root.join(step_dir_name(step));
        if step == saved || dir.join(COMPLETE).is_file() {
            complete += 1;
            if complete > keep {
                let _ = std::fs::remove_dir_all(&dir);
            }
        } else if first {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}
