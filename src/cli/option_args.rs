//! The arguments of the commands that build a step, made from the option
//! table (`hlatc::compile_step::spellings`): a flag per row a command
//! takes ([`OptionSet`]: `hlatc compile` every row, `hlatc train` the
//! step's), its value checked by the option's own codec as clap reads it,
//! so a value the library would refuse is clap's error naming the flag,
//! and the options built from the flags given are [`CompileOptions::set`]
//! of each, in order.

use clap::builder::ValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use hlatc::compile_step::spellings::{CompileOption, DefaultValue, CONFLICTS};
use hlatc::compile_step::{CompileOptions, ModelSource, Takes};
use hlatc::passes::Target;
use std::path::PathBuf;

/// The rows a command takes, and its defaults.
pub trait OptionSet: 'static {
    /// Whether the command takes `option`'s flag.
    fn takes(option: CompileOption) -> bool;

    /// What the options are where no flag is given: the library's unless
    /// the command has its own.
    fn base() -> CompileOptions {
        CompileOptions::default()
    }

    /// What the command does where `option` is not given, as its `--help`
    /// says it, where that is not the table's default value (`None`: the
    /// table's).
    fn own_default(_option: CompileOption) -> Option<&'static str> {
        None
    }
}

/// The rows `S` takes, in the table's order (the order of `--help`).
fn rows<S: OptionSet>() -> impl Iterator<Item = CompileOption> {
    CompileOption::ALL.iter().copied().filter(|&o| S::takes(o))
}

/// `hlatc compile`: every row.
pub struct EveryOption;

impl OptionSet for EveryOption {
    fn takes(_: CompileOption) -> bool {
        true
    }
}

/// The rows that say which step is built, and so what its state is: its
/// model and batch, its precision and rounding, its layout and how a
/// sharded step is written. `train` and `shard`/`unshard` both take them.
fn names_the_step(option: CompileOption) -> bool {
    use CompileOption as O;
    matches!(
        option,
        O::Model
            | O::Config
            | O::BatchSize
            | O::SeqLen
            | O::Packed
            | O::SeparateProjections
            | O::CapacityFactor
            | O::Precision
            | O::Rounding
            | O::Tp
            | O::Dp
            | O::Pp
            | O::Ep
            | O::EpExchange
            | O::Cp
            | O::CpBalance
            | O::CpExchange
            | O::SequenceParallel
            | O::Zero1
            | O::Fsdp
            | O::Reshard
            | O::Spmd
            | O::RankSource
    )
}

/// `hlatc train`: what builds the step it trains on XLA CPU (not the
/// target, chip, pipeline or bundle, which are compile's).
pub struct TrainOptions;

impl OptionSet for TrainOptions {
    /// The step's rows, with its remat, optimizer, accumulation, stage
    /// sends and kernels.
    fn takes(option: CompileOption) -> bool {
        use CompileOption as O;
        names_the_step(option)
            || matches!(
                option,
                O::Remat
                    | O::LrMax
                    | O::LrMin
                    | O::WarmupSteps
                    | O::TotalSteps
                    | O::Beta1
                    | O::Beta2
                    | O::AdamEps
                    | O::WeightDecay
                    | O::ClipNorm
                    | O::GradAccum
                    | O::PpSend
                    | O::Kernel
            )
    }

    /// `tiny`, on XLA CPU.
    fn base() -> CompileOptions {
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            target: Target::Cpu,
            ..CompileOptions::default()
        }
    }
}

/// `hlatc shard` and `unshard`: what builds the step whose state is
/// divided (its target too: on cpu a stochastically rounding step carries
/// its RNG state).
pub struct StateOptions;

impl OptionSet for StateOptions {
    fn takes(option: CompileOption) -> bool {
        names_the_step(option) || option == CompileOption::Target
    }

    /// `tiny`, as `train`'s.
    fn base() -> CompileOptions {
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            ..CompileOptions::default()
        }
    }
}

/// `hlatc plan`: the rows that say which model and step every layout
/// compiles. Its layouts, batch and cluster are its own flags.
pub struct PlanRows;

impl OptionSet for PlanRows {
    fn takes(option: CompileOption) -> bool {
        use CompileOption as O;
        matches!(
            option,
            O::Model | O::Config | O::SeqLen | O::CapacityFactor | O::Precision | O::Kernel
        )
    }

    /// Without `--precision` the plan searches the bf16 presets.
    fn own_default(option: CompileOption) -> Option<&'static str> {
        (option == CompileOption::Precision)
            .then_some("search bf16-master, bf16-mixed and bf16-pure")
    }
}

/// The rows of `S` as given on a command line: the library's options they
/// make over `S`'s defaults, and each occurrence of the CLI's own options
/// (`--out`), its word (`None` for a switch).
pub struct OptionArgs<S> {
    options: CompileOptions,
    own: Vec<(CompileOption, Option<String>)>,
    given: Vec<CompileOption>,
    set: std::marker::PhantomData<S>,
}

/// `hlatc compile`'s arguments.
pub type CompileArgs = OptionArgs<EveryOption>;

impl<S> OptionArgs<S> {
    /// The options the flags make.
    pub fn options(&self) -> &CompileOptions {
        &self.options
    }

    /// Whether `option`'s flag was given (its default is not).
    pub fn given(&self, option: CompileOption) -> bool {
        self.given.contains(&option)
    }

    /// Whether a switch of the CLI's own (`--verify`) was given.
    pub fn switch(&self, option: CompileOption) -> bool {
        self.own.iter().any(|(o, _)| *o == option)
    }

    /// The path a CLI option of its own (`--out`) names.
    pub fn path(&self, option: CompileOption) -> Option<PathBuf> {
        self.own
            .iter()
            .find(|(o, _)| *o == option)
            .and_then(|(_, w)| w.as_ref().map(PathBuf::from))
    }
}

/// The flag of one row, among the rows `S` takes.
fn arg<S: OptionSet>(option: CompileOption) -> Arg {
    let s = option.spelling();
    let mut help = s.help.to_string();
    if let Some(names) = option.choices() {
        help.push_str(&format!("\n\n[possible values: {}]", names.join(", ")));
    }
    let own_default = S::own_default(option);
    if let Some(what) = own_default {
        help.push_str(&format!("\n\n[default: {what}]"));
    }
    let mut arg = Arg::new(s.flag).long(s.flag).help(help);
    arg = match option.takes() {
        Takes::Switch => arg.action(ArgAction::SetTrue),
        Takes::One => arg.action(ArgAction::Set),
        Takes::Repeated => arg.action(ArgAction::Append),
    };
    if option.takes() != Takes::Switch {
        arg = arg
            .value_name(s.value_name)
            .value_parser(checked(option))
            .allow_negative_numbers(true);
    }
    if let (DefaultValue::Value(v), None) = (s.default, own_default) {
        arg = arg.default_value(v);
    }
    for (a, b) in CONFLICTS {
        if *a == option && S::takes(*b) {
            arg = arg.conflicts_with(b.spelling().flag);
        }
    }
    if option == CompileOption::Out {
        arg = arg.required(true);
    }
    arg
}

/// Reads a word as the library will: the option set on a scratch copy of
/// the defaults, and its refusal clap's error for the flag.
fn checked(option: CompileOption) -> ValueParser {
    ValueParser::new(move |word: &str| -> Result<String, String> {
        if option.is_library() {
            let mut scratch = CompileOptions::default();
            scratch.set(option, Some(word)).map_err(|e| e.problem)?;
        }
        Ok(word.to_string())
    })
}

impl<S: OptionSet> clap::Args for OptionArgs<S> {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(rows::<S>().map(arg::<S>))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<S: OptionSet> clap::FromArgMatches for OptionArgs<S> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let (mut options, mut own, mut given) = (S::base(), Vec::new(), Vec::new());
        for option in rows::<S>() {
            let id = option.spelling().flag;
            // A default is no option given: the library's own default
            // stands, which the table holds equal (tests/it/cli.rs).
            if m.value_source(id) != Some(ValueSource::CommandLine) {
                continue;
            }
            given.push(option);
            let words: Vec<Option<&str>> = match option.takes() {
                Takes::Switch => vec![None],
                Takes::One | Takes::Repeated => m
                    .get_many::<String>(id)
                    .into_iter()
                    .flatten()
                    .map(|w| Some(w.as_str()))
                    .collect(),
            };
            for word in words {
                if !option.is_library() {
                    own.push((option, word.map(String::from)));
                } else if let Err(e) = options.set(option, word) {
                    // `checked` read the word as clap took it.
                    return Err(clap::Error::raw(ErrorKind::ValueValidation, e));
                }
            }
        }
        Ok(OptionArgs {
            options,
            own,
            given,
            set: std::marker::PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
