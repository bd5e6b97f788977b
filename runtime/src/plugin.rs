//! Finding the XLA CPU PJRT plugin (`xla_cpu_pjrt.so` from the
//! `xla-cpu-pjrt==0.0.1` wheel on PyPI).

use std::path::{Path, PathBuf};

/// Environment variable naming the plugin file explicitly.
pub const PLUGIN_ENV: &str = "HLATC_PJRT_PLUGIN";

/// Where `scripts/fetch-xla-cpu-plugin.sh` unpacks the wheel, relative to the
/// repository root.
pub const CACHE_RELATIVE: &str = ".cache/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";

/// The command that fetches the plugin, for error messages.
pub const FETCH_HINT: &str =
    "run `scripts/fetch-xla-cpu-plugin.sh` in the hlatc repository (it runs \
`pip download --no-deps xla-cpu-pjrt==0.0.1` and unpacks the wheel into .cache/), \
or set HLATC_PJRT_PLUGIN to the path of xla_cpu_pjrt.so";

/// Candidate plugin paths, in search order: `$HLATC_PJRT_PLUGIN`, then the
/// cache under the current directory and its ancestors, then under the
/// executable's ancestors, then under the source tree hlatc was built from.
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
        let p = r.join(CACHE_RELATIVE);
        if !out.contains(&p) {
            out.push(p);
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
