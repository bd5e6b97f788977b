//! [`VerifyFailure`], on its own so that [`crate::Error`] can wrap it
//! without importing the check that raises it.

use std::path::PathBuf;

/// What `--verify` found wrong with the bundle it read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum VerifyFailure {
    #[error("{} does not decode to the compiled module", .path.display())]
    NotTheModule { path: PathBuf },
    #[error("{} is missing or not JSON", .path.display())]
    Manifest { path: PathBuf },
    #[error("the manifest's sha256 does not match {label}")]
    Sha256 { label: String },
    #[error("two programs")]
    NotTwoPrograms,
    #[error("step {step}: loss {loss} grad norm {grad_norm} are not finite and positive")]
    NotFinite {
        step: i64,
        loss: f64,
        grad_norm: f64,
    },
    #[error("step {step}: loss {loss:.4} is far from ln(vocab) = {uniform:.4} at initialization")]
    FarFromUniform { step: i64, loss: f64, uniform: f64 },
    #[error("step {step}: learning rate {got} but the schedule says {want}")]
    LearningRate { step: i64, got: f64, want: f64 },
    #[error("the step counter reads {0} after 2 steps")]
    StepCounter(i64),
}
