//! `compile_step`: `hlatc compile`'s options from Python's keywords,
//! each name parsed by the Rust type that owns it, and the compile itself
//! (the CLI's library call, so the bundles are the same bytes).

use crate::args;
use crate::errors::{coded, guarded, option_code, to_py, usage, CONFIG};
use crate::step::Step;
use hlatc::compile_step::spellings::{CompileOption, DefaultValue};
use hlatc::compile_step::{compile_step as compile, CompileOptions, ModelSource, PyValue};
use hlatc::models::kernels::KernelRequest;
use hlatc::usage::UsageKind;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Where the model comes from: `model` (a preset) or `config` (a path to
/// a `config.json`, or its contents as a dict).
pub(crate) fn source(
    model: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<ModelSource> {
    match (model, config) {
        (Some(_), Some(_)) => Err(usage(
            UsageKind::Conflict,
            "give model (a preset) or config (a config.json), not both",
        )),
        (Some(m), None) => Ok(ModelSource::Preset(m)),
        (None, None) => Ok(ModelSource::Preset("hlat-7b".into())),
        (None, Some(c)) => {
            if c.is_instance_of::<PyDict>() {
                let json = c
                    .py()
                    .import("json")?
                    .call_method1("dumps", (c,))
                    .map_err(|_| {
                        args::refuse(
                            args::Refused::Invalid,
                            "config",
                            c,
                            "a config.json's contents: a dict of JSON values",
                        )
                    })?;
                Ok(ModelSource::ConfigJson {
                    json: json.extract()?,
                    name: "config (dict)".into(),
                })
            } else {
                let path: std::path::PathBuf = c.extract().map_err(|_| {
                    args::refuse(
                        args::Refused::Type,
                        "config",
                        c,
                        "a config.json's path (str or os.PathLike) or its contents as a dict",
                    )
                })?;
                Ok(ModelSource::ConfigFile(path))
            }
        }
    }
}

/// Compiles a model's training step as `hlatc compile` does: the same
/// options under the same names and defaults (see `hlatc compile --help`),
/// the same bytes. Every keyword is an option of the table
/// (`hlatc::compile_step::spellings`), read by what its keyword takes
/// ([`keyword_words`]); the stub and the wrapper declare them. The GIL is
/// released while it compiles.
#[pyfunction]
#[pyo3(signature = (**options))]
pub fn compile_step(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Step> {
    let options = compile_options(options)?;
    let compiled = py.allow_threads(|| guarded(|| compile(&options).map_err(to_py)))?;
    // As `hlatc compile` notes them: a request that did not apply is said.
    for f in &compiled.kernel_fallbacks {
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(py, &category, &std::ffi::CString::new(f.to_string())?, 1)?;
    }
    Step::new(py, compiled)
}

/// `kernels=`: `None`, or a dict of kernel point to implementation
/// (`{"attention": "blocked:128"}`), each read as `--kernel` reads
/// `POINT=IMPL[:ARG]`.
pub(crate) fn kernel_requests(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<KernelRequest>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    pairs("kernels", v)?
        .into_iter()
        .flatten()
        // Coded as the CLI codes a `--kernel` it cannot read.
        .map(|w| {
            KernelRequest::parse(&w)
                .map_err(|e| CONFIG.coded(option_code("kernels"), e.to_string()))
        })
        .collect()
}

/// The library's options from `compile_step`'s keywords: each keyword's
/// value as the words its option reads, set in turn; `model` and `config`
/// together make the model's source.
pub(crate) fn compile_options(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<CompileOptions> {
    let mut options = CompileOptions::default();
    let (mut model, mut config) = (None, None);
    for (key, value) in kwargs.into_iter().flatten() {
        let key: String = key.extract()?;
        let option = CompileOption::by_keyword(&key).ok_or_else(|| {
            PyTypeError::new_err(format!(
                "compile_step() got an unexpected keyword argument '{key}'"
            ))
        })?;
        match option {
            CompileOption::Model => model = args::read::<Option<String>>("model", &value)?,
            CompileOption::Config => config = Some(value),
            _ => {
                for word in keyword_words(option, &value)? {
                    options
                        .set(option, word.as_deref())
                        .map_err(|e| refused_word(option, word.as_deref(), e))?;
                }
            }
        }
    }
    options.model = source(model, config.as_ref().filter(|c| !c.is_none()))?;
    Ok(options)
}

/// A keyword's value as its option's words (`None` for a switch given):
/// none for `None` where the option has no default of its own, or for a
/// switch left off.
fn keyword_words(option: CompileOption, v: &Bound<'_, PyAny>) -> PyResult<Vec<Option<String>>> {
    let name = option.keyword();
    let optional = matches!(option.spelling().default, DefaultValue::Unset);
    if optional && v.is_none() {
        return Ok(Vec::new());
    }
    let one = |w: String| Ok(vec![Some(w)]);
    match option.python_value() {
        Some(PyValue::Bool) => Ok(match args::read::<bool>(name, v)? {
            true => vec![None],
            false => Vec::new(),
        }),
        Some(PyValue::Int) => one(args::read::<i64>(name, v)?.to_string()),
        Some(PyValue::Float) => one(args::read::<f64>(name, v)?.to_string()),
        Some(PyValue::Name) => one(args::read::<&'static str>(name, v)?.to_string()),
        Some(PyValue::Path) => one(args::read::<PathBuf>(name, v)?.display().to_string()),
        Some(PyValue::CommaList) | Some(PyValue::Names) => pass_names(option, v),
        Some(PyValue::Pairs) => pairs(name, v),
        Some(PyValue::IntOrWord) => match v.extract::<String>() {
            Ok(word) => one(word),
            Err(_) => match <u64 as args::Accepted>::read(name, v) {
                Ok(n) => one(n.to_string()),
                Err(why) => Err(args::refuse(
                    why,
                    name,
                    v,
                    "bytes (an int 0 or more), a size such as '16GiB', or 'none'",
                )),
            },
        },
        // `config` is read with `model`; the CLI's own options have no
        // keyword, so `by_keyword` never gives one.
        Some(PyValue::Config) | None => Err(PyTypeError::new_err(format!(
            "compile_step() got an unexpected keyword argument '{name}'"
        ))),
    }
}

/// Pass names: one name or a list of them, and for `passes` one string of
/// them separated by commas.
fn pass_names(option: CompileOption, v: &Bound<'_, PyAny>) -> PyResult<Vec<Option<String>>> {
    let name = option.keyword();
    let names: Vec<String> = match v.extract::<String>() {
        Ok(one) => one
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(String::from)
            .collect(),
        Err(_) => args::read::<Vec<String>>(name, v).map_err(|_| {
            let accepted = "a list of pass names (str), or one name or a comma-separated \
                            string of them (hlatc.passes() lists them)";
            args::refuse(args::Refused::Type, name, v, accepted)
        })?,
    };
    Ok(match option.python_value() {
        // One word of them all: an empty list runs no pass.
        Some(PyValue::CommaList) => vec![Some(names.join(","))],
        _ => names.into_iter().map(Some).collect(),
    })
}

/// A dict of name to value as `NAME=VALUE` words (`kernels=`, as repeated
/// `--kernel POINT=IMPL[:ARG]` give them).
fn pairs(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Option<String>>> {
    let refused = || {
        let accepted = "a dict of kernel point to implementation, both str";
        let e = args::argument_error(v.py(), name, v, accepted, true);
        PyErr::from_value(e.into_bound(v.py()))
    };
    let dict = v.downcast::<PyDict>().map_err(|_| refused())?;
    // The entry that is not a str, named with its type: the dict itself
    // is what was asked for.
    let not_str = |what: String, x: &Bound<'_, PyAny>| {
        let type_name = x
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        let message =
            format!("{name}: {what} is {type_name}, not str (a kernel point to its implementation, both str, as {{\"attention\": \"blocked:128\"}})");
        crate::errors::usage_type_error(name, message)
    };
    dict.iter()
        .map(
            |(key, value)| match (key.extract::<String>(), value.extract::<String>()) {
                (Ok(key), Ok(value)) => Ok(Some(format!("{key}={value}"))),
                (Ok(key), Err(_)) => Err(not_str(format!("the value of {key:?}"), &value)),
                (Err(_), _) => Err(not_str(
                    format!(
                        "the key {}",
                        key.repr().map(|r| r.to_string()).unwrap_or_default()
                    ),
                    &key,
                )),
            },
        )
        .collect()
}

/// A word its option's codec refused: a kernel request the library cannot
/// read is a `ConfigError`, as a config's unknown name is; a size that
/// does not parse (`device_memory="16XB"`) an invalid argument; any other
/// (a number its field cannot hold, a name outside its set) one out of
/// range.
/// Its code is the one the CLI prints for the same refusal
/// (`option.kernels`).
fn refused_word(
    option: CompileOption,
    word: Option<&str>,
    e: hlatc::compile_step::OptionError,
) -> PyErr {
    let name = option.keyword();
    let problem = e.problem.clone();
    let code = hlatc::Error::Option(e).code();
    let message = format!("{name}={:?}: {problem}", word.unwrap_or_default());
    match option.python_value() {
        Some(PyValue::Pairs) => CONFIG.coded(code, problem),
        Some(PyValue::IntOrWord) => coded(
            crate::errors::argument_usage(UsageKind::Invalid, name, message),
            code,
        ),
        _ => coded(
            crate::errors::argument_usage(UsageKind::OutOfRange, name, message),
            code,
        ),
    }
}
