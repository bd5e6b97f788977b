//! One run per checkpoint directory: an advisory lock file that says who
//! holds it.
//!
//! Two runs saving into one directory would remove each other's
//! checkpoints and fail much later with an error that does not say why
//! (`Directory not empty`). So a run takes `DIR/hlatc.lock` before it
//! reads or writes a checkpoint, and a second run is refused at once,
//! naming the holder (pid, host, start time). The file is made whole in
//! one step (written aside, then hard-linked into place, which fails if
//! the lock exists), so a reader never sees half a holder. A run killed
//! with `SIGKILL` leaves its lock behind: the next run on the same host
//! finds its process gone (or its pid reused by a process started later)
//! and takes the lock over with a warning. A lock taken on another host
//! cannot be checked from here and is refused.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The lock's file name in a checkpoint directory.
pub const LOCK_FILE: &str = "hlatc.lock";

/// Who holds a lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    pub pid: u32,
    pub host: String,
    /// When the holder took it, seconds since the Unix epoch.
    pub started: u64,
    /// The holder process's start time (clock ticks after boot, from
    /// `/proc/PID/stat`), to tell a reused pid from the holder.
    #[serde(default)]
    pub process_start: Option<u64>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on host {}, since {}",
            self.pid,
            self.host,
            utc(self.started)
        )
    }
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum LockError {
    #[error(
        "{}: another run holds this checkpoint directory ({holder}); one run saves into a \
         directory at a time (remove {} if that run is gone)",
        dir.display(), dir.join(LOCK_FILE).display()
    )]
    Held { dir: PathBuf, holder: LockHolder },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A held lock; dropping it lets the directory go.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    holder: LockHolder,
}

impl DirLock {
    /// Takes `dir`'s lock (the directory must exist). Returns the lock and,
    /// when it took over a lock whose process is gone, that stale holder
    /// (for a warning).
    pub fn acquire(dir: &Path) -> Result<(DirLock, Option<LockHolder>), LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| LockError::Io { path: p, source }
        };
        let me = LockHolder {
            pid: std::process::id(),
            host: hostname(),
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            process_start: process_start(std::process::id()),
        };
        let text = serde_json::to_string(&me).expect("a holder serializes");
        let aside = dir.join(format!(".{LOCK_FILE}.{}", me.pid));
        hlatc_runtime::atomic_file::write_synced(&aside, text.as_bytes()).map_err(io(&aside))?;
        let mut taken_over = None;
        // Twice at most: once, and once more after removing a stale lock.
        let result = loop {
            match std::fs::hard_link(&aside, &path) {
                Ok(()) => break Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => break Err(io(&path)(e)),
            }
            let holder = match read_holder(&path) {
                Ok(Some(h)) => h,
                // Removed between our link and our read: try again.
                Ok(None) => continue,
                Err(e) => break Err(e),
            };
            if taken_over.is_some() || is_alive(&holder) {
                break Err(LockError::Held {
                    dir: dir.to_path_buf(),
                    holder,
                });
            }
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    break Err(io(&path)(e));
                }
            }
            taken_over = Some(holder);
        };
        let _ = std::fs::remove_file(&aside);
        result?;
        Ok((DirLock { path, holder: me }, taken_over))
    }

    /// Who holds it: this process.
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Only our own lock: a run that took over a lock it thought stale
        // must not lose it to us.
        if let Ok(Some(h)) = read_holder(&self.path) {
            if h == self.holder {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// The holder recorded in `path` (`None` if there is no lock). A lock that
/// cannot be parsed is one whose writer crashed before linking it, which
/// cannot happen with the link; it reads as held by nobody alive.
fn read_holder(path: &Path) -> Result<Option<LockHolder>, LockError> {
    match hlatc_compiler::util::input_file::read_to_string(path, std::convert::identity) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).unwrap_or(LockHolder {
            pid: 0,
            host: hostname(),
            started: 0,
            process_start: None,
        }))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LockError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether `holder`'s process still runs. One on another host, or where
/// `/proc` cannot tell, is taken to run.
fn is_alive(holder: &LockHolder) -> bool {
    if holder.host != hostname() {
        return true;
    }
    if holder.pid == 0 {
        return false;
    }
    if !Path::new("/proc/self/stat").exists() {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", holder.pid)) else {
        return false;
    };
    let fields = stat_fields(&stat);
    // A zombie (killed, not yet reaped) saves nothing more.
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return false;
    }
    match (holder.process_start, process_start_of(&fields)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

/// The fields of `/proc/PID/stat` after the command name (which may hold
/// spaces and parentheses): the state first.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rfind(')')
        .map_or(Vec::new(), |i| stat[i + 1..].split_whitespace().collect())
}

/// Field 22 of `/proc/PID/stat`, the process's start after boot: the 20th
/// after the command name.
fn process_start_of(fields: &[&str]) -> Option<u64> {
    fields.get(19).and_then(|s| s.parse().ok())
}

fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    process_start_of(&stat_fields(&stat))
}

/// This machine's name, as `hostname` prints it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Seconds since the epoch as a UTC date and time
/// (`2026-11-26 14:03:07 UTC`).
fn utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hlatc-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_held_lock_is_refused_naming_its_holder_and_released_on_drop() {
        let d = scratch("held");
        let (lock, stale) = DirLock::acquire(&d).unwrap();
        assert!(stale.is_none());
        let e = DirLock::acquire(&d).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!(
                "another run holds this checkpoint directory (pid {}",
                std::process::id()
            )),
            "{text}"
        );
        drop(lock);
        assert!(!d.join(LOCK_FILE).exists());
        DirLock::acquire(&d).unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_dead_process_lock_is_taken_over() {
        let d = scratch("stale");
        // A pid that cannot be running: above the kernel's pid_max.
        let dead = LockHolder {
            pid: 4_194_304 + 7,
            host: hostname(),
            started: 0,
            process_start: None,
        };
        std::fs::write(d.join(LOCK_FILE), serde_json::to_string(&dead).unwrap()).unwrap();
        let (_lock, stale) = DirLock::acquire(&d).unwrap();
        assert_eq!(stale, Some(dead));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn dates_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
