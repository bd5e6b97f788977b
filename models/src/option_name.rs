//! Options as the libraries' messages name them: by a typed name, which
//! each front end spells its own way. `hlatc compile` reads `--tp 3`, and
//! `hlatc.compile_step` reads `tp=3`; a refusal should name the option as
//! the reader wrote it. A message writes [`OptionName::Tp.set(3)`](OptionName::set)
//! or [`OptionName::Tp.named()`](OptionName::named), and the process's
//! [`Spelling`] writes the words: flags, unless a front end that spells
//! keywords (the Python package) said so when it started.
//!
//! The spelling is the process's, not a message's, because a message is
//! made wherever its error is displayed: deep in a search's worker thread
//! as often as at the front end. One process is one front end.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// An option a library's message names. Its typed name is the Python
/// keyword, and its flag that name in kebab case (the root crate's test of
/// the option table holds both to the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::EnumIter)]
pub enum OptionName {
    Tp,
    Dp,
    Pp,
    Ep,
    Fsdp,
    Cp,
    SequenceParallel,
    Zero1,
    CpBalance,
    CpExchange,
    EpExchange,
    Reshard,
    SeqLen,
    GradAccum,
    Packed,
    /// How a corpus's documents fill rows (the loader's, `hlatc train`'s).
    Packing,
    PpSend,
    BatchSize,
    /// A kernel point's implementation (`--kernel POINT=IMPL`, Python's
    /// `kernels={POINT: IMPL}`).
    Kernel,
    Remat,
    Spmd,
    RankSource,
    CapacityFactor,
    Precision,
    /// The loader's: the field of a JSONL record that holds the text.
    TextField,
    /// The loader's: the tokenizer text is encoded with.
    Tokenizer,
    /// A run's: how many checkpoints it keeps.
    Keep,
}

impl OptionName {
    /// Its typed name: `sequence_parallel`.
    pub const fn keyword(self) -> &'static str {
        match self {
            OptionName::Tp => "tp",
            OptionName::Dp => "dp",
            OptionName::Pp => "pp",
            OptionName::Ep => "ep",
            OptionName::Fsdp => "fsdp",
            OptionName::Cp => "cp",
            OptionName::SequenceParallel => "sequence_parallel",
            OptionName::Zero1 => "zero1",
            OptionName::CpBalance => "cp_balance",
            OptionName::CpExchange => "cp_exchange",
            OptionName::EpExchange => "ep_exchange",
            OptionName::Reshard => "reshard",
            OptionName::SeqLen => "seq_len",
            OptionName::GradAccum => "grad_accum",
            OptionName::Packed => "packed",
            OptionName::Packing => "packing",
            OptionName::PpSend => "pp_send",
            OptionName::BatchSize => "batch_size",
            OptionName::Kernel => "kernels",
            OptionName::Remat => "remat",
            OptionName::Spmd => "spmd",
            OptionName::RankSource => "rank_source",
            OptionName::CapacityFactor => "capacity_factor",
            OptionName::Precision => "precision",
            OptionName::TextField => "text_field",
            OptionName::Tokenizer => "tokenizer",
            OptionName::Keep => "keep",
        }
    }

    /// As the command line spells it: `--sequence-parallel`.
    pub fn flag(self) -> String {
        match self {
            // One request a flag, many a keyword: `--kernel`, `kernels=`.
            OptionName::Kernel => "--kernel".to_string(),
            _ => format!("--{}", self.keyword().replace('_', "-")),
        }
    }

    /// The option by name, as the process spells it: `--tp` or `tp`.
    pub fn named(self) -> Named {
        Named(self)
    }

    /// The option given `value`, as the process spells it: `--tp 3` or
    /// `tp=3`.
    pub fn set<T: fmt::Display>(self, value: T) -> Set<T> {
        Set(self, value)
    }
}

/// How this process's messages spell an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// The command line's: `--tp 3`. The default.
    Flags,
    /// Keyword arguments: `tp=3`.
    Keywords,
}

static KEYWORDS: AtomicBool = AtomicBool::new(false);

/// Makes every message of this process spell options as `spelling` does:
/// what a front end says once, as it starts.
pub fn spell_as(spelling: Spelling) {
    KEYWORDS.store(spelling == Spelling::Keywords, Ordering::Relaxed);
}

/// How this process's messages spell options.
pub fn spelling() -> Spelling {
    match KEYWORDS.load(Ordering::Relaxed) {
        true => Spelling::Keywords,
        false => Spelling::Flags,
    }
}

/// [`OptionName::named`].
#[derive(Clone, Copy, Debug)]
pub struct Named(OptionName);

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match spelling() {
            Spelling::Flags => f.write_str(&self.0.flag()),
            Spelling::Keywords => f.write_str(self.0.keyword()),
        }
    }
}

/// [`OptionName::set`].
#[derive(Clone, Copy, Debug)]
pub struct Set<T>(OptionName, T);

impl<T: fmt::Display> fmt::Display for Set<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (option, value) = (self.0, self.1.to_string());
        match (spelling(), option, value.split_once('=')) {
            // Python's kernel requests are a dict of point to implementation.
            (Spelling::Keywords, OptionName::Kernel, Some((point, implementation))) => {
                write!(f, "{}={{{point:?}: {implementation:?}}}", option.keyword())
            }
            _ => f.write_str(&spell_set(&option.flag(), option.keyword(), value)),
        }
    }
}

/// An option given `value`, as this process spells options: `flag value`
/// or `keyword=value`. What [`OptionName::set`] writes, for the options
/// of other tables too (the plan's).
pub fn spell_set(flag: &str, keyword: &str, value: impl fmt::Display) -> String {
    match spelling() {
        Spelling::Flags => format!("{flag} {value}"),
        Spelling::Keywords => format!("{keyword}={value}"),
    }
}
