//! What a bundle is for: XLA CPU, or neuronx-cc for one Trainium chip.
//! The passes need only the compiler ([`Target`]); the bundle's flags, its
//! runtime environment, its pre-flight and the memory its plan is held to
//! need the chip too.

use hlatc_passes::neuron_check::Chip;
use hlatc_passes::Target;
use std::fmt;

/// The compiler a bundle is written for and, for Neuron, the chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BundleTarget {
    Cpu,
    Neuron(Chip),
}

/// A chip asked for where the bundle has none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the chip {0} is for a neuron bundle; a cpu bundle runs on XLA CPU and names no chip")]
pub struct ChipWithoutNeuron(pub Chip);

impl BundleTarget {
    /// A Neuron bundle for trn1, the default chip.
    pub const TRN1: BundleTarget = BundleTarget::Neuron(Chip::Trn1);
    /// A Neuron bundle for trn2 at its default logical core (LNC=2).
    pub const TRN2: BundleTarget = BundleTarget::Neuron(Chip::Trn2);

    /// `target` for `chip`: trn1 when a Neuron bundle names none; a chip
    /// for a cpu bundle is refused rather than ignored.
    pub fn choose(target: Target, chip: Option<Chip>) -> Result<Self, ChipWithoutNeuron> {
        match (target, chip) {
            (Target::Neuron, chip) => Ok(BundleTarget::Neuron(chip.unwrap_or(Chip::Trn1))),
            (Target::Cpu, None) => Ok(BundleTarget::Cpu),
            (Target::Cpu, Some(chip)) => Err(ChipWithoutNeuron(chip)),
        }
    }

    /// The compiler, as the passes know it.
    pub fn target(self) -> Target {
        match self {
            BundleTarget::Cpu => Target::Cpu,
            BundleTarget::Neuron(_) => Target::Neuron,
        }
    }

    /// The chip a Neuron bundle is compiled for.
    pub fn chip(self) -> Option<Chip> {
        match self {
            BundleTarget::Cpu => None,
            BundleTarget::Neuron(chip) => Some(chip),
        }
    }

    /// The target's name (`neuron`, `cpu`), as manifests write it.
    pub fn name(self) -> &'static str {
        self.target().name()
    }
}

/// `neuron (trn2)`, `cpu`.
impl fmt::Display for BundleTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BundleTarget::Cpu => f.write_str("cpu"),
            BundleTarget::Neuron(chip) => write!(f, "neuron ({chip})"),
        }
    }
}
