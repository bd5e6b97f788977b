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

/// Writes `bytes` to `path` through a temporary file that is synced and then
/// renamed over it. On any error the temporary file is removed and `path`
/// keeps what it held before.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
