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

/// Every option, in the order of `hlatc.compile_step`'s keywords (the
/// CLI's own options last).
pub const SPELLINGS: [Spelling; 42] = [
    both("model", "model", Unset),
    both("config", "config", Unset),
    both("batch-size", "batch_size", Unset),
    both("seq-len", "seq_len", Unset),
    both("packed", "packed", Off),
    both("separate-projections", "separate_projections", Off),
    both("capacity-factor", "capacity_factor", Unset),
    both("precision", "precision", Value("bf16-mixed")),
    both("rounding", "rounding", Unset),
    both("target", "target", Value("neuron")),
    both("chip", "chip", Unset),
    both("passes", "passes", Unset),
    both("disable-pass", "disable_pass", Empty),
    both("verify-each-pass", "verify_each_pass", Off),
    both("remat", "remat", Value("core-attention")),
    both("tp", "tp", Value("1")),
    both("dp", "dp", Value("1")),
    both("pp", "pp", Value("1")),
    both("ep", "ep", Value("1")),
    both("ep-exchange", "ep_exchange", Value("all-to-all")),
    both("sequence-parallel", "sequence_parallel", Off),
    both("zero1", "zero1", Off),
    both("lr-max", "lr_max", Unset),
    both("lr-min", "lr_min", Unset),
    both("warmup-steps", "warmup_steps", Unset),
    both("total-steps", "total_steps", Unset),
    both("beta1", "beta1", Unset),
    both("beta2", "beta2", Unset),
    both("adam-eps", "adam_eps", Unset),
    both("weight-decay", "weight_decay", Unset),
    both("clip-norm", "clip_norm", Unset),
    both("module-markers", "module_markers", Off),
    both("device-memory", "device_memory", Unset),
    both("grad-accum", "grad_accum", Value("1")),
    both("spmd", "spmd", Unset),
    both("rank-source", "rank_source", Unset),
    both("replica-groups", "replica_groups", Value("explicit")),
    both("pp-send", "pp_send", Unset),
    both("kernel", "kernels", Unset),
    cli("out", Unset),
    cli("verify", Off),
    cli("pass-report", Off),
];
