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
    /// bf16 weights for compute and communication, with an f32 master copy
    /// of each kept beside the f32 Adam state (sharded with it under
    /// ZeRO-1): the update is applied to the master, and the weights are
    /// the master rounded to nearest. HLAT's advice for 7B and 70B: "always
    /// use ZeRO-1 with master weights".
    Bf16Master,
    /// `bf16-master` whose linear layers multiply in MXFP8 (OCP MX: E4M3
    /// elements, a power-of-two E8M0 scale per 32 along the contracting
    /// dimension), forward and both backward products, accumulating in
    /// f32; attention's own products, the head and a router stay bf16
    /// (`hlatc_passes::MX_KEPT_SCOPES`). Trn3's MX matmuls run at four
    /// times its BF16 rate.
    Mxfp8,
}

impl Precision {
    pub const ALL: [Precision; 6] = [
        Precision::Fp32,
        Precision::Bf16Mixed,
        Precision::Bf16Pure,
        Precision::Bf16Master,
        Precision::Mxfp8,
        Precision::Fp64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp64 => "fp64",
            Precision::Bf16Mixed => "bf16-mixed",
            Precision::Bf16Pure => "bf16-pure",
            Precision::Bf16Master => "bf16-master",
            Precision::Mxfp8 => "mxfp8",
        }
    }

    pub fn from_name(s: &str) -> Option<Precision> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The type of the weights the step carries (and computes from).
    pub fn storage(self) -> ElementType {
        match self {
            Precision::Fp32 | Precision::Bf16Mixed => ElementType::F32,
            Precision::Bf16Pure | Precision::Bf16Master | Precision::Mxfp8 => ElementType::Bf16,
            Precision::Fp64 => ElementType::F64,
        }
    }

    /// The type of the optimizer state: the Adam moments, and the master
    /// weights where the preset keeps them.
    pub fn optimizer_storage(self) -> ElementType {
        match self {
            Precision::Bf16Master | Precision::Mxfp8 => ElementType::F32,
            other => other.storage(),
        }
    }

    /// Whether the optimizer keeps an f32 master copy of the weights.
    pub fn keeps_master_weights(self) -> bool {
        matches!(self, Precision::Bf16Master | Precision::Mxfp8)
    }

    /// The type gradients are summed, clipped and accumulated in: f32
    /// (HLAT: "FP32 for gradient accumulation and all-reduce"), f64 under
    /// fp64.
    pub fn gradient_sum_type(self) -> ElementType {
        match self {
            Precision::Fp64 => ElementType::F64,
            _ => ElementType::F32,
        }
    }

    /// Bytes of state one parameter costs: its weight, its master copy where
    /// there is one, and its two Adam moments.
    pub fn state_bytes_per_parameter(self) -> i64 {
        let optimizer = self.optimizer_storage().byte_size() as i64;
        let copies = if self.keeps_master_weights() { 3 } else { 2 };
        self.storage().byte_size() as i64 + copies * optimizer
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
            Precision::Bf16Mixed | Precision::Bf16Pure | Precision::Bf16Master => {
                Some(CastPolicy::bf16())
            }
            Precision::Mxfp8 => Some(CastPolicy::mxfp8()),
        }
    }

    /// Stochastic rounding where state is stored back in bf16 (bf16-pure's
    /// weight and moment updates); with f32 state nothing is rounded
    /// stochastically. Master weights keep what rounding would lose, so
    /// their bf16 copy rounds to nearest.
    pub fn default_rounding(self) -> RoundingPolicy {
        match self {
            Precision::Bf16Master | Precision::Mxfp8 => RoundingPolicy::NearestEven,
            _ => RoundingPolicy::StateUpdates,
        }
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
