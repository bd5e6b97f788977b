//! [`Error`]: everything writing and reading the step's artifacts can
//! fail with. It names only the leaf error types of the modules (none of
//! which names it back), so every module may return it without a circle
//! through the crate root.

use crate::bundle::refusal::refusal_message;
use crate::checkpoint::CheckpointError;
use crate::checkpoint_lock::LockError;
use crate::run_identity::RunIdentityError;
use crate::state_error::StateError;
use crate::state_metadata::StateMetadataError;
use hlatc_step::batch_check::BatchError;
use hlatc_step::train_step::StepError;
use std::path::PathBuf;

/// Everything writing or reading the step's artifacts can fail with, each
/// naming the file, input or setting at fault.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum Error {
    /// A file or directory that could not be read or written: the
    /// operating system's error, its kind kept.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file that was read but is not what it should be (a token file's
    /// ids, a bundle's manifest), or a place that cannot be one.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Proto {
        path: PathBuf,
        #[source]
        source: hlatc_compiler::formats::proto::ProtoError,
    },
    #[error("{path}: {source}")]
    Verify {
        path: PathBuf,
        #[source]
        source: hlatc_compiler::VerifyError,
    },
    #[error(transparent)]
    Tensors(#[from] hlatc_runtime::TensorFileError),
    #[error(transparent)]
    Config(#[from] hlatc_models::ConfigError),
    #[error(transparent)]
    Step(#[from] StepError),
    #[error(transparent)]
    Pass(#[from] hlatc_passes::PassError),
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// neuronx-cc would refuse the module (the Neuron pre-flight found a
    /// refusal): nothing was written to `dir`.
    #[error("{}", refusal_message(dir, *chip, findings))]
    NeuronRefused {
        dir: PathBuf,
        /// The chip the bundle was for.
        chip: hlatc_passes::neuron_check::Chip,
        /// The refusals, each located in the bundle's text.
        findings: Vec<hlatc_passes::neuron_check::LocatedFinding>,
    },
    /// A training state, or the tensors a run starts from, that does not
    /// fit the step. Boxed: every fallible call should not be the size of
    /// its largest error.
    #[error(transparent)]
    State(Box<StateError>),
    /// A resume of a checkpoint another run wrote, or its identity unread.
    #[error(transparent)]
    Identity(#[from] RunIdentityError),
    /// A checkpoint directory another run holds.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A rank file of another rank, layout or step.
    #[error(transparent)]
    StateMetadata(#[from] StateMetadataError),
    /// A path that is not a regular file (`/dev/zero`, a FIFO), refused
    /// before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

impl From<StateError> for Error {
    fn from(e: StateError) -> Error {
        Error::State(Box::new(e))
    }
}
