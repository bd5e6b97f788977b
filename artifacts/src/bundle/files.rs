//! The names of a bundle's files and of its format, and the hash that ties
//! the manifest to the module: what every writer and reader of a bundle
//! agrees on.

use hlatc_compiler::util::input_file::{self, NotRegularFile};
use sha2::{Digest, Sha256};

pub const PROTO_FILE: &str = "model.hlo_module.pb";

pub const TEXT_FILE: &str = "model.hlo.txt";

/// The manifest format hlatc writes. Version 2 since issue 48's runs of
/// layers changed the shape of `inputs`/`outputs` (under version 1 an
/// external reader of the old flat lists broke); its JSON Schema is
/// `docs/schema/manifest-v2.json`. Readers take 1 and 2.
pub const BUNDLE_FORMAT: &str = "hlatc-bundle/2";

pub const MANIFEST_FILE: &str = "manifest.json";

pub const FLAGS_FILE: &str = "compile_flags.json";

pub const NEURON_SCRIPT: &str = "neuronx-cc.sh";

/// The lowercase hex SHA-256 of `bytes`: the module hash in the manifest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// [`sha256_hex`] of the regular file at `path` (see
/// [`input_file::open`]), read a block at a time (a rank's file or a
/// checkpoint may be larger than memory should hold twice); `io` makes the
/// caller's error of the operating system's.
pub fn sha256_file_hex<E: From<NotRegularFile>>(
    path: &std::path::Path,
    io: impl Fn(std::io::Error) -> E,
) -> Result<String, E> {
    let (file, len) = input_file::open(path, &io)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::io::Read::take(file, len), &mut hasher).map_err(io)?;
    Ok(hex(&hasher.finalize()))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
