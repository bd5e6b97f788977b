//! What a check is for: which Trainium chip `neuronx-cc --target` names,
//! and what neuronx-cc is told about integers: `--native-int64` and
//! `--implicit-integer-downcast`, as a bundle pins them or as an SDK
//! release defaults them. Both change what is refused: trn2 and later
//! execute 64-bit integers natively where trn1 narrows them, and the SDK
//! after 2.32 turns the integer downcasts that 2.32 only warns about into
//! errors.

use std::fmt;

/// A chip `neuronx-cc --target` accepts that hlatc checks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chip {
    /// Trainium 1 (NeuronCore-v2); what hlatc's bundles name unless
    /// told `--chip trn2`.
    Trn1,
    /// Trainium 2 (NeuronCore-v3).
    Trn2,
    /// Trainium 3 (NeuronCore-v4): trn2's data types and integer
    /// behaviour, and f8e4m3fn natively (the SDK's data-types page and
    /// NCC_EVRF051). neuronx-cc 2.32's reference does not list it as a
    /// `--target`; the SDK's own NKI samples compile with `--target trn3`.
    Trn3,
}

impl Chip {
    pub const ALL: [Chip; 3] = [Chip::Trn1, Chip::Trn2, Chip::Trn3];

    /// As `neuronx-cc --target` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Chip::Trn1 => "trn1",
            Chip::Trn2 => "trn2",
            Chip::Trn3 => "trn3",
        }
    }

    pub fn from_name(s: &str) -> Option<Chip> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// HBM per NeuronCore, as the SDK states it: 16 GiB on Trn1; 24 GiB on
    /// Trn2 with its default logical core of two physical ones (LNC=2).
    /// Trn3's 144 GiB over its 8 physical cores, two to a logical core, is
    /// 36 GiB; the SDK states the chip's total, not a bank's, so the even
    /// split is hlatc's reading.
    pub const fn hbm_per_core(self) -> u64 {
        match self {
            Chip::Trn1 => 16 << 30,
            Chip::Trn2 => 24 << 30,
            Chip::Trn3 => 36 << 30,
        }
    }

    /// Logical NeuronCores a chip exposes at [`Chip::logical_nc_config`].
    pub const fn cores_per_chip(self) -> u32 {
        match self {
            Chip::Trn1 => 2,
            Chip::Trn2 | Chip::Trn3 => 4,
        }
    }

    /// Whether `--native-int64=enabled` is open to it: trn2 and later
    /// (neuronx-cc's reference); trn1 narrows 64-bit integers always.
    pub const fn has_native_int64(self) -> bool {
        !matches!(self, Chip::Trn1)
    }

    /// Physical NeuronCores per logical core a bundle is compiled for:
    /// trn1 has only 1 (neuronx-cc refuses another, NCC_EARG001); trn2's
    /// default is 2, the configuration [`Chip::hbm_per_core`]'s 24 GiB is
    /// that of; trn3 takes 1 or 2 as trn2 does, and hlatc names 2 on both.
    /// The compiler's `--logical-nc-config` and the runtime's
    /// `NEURON_LOGICAL_NC_CONFIG` must agree (the SDK's "Logical
    /// NeuronCore configuration" page).
    pub const fn logical_nc_config(self) -> u32 {
        match self {
            Chip::Trn1 => 1,
            Chip::Trn2 | Chip::Trn3 => 2,
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
    /// announce: `--native-int64=enabled` on trn2 and later, and
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

    /// The integer flags neuronx-cc assumes where none is given.
    pub const fn integer_flags(self) -> IntegerFlags {
        match self {
            Sdk::V2_32 => IntegerFlags {
                native_int64: false,
                downcast: Downcasts::ALL,
            },
            Sdk::Next => IntegerFlags {
                native_int64: true,
                downcast: Downcasts::NONE,
            },
        }
    }
}

impl From<Sdk> for IntegerFlags {
    fn from(sdk: Sdk) -> IntegerFlags {
        sdk.integer_flags()
    }
}

/// An op without an integer datapath (it computes in f32, or `power` in
/// s32), as `--implicit-integer-downcast` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DowncastOp {
    Dot,
    /// A scatter that combines into its destination (scatter-with-compute).
    Scatter,
    AllReduce,
    ReduceScatter,
    /// `power` on 64-bit integers (it runs on 32).
    Pow,
}

impl DowncastOp {
    pub const ALL: [DowncastOp; 5] = [
        DowncastOp::Dot,
        DowncastOp::Scatter,
        DowncastOp::AllReduce,
        DowncastOp::ReduceScatter,
        DowncastOp::Pow,
    ];

    /// As `--implicit-integer-downcast` lists it.
    pub fn name(self) -> &'static str {
        match self {
            DowncastOp::Dot => "dot",
            DowncastOp::Scatter => "scatter",
            DowncastOp::AllReduce => "all_reduce",
            DowncastOp::ReduceScatter => "reduce_scatter",
            DowncastOp::Pow => "pow",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The ops permitted to run on a lossy downcast; the others are refused
/// (NCC_EVRF035, EVRF060 to EVRF063).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Downcasts(u8);

impl Downcasts {
    pub const NONE: Downcasts = Downcasts(0);
    pub const ALL: Downcasts = Downcasts(0b1_1111);

    pub fn permits(self, op: DowncastOp) -> bool {
        self.0 & op.bit() != 0
    }

    pub fn with(self, op: DowncastOp) -> Downcasts {
        Downcasts(self.0 | op.bit())
    }

    /// As `--implicit-integer-downcast=` takes it: `none`, `all`, or the
    /// ops in the flag's order.
    pub fn flag_value(self) -> String {
        match self {
            Downcasts::NONE => "none".to_string(),
            Downcasts::ALL => "all".to_string(),
            _ => DowncastOp::ALL
                .into_iter()
                .filter(|&op| self.permits(op))
                .map(DowncastOp::name)
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Reads a `--implicit-integer-downcast=` value (`default` is
    /// 2.32's `all`).
    pub fn parse(value: &str) -> Option<Downcasts> {
        match value {
            "none" => Some(Downcasts::NONE),
            "all" | "default" => Some(Downcasts::ALL),
            list => list.split(',').try_fold(Downcasts::NONE, |d, name| {
                let op = DowncastOp::ALL.into_iter().find(|op| op.name() == name)?;
                Some(d.with(op))
            }),
        }
    }
}

/// What neuronx-cc is told about integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntegerFlags {
    /// `--native-int64=enabled`: 64-bit integers run natively (trn2 and
    /// later; trn1 narrows them whatever this says).
    pub native_int64: bool,
    /// `--implicit-integer-downcast`.
    pub downcast: Downcasts,
}

/// The flag names, as neuronx-cc takes them.
const NATIVE_INT64: &str = "--native-int64=";
const IMPLICIT_DOWNCAST: &str = "--implicit-integer-downcast=";

impl IntegerFlags {
    /// Whether `chip` narrows 64-bit integers to 32 bits under these
    /// flags.
    pub fn narrows_int64(self, chip: Chip) -> bool {
        !(self.native_int64 && chip.has_native_int64())
    }

    /// The flags for `neuronx-cc compile` on `chip`: `--native-int64`
    /// only where the chip has it (neuronx-cc's reference: "only
    /// available on trn2 and later").
    pub fn compile_flags(self, chip: Chip) -> Vec<String> {
        let mut flags = Vec::with_capacity(2);
        if chip.has_native_int64() {
            let mode = if self.native_int64 {
                "enabled"
            } else {
                "disabled"
            };
            flags.push(format!("{NATIVE_INT64}{mode}"));
        }
        flags.push(format!("{IMPLICIT_DOWNCAST}{}", self.downcast.flag_value()));
        flags
    }

    /// The flags a compile command line pins, each one it does not from
    /// `defaults`; `Err` names a value neuronx-cc does not take.
    pub fn from_compile_flags(
        flags: &[String],
        defaults: IntegerFlags,
    ) -> Result<PinnedFlags, FlagValueError> {
        let mut out = PinnedFlags {
            flags: defaults,
            pinned: 0,
        };
        for f in flags {
            if let Some(mode) = f.strip_prefix(NATIVE_INT64) {
                out.flags.native_int64 = match mode {
                    "enabled" => true,
                    "disabled" | "default" => false,
                    _ => return Err(FlagValueError(f.clone())),
                };
                out.pinned += 1;
            } else if let Some(value) = f.strip_prefix(IMPLICIT_DOWNCAST) {
                out.flags.downcast =
                    Downcasts::parse(value).ok_or_else(|| FlagValueError(f.clone()))?;
                out.pinned += 1;
            }
        }
        Ok(out)
    }
}

/// A compile flag whose value neuronx-cc does not take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}: not a value neuronx-cc takes")]
pub struct FlagValueError(pub String);

/// Integer flags read from a compile command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedFlags {
    pub flags: IntegerFlags,
    /// How many of the two flags the command line gave.
    pub pinned: usize,
}

impl fmt::Display for Sdk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
