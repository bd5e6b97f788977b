//! Arguments read at the boundary. PyO3's own conversions raise a builtin
//! `TypeError`, or an `OverflowError` naming no argument for a negative
//! count; these raise an `hlatc.UsageError` naming the argument, what was
//! given and what is taken: a `UsageTypeError` (also a `TypeError`;
//! category `invalid`) for a value of another type, a `UsageError` (also a
//! `ValueError`; category `out_of_range`) for one out of range. Each
//! argument is read with `#[pyo3(from_py_with = args::NAME)]`: the
//! extractor named as the argument (declared once in [`named!`]) reads any
//! type that is [`Accepted`].

use crate::errors::{argument_usage, option_code, usage_type_error, CONFIG};
use hlatc::usage::UsageKind;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};
use std::path::PathBuf;

/// Why a value was refused.
pub(crate) enum Refused {
    /// Not of a type the argument takes.
    Type,
    /// Of the type, but out of range.
    Range,
    /// Of the type, but not a value of it the argument can take (a dict
    /// whose values are not JSON's).
    Invalid,
    /// A name the argument's fixed set does not hold.
    Unknown(Vec<&'static str>),
}

/// A type an argument can be read as, and what it takes, in words. `name`
/// is the argument's (a name of a fixed set is looked up by it).
pub(crate) trait Accepted<'py>: Sized {
    /// What the argument takes: `an int 0 or more`.
    fn accepted() -> String;
    fn read(name: &str, v: &Bound<'py, PyAny>) -> Result<Self, Refused>;
}

/// Reads `v`, the argument `name`, or refuses it naming it.
pub(crate) fn read<'py, T: Accepted<'py>>(name: &str, v: &Bound<'py, PyAny>) -> PyResult<T> {
    T::read(name, v).map_err(|why| refuse(why, name, v, &T::accepted()))
}

/// The error refusing `v`, the argument `name`, with what it takes
/// (`accepted`): a `UsageTypeError` for [`Refused::Type`], else a
/// `UsageError` (invalid for [`Refused::Invalid`], else out of range).
pub(crate) fn refuse(why: Refused, name: &str, v: &Bound<'_, PyAny>, accepted: &str) -> PyErr {
    let given = given(v);
    match why {
        Refused::Type => {
            let type_name = v
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            usage_type_error(
                name,
                format!("{name}={given}: expected {accepted}, got {type_name}"),
            )
        }
        Refused::Range => argument_usage(
            UsageKind::OutOfRange,
            name,
            format!("{name}={given} is out of range: expected {accepted}"),
        ),
        Refused::Invalid => argument_usage(
            UsageKind::Invalid,
            name,
            format!("{name}={given}: expected {accepted}"),
        ),
        // An unknown name of a config option is a ConfigError with the
        // names, as the Rust core's parsers refuse it; see USAGE_SETS.
        Refused::Unknown(known) => {
            let message = format!("unknown {name} {given} (known: {})", known.join(", "));
            match USAGE_SETS.contains(&name) {
                true => argument_usage(UsageKind::OutOfRange, name, message),
                false => {
                    let field = PyString::new(v.py(), name).into_any().unbind();
                    // A compile option's code, as the CLI prints it for
                    // the same name (`option.reshard`).
                    CONFIG.coded_with(option_code(name), message, &[("key", field)])
                }
            }
        }
    }
}

/// `repr(v)`, cut short: a value can be a whole array.
fn given(v: &Bound<'_, PyAny>) -> String {
    const MAX: usize = 60;
    let r = v
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".into());
    match r.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &r[..at]),
        None => r,
    }
}

/// An int as `i128`: any Python int (or `__index__`) that fits in 64 bits,
/// signed or not; wider ones are out of range. A bool is no count (as the
/// Python side's checks say too).
fn int(v: &Bound<'_, PyAny>) -> Result<i128, Refused> {
    if v.is_instance_of::<PyBool>() {
        return Err(Refused::Type);
    }
    match v.extract::<i64>() {
        Ok(i) => Ok(i.into()),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => v
            .extract::<u64>()
            .map(i128::from)
            .map_err(|_| Refused::Range),
        Err(_) => Err(Refused::Type),
    }
}

macro_rules! ints {
    ($($t:ty => $what:expr),* $(,)?) => {$(
        impl Accepted<'_> for $t {
            fn accepted() -> String {
                $what.into()
            }
            fn read(_: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
                <$t>::try_from(int(v)?).map_err(|_| Refused::Range)
            }
        }
    )*};
}

ints! {
    i64 => "an int from -2**63 to 2**63-1",
    u64 => "an int 0 or more, below 2**64",
    usize => "an int 0 or more, below 2**64",
    u32 => "an int from 0 to 2**32-1",
}

impl Accepted<'_> for f64 {
    fn accepted() -> String {
        "a number".into()
    }
    fn read(_: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        // A str has no __float__, but refuse it by name before asking.
        if v.is_instance_of::<PyString>() {
            return Err(Refused::Type);
        }
        v.extract().map_err(|_| Refused::Type)
    }
}

impl Accepted<'_> for bool {
    fn accepted() -> String {
        "True or False".into()
    }
    fn read(_: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        v.downcast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| Refused::Type)
    }
}

impl Accepted<'_> for String {
    fn accepted() -> String {
        "a str".into()
    }
    fn read(_: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        v.extract().map_err(|_| Refused::Type)
    }
}

impl Accepted<'_> for PathBuf {
    fn accepted() -> String {
        "a path (str or os.PathLike)".into()
    }
    fn read(_: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        v.extract().map_err(|_| Refused::Type)
    }
}

impl<'py, T: Accepted<'py>> Accepted<'py> for Vec<T> {
    fn accepted() -> String {
        format!("a list, each {}", T::accepted())
    }
    fn read(name: &str, v: &Bound<'py, PyAny>) -> Result<Self, Refused> {
        // PyO3 would take a str as a list of its characters.
        if v.is_instance_of::<PyString>() {
            return Err(Refused::Type);
        }
        let items = v.try_iter().map_err(|_| Refused::Type)?;
        items
            .map(|item| {
                item.map_err(|_| Refused::Type)
                    .and_then(|i| T::read(name, &i))
            })
            .collect()
    }
}

/// One of hlatc's classes (`Step`, `Module`), borrowed.
impl<'py, T: pyo3::PyClass> Accepted<'py> for Bound<'py, T> {
    fn accepted() -> String {
        format!("an hlatc {}", T::NAME)
    }
    fn read(_: &str, v: &Bound<'py, PyAny>) -> Result<Self, Refused> {
        v.downcast::<T>().cloned().map_err(|_| Refused::Type)
    }
}

/// Free text whose default is a literal: [`Text::of`] makes one in a
/// signature's default, where a `String` cannot be made.
pub(crate) struct Text(pub std::borrow::Cow<'static, str>);

impl Text {
    pub(crate) const fn of(s: &'static str) -> Text {
        Text(std::borrow::Cow::Borrowed(s))
    }
}

impl Accepted<'_> for Text {
    fn accepted() -> String {
        <String as Accepted>::accepted()
    }
    fn read(name: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        <String as Accepted>::read(name, v).map(|s| Text(s.into()))
    }
}

impl<'py, T: Accepted<'py>> Accepted<'py> for Option<T> {
    fn accepted() -> String {
        format!("None or {}", T::accepted())
    }
    fn read(name: &str, v: &Bound<'py, PyAny>) -> Result<Self, Refused> {
        if v.is_none() {
            return Ok(None);
        }
        T::read(name, v).map(Some)
    }
}

/// The fixed sets whose unknown name is a `UsageError`, as hlatc has
/// raised it: the hardware (`instance`, `hlatc plan`'s, and `chip`,
/// `compile_step`'s) and the loader's settings, which are no model
/// config's. Every other is a `ConfigError`, as the python.md's table of
/// `Literal`s says.
const USAGE_SETS: [&str; 4] = ["instance", "chip", "packing", "raw_dtype"];

/// A name of a fixed set (`precision="bf16-pure"`): the set's own
/// spelling, from the list `hlatc._hlatc.choices()` gives under the
/// argument's name. A `&'static str`, so the argument's default is a
/// literal PyO3 prints in its signature.
impl Accepted<'_> for &'static str {
    fn accepted() -> String {
        "a str".into()
    }
    fn read(name: &str, v: &Bound<'_, PyAny>) -> Result<Self, Refused> {
        let given: String = v.extract().map_err(|_| Refused::Type)?;
        let known = crate::choice_lists().remove(name).unwrap_or_default();
        match known.iter().find(|k| **k == given) {
            Some(k) => Ok(*k),
            None => Err(Refused::Unknown(known)),
        }
    }
}

/// One extractor per argument name, for `#[pyo3(from_py_with = ...)]`:
/// the name is the function's, so it is written once.
macro_rules! named {
    ($($name:ident),* $(,)?) => {$(
        pub(crate) fn $name<'py, T: Accepted<'py>>(v: &Bound<'py, PyAny>) -> PyResult<T> {
            read(stringify!($name), v)
        }
    )*};
}

named! {
    // the keywords compile_step shares with plan and the trainers (its
    // own are read by the option table's kinds: python/src/compile.rs)
    model, batch_size, seq_len, precision, target, passes, remat, tp, dp, pp, sequence_parallel, zero1, capacity_factor,
    // Step, Trainer, Schedule, TickPlan
    seed, rank, checkpoint, path, tick, stage, phase,
    // plan, append_measured_run
    instance, nodes, global_batch, top, price, layout, calibration, threads, seq_per_s,
    micro_batch, sdk, source, json, plot, predict, report,
    // load_module, optimize, plot_metrics, Trainer
    module, series, title, log_y, step,
    // Loader
    sources, vocab_size, replicas, owned, tokenizer, text_field, format, packing,
    shuffle_buffer, epochs, eos_id, raw_dtype, position,
}

/// The error refusing `given`, the argument `name`, which takes
/// `accepted`: for what the Python side checks itself (a tensor dict, a
/// `Step`), in the words and classes of the checks here.
#[pyfunction]
#[pyo3(signature = (name, given, accepted, *, of_type))]
pub fn argument_error(
    py: Python<'_>,
    name: &str,
    given: &Bound<'_, PyAny>,
    accepted: &str,
    of_type: bool,
) -> PyObject {
    let why = if of_type {
        Refused::Type
    } else {
        Refused::Range
    };
    refuse(why, name, given, accepted).into_value(py).into_any()
}
