//! The native module of the `hlatc` Python package: a thin PyO3 layer over
//! the `hlatc` library. The Python side (`hlatc/__init__.py`) adds NumPy
//! arrays and the JAX bridge; the stubs are `hlatc/_hlatc.pyi`, checked
//! against this module by `mypy.stubtest` (scripts/test.sh).

mod args;
mod arrays;
mod checkpoint;
mod compile;
mod data;
mod errors;
mod fit;
mod identity;
mod listing;
mod module;
mod plan;
mod plot;
mod schedule;
mod step;
mod tensor_info;
mod tensors;
mod tick_plan;
mod trainer;

use hlatc::compile_step::spellings::CompileOption;
use hlatc::metrics::Series;
use hlatc::pipeline::Phase;
use hlatc::token_data::RawDtype;
use hlatc::train::loader::{Packing, SourceFormat};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use std::collections::BTreeMap;

/// The names each option of a fixed set of values takes, from the Rust
/// types that parse them (`model`: the presets): what the `Literal` types
/// of `hlatc._types` list, which a test holds equal.
#[pyfunction]
fn choices() -> BTreeMap<&'static str, Vec<&'static str>> {
    choice_lists()
}

/// [`choices`], for Rust: also what [`args`] reads a name of a fixed set
/// against, by the argument's name.
pub(crate) fn choice_lists() -> BTreeMap<&'static str, Vec<&'static str>> {
    fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
        all.iter().map(|t| name(*t)).collect()
    }
    // Every compile option of a fixed set, under its keyword, from the
    // option table; then the other functions' sets.
    let compile_sets = CompileOption::ALL.iter().filter_map(|o| {
        let keyword = o.spelling().python?;
        Some((keyword, o.choices()?))
    });
    let mut lists: BTreeMap<&'static str, Vec<&'static str>> = compile_sets.collect();
    lists.extend([
        ("format", names(&SourceFormat::ALL, SourceFormat::name)),
        ("packing", names(&Packing::ALL, Packing::name)),
        ("raw_dtype", names(&RawDtype::ALL, RawDtype::name)),
        ("series", names(&Series::ALL, Series::column)),
        ("phase", names(&Phase::ALL, Phase::name)),
        (
            "program",
            names(
                &hlatc::bundle::ProgramName::ALL,
                hlatc::bundle::ProgramName::name,
            ),
        ),
        (
            "instance",
            names(&hlatc::plan::Instance::ALL, hlatc::plan::Instance::name),
        ),
    ]);
    lists
}

/// The program a bundle manifest's `programs[].name` names, in the one
/// spelling (its folder's): `micro step`, as bundles before it wrote
/// gradient accumulation's, is `micro_step`. An unknown name raises
/// `UsageError` naming the known ones.
#[pyfunction]
fn program_name(name: &str) -> PyResult<&'static str> {
    hlatc::bundle::ProgramName::from_manifest(name)
        .map(|p| p.name())
        .map_err(|e| errors::usage(UsageKind::OutOfRange, e.to_string()))
}

/// Every option of a compile as `hlatc compile` and `compile_step` spell
/// it: `(flag, keyword or None, default kind, default value or None)`,
/// the kind `off`, `unset`, `empty` or `value` (`hlatc::compile_step::spellings`),
/// which a test holds `compile_step`'s signature to.
#[pyfunction]
fn compile_spellings() -> Vec<(
    &'static str,
    Option<&'static str>,
    &'static str,
    Option<&'static str>,
)> {
    use hlatc::compile_step::spellings::{DefaultValue, SPELLINGS};
    SPELLINGS
        .iter()
        .map(|s| {
            let (kind, value) = match s.default {
                DefaultValue::Off => ("off", None),
                DefaultValue::Unset => ("unset", None),
                DefaultValue::Empty => ("empty", None),
                DefaultValue::Value(v) => ("value", Some(v)),
            };
            (s.flag, s.python, kind, value)
        })
        .collect()
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _hlatc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Messages name options as Python users write them (`tp=3`, not the
    // command line's `--tp 3`): this process is a Python one.
    hlatc::models::option_name::spell_as(hlatc::models::option_name::Spelling::Keywords);
    errors::register(m)?;
    // `UsageError.category`'s names, from the Rust enum: what the Python
    // side's own refusals (`hlatc._args.UsageKind`) are held to.
    m.add(
        "USAGE_CATEGORIES",
        UsageKind::ALL.map(UsageKind::name).to_vec(),
    )?;
    m.add_function(wrap_pyfunction!(compile::compile_step, m)?)?;
    m.add_function(wrap_pyfunction!(choices, m)?)?;
    m.add_function(wrap_pyfunction!(args::argument_error, m)?)?;
    m.add_function(wrap_pyfunction!(program_name, m)?)?;
    m.add("BUNDLE_FORMATS", hlatc::bundle::READ_FORMATS.to_vec())?;
    m.add("PROGRAM_FORMATS", hlatc::bundle::PROGRAM_FORMATS.to_vec())?;
    m.add_function(wrap_pyfunction!(compile_spellings, m)?)?;
    m.add_function(wrap_pyfunction!(module::load_module, m)?)?;
    m.add_function(wrap_pyfunction!(module::optimize, m)?)?;
    m.add_function(wrap_pyfunction!(module::passes, m)?)?;
    m.add_function(wrap_pyfunction!(plot::plot_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan, m)?)?;
    m.add_class::<identity::RunIdentity>()?;
    m.add_function(wrap_pyfunction!(identity::init_of_file, m)?)?;
    m.add_function(wrap_pyfunction!(listing::expand_listing, m)?)?;
    m.add_class::<listing::ListedBundle>()?;
    m.add_class::<listing::ListedProgram>()?;
    // The groups of fields `allow_changes` names, as `--allow-resume-change`
    // takes them: the Rust list, not a copy.
    m.add(
        "IDENTITY_GROUPS",
        hlatc::run_identity::FIELD_GROUPS.to_vec(),
    )?;
    m.add_function(wrap_pyfunction!(plan::append_measured_run, m)?)?;
    m.add_class::<plan::Plan>()?;
    m.add_class::<plan::Candidate>()?;
    m.add_class::<plan::CapacityAdvice>()?;
    m.add_class::<plan::PredictedRun>()?;
    m.add_class::<plan::CalibrationReport>()?;
    m.add_class::<plan::Prediction>()?;
    m.add_function(wrap_pyfunction!(tensors::read_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(tensors::rank_file, m)?)?;
    m.add_function(wrap_pyfunction!(tensors::write_safetensors, m)?)?;
    m.add_class::<step::Step>()?;
    m.add_class::<tensor_info::TensorInfo>()?;
    m.add_class::<schedule::Schedule>()?;
    m.add_class::<tick_plan::TickPlan>()?;
    m.add_class::<tick_plan::TickRouting>()?;
    m.add_class::<module::Module>()?;
    m.add_class::<trainer::Trainer>()?;
    m.add_class::<data::Loader>()?;
    m.add_function(wrap_pyfunction!(data::data_layout, m)?)?;
    m.add_class::<fit::RunCheckpoints>()?;
    m.add_function(wrap_pyfunction!(fit::fit_steps, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::metrics_csv, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::read_metrics_csv, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::step_dir_name, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::loader_file, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_prepare_save, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_write_rank, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_write_file, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_write_marker, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_open, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_read_marker, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_problem, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_steps, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::sharded_prune, m)?)?;
    // A checkpoint's files, named once (the train crate's names).
    m.add("STATE_FILE", hlatc::artifacts::checkpoint::STATE_FILE)?;
    m.add("LOADER_FILE", hlatc::artifacts::checkpoint::LOADER_FILE)?;
    m.add("METRICS_FILE", hlatc::artifacts::checkpoint::METRICS_FILE)?;
    m.add("COMPLETE", hlatc::artifacts::checkpoint::COMPLETE)?;
    m.add(
        "CHECKPOINT_FORMAT",
        hlatc::artifacts::checkpoint::sharded::FORMAT,
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
