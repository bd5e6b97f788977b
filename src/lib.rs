//! hlatc: an ahead-of-time compiler from Llama-family model definitions to
//! XLA HLO training steps, verified on XLA's CPU backend.
//!
//! This facade re-exports the stable pieces and adds file loading:
//!
//! ```no_run
//! let module = hlatc::load_module("model.hlo.txt".as_ref())?;     // text or HloModuleProto
//! hlatc::save_module(&module, "model.hlo_module.pb".as_ref())?;  // format by extension
//! # Ok::<(), hlatc::Error>(())
//! ```

pub use hlatc_compiler as compiler;
pub use hlatc_models as models;
pub use hlatc_passes as passes;
pub use hlatc_runtime as runtime;

pub use hlatc_compiler::{proto, text, verify, Literal, Module};

pub mod bundle;
pub mod check;
pub mod data;
pub mod train_step;
pub mod trainer;

use std::path::{Path, PathBuf};

/// Everything the facade and CLI can fail with, each naming the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}:{source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: text::ParseError,
    },
    #[error("{path}: {source}")]
    Proto {
        path: PathBuf,
        #[source]
        source: proto::ProtoError,
    },
    #[error("{path}: {source}")]
    Verify {
        path: PathBuf,
        #[source]
        source: compiler::VerifyError,
    },
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    #[error(transparent)]
    Tensors(#[from] runtime::TensorFileError),
    #[error(transparent)]
    Config(#[from] models::ConfigError),
    #[error(transparent)]
    Step(#[from] train_step::StepError),
    #[error(transparent)]
    Pass(#[from] passes::PassError),
    /// A check of a written bundle failed (`compile --verify`).
    #[error("verification failed: {0}")]
    Verification(String),
    /// Standard output or error could not be written (a closed pipe, a
    /// full disk).
    #[error("cannot write to {stream}: {message}")]
    Output {
        stream: &'static str,
        kind: std::io::ErrorKind,
        message: String,
    },
    /// Inputs that do not fit together (checkpoint vs model, flags).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// A reader closed our standard output (`hlatc ... | head`): like other
    /// Unix tools, stop quietly and successfully.
    pub fn is_closed_stdout(&self) -> bool {
        matches!(
            self,
            Error::Output {
                stream: "standard output",
                kind: std::io::ErrorKind::BrokenPipe,
                ..
            }
        )
    }
}

/// On-disk formats of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// XLA HLO text.
    Text,
    /// Serialized `HloModuleProto`.
    Proto,
}

impl Format {
    /// By extension: `.pb` / `.proto` / `.binpb` are protos, anything else text.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("pb" | "proto" | "binpb") => Format::Proto,
            _ => Format::Text,
        }
    }

    /// By content: serialized protos contain control bytes (field tags and
    /// lengths) right from the start; HLO text never does.
    pub fn sniff(bytes: &[u8]) -> Format {
        let head = &bytes[..bytes.len().min(4096)];
        let binary = head
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
        let utf8 = match std::str::from_utf8(head) {
            Ok(_) => true,
            // A multi-byte character cut at the 4096-byte boundary is fine.
            Err(e) => e.error_len().is_none(),
        };
        if binary || !utf8 || head.is_empty() {
            Format::Proto
        } else {
            Format::Text
        }
    }
}

/// Reads a module in either format (decided by content) and verifies it.
pub fn load_module(path: &Path) -> Result<Module, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let module = match Format::sniff(&bytes) {
        Format::Text => {
            let s = std::str::from_utf8(&bytes).map_err(|e| Error::Io {
                path: path.to_path_buf(),
                message: format!("not UTF-8 text: {e}"),
            })?;
            text::parse_module(s).map_err(|source| Error::Parse {
                path: path.to_path_buf(),
                source,
            })?
        }
        Format::Proto => proto::decode_module(&bytes).map_err(|source| Error::Proto {
            path: path.to_path_buf(),
            source,
        })?,
    };
    verify(&module).map_err(|source| Error::Verify {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(module)
}

/// The bytes of `module` in `format`.
pub fn module_bytes(module: &Module, format: Format) -> Vec<u8> {
    match format {
        Format::Text => text::print_module(module).into_bytes(),
        Format::Proto => proto::encode_module(module),
    }
}

/// Writes `module` in the format its extension names.
pub fn save_module(module: &Module, path: &Path) -> Result<(), Error> {
    std::fs::write(path, module_bytes(module, Format::from_path(path))).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
