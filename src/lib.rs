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

pub use hlatc_artifacts as artifacts;
pub use hlatc_compiler as compiler;
pub use hlatc_models as models;
pub use hlatc_passes as passes;
pub use hlatc_runtime as runtime;
pub use hlatc_step as step;
pub use hlatc_train as train;

pub use hlatc_compiler::{formats::proto, formats::text, verify, Literal, Module};

pub use hlatc_artifacts::{
    bundle, checkpoint, checkpoint_lock, initial_inputs, rank_checkpoint, run_identity,
    state_metadata, state_shards,
};
pub use hlatc_step::{
    batch_check, data, grad_accum, kernel_choice, memory_plan, optimizer, precision, rank_inputs,
    sharding, spmd, train_step,
};
pub use hlatc_train::{check, loader, token_data, trainer};

/// Pipeline parallelism in one place: its tick programs as
/// [`hlatc_step::pipeline`] builds them, and as [`hlatc_train::pipeline`]
/// drives them.
pub mod pipeline {
    pub use hlatc_step::pipeline::*;
    pub use hlatc_train::pipeline::*;
}

pub mod compile_step;
pub mod error_code;
pub mod every_error_code;
pub mod fit;
pub mod metrics;
pub mod plan;
pub mod plot;
pub mod step_programs;
pub mod usage;

use hlatc_artifacts::run_identity::FrontEnd;
use std::path::{Path, PathBuf};

/// Everything the facade and CLI can fail with, each naming the file.
///
/// What the training libraries can fail with is [`Error::Artifact`] (a
/// file that cannot be read or written, a config, a pass, a refused step:
/// one [`hlatc_artifacts::Error`]) or [`Error::Train`] (XLA CPU, the data,
/// a run: one [`hlatc_train::Error`]), an artifacts error always the first
/// however it was raised; the variants here are what only the facade adds:
/// reading HLO text, running a module read from a file, writing to the
/// console and fitting a step to its devices.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum Error {
    #[error("{path}:{source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: text::ParseError,
    },
    /// XLA CPU could not compile or run the module read from `path`.
    #[error("{path}: {source}")]
    RunModule {
        path: PathBuf,
        #[source]
        source: runtime::RuntimeError,
    },
    /// Standard output or error could not be written (a closed pipe, a
    /// full disk).
    #[error("cannot write to {stream}: {message}")]
    Output {
        stream: &'static str,
        kind: std::io::ErrorKind,
        message: String,
    },
    /// A rank's memory plan is over its device's memory.
    #[error("{}", does_not_fit(plan, *device_memory, fix.as_ref(), FrontEnd::Cli))]
    DoesNotFit {
        plan: memory_plan::MemoryPlan,
        device_memory: u64,
        fix: Option<compile_step::Fit>,
    },
    /// Options, inputs or files that the command line or the Python
    /// package gave and hlatc refuses, by category (the libraries' errors
    /// are typed; this is the facade's word to its user).
    #[error(transparent)]
    Usage(#[from] usage::Usage),
    /// A compile option's value out of its range, by its typed name.
    #[error(transparent)]
    Option(#[from] compile_step::OptionError),
    /// `compile --verify` found the staged bundle wrong, so it was not
    /// written.
    #[error("verification failed: {source}\nnothing was written to {}; an earlier bundle there is untouched", .out.display())]
    NotWritten {
        out: PathBuf,
        source: Box<hlatc_train::Error>,
    },
    #[error(transparent)]
    Artifact(#[from] hlatc_artifacts::Error),
    #[error(transparent)]
    Train(hlatc_train::Error),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// A `--kernel` (Python's `kernels=`) that names no point or
    /// implementation, or a point twice.
    #[error(transparent)]
    Kernel(#[from] hlatc_step::kernel_choice::KernelChoiceError),
    /// A chip asked of a bundle that is not for Neuron.
    #[error(transparent)]
    Chip(#[from] hlatc_artifacts::bundle::ChipWithoutNeuron),
    /// A metrics file (`train --metrics`, a checkpoint's) that cannot be
    /// read or parsed, by file, line and column.
    #[error(transparent)]
    Metrics(#[from] metrics::MetricsError),
    /// A training state whose tensors do not fit the model's layout.
    #[error("state: {0}")]
    StateLayout(#[from] models::layout::LayoutError),
    /// A tensor read from a file that does not convert to what it feeds
    /// (`what` names the file and tensor).
    #[error("{what}: {source}")]
    Tensor {
        what: String,
        #[source]
        source: compiler::LiteralError,
    },
    /// Inputs refused on one rank of several.
    #[error("rank {rank}: {source}")]
    RankInputs {
        rank: usize,
        #[source]
        source: Box<hlatc_artifacts::Error>,
    },
    /// A parameter of the module read from `path` that cannot be bound
    /// (`hlatc opt --bind`).
    #[error("{}: {source}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: passes::bind::BindError,
    },
    /// A pass that failed on the module read from `path` (`hlatc opt`).
    #[error("{}: {source}", path.display())]
    PassOn {
        path: PathBuf,
        #[source]
        source: passes::PassError,
    },
    /// A curve that could not be drawn, or its PNG written, to `path`.
    #[error("plotting {}: {source}", path.display())]
    Plot {
        path: PathBuf,
        #[source]
        source: plot::PlotError,
    },
    /// A report that could not be written as JSON.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A run's checkpoint directory that cannot be taken up: locked by
    /// another run, written by another run, or without a state.
    #[error(transparent)]
    RunCheckpoint(#[from] fit::checkpoints::RunCheckpointError),
}

/// A rank's plan over its device's memory, with the smallest change that
/// fits, in the words of `front`'s options.
pub fn does_not_fit(
    plan: &memory_plan::MemoryPlan,
    device_memory: u64,
    fix: Option<&compile_step::Fit>,
    front: FrontEnd,
) -> String {
    let (option, fix, tried) = match front {
        FrontEnd::Cli => (
            "--device-memory",
            fix.map(compile_step::Fit::flags),
            "--zero1 or --fsdp, --remat full-layer, --reshard always",
        ),
        FrontEnd::Python => (
            "device_memory",
            fix.map(compile_step::Fit::keywords),
            "zero1=True or fsdp=, remat=\"full-layer\", reshard=\"always\"",
        ),
    };
    let advice = match fix {
        Some(f) => format!("the smallest change that fits: {f}"),
        None => format!("no change tried fits ({tried}, up to 64x the DP replicas or TP)"),
    };
    format!(
        "a rank needs {plan}, over the {} of device memory it has ({option}); {advice}",
        memory_plan::gib(device_memory)
    )
}

/// A run's error, its artifacts' kept apart: [`Error::Artifact`] is every
/// artifacts error, whichever library raised it.
impl From<hlatc_train::Error> for Error {
    fn from(e: hlatc_train::Error) -> Error {
        match e {
            hlatc_train::Error::Artifact(a) => Error::Artifact(a),
            e => Error::Train(e),
        }
    }
}

/// The library errors that [`hlatc_artifacts::Error`] and
/// [`hlatc_train::Error`] already wrap reach the facade's [`Error`] through
/// them, so each is named in one place.
macro_rules! through {
    ($variant:ident: $($source:ty),* $(,)?) => {$(
        impl From<$source> for Error {
            fn from(e: $source) -> Error {
                Error::$variant(e.into())
            }
        }
    )*};
}

through!(Artifact:
    runtime::TensorFileError,
    models::ConfigError,
    train_step::StepError,
    passes::PassError,
    batch_check::BatchError,
    checkpoint::CheckpointError,
    run_identity::RunIdentityError,
    checkpoint_lock::LockError,
    state_metadata::StateMetadataError,
    compiler::util::input_file::NotRegularFile,
);
through!(Train:
    runtime::RuntimeError,
    loader::LoaderError,
    train::run_error::RunError,
);

impl Error {
    /// A file that cannot be read or written.
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Artifact(hlatc_artifacts::Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// A file that was read but is not what it should be.
    pub fn file(path: &Path, message: impl Into<String>) -> Error {
        Error::Artifact(hlatc_artifacts::Error::File {
            path: path.to_path_buf(),
            message: message.into(),
        })
    }

    /// A usage error of category `kind`.
    pub fn usage(kind: usage::UsageKind, message: impl Into<String>) -> Error {
        Error::Usage(usage::Usage {
            kind,
            message: message.into(),
        })
    }

    /// A value outside the range its option or input takes.
    pub fn out_of_range(message: impl Into<String>) -> Error {
        Error::usage(usage::UsageKind::OutOfRange, message)
    }

    /// Options, or an option and what it is given, that do not fit
    /// together.
    pub fn conflict(message: impl Into<String>) -> Error {
        Error::usage(usage::UsageKind::Conflict, message)
    }

    /// Something hlatc does not do (on this target, or yet).
    pub fn unsupported(message: impl Into<String>) -> Error {
        Error::usage(usage::UsageKind::Unsupported, message)
    }

    /// A name, tensor or program asked for that is not there.
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::usage(usage::UsageKind::NotFound, message)
    }

    /// Input that is not what it should be.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::usage(usage::UsageKind::Invalid, message)
    }

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

    /// By content. HLO text never holds control bytes other than tab,
    /// newline and carriage return; a serialized proto has them within its
    /// first bytes (field tags such as 0x12 and short lengths). A stray
    /// non-UTF-8 byte does not make text a proto: it is read as text, and
    /// the error names the byte's line and column.
    pub fn sniff(bytes: &[u8]) -> Format {
        let head = &bytes[..bytes.len().min(4096)];
        let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        let unmarked = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
        let start = unmarked.iter().position(|b| !is_space(b)).unwrap_or(0);
        if let Some(rest) = unmarked[start..].strip_prefix(b"HloModule") {
            if rest.first().is_some_and(is_space) {
                return Format::Text;
            }
        }
        let binary = head
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
        if binary {
            Format::Proto
        } else {
            Format::Text
        }
    }
}

/// Reads a module in either format (decided by content) and verifies it.
/// Instruction names repeated across computations are renamed as XLA
/// renames them; [`load_module_noted`] says which.
pub fn load_module(path: &Path) -> Result<Module, Error> {
    load_module_noted(path).map(|(m, _)| m)
}

/// [`load_module`], with a note for each change made while reading (see
/// [`text::parse_module_noted`]).
pub fn load_module_noted(path: &Path) -> Result<(Module, Vec<String>), Error> {
    let bytes = compiler::util::input_file::read(path, |e| Error::io(path, e))?;
    module_from_bytes_noted(&bytes, path)
}

/// A module from the bytes of HLO text or a serialized `HloModuleProto`
/// (told apart by content), verified; `path` names them in errors.
pub fn module_from_bytes(bytes: &[u8], path: &Path) -> Result<Module, Error> {
    module_from_bytes_noted(bytes, path).map(|(m, _)| m)
}

fn module_from_bytes_noted(bytes: &[u8], path: &Path) -> Result<(Module, Vec<String>), Error> {
    let io = |message: String| Error::file(path, message);
    if bytes.is_empty() {
        return Err(io(
            "the file is empty; expected HLO text or a serialized HloModuleProto".into(),
        ));
    }
    let (module, notes) = match Format::sniff(bytes) {
        Format::Text => {
            let s = std::str::from_utf8(bytes).map_err(|e| {
                let at = e.valid_up_to();
                let before = &bytes[..at];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                let line_start = before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let column = String::from_utf8_lossy(&before[line_start..])
                    .chars()
                    .count()
                    + 1;
                Error::Parse {
                    path: path.to_path_buf(),
                    source: text::ParseError {
                        line,
                        column,
                        message: format!(
                            "byte 0x{:02x} is not UTF-8; HLO text must be UTF-8",
                            bytes[at]
                        ),
                    },
                }
            })?;
            text::parse_module_noted(s).map_err(|source| Error::Parse {
                path: path.to_path_buf(),
                source,
            })?
        }
        Format::Proto => proto::decode_module_noted(bytes).map_err(|source| {
            Error::Artifact(hlatc_artifacts::Error::Proto {
                path: path.to_path_buf(),
                source,
            })
        })?,
    };
    verify(&module).map_err(|source| {
        Error::Artifact(hlatc_artifacts::Error::Verify {
            path: path.to_path_buf(),
            source,
        })
    })?;
    Ok((module, notes))
}

/// The bytes of `module` in `format`.
pub fn module_bytes(module: &Module, format: Format) -> Vec<u8> {
    match format {
        Format::Text => text::print_module(module).into_bytes(),
        Format::Proto => proto::encode_module(module),
    }
}

/// What `format` cannot carry of `module`, a sentence each. HLO text has
/// no syntax for a proto's `device_assignment`, and `HloModuleProto` no
/// field for the module config that text keeps (`replica_count`,
/// `num_partitions`, the SPMD propagation flags, `alias_passthrough_params`). XLA drops them the same
/// way; hlatc says so instead of dropping them silently.
pub fn unwritten(module: &Module, format: Format) -> Vec<String> {
    let mut out = Vec::new();
    match format {
        Format::Text => {
            if let Some(d) = &module.device_assignment {
                out.push(format!(
                    "its device_assignment ({d}) has no HLO text syntax and is not written; the proto form keeps it"
                ));
            }
            out.extend(hlatc_compiler::formats::text::unprintable(module));
        }
        Format::Proto => {
            if !module.devices.is_single() {
                out.push(format!(
                    "replica_count={} and num_partitions={} are module config, which HloModuleProto has no field for, and are not written; the text form keeps them",
                    module.devices.replica_count, module.devices.num_partitions
                ));
            }
            if module.allow_spmd_sharding_propagation != Default::default() {
                out.push(
                    "allow_spmd_sharding_propagation_to_parameters/_to_output are module config, which HloModuleProto has no field for, and are not written; the text form keeps them"
                        .to_string(),
                );
            }
            if module.alias_passthrough_params {
                out.push(
                    "alias_passthrough_params=true is module config, which HloModuleProto has no field for, and is not written; the text form keeps it"
                        .to_string(),
                );
            }
        }
    }
    out
}

/// Writes `module` in the format its extension names.
pub fn save_module(module: &Module, path: &Path) -> Result<(), Error> {
    runtime::atomic_file::write_atomic(path, &module_bytes(module, Format::from_path(path)))
        .map_err(|e| Error::io(path, e))
}

/// The tensor to bind to parameter `name` (`opt --bind`): the file's tensor
/// of that name, or its only tensor.
pub fn read_bound_tensor(path: &Path, name: &str) -> Result<hlatc_compiler::Literal, Error> {
    let mut tensors = runtime::tensors::read_safetensors(path)?;
    if let Some(t) = tensors.remove(name) {
        return Ok(t);
    }
    if tensors.len() == 1 {
        return Ok(tensors.into_values().next().expect("one tensor"));
    }
    Err(Error::not_found(format!(
        "{}: no tensor named '{name}' and not exactly one tensor to choose (tensors: {})",
        path.display(),
        tensors.keys().cloned().collect::<Vec<_>>().join(", ")
    )))
}

/// The Rust examples of the README and the book, compiled and run as
/// doctests so that the docs cannot drift from the API.
#[cfg(doctest)]
mod doc_examples {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/src/library.md")]
    struct Library;
}
