//! Which converts to a low type round stochastically: the policy
//! `annotate-rounding` applies.

use hlatc_compiler::{InstrId, Module};
use std::fmt;
use std::sync::Arc;

/// The frontend attribute that marks a convert rounding stochastically. A
/// convert without it rounds to nearest even, as XLA defines.
pub const ROUNDING_ATTRIBUTE: &str = "hlatc_rounding";
/// [`ROUNDING_ATTRIBUTE`]'s value for stochastic rounding.
pub const STOCHASTIC: &str = "stochastic";

/// How one convert rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    NearestEven,
    Stochastic,
}

/// A user's choice per convert: the module and the convert (an f32 to low
/// convert of the entry computation).
pub type RoundingChooser = Arc<dyn Fn(&Module, InstrId) -> Rounding + Send + Sync>;

/// Which converts to the low type round stochastically.
#[derive(Clone, Default)]
pub enum RoundingPolicy {
    /// Round to nearest even everywhere (`rne`).
    NearestEven,
    /// Every convert from f32 to bf16 rounds stochastically (`sr`).
    Stochastic,
    /// Stochastic rounding on converts that write carried state (an output
    /// aliased to an input: weights and optimizer state), nearest even
    /// elsewhere (`state-updates`, the default). HLAT's 7B recipe.
    #[default]
    StateUpdates,
    /// The caller decides per convert; the name is what a manifest records.
    Custom(String, RoundingChooser),
}

impl RoundingPolicy {
    /// The policies `--rounding` can name.
    pub const NAMES: [&'static str; 3] = ["rne", "sr", "state-updates"];

    pub fn name(&self) -> &str {
        match self {
            RoundingPolicy::NearestEven => "rne",
            RoundingPolicy::Stochastic => "sr",
            RoundingPolicy::StateUpdates => "state-updates",
            RoundingPolicy::Custom(name, _) => name,
        }
    }

    pub fn from_name(s: &str) -> Option<RoundingPolicy> {
        match s {
            "rne" => Some(RoundingPolicy::NearestEven),
            "sr" => Some(RoundingPolicy::Stochastic),
            "state-updates" => Some(RoundingPolicy::StateUpdates),
            _ => None,
        }
    }
}

impl fmt::Debug for RoundingPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for RoundingPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
