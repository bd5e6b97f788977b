//! Finding XLA's CPU PJRT plugin: jaxlib 0.11's XLA (`pjrt_c_api_cpu_plugin.so`
//! from the `lammps-jax-pjrt-cpu==0.11.2` wheel on PyPI), or OpenXLA's older
//! `xla_cpu_pjrt.so` (`xla-cpu-pjrt==0.0.1`), as
//! `scripts/fetch-xla-cpu-plugin.sh` fetches them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Environment variable naming the plugin file explicitly.
pub const PLUGIN_ENV: &str = "HLATC_PJRT_PLUGIN";

/// Where `scripts/fetch-xla-cpu-plugin.sh` unpacks each wheel, relative to
/// the repository root, in the order they are taken: the default first.
pub const CACHE_RELATIVE: [&str; 2] = [
    ".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
    ".cache/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
];

/// The command that fetches the plugin, for error messages.
pub const FETCH_HINT: &str =
    "run `scripts/fetch-xla-cpu-plugin.sh` in the hlatc repository (it runs \
`pip download --no-deps lammps-jax-pjrt-cpu==0.11.2` and unpacks the wheel into .cache/), \
or set HLATC_PJRT_PLUGIN to the path of an XLA CPU PJRT plugin";

/// Candidate plugin paths, in search order: `$HLATC_PJRT_PLUGIN`, then the
/// caches under the current directory and its ancestors, then under the
/// executable's ancestors, then under the source tree hlatc was built
/// from; in each folder, the default plugin before the older one.
pub fn candidate_paths() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(PLUGIN_ENV) {
        out.push(PathBuf::from(p));
        return out;
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    for r in roots {
        for rel in CACHE_RELATIVE {
            let p = r.join(rel);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The first candidate that exists.
pub fn find_plugin() -> Result<PathBuf, Vec<PathBuf>> {
    let candidates = candidate_paths();
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(candidates)
}

/// Checks that `path` is a whole 64-bit ELF shared object before it is
/// loaded: `dlopen` of a truncated file maps pages past its end, and the
/// first touch of one kills the process with SIGBUS. When the wheel's
/// `RECORD` lies beside the install (as `scripts/fetch-xla-cpu-plugin.sh`
/// leaves it), the size must also match what it lists.
pub fn check_plugin_file(path: &Path) -> Result<(), PluginFileError> {
    use std::io::Read;
    let (mut file, size) =
        hlatc_compiler::util::input_file::open(path, |e| PluginFileError::Unreadable(Arc::new(e)))?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header)
        .map_err(|_| PluginFileError::TooShort { size })?;
    if &header[..4] != b"\x7fELF" {
        return Err(PluginFileError::NotElf);
    }
    if header[4] != 2 || header[5] != 1 {
        return Err(PluginFileError::Not64BitLittleEndian);
    }
    let u64_at = |o: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&header[o..o + 8]);
        u64::from_le_bytes(bytes)
    };
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([header[o], header[o + 1]]));
    // The section header table is the last thing a linker writes.
    let table_end = u64_at(0x28).saturating_add(u16_at(0x3A).saturating_mul(u16_at(0x3C)));
    if table_end > size {
        return Err(PluginFileError::Truncated { size, table_end });
    }
    if let Some(listed) = record_size(path) {
        if listed != size {
            return Err(PluginFileError::SizeMismatch { size, listed });
        }
    }
    Ok(())
}

/// Why a file is not a plugin `dlopen` could load safely.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginFileError {
    /// Its metadata could not be read (missing, or no permission).
    #[error("cannot read it: {0}")]
    Unreadable(#[source] Arc<std::io::Error>),
    /// Shorter than an ELF header.
    #[error("{size} bytes is too short for a shared library")]
    TooShort { size: u64 },
    /// No ELF magic at its start.
    #[error("not an ELF shared library")]
    NotElf,
    /// An ELF file of another class or byte order, which this process
    /// cannot map.
    #[error("not a 64-bit little-endian ELF file")]
    Not64BitLittleEndian,
    /// Cut short before the section table the header points at.
    #[error("truncated: {size} bytes, but its section table ends at byte {table_end}")]
    Truncated { size: u64, table_end: u64 },
    /// The wheel's `RECORD` lists another size: an interrupted install.
    #[error("{size} bytes, but the wheel's RECORD lists {listed}: the install is incomplete")]
    SizeMismatch { size: u64, listed: u64 },
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

/// The size `RECORD` lists for the plugin, when it lies in an unpacked
/// wheel the way the fetch script leaves one: a `*.dist-info/RECORD` in a
/// folder one to three levels above it (`xla-cpu-pjrt`'s
/// `xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so`, or
/// `lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so`).
fn record_size(path: &Path) -> Option<u64> {
    path.ancestors().skip(1).take(3).find_map(|root| {
        let rel = path.strip_prefix(root).ok()?.to_str()?.replace('\\', "/");
        let dist_info = std::fs::read_dir(root).ok()?.find_map(|e| {
            let p = e.ok()?.path();
            p.extension().is_some_and(|x| x == "dist-info").then_some(p)
        })?;
        let record = std::fs::read_to_string(dist_info.join("RECORD")).ok()?;
        record.lines().find_map(|line| {
            let mut fields = line.rsplitn(3, ',');
            let size = fields.next()?;
            let _hash = fields.next()?;
            (fields.next()? == rel).then(|| size.parse().ok())?
        })
    })
}
