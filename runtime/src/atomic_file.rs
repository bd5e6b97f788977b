//! Files that are whole or absent. Every file hlatc writes goes through
//! here: a full disk, a killed process or a failed check never leaves a
//! truncated file where a good one was.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A temporary path beside `path`, in the same directory (so the final
/// rename stays on one file system and is atomic), unique to this process.
pub fn temp_beside(path: &Path, what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    path.with_file_name(format!(".{name}.{what}-{}-{n}", std::process::id()))
}

/// Whether `path` is something other than a regular file that writes go
/// into (`/dev/null`, a terminal, a FIFO): renaming a file over it would
/// replace the device itself (as root, `-o /dev/null` would leave a
/// regular file in its place), so it is written in place instead.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Writes `bytes` to `path` through a temporary file that is synced and then
/// renamed over it. On any error the temporary file is removed and `path`
/// keeps what it held before. A device or FIFO (`/dev/null`, `/dev/stdout`)
/// is written in place: it has no contents to keep whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if is_special(path) {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .write_all(bytes);
    }
    let tmp = temp_beside(path, "tmp");
    let result = (|| {
        write_synced(&tmp, bytes)?;
        // Keep an existing file's permissions (an executable script stays so).
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` with `bytes` and waits until they are on disk: a file
/// that is renamed into place, or a directory that is, must be whole first.
pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// [`write_synced`] for each of `files`, each on a thread of its own:
/// waiting for the disk is most of a small file's cost, and the file
/// system takes the syncs together (on ext4 one journal commit can carry
/// them all) where one after another each would wait its turn. On an
/// error, the first file (in `files`' order) that failed and why; the
/// others may or may not have been written.
pub fn write_synced_all<B: AsRef<[u8]> + Sync>(
    files: &[(PathBuf, B)],
) -> Result<(), (PathBuf, std::io::Error)> {
    std::thread::scope(|s| {
        let writers: Vec<_> = files
            .iter()
            .map(|(path, bytes)| s.spawn(move || write_synced(path, bytes.as_ref())))
            .collect();
        let mut first_error = None;
        for ((path, _), writer) in files.iter().zip(writers) {
            let result = writer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if let (Err(e), None) = (result, &first_error) {
                first_error = Some((path.clone(), e));
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// Why a path cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotWritable {
    #[error("is a directory")]
    IsDirectory,
    #[error("directory {} does not exist", .0.display())]
    NoDirectory(PathBuf),
    #[error("cannot write in {}: {message}", dir.display())]
    CannotCreate { dir: PathBuf, message: String },
}

/// Fails early, before long work, when `path` could not be written: its
/// directory is missing or read-only, or `path` is a directory. Leaves
/// nothing behind.
pub fn check_writable(path: &Path) -> Result<(), NotWritable> {
    if path.is_dir() {
        return Err(NotWritable::IsDirectory);
    }
    if is_special(path) {
        // Written in place (see `write_atomic`): nothing is created beside it.
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(NotWritable::NoDirectory(dir.to_path_buf()));
    }
    let probe = temp_beside(path, "probe");
    std::fs::File::create(&probe).map_err(|e| NotWritable::CannotCreate {
        dir: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
