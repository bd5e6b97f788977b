//! [`Error`]: everything running the step can fail with: the artifacts'
//! errors ([`hlatc_artifacts::Error`]) and what only a run meets. It names
//! only the leaf error types of the modules (none of which names it back),
//! so every module may return it without a circle through the crate root.

use crate::loader::LoaderError;
use crate::run_error::RunError;
use crate::verify_failure::VerifyFailure;
use hlatc_artifacts::state_error::StateError;
use hlatc_step::batch_check::BatchError;
use hlatc_step::train_step::StepError;

/// Everything running the step can fail with, each naming the file, input
/// or setting at fault.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum Error {
    /// Reading or writing the step's bundle, checkpoints or state files.
    #[error(transparent)]
    Artifact(#[from] hlatc_artifacts::Error),
    #[error(transparent)]
    Runtime(#[from] hlatc_runtime::RuntimeError),
    #[error(transparent)]
    Loader(#[from] LoaderError),
    /// A check of a written bundle failed (`compile --verify`).
    #[error("verification failed: {0}")]
    Verification(VerifyFailure),
    /// A run's programs, state and inputs that do not fit together.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The artifacts' leaf errors that a run meets too, each reached through
/// [`Error::Artifact`] so that a caller matches one variant wherever it
/// was raised.
macro_rules! through_artifacts {
    ($($leaf:ty),* $(,)?) => {$(
        impl From<$leaf> for Error {
            fn from(e: $leaf) -> Error {
                Error::Artifact(e.into())
            }
        }
    )*};
}

through_artifacts!(
    StateError,
    StepError,
    BatchError,
    hlatc_runtime::TensorFileError,
    hlatc_models::ConfigError,
    hlatc_passes::PassError,
);
