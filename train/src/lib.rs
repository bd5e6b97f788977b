//! The training step as a library: what `hlatc compile` and `hlatc train`
//! are built from, and what a training stack embeds.
//!
//! - [`optimizer`]: AdamW, global grad-norm clipping and the learning-rate
//!   schedule, built into the graph;
//! - [`precision`]: the precision presets (storage type, cast and rounding
//!   policy);
//! - [`train_step`]: forward, backward and update in one module, every
//!   input and output described by its role ([`train_step::StateLayout`]);
//! - [`sharding`]: a sharded step's gradient all-reduce and global norm;
//!   [`rank_inputs`]: which part of each input a rank takes; [`zero1`]:
//!   the optimizer state divided over the DP replicas; [`memory_plan`]:
//!   what a rank needs in device memory;
//! - [`bundle`]: the module, its manifest and the Neuron compile flags on
//!   disk, written whole or not at all; [`check`] re-reads and runs one;
//! - [`trainer`], [`data`], [`token_data`]: running the step on XLA CPU;
//!   [`loader`]: text or token ids, tokenized and packed as training runs;
//!   [`checkpoint`]: the checkpoints a run saves as it goes and resumes from;
//!   [`run_identity`]: what defines a run, recorded in them and checked on resume;
//!   [`checkpoint_lock`]: one run per checkpoint directory; [`state_metadata`]:
//!   whose rank, layout, step and run a state file holds;
//!   [`initial_inputs`]: every input's start value, from its role;
//!   [`batch_check`]: token, target and segment ids checked before a run.

pub mod batch_check;
pub mod bundle;
pub mod check;
pub mod checkpoint;
pub mod checkpoint_lock;
pub mod data;
pub mod device_state;
pub mod grad_accum;
pub mod initial_inputs;
pub mod loader;
mod memory_parts;
pub mod memory_plan;
pub mod optimizer;
pub mod pipeline;
mod pipeline_form;
pub mod precision;
pub mod rank_checkpoint;
pub mod rank_inputs;
pub mod run_error;
pub mod run_identity;
pub mod sharding;
pub mod spmd;
pub mod state_error;
pub mod state_metadata;
pub mod state_shards;
pub mod token_data;
pub mod train_step;
pub mod trainer;
pub mod zero1;

use std::path::PathBuf;

/// Everything the training library can fail with, each naming the file,
/// input or setting at fault.
#[derive(Debug, thiserror::Error)]
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
    Runtime(#[from] hlatc_runtime::RuntimeError),
    #[error(transparent)]
    Tensors(#[from] hlatc_runtime::TensorFileError),
    #[error(transparent)]
    Config(#[from] hlatc_models::ConfigError),
    #[error(transparent)]
    Step(#[from] train_step::StepError),
    #[error(transparent)]
    Pass(#[from] hlatc_passes::PassError),
    #[error(transparent)]
    Batch(#[from] batch_check::BatchError),
    #[error(transparent)]
    Loader(#[from] loader::LoaderError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
    /// neuronx-cc would refuse the module (the Neuron pre-flight found a
    /// refusal): nothing was written to `dir`.
    #[error("{}", bundle::refusal_message(dir, findings))]
    NeuronRefused {
        dir: PathBuf,
        /// The refusals, each located in the bundle's text.
        findings: Vec<hlatc_passes::neuron_check::LocatedFinding>,
    },
    /// A check of a written bundle failed (`compile --verify`).
    #[error("verification failed: {0}")]
    Verification(check::VerifyFailure),
    /// A training state, or the tensors a run starts from, that does not
    /// fit the step. Boxed: every fallible call should not be the size of
    /// its largest error.
    #[error(transparent)]
    State(Box<state_error::StateError>),
    /// A run's programs, state and inputs that do not fit together.
    #[error(transparent)]
    Run(#[from] run_error::RunError),
    /// A resume of a checkpoint another run wrote, or its identity unread.
    #[error(transparent)]
    Identity(#[from] run_identity::RunIdentityError),
    /// A checkpoint directory another run holds.
    #[error(transparent)]
    Lock(#[from] checkpoint_lock::LockError),
    /// A rank file of another rank, layout or step.
    #[error(transparent)]
    StateMetadata(#[from] state_metadata::StateMetadataError),
    /// An end-of-document id outside the vocabulary.
    #[error("--eos {eos} is outside the vocabulary 0..{vocab}")]
    EosOutsideVocabulary { eos: i64, vocab: i64 },
}

impl From<state_error::StateError> for Error {
    fn from(e: state_error::StateError) -> Error {
        Error::State(Box::new(e))
    }
}
