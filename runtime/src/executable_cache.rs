//! An on-disk cache of compiled XLA CPU executables, on only when
//! [`CACHE_DIR_ENV`] names a directory (`scripts/test.sh` sets it to
//! `~/.cache/hlatc-tests/xla`, kept from run to run and clone to clone: the
//! tests compile some programs more than once, in different processes, and
//! every run compiles most of the last run's again).
//!
//! The key is a sha256 of everything that decides what XLA compiles: the
//! `HloModuleProto` bytes handed to PJRT, the serialized compile options,
//! the plugin file's sha256 (`plugin_digest`: the same build wherever it
//! lies, hashed once per copy), the client's platform and devices,
//! `XLA_FLAGS` as this process has it, and the host's processor (XLA CPU compiles for the features of
//! the machine it runs on, so a cache on a disk another machine used must
//! not hand it code its processor lacks). A hit loads the executable the plugin serialized
//! (`PJRT_Executable_DeserializeAndLoad`) instead of compiling; a miss
//! compiles, serializes the executable and writes it to a temporary file
//! that is renamed into place, so another process reads a whole file or
//! none. Every file carries its key and a sha256 of its bytes, checked
//! before the plugin sees them. Whatever goes wrong with the cache (a
//! file unreadable, corrupt, refused by the plugin; a write that fails)
//! falls back to compiling: the cache can make a compile faster, never
//! make it fail or change what it gives.

use crate::pjrt::{self, PjrtError};
use crate::plugin_digest::{hex, plugin_digest};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The environment variable naming the cache's directory. Unset, empty,
/// or naming no directory: no cache.
pub const CACHE_DIR_ENV: &str = "HLATC_XLA_CACHE_DIR";

/// The first bytes of every cache file; a new layout gets a new magic.
// Public for the crate's tests (tests/it/cache_files.rs).
#[doc(hidden)]
pub const MAGIC: &[u8; 8] = b"HLATCXE1";
/// Magic, key, checksum of the payload.
const HEADER_LEN: usize = 8 + 32 + 32;

/// Why the cache could not serve or keep an executable. Never an error of
/// a compile: the runtime compiles instead, and says so in
/// [`CacheOutcome::Fallback`].
#[derive(Debug, Clone, thiserror::Error)]
pub enum CacheError {
    #[error("cannot read cached executable {}: {message}", .path.display())]
    Read {
        path: PathBuf,
        /// The operating system's error, by kind and in words (the error
        /// itself is not `Clone`).
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("cached executable {} is corrupt: {reason}", .path.display())]
    Corrupt { path: PathBuf, reason: &'static str },
    #[error("the plugin refused cached executable {}: {source}", .path.display())]
    Load {
        path: PathBuf,
        #[source]
        source: PjrtError,
    },
    #[error("cannot serialize the executable for the cache: {0}")]
    Serialize(#[source] PjrtError),
    #[error("cannot write cached executable {}: {message}", .path.display())]
    Write {
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
}

/// Where a program's executable came from.
#[derive(Debug, Clone, Default)]
pub enum CacheOutcome {
    /// Compiled; no cache is in use.
    #[default]
    Off,
    /// Loaded from the cache; XLA did not compile it.
    Hit,
    /// Compiled, as the cache had none; written to it unless
    /// [`CacheStats::store_failures`] counts it.
    Miss,
    /// Compiled, as the cache's file was of no use (the error says why);
    /// written to it again unless [`CacheStats::store_failures`] counts it.
    Fallback(CacheError),
}

impl CacheOutcome {
    pub fn is_hit(&self) -> bool {
        matches!(self, CacheOutcome::Hit)
    }
}

/// What one cache has served in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Compiles because a file was unreadable, corrupt or refused.
    pub fallbacks: u64,
    /// Executables compiled but not written (serialization or the write failed).
    pub store_failures: u64,
}

/// A directory of compiled executables (see the module's documentation).
#[derive(Debug)]
pub struct ExecutableCache {
    dir: PathBuf,
    /// `XLA_FLAGS` when the cache was made (XLA reads it once per
    /// process), its surrounding whitespace left out: XLA reads `"-a "` as
    /// `"-a"`, and so must the key, or a script that appends to the flags
    /// (`"-a ${XLA_FLAGS:-}"`) would miss what a shell that set `-a`
    /// compiled. `None` when unset or blank.
    xla_flags: Option<Vec<u8>>,
    hits: AtomicU64,
    misses: AtomicU64,
    fallbacks: AtomicU64,
    store_failures: AtomicU64,
}

impl ExecutableCache {
    /// A cache in `dir`, which the caller has made.
    pub fn new(dir: impl Into<PathBuf>) -> ExecutableCache {
        ExecutableCache::with_xla_flags(dir, std::env::var_os("XLA_FLAGS"))
    }

    /// A cache in `dir` whose keys hold `xla_flags` as this process's
    /// `XLA_FLAGS`: [`ExecutableCache::new`] passes the environment's, and
    /// tests other values.
    pub fn with_xla_flags(dir: impl Into<PathBuf>, xla_flags: Option<OsString>) -> ExecutableCache {
        let xla_flags = xla_flags
            .map(|f| f.as_encoded_bytes().trim_ascii().to_vec())
            .filter(|f| !f.is_empty());
        ExecutableCache {
            dir: dir.into(),
            xla_flags,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
        }
    }

    /// The process's cache, from [`CACHE_DIR_ENV`], read once; `None` when
    /// it names no directory.
    pub fn from_env() -> Option<Arc<ExecutableCache>> {
        static FROM_ENV: OnceLock<Option<Arc<ExecutableCache>>> = OnceLock::new();
        FROM_ENV
            .get_or_init(|| {
                let dir = PathBuf::from(std::env::var_os(CACHE_DIR_ENV)?);
                dir.is_dir().then(|| Arc::new(ExecutableCache::new(dir)))
            })
            .clone()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            store_failures: self.store_failures.load(Ordering::Relaxed),
        }
    }

    /// The executable of `program` compiled with `options` on `client`:
    /// loaded from the cache when it holds it, compiled (and stored)
    /// otherwise. Only the compile's own error is returned.
    pub(crate) fn get_or_compile(
        &self,
        client: &pjrt::Client,
        program: &[u8],
        options: &[u8],
    ) -> Result<(pjrt::LoadedExecutable, CacheOutcome), PjrtError> {
        let Some(key) = self.key(client, program, options) else {
            // The plugin file could not be identified: no key is safe.
            return Ok((client.compile(program, options)?, CacheOutcome::Off));
        };
        let path = self.path(&key);
        let fallback = match self.load(client, &path, &key, options) {
            Ok(Some(exe)) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok((exe, CacheOutcome::Hit));
            }
            Ok(None) => None,
            Err(e) => Some(e),
        };
        let exe = client.compile(program, options)?;
        if self.store(&exe, &path, &key).is_err() {
            self.store_failures.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = match fallback {
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                CacheOutcome::Miss
            }
            Some(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                CacheOutcome::Fallback(e)
            }
        };
        Ok((exe, outcome))
    }

    /// The sha256 of everything that decides the executable, each part
    /// length-prefixed so that no two different inputs run together.
    fn key(&self, client: &pjrt::Client, program: &[u8], options: &[u8]) -> Option<[u8; 32]> {
        let identity = client.plugin_identity()?;
        let plugin = plugin_digest(&self.dir, client.plugin_path(), identity)?;
        let cpu = host_cpu()?;
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(MAGIC);
        part(program);
        part(options);
        part(plugin.as_bytes());
        part(cpu.as_bytes());
        part(client.platform_name().as_bytes());
        let devices: Vec<u8> = client
            .device_ids()
            .iter()
            .flat_map(|id| id.to_le_bytes())
            .collect();
        part(&devices);
        match &self.xla_flags {
            Some(flags) => {
                part(b"XLA_FLAGS");
                part(flags);
            }
            None => part(b"no XLA_FLAGS"),
        }
        Some(h.finalize().into())
    }

    fn path(&self, key: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.xla-executable", hex(key)))
    }

    /// The cached executable, `None` when there is no file.
    fn load(
        &self,
        client: &pjrt::Client,
        path: &Path,
        key: &[u8; 32],
        options: &[u8],
    ) -> Result<Option<pjrt::LoadedExecutable>, CacheError> {
        let bytes = match hlatc_compiler::util::input_file::read(path, std::convert::identity) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(CacheError::Read {
                    path: path.to_path_buf(),
                    kind: e.kind(),
                    message: e.to_string(),
                })
            }
        };
        let payload = check_file(&bytes, key).map_err(|reason| CacheError::Corrupt {
            path: path.to_path_buf(),
            reason,
        })?;
        client
            .deserialize(payload, options)
            .map(Some)
            .map_err(|source| CacheError::Load {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Writes `exe` under `key`: to a temporary file beside its place,
    /// renamed into it. Not synced: a file torn by a crash fails its
    /// checksum, and the cache is only ever a shortcut.
    fn store(
        &self,
        exe: &pjrt::LoadedExecutable,
        path: &Path,
        key: &[u8; 32],
    ) -> Result<(), CacheError> {
        let payload = exe.serialize().map_err(CacheError::Serialize)?;
        let tmp = crate::atomic_file::temp_beside(path, "tmp");
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(key)?;
            f.write_all(&Sha256::digest(&payload))?;
            f.write_all(&payload)?;
            drop(f);
            std::fs::rename(&tmp, path)
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CacheError::Write {
                path: path.to_path_buf(),
                kind: e.kind(),
                message: e.to_string(),
            }
        })
    }
}

/// The host processor as XLA CPU compiles for it: the model and feature
/// flags `/proc/cpuinfo` gives for its first processor, read once. `None`
/// where there is no such file: no key is safe there.
fn host_cpu() -> Option<&'static str> {
    static CPU: OnceLock<Option<String>> = OnceLock::new();
    CPU.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        cpu_identity(&info)
    })
    .as_deref()
}

/// The first processor's `vendor_id`, `model name` and `flags` lines of a
/// `/proc/cpuinfo` (whichever it has; `None` when it has none of them).
// Public for the crate's tests (tests/it/cache_files.rs).
#[doc(hidden)]
pub fn cpu_identity(cpuinfo: &str) -> Option<String> {
    let first = cpuinfo.split("\n\n").next()?;
    let lines: Vec<&str> = first
        .lines()
        .filter(|l| {
            let key = l.split(':').next().unwrap_or("").trim();
            matches!(
                key,
                "vendor_id" | "model name" | "flags" | "Features" | "CPU part"
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The payload of a cache file, when its header is this layout's, names
/// `key` and its checksum matches.
// Public for the crate's tests (tests/it/cache_files.rs).
#[doc(hidden)]
pub fn check_file<'a>(bytes: &'a [u8], key: &[u8; 32]) -> Result<&'a [u8], &'static str> {
    if bytes.len() < HEADER_LEN {
        return Err("shorter than its header");
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    if &header[..8] != MAGIC {
        return Err("not a cache file of this layout");
    }
    if &header[8..40] != key {
        return Err("written for another key");
    }
    if header[40..] != Sha256::digest(payload)[..] {
        return Err("checksum mismatch");
    }
    Ok(payload)
}
