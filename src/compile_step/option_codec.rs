//! How each kind of compile option reads a word into its field of
//! [`CompileOptions`](super::CompileOptions) and writes the field back as
//! words: one codec per kind of value, so the option table
//! ([`super::spellings`]) names a field and a codec and every front end
//! (clap's arguments, Python's keywords, [`super::command_line`]) reads and
//! writes the option through them.

use super::{ModelSource, ReplicaGroupForm};
use hlatc_models::kernels::KernelRequest;
use hlatc_models::{CpBalance, CpExchange, EpExchange, Reshard};
use hlatc_passes::neuron_check::Chip;
use hlatc_passes::{RematPolicy, RoundingPolicy, Target};
use hlatc_step::memory_plan::DeviceMemory;
use hlatc_step::pipeline::StageSend;
use hlatc_step::precision::Precision;
use hlatc_step::spmd::{RankSource, SpmdForm};
use std::path::PathBuf;

/// Options no command line can give.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unspellable {
    /// A model given as JSON text or as a config already read, not by a
    /// preset's name or a file's path.
    #[error("{0} is not a preset or a config.json on disk, so no command line names it")]
    Model(String),
}

/// Why a word is not a value of its option. Each names the word, never
/// the option, which the caller names as its front end spells it
/// ([`super::OptionError`]).
#[derive(Debug, thiserror::Error)]
pub enum WordError {
    /// Not a number of the kind the option takes.
    #[error("'{word}' is not {what}")]
    NotA { word: String, what: &'static str },
    /// Not a name of the option's fixed set.
    #[error("unknown {noun} '{word}' (known: {})", known.join(", "))]
    UnknownName {
        noun: &'static str,
        word: String,
        known: Vec<&'static str>,
    },
    /// A kernel request that does not read.
    #[error(transparent)]
    Kernel(#[from] hlatc_models::kernels::KernelRequestError),
    /// A device memory size that does not read.
    #[error(transparent)]
    Size(#[from] hlatc_step::memory_plan::SizeError),
    /// An option only a front end takes (`--out`), which no field of the
    /// step's options holds.
    #[error("is not an option of the step")]
    FrontEndOnly,
}

/// How an option is given on a command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// A switch: given or not, no value.
    Switch,
    /// One value.
    One,
    /// A value each time it is given (`--kernel a --kernel b`).
    Repeated,
}

/// What a Python keyword takes, which the Python layer reads into words:
/// a closed set, so an option of a kind already here needs no Python code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PyValue {
    Bool,
    Int,
    Float,
    /// A name of the option's fixed set ([`super::CompileOption::choices`]).
    Name,
    /// A path (str or os.PathLike).
    Path,
    /// A list of names, or one string of them separated by commas.
    CommaList,
    /// One name or a list of them.
    Names,
    /// A dict of name to value, each pair one `NAME=VALUE` word.
    Pairs,
    /// An int 0 or more, or a word (`"16GiB"`, `"none"`).
    IntOrWord,
    /// A config.json's path, or its contents as a dict.
    Config,
}

/// How one kind of field reads and writes its option.
pub trait Codec<T> {
    const TAKES: Takes;
    const PY: PyValue;
    /// One occurrence into `slot`: its word, `None` for a switch.
    fn read(slot: &mut T, word: Option<&str>) -> Result<(), WordError>;
    /// The occurrences that give `value` (`None` for a switch), none
    /// where it is `default`.
    fn write(value: &T, default: &T) -> Result<Vec<Option<String>>, Unspellable>;
    /// The names a fixed set takes.
    fn choices() -> Option<Vec<&'static str>> {
        None
    }
}

/// A value written as a plain word.
pub trait Word: Sized + PartialEq + std::fmt::Display + std::str::FromStr {
    /// What the word must be, in words.
    const WHAT: &'static str;
    const PY: PyValue;
}

impl Word for i64 {
    const WHAT: &'static str = "an integer";
    const PY: PyValue = PyValue::Int;
}

impl Word for f64 {
    const WHAT: &'static str = "a number";
    const PY: PyValue = PyValue::Float;
}

fn parse<T: Word>(word: Option<&str>) -> Result<T, WordError> {
    let w = word.unwrap_or_default();
    w.trim().parse().map_err(|_| WordError::NotA {
        word: w.to_string(),
        what: T::WHAT,
    })
}

/// A name of a fixed set, spelled as hlatc spells it everywhere.
pub trait Named: Sized {
    /// What one of the set is called in a refusal: `remat policy`.
    const NOUN: &'static str;
    fn names() -> Vec<&'static str>;
    fn named(word: &str) -> Option<Self>;
    fn word(&self) -> String;
}

macro_rules! named_by_all {
    ($($t:ty => $noun:expr,)*) => {$(
        impl Named for $t {
            const NOUN: &'static str = $noun;
            fn names() -> Vec<&'static str> {
                <$t>::ALL.iter().map(|c| c.name()).collect()
            }
            fn named(word: &str) -> Option<Self> {
                <$t>::ALL.into_iter().find(|c| c.name() == word)
            }
            fn word(&self) -> String {
                self.name().to_string()
            }
        }
    )*};
}

named_by_all! {
    Precision => "precision",
    Target => "target",
    Chip => "chip",
    RematPolicy => "remat policy",
    EpExchange => "exchange",
    CpBalance => "balance",
    CpExchange => "exchange form",
    Reshard => "reshard policy",
    SpmdForm => "SPMD form",
    RankSource => "rank source",
    ReplicaGroupForm => "replica-group form",
    StageSend => "send form",
}

impl Named for RoundingPolicy {
    const NOUN: &'static str = "rounding policy";
    fn names() -> Vec<&'static str> {
        RoundingPolicy::NAMES.to_vec()
    }
    fn named(word: &str) -> Option<Self> {
        RoundingPolicy::from_name(word)
    }
    fn word(&self) -> String {
        self.to_string()
    }
}

/// A name of `T`'s set, or the refusal naming the set: what every command
/// that reads one prints (`unknown remat policy 'x' (known: ...)`).
pub fn parse_name<T: Named>(w: &str) -> Result<T, WordError> {
    T::named(w).ok_or_else(|| WordError::UnknownName {
        noun: T::NOUN,
        word: w.to_string(),
        known: T::names(),
    })
}

/// A switch, off by default.
pub struct Switch;

impl Codec<bool> for Switch {
    const TAKES: Takes = Takes::Switch;
    const PY: PyValue = PyValue::Bool;
    fn read(slot: &mut bool, _: Option<&str>) -> Result<(), WordError> {
        *slot = true;
        Ok(())
    }
    fn write(value: &bool, _: &bool) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(if *value { vec![None] } else { Vec::new() })
    }
}

/// A number with a default of its own.
pub struct Plain;

impl<T: Word> Codec<T> for Plain {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = T::PY;
    fn read(slot: &mut T, word: Option<&str>) -> Result<(), WordError> {
        *slot = parse(word)?;
        Ok(())
    }
    fn write(value: &T, default: &T) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(once_unless(value, default, |v| v.to_string()))
    }
}

/// A number, or nothing for the model's, the target's or the layout's.
pub struct Maybe;

impl<T: Word> Codec<Option<T>> for Maybe {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = T::PY;
    fn read(slot: &mut Option<T>, word: Option<&str>) -> Result<(), WordError> {
        *slot = Some(parse(word)?);
        Ok(())
    }
    fn write(value: &Option<T>, _: &Option<T>) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(value.iter().map(|v| Some(v.to_string())).collect())
    }
}

/// A name of a fixed set with a default of its own.
pub struct Choice;

impl<T: Named + PartialEq> Codec<T> for Choice {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::Name;
    fn read(slot: &mut T, word: Option<&str>) -> Result<(), WordError> {
        *slot = parse_name(word.unwrap_or_default())?;
        Ok(())
    }
    fn write(value: &T, default: &T) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(once_unless(value, default, Named::word))
    }
    fn choices() -> Option<Vec<&'static str>> {
        Some(T::names())
    }
}

/// A name of a fixed set, or nothing for the target's or the model's.
pub struct MaybeChoice;

impl<T: Named> Codec<Option<T>> for MaybeChoice {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::Name;
    fn read(slot: &mut Option<T>, word: Option<&str>) -> Result<(), WordError> {
        *slot = Some(parse_name(word.unwrap_or_default())?);
        Ok(())
    }
    fn write(value: &Option<T>, _: &Option<T>) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(value.iter().map(|v| Some(v.word())).collect())
    }
    fn choices() -> Option<Vec<&'static str>> {
        Some(T::names())
    }
}

/// Names given one at a time (`--disable-pass a --disable-pass b`).
pub struct EachName;

impl Codec<Vec<String>> for EachName {
    const TAKES: Takes = Takes::Repeated;
    const PY: PyValue = PyValue::Names;
    fn read(slot: &mut Vec<String>, word: Option<&str>) -> Result<(), WordError> {
        slot.push(word.unwrap_or_default().to_string());
        Ok(())
    }
    fn write(value: &Vec<String>, _: &Vec<String>) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(value.iter().map(|v| Some(v.clone())).collect())
    }
}

/// Names separated by commas in one word (`--passes a,b`; empty for
/// none), or nothing for the target's.
pub struct CommaNames;

impl Codec<Option<Vec<String>>> for CommaNames {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::CommaList;
    fn read(slot: &mut Option<Vec<String>>, word: Option<&str>) -> Result<(), WordError> {
        let names = word.unwrap_or_default().split(',').map(String::from);
        slot.get_or_insert_with(Vec::new).extend(names);
        Ok(())
    }
    fn write(
        value: &Option<Vec<String>>,
        _: &Option<Vec<String>>,
    ) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(value.iter().map(|v| Some(v.join(","))).collect())
    }
}

/// Kernel requests, one `POINT=IMPL[:ARG]` at a time.
pub struct Kernels;

impl Codec<Vec<KernelRequest>> for Kernels {
    const TAKES: Takes = Takes::Repeated;
    const PY: PyValue = PyValue::Pairs;
    fn read(slot: &mut Vec<KernelRequest>, word: Option<&str>) -> Result<(), WordError> {
        slot.push(KernelRequest::parse(word.unwrap_or_default())?);
        Ok(())
    }
    fn write(
        value: &Vec<KernelRequest>,
        _: &Vec<KernelRequest>,
    ) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(value.iter().map(|k| Some(k.to_string())).collect())
    }
}

/// A size (`16GiB`, bytes) or `none`; the target's default when not given.
pub struct Memory;

impl Codec<DeviceMemory> for Memory {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::IntOrWord;
    fn read(slot: &mut DeviceMemory, word: Option<&str>) -> Result<(), WordError> {
        *slot = word.unwrap_or_default().parse()?;
        Ok(())
    }
    fn write(value: &DeviceMemory, _: &DeviceMemory) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(match value {
            DeviceMemory::TargetDefault => Vec::new(),
            DeviceMemory::Bytes(b) => vec![Some(b.to_string())],
            DeviceMemory::Unchecked => vec![Some("none".into())],
        })
    }
}

/// The model as a preset's name; always written, as the command that
/// builds a step names its model.
pub struct Preset;

impl Codec<ModelSource> for Preset {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::Name;
    fn read(slot: &mut ModelSource, word: Option<&str>) -> Result<(), WordError> {
        let w = word.unwrap_or_default();
        if !hlatc_models::PRESETS.contains(&w) {
            return Err(WordError::UnknownName {
                noun: "model",
                word: w.to_string(),
                known: hlatc_models::PRESETS.to_vec(),
            });
        }
        *slot = ModelSource::Preset(w.to_string());
        Ok(())
    }
    fn write(value: &ModelSource, _: &ModelSource) -> Result<Vec<Option<String>>, Unspellable> {
        match value {
            ModelSource::Preset(name) => Ok(vec![Some(name.clone())]),
            ModelSource::ConfigFile(_) => Ok(Vec::new()),
            ModelSource::ConfigJson { name, .. } | ModelSource::Config { name, .. } => {
                Err(Unspellable::Model(name.clone()))
            }
        }
    }
    fn choices() -> Option<Vec<&'static str>> {
        Some(hlatc_models::PRESETS.to_vec())
    }
}

/// The model as a config.json on disk.
pub struct ConfigPath;

impl Codec<ModelSource> for ConfigPath {
    const TAKES: Takes = Takes::One;
    const PY: PyValue = PyValue::Config;
    fn read(slot: &mut ModelSource, word: Option<&str>) -> Result<(), WordError> {
        *slot = ModelSource::ConfigFile(PathBuf::from(word.unwrap_or_default()));
        Ok(())
    }
    fn write(value: &ModelSource, _: &ModelSource) -> Result<Vec<Option<String>>, Unspellable> {
        Ok(match value {
            ModelSource::ConfigFile(path) => vec![Some(path.display().to_string())],
            _ => Vec::new(),
        })
    }
}

/// `value` once unless it is `default`.
fn once_unless<T: PartialEq>(
    value: &T,
    default: &T,
    word: impl Fn(&T) -> String,
) -> Vec<Option<String>> {
    match value == default {
        true => Vec::new(),
        false => vec![Some(word(value))],
    }
}
