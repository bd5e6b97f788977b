//! Every option of a compile as each front end spells it: the flag of
//! `hlatc compile`, the keyword of Python's `hlatc.compile_step`, and the
//! default both take. [`CompileOptions`](super::CompileOptions) is what
//! they build; this list is what a test holds them to, so an option added
//! to one front end and not the others, or given another default in one,
//! fails (`tests/it/cli.rs` reads `hlatc compile --help` and the book's
//! usage line; `python/tests/test_api.py` reads `compile_step`'s
//! signature, its stub's and `python.md`).

/// One option's spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spelling {
    /// `--flag` without its dashes.
    pub flag: &'static str,
    /// The keyword of `hlatc.compile_step`; `None` for what only the CLI
    /// does (where to write, whether to verify and report).
    pub python: Option<&'static str>,
    pub default: DefaultValue,
}

/// What an option is when not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// A switch, off (`False`).
    Off,
    /// Nothing given: the model's, the target's or the layout's choice,
    /// which `--help` describes in words (`None`).
    Unset,
    /// A list, empty (`()`).
    Empty,
    /// This value, as `--help` prints it and Python's default reads.
    Value(&'static str),
}

const fn both(flag: &'static str, python: &'static str, default: DefaultValue) -> Spelling {
    Spelling {
        flag,
        python: Some(python),
        default,
    }
}

const fn cli(flag: &'static str, default: DefaultValue) -> Spelling {
    Spelling {
        flag,
        python: None,
        default,
    }
}

use DefaultValue::{Empty, Off, Unset, Value};

/// Declares [`CompileOption`] and [`SPELLINGS`] from one list, so an
/// option's typed name and its spellings cannot drift apart.
macro_rules! compile_options {
    ($($option:ident => $spelling:expr,)*) => {
        /// An option of a compile, by a typed name: library errors name an
        /// option by it, and each front end renders it its own way
        /// ([`CompileOption::flag`], [`CompileOption::keyword`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CompileOption {
            $($option,)*
        }

        /// Every option, in the order of `hlatc.compile_step`'s keywords
        /// (the CLI's own options last).
        pub const SPELLINGS: &[Spelling] = &[$($spelling,)*];

        impl CompileOption {
            /// Every option, in [`SPELLINGS`]' order.
            pub const ALL: &[CompileOption] = &[$(CompileOption::$option,)*];
        }
    };
}

compile_options! {
    Model => both("model", "model", Unset),
    Config => both("config", "config", Unset),
    BatchSize => both("batch-size", "batch_size", Unset),
    SeqLen => both("seq-len", "seq_len", Unset),
    Packed => both("packed", "packed", Off),
    SeparateProjections => both("separate-projections", "separate_projections", Off),
    CapacityFactor => both("capacity-factor", "capacity_factor", Unset),
    Precision => both("precision", "precision", Value("bf16-mixed")),
    Rounding => both("rounding", "rounding", Unset),
    Target => both("target", "target", Value("neuron")),
    Chip => both("chip", "chip", Unset),
    Passes => both("passes", "passes", Unset),
    DisablePass => both("disable-pass", "disable_pass", Empty),
    VerifyEachPass => both("verify-each-pass", "verify_each_pass", Off),
    Remat => both("remat", "remat", Value("core-attention")),
    Tp => both("tp", "tp", Value("1")),
    Dp => both("dp", "dp", Value("1")),
    Pp => both("pp", "pp", Value("1")),
    Ep => both("ep", "ep", Value("1")),
    EpExchange => both("ep-exchange", "ep_exchange", Value("all-to-all")),
    SequenceParallel => both("sequence-parallel", "sequence_parallel", Off),
    Zero1 => both("zero1", "zero1", Off),
    LrMax => both("lr-max", "lr_max", Unset),
    LrMin => both("lr-min", "lr_min", Unset),
    WarmupSteps => both("warmup-steps", "warmup_steps", Unset),
    TotalSteps => both("total-steps", "total_steps", Unset),
    Beta1 => both("beta1", "beta1", Unset),
    Beta2 => both("beta2", "beta2", Unset),
    AdamEps => both("adam-eps", "adam_eps", Unset),
    WeightDecay => both("weight-decay", "weight_decay", Unset),
    ClipNorm => both("clip-norm", "clip_norm", Unset),
    ModuleMarkers => both("module-markers", "module_markers", Off),
    DeviceMemory => both("device-memory", "device_memory", Unset),
    GradAccum => both("grad-accum", "grad_accum", Value("1")),
    Spmd => both("spmd", "spmd", Unset),
    RankSource => both("rank-source", "rank_source", Unset),
    ReplicaGroups => both("replica-groups", "replica_groups", Value("explicit")),
    PpSend => both("pp-send", "pp_send", Unset),
    Kernel => both("kernel", "kernels", Unset),
    Out => cli("out", Unset),
    Verify => cli("verify", Off),
    PassReport => cli("pass-report", Off),
}

impl CompileOption {
    pub fn spelling(self) -> &'static Spelling {
        &SPELLINGS[self as usize]
    }

    /// As `hlatc compile` spells it: `--tp`.
    pub fn flag(self) -> String {
        format!("--{}", self.spelling().flag)
    }

    /// As `hlatc.compile_step` spells it (`tp`); the flag without its
    /// dashes for what only the CLI takes.
    pub fn keyword(self) -> &'static str {
        let s = self.spelling();
        s.python.unwrap_or(s.flag)
    }
}
