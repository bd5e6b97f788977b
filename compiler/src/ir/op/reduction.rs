//! Attributes of the reductions: which batch normalization.

use super::description::Arity;

/// Which batch normalization: `batch-norm-training(x, scale, offset)`
/// gives (normalized, mean, variance) over every dimension but the
/// feature one; `batch-norm-inference(x, scale, offset, mean, variance)`
/// normalizes by the given statistics; `batch-norm-grad(x, scale, mean,
/// variance, grad)` gives (d x, d scale, d offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchNormKind {
    Training,
    Inference,
    Grad,
}

impl BatchNormKind {
    pub const ALL: [BatchNormKind; 3] = [
        BatchNormKind::Training,
        BatchNormKind::Inference,
        BatchNormKind::Grad,
    ];

    /// The operand, scale and offset; inference adds the mean and
    /// variance, grad the mean, variance and output gradient.
    pub fn arity(self) -> Arity {
        match self {
            BatchNormKind::Training => Arity::Exactly(3),
            BatchNormKind::Inference | BatchNormKind::Grad => Arity::Exactly(5),
        }
    }

    pub const fn opcode(self) -> &'static str {
        match self {
            BatchNormKind::Training => "batch-norm-training",
            BatchNormKind::Inference => "batch-norm-inference",
            BatchNormKind::Grad => "batch-norm-grad",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.opcode() == s)
    }
}
