//! The option table: every option of a compile, declared once with the
//! field of [`CompileOptions`] it sets and the codec that reads and writes
//! it ([`super::option_codec`]), its `hlatc compile` flag and help, its
//! keyword and type in Python's `hlatc.compile_step`, and the default both
//! take. Everything else is made from it: [`CompileOption`], its reading
//! and writing ([`CompileOptions::set`] and [`CompileOptions::settings`],
//! so [`CompileOptions::command_line`] writes every option), `hlatc compile`'s
//! arguments (`src/cli/option_args.rs`), Python's keywords
//! (`python/src/compile.rs`, and the choice lists it reads names
//! against), and the generated surfaces that `tests/it/option_surfaces.rs`
//! holds to it and rewrites with `HLATC_BLESS=1`: the Python wrapper's
//! signature, its stub and the book's table of options.

use super::option_codec::{
    Choice, Codec, CommaNames, ConfigPath, EachName, Kernels, Maybe, MaybeChoice, Memory, Plain,
    Preset, PyValue, Switch, Takes, Unspellable, WordError,
};
use super::CompileOptions;

/// One option's spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spelling {
    /// `--flag` without its dashes.
    pub flag: &'static str,
    /// The keyword of `hlatc.compile_step`; `None` for what only the CLI
    /// does (where to write, whether to verify and report).
    pub python: Option<&'static str>,
    /// Its typed name, as its code and the library's messages name it:
    /// the Python keyword, or the flag in snake case for the CLI's own.
    pub name: &'static str,
    pub default: DefaultValue,
    /// The flag's value in `--help` (`T` of `--tp <T>`); empty for a
    /// switch.
    pub value_name: &'static str,
    /// The keyword's type as the stub and the wrapper declare it.
    pub python_type: &'static str,
    /// `hlatc compile --help`'s words for it.
    pub help: &'static str,
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

use DefaultValue::{Empty, Off, Unset, Value};

/// What one option is, beside its spellings: read from its codec over its
/// field's type.
struct Kind {
    takes: Takes,
    python: PyValue,
    choices: Option<Vec<&'static str>>,
}

/// `field` names the option's field, so its type (and the codec's impl
/// for it) is known without making any options.
fn kind_of<T, C: Codec<T>>(field: fn(&CompileOptions) -> &T) -> Kind {
    let _ = field;
    Kind {
        takes: C::TAKES,
        python: C::PY,
        choices: C::choices(),
    }
}

/// Declares [`CompileOption`], [`SPELLINGS`] and the reading and writing
/// of each option from one list, so an option's typed name, its spellings
/// and its field cannot drift apart. The library's options come first,
/// each `Name = field.path, Codec { ... }`; the CLI's own last.
macro_rules! compile_options {
    (
        library {$(
            $option:ident = $($field:ident).+, $codec:ty {
                flag: $flag:expr, python: $python:expr, default: $default:expr,
                value: $value:expr, py: $py:expr, help: $help:expr $(,)?
            },
        )*}
        front_end {$(
            $cli:ident {
                flag: $cflag:expr, name: $cname:expr, default: $cdefault:expr, value: $cvalue:expr,
                takes: $ctakes:ident, help: $chelp:expr $(,)?
            },
        )*}
    ) => {
        /// An option of a compile, by a typed name: library errors name an
        /// option by it, and each front end renders it its own way
        /// ([`CompileOption::flag`], [`CompileOption::keyword`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CompileOption {
            $($option,)*
            $($cli,)*
        }

        /// Every option, in the order of `hlatc.compile_step`'s keywords
        /// (the CLI's own options last).
        pub const SPELLINGS: &[Spelling] = &[
            $(Spelling {
                flag: $flag,
                python: Some($python),
                name: $python,
                default: $default,
                value_name: $value,
                python_type: $py,
                help: $help,
            },)*
            $(Spelling {
                flag: $cflag,
                python: None,
                name: $cname,
                default: $cdefault,
                value_name: $cvalue,
                python_type: "",
                help: $chelp,
            },)*
        ];

        impl CompileOption {
            /// Every option, in [`SPELLINGS`]' order.
            pub const ALL: &[CompileOption] = &[$(CompileOption::$option,)* $(CompileOption::$cli,)*];

            /// What its codec makes of it; `None` for the CLI's own.
            fn kind(self) -> Option<Kind> {
                match self {
                    $(CompileOption::$option => Some(kind_of::<_, $codec>(|o| &o.$($field).+)),)*
                    _ => None,
                }
            }

            /// How each of the CLI's own options is given.
            fn front_end_takes(self) -> Takes {
                match self {
                    $(CompileOption::$cli => Takes::$ctakes,)*
                    _ => Takes::One,
                }
            }
        }

        impl CompileOption {
            /// One occurrence given: its word (`None` for a switch) read
            /// into the option's field of `options` by its codec, or what
            /// is wrong with it. A repeated option adds to what is there;
            /// any other replaces it. The CLI's own options (`--out`) are
            /// no field there.
            pub(super) fn read(self, options: &mut CompileOptions, word: Option<&str>) -> Result<(), WordError> {
                match self {
                    $(CompileOption::$option => <$codec as Codec<_>>::read(&mut options.$($field).+, word),)*
                    _ => Err(WordError::FrontEndOnly),
                }
            }

            /// The occurrences that give its field's value in `options`
            /// (`None` for a switch), none where it is `defaults`'.
            pub(super) fn write(
                self,
                options: &CompileOptions,
                defaults: &CompileOptions,
            ) -> Result<Vec<Option<String>>, Unspellable> {
                match self {
                    $(CompileOption::$option => <$codec as Codec<_>>::write(&options.$($field).+, &defaults.$($field).+),)*
                    _ => Ok(Vec::new()),
                }
            }
        }
    };
}

include!("option_rows.rs");

impl CompileOption {
    pub fn spelling(self) -> &'static Spelling {
        &SPELLINGS[self as usize]
    }

    /// As `hlatc compile` spells it: `--tp`.
    pub fn flag(self) -> String {
        format!("--{}", self.spelling().flag)
    }

    /// The row whose flag is `--{flag}`.
    pub fn from_flag(flag: &str) -> Option<CompileOption> {
        CompileOption::ALL
            .iter()
            .copied()
            .find(|o| o.spelling().flag == flag)
    }

    /// Its typed name: as `hlatc.compile_step` spells it (`tp`), and in
    /// snake case for what only the CLI takes (`pass_report`).
    pub fn keyword(self) -> &'static str {
        self.spelling().name
    }

    /// Whether it is given as a switch, once, or once per value.
    pub fn takes(self) -> Takes {
        self.kind().map_or(self.front_end_takes(), |k| k.takes)
    }

    /// What its Python keyword takes; `None` for the CLI's own options.
    pub fn python_value(self) -> Option<PyValue> {
        self.kind().map(|k| k.python)
    }

    /// The names it takes, for an option of a fixed set.
    pub fn choices(self) -> Option<Vec<&'static str>> {
        self.kind().and_then(|k| k.choices)
    }

    /// Whether [`CompileOptions`] has a field for it (the CLI's own
    /// options do not).
    pub fn is_library(self) -> bool {
        self.kind().is_some()
    }

    /// The option by its Python keyword.
    pub fn by_keyword(keyword: &str) -> Option<CompileOption> {
        Self::ALL
            .iter()
            .copied()
            .find(|o| o.spelling().python == Some(keyword))
    }
}

/// Pairs of options that cannot both be given: a model is a preset or a
/// config.json, and a pipeline is named whole or left passes out of.
pub const CONFLICTS: &[(CompileOption, CompileOption)] = &[
    (CompileOption::Model, CompileOption::Config),
    (CompileOption::DisablePass, CompileOption::Passes),
];
