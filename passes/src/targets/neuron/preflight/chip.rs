//! What a check is for: which Trainium chip `neuronx-cc --target` names,
//! and which SDK release's defaults it compiles with. Both change what is
//! refused: trn2 executes 64-bit integers natively where trn1 narrows
//! them, and the SDK after 2.32 turns the integer downcasts that 2.32 only
//! warns about into errors.

use std::fmt;

/// A chip `neuronx-cc --target` accepts that hlatc checks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chip {
    /// Trainium 1 (NeuronCore-v2); what hlatc's bundles name unless
    /// told `--chip trn2`.
    Trn1,
    /// Trainium 2 (NeuronCore-v3).
    Trn2,
}

impl Chip {
    pub const ALL: [Chip; 2] = [Chip::Trn1, Chip::Trn2];

    /// As `neuronx-cc --target` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Chip::Trn1 => "trn1",
            Chip::Trn2 => "trn2",
        }
    }

    pub fn from_name(s: &str) -> Option<Chip> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// HBM per NeuronCore, as the SDK states it: 16 GiB on Trn1; 24 GiB on
    /// Trn2 with its default logical core of two physical ones (LNC=2).
    pub const fn hbm_per_core(self) -> u64 {
        match self {
            Chip::Trn1 => 16 << 30,
            Chip::Trn2 => 24 << 30,
        }
    }

    /// Physical NeuronCores per logical core a bundle is compiled for:
    /// trn1 has only 1 (neuronx-cc refuses another, NCC_EARG001); trn2's
    /// default is 2, the configuration [`Chip::hbm_per_core`]'s 24 GiB is
    /// that of. The compiler's `--logical-nc-config` and the runtime's
    /// `NEURON_LOGICAL_NC_CONFIG` must agree (the SDK's "Logical
    /// NeuronCore configuration" page).
    pub const fn logical_nc_config(self) -> u32 {
        match self {
            Chip::Trn1 => 1,
            Chip::Trn2 => 2,
        }
    }
}

impl fmt::Display for Chip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which SDK release's compiler defaults a check assumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Sdk {
    /// Neuron 2.32.0 (neuronx-cc 2.27): `--native-int64=default` (64-bit
    /// integers narrowed to 32 bits) and `--implicit-integer-downcast=default`
    /// (ops without an integer datapath run in f32 with a warning).
    #[default]
    V2_32,
    /// The release after 2.32, whose new defaults its release notes
    /// announce: `--native-int64=enabled` on trn2 and
    /// `--implicit-integer-downcast=none`, so those downcasts are errors.
    Next,
}

impl Sdk {
    pub const ALL: [Sdk; 2] = [Sdk::V2_32, Sdk::Next];

    pub fn name(self) -> &'static str {
        match self {
            Sdk::V2_32 => "2.32",
            Sdk::Next => "next",
        }
    }

    pub fn from_name(s: &str) -> Option<Sdk> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }
}

impl fmt::Display for Sdk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
