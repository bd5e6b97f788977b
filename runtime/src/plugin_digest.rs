//! The plugin file's sha256, which names the plugin in the executable
//! cache's keys: the same build is the same plugin wherever it lies and
//! whenever it was fetched (each clone fetches its own copy, with a new
//! modification time), and another build is never taken for it, whatever
//! its size and times. Hashing the 260 MB file takes about half a second,
//! so the digest is kept in the cache's directory under the file's path,
//! size, modification time and inode, and read back by every later process
//! while the file stays as it is.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

/// The sha256 (hex) of the plugin at `plugin`, which was `loaded_identity`
/// (size and modification time) when this process loaded it. `None` when
/// the file has changed since, or cannot be read: then no cache key names
/// what this process runs.
pub(crate) fn plugin_digest(
    cache_dir: &Path,
    plugin: &Path,
    loaded_identity: &str,
) -> Option<String> {
    // One plugin per process in practice: the digest of the last asked.
    static LAST: Mutex<Option<(String, String)>> = Mutex::new(None);
    let stamp = stamp(plugin, loaded_identity)?;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let memo = cache_dir.join(format!(
        "{}.plugin-sha256",
        hex(&Sha256::digest(stamp.as_bytes()))
    ));
    if let Some((s, digest)) = last.as_ref() {
        if *s == stamp {
            // Another cache directory of this process may have asked
            // first: this one keeps the digest for later processes too.
            if !memo.exists() {
                let _ = crate::atomic_file::write_atomic(&memo, digest.as_bytes());
            }
            return Some(digest.clone());
        }
    }
    let digest =
        match hlatc_compiler::util::input_file::read_to_string(&memo, std::convert::identity) {
            Ok(d) if is_digest(d.trim()) => d.trim().to_string(),
            _ => {
                let digest = hash_file(plugin)?;
                // Hashed as loaded: a file rewritten meanwhile is not vouched for.
                if self::stamp(plugin, loaded_identity)? != stamp {
                    return None;
                }
                // Only a shortcut: a failed write costs the next process a hash.
                let _ = crate::atomic_file::write_atomic(&memo, digest.as_bytes());
                digest
            }
        };
    *last = Some((stamp, digest.clone()));
    Some(digest)
}

/// The file as it is now: path, inode and the loaded identity, if the file
/// still has it.
fn stamp(plugin: &Path, loaded_identity: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let path = plugin.canonicalize().ok()?;
    if crate::pjrt::file_identity(&path)? != loaded_identity {
        return None;
    }
    let inode = std::fs::metadata(&path).ok()?.ino();
    Some(format!("{} ino={inode} {loaded_identity}", path.display()))
}

fn hash_file(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return Some(hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// `bytes` in lowercase hex: how the cache names its files.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
