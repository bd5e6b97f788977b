//! Precision presets: how the step stores its state and which precision
//! each op computes in. One choice that sets the step's input types, the
//! `amp` pass's cast policy and the default rounding policy together.

use hlatc_compiler::ElementType;
use hlatc_passes::{CastPolicy, RoundingPolicy};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Everything in f32: the program as built.
    Fp32,
    /// Everything in f64: for checking against float64 references
    /// (PyTorch's, in the parity tests), not for training.
    Fp64,
    /// bf16 compute (dots with f32 accumulation; softmax, norms, loss and
    /// optimizer in f32) over f32 master weights and f32 Adam state.
    /// HLAT's 70B recipe.
    #[default]
    Bf16Mixed,
    /// bf16 compute over bf16 weights and bf16 Adam state, updated in f32
    /// and stored back with stochastic rounding. HLAT's 7B recipe.
    Bf16Pure,
}

impl Precision {
    pub const ALL: [Precision; 4] = [
        Precision::Fp32,
        Precision::Bf16Mixed,
        Precision::Bf16Pure,
        Precision::Fp64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp64 => "fp64",
            Precision::Bf16Mixed => "bf16-mixed",
            Precision::Bf16Pure => "bf16-pure",
        }
    }

    pub fn from_name(s: &str) -> Option<Precision> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The type of the weights and the optimizer state the step carries.
    pub fn storage(self) -> ElementType {
        match self {
            Precision::Fp32 | Precision::Bf16Mixed => ElementType::F32,
            Precision::Bf16Pure => ElementType::Bf16,
            Precision::Fp64 => ElementType::F64,
        }
    }

    /// The type the graph is written in before `amp` lowers it, and of the
    /// loss, grad norm and learning rate the step returns.
    pub fn compute(self) -> ElementType {
        match self {
            Precision::Fp64 => ElementType::F64,
            _ => ElementType::F32,
        }
    }

    /// What `amp` casts; `None` for fp32.
    pub fn cast_policy(self) -> Option<CastPolicy> {
        match self {
            Precision::Fp32 | Precision::Fp64 => None,
            Precision::Bf16Mixed | Precision::Bf16Pure => Some(CastPolicy::bf16()),
        }
    }

    /// Stochastic rounding where state is stored back in bf16 (bf16-pure's
    /// weight and moment updates); with f32 state nothing is rounded
    /// stochastically.
    pub fn default_rounding(self) -> RoundingPolicy {
        RoundingPolicy::StateUpdates
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Precision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A manifest's `precision`, read back by name.
impl<'de> serde::Deserialize<'de> for Precision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Precision::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
            serde::de::Error::custom(format!(
                "unknown precision '{name}' (known: {})",
                known.join(", ")
            ))
        })
    }
}
