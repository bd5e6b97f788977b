//! `compile_step`: `hlatc compile`'s options from Python's keywords,
//! each name parsed by the Rust type that owns it, and the compile itself
//! (the CLI's library call, so the bundles are the same bytes).

use crate::args;
use crate::errors::{
    guarded, named, precision_named, remat_named, target_named, to_py, usage, CONFIG, USAGE,
};
use crate::step::Step;
use hlatc::compile_step::{
    compile_step as compile, CompileOptions, ModelSource, OptimizerOverrides, ReplicaGroupForm,
};
use hlatc::memory_plan::DeviceMemory;
use hlatc::models::kernels::KernelRequest;
use hlatc::models::{EpExchange, Parallelism};
use hlatc::passes::neuron_check::Chip;
use hlatc::passes::RoundingPolicy;
use hlatc::pipeline::StageSend;
use hlatc::spmd::{RankSource, SpmdForm};
use hlatc::step_programs;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Where the model comes from: `model` (a preset) or `config` (a path to
/// a `config.json`, or its contents as a dict).
pub(crate) fn source(
    model: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<ModelSource> {
    match (model, config) {
        (Some(_), Some(_)) => Err(usage(
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
                            args::Refused::Range,
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
/// the same bytes. The GIL is released while it compiles.
#[pyfunction]
#[pyo3(signature = (
    *, model=None, config=None, batch_size=None, seq_len=None, packed=false,
    separate_projections=false, capacity_factor=None, precision="bf16-mixed", rounding=None, target="neuron",
    chip=None, passes=None, disable_pass=Vec::new(), verify_each_pass=false, remat="core-attention",
    tp=1, dp=1, pp=1, ep=1, ep_exchange="all-to-all", sequence_parallel=false, zero1=false, lr_max=None, lr_min=None,
    warmup_steps=None, total_steps=None, beta1=None, beta2=None, adam_eps=None, weight_decay=None,
    clip_norm=None,
    module_markers=false, device_memory=None, grad_accum=1, spmd=None, rank_source=None,
    replica_groups="explicit", pp_send=None, kernels=None
))]
#[allow(clippy::too_many_arguments)]
pub fn compile_step(
    py: Python<'_>,
    #[pyo3(from_py_with = args::model)] model: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = args::batch_size)] batch_size: Option<i64>,
    #[pyo3(from_py_with = args::seq_len)] seq_len: Option<i64>,
    #[pyo3(from_py_with = args::packed)] packed: bool,
    #[pyo3(from_py_with = args::separate_projections)] separate_projections: bool,
    #[pyo3(from_py_with = args::capacity_factor)] capacity_factor: Option<f64>,
    #[pyo3(from_py_with = args::precision)] precision: &str,
    #[pyo3(from_py_with = args::rounding)] rounding: Option<&str>,
    #[pyo3(from_py_with = args::target)] target: &str,
    #[pyo3(from_py_with = args::chip)] chip: Option<&str>,
    #[pyo3(from_py_with = args::passes)] passes: Option<Vec<String>>,
    #[pyo3(from_py_with = args::disable_pass)] disable_pass: Vec<String>,
    #[pyo3(from_py_with = args::verify_each_pass)] verify_each_pass: bool,
    #[pyo3(from_py_with = args::remat)] remat: &str,
    #[pyo3(from_py_with = args::tp)] tp: i64,
    #[pyo3(from_py_with = args::dp)] dp: i64,
    #[pyo3(from_py_with = args::pp)] pp: i64,
    #[pyo3(from_py_with = args::ep)] ep: i64,
    #[pyo3(from_py_with = args::ep_exchange)] ep_exchange: &str,
    #[pyo3(from_py_with = args::sequence_parallel)] sequence_parallel: bool,
    #[pyo3(from_py_with = args::zero1)] zero1: bool,
    #[pyo3(from_py_with = args::lr_max)] lr_max: Option<f64>,
    #[pyo3(from_py_with = args::lr_min)] lr_min: Option<f64>,
    #[pyo3(from_py_with = args::warmup_steps)] warmup_steps: Option<i64>,
    #[pyo3(from_py_with = args::total_steps)] total_steps: Option<i64>,
    #[pyo3(from_py_with = args::beta1)] beta1: Option<f64>,
    #[pyo3(from_py_with = args::beta2)] beta2: Option<f64>,
    #[pyo3(from_py_with = args::adam_eps)] adam_eps: Option<f64>,
    #[pyo3(from_py_with = args::weight_decay)] weight_decay: Option<f64>,
    #[pyo3(from_py_with = args::clip_norm)] clip_norm: Option<f64>,
    #[pyo3(from_py_with = args::module_markers)] module_markers: bool,
    device_memory: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = args::grad_accum)] grad_accum: i64,
    #[pyo3(from_py_with = args::spmd)] spmd: Option<&str>,
    #[pyo3(from_py_with = args::rank_source)] rank_source: Option<&str>,
    #[pyo3(from_py_with = args::replica_groups)] replica_groups: &str,
    #[pyo3(from_py_with = args::pp_send)] pp_send: Option<&str>,
    kernels: Option<&Bound<'_, PyAny>>,
) -> PyResult<Step> {
    let rounding = rounding
        .map(|r| {
            RoundingPolicy::from_name(r).ok_or_else(|| {
                CONFIG.err(format!(
                    "unknown rounding policy '{r}' (known: {})",
                    RoundingPolicy::NAMES.join(", ")
                ))
            })
        })
        .transpose()?;
    let options = CompileOptions {
        model: source(model, config)?,
        separate_projections,
        capacity_factor,
        batch_size,
        seq_len,
        packed,
        optimizer: OptimizerOverrides {
            lr_max,
            lr_min,
            warmup_steps,
            total_steps,
            beta1,
            beta2,
            adam_eps,
            weight_decay,
            clip_norm,
        },
        precision: precision_named(&CONFIG, precision)?,
        rounding,
        target: target_named(&CONFIG, target)?,
        chip: chip
            .map(|c| named(&USAGE, "chip", c, &Chip::ALL, Chip::name))
            .transpose()?,
        passes,
        disable_passes: disable_pass,
        verify_each_pass,
        remat: remat_named(&CONFIG, remat)?,
        parallel: Parallelism {
            tp,
            dp,
            sequence_parallel,
            zero1,
            pp,
            ep,
            ep_exchange: named(
                &CONFIG,
                "expert exchange",
                ep_exchange,
                &EpExchange::ALL,
                EpExchange::name,
            )?,
        },
        spmd: spmd
            .map(|f| named(&CONFIG, "SPMD form", f, &SpmdForm::ALL, SpmdForm::name))
            .transpose()?,
        rank_source: rank_source
            .map(|r| {
                named(
                    &CONFIG,
                    "rank source",
                    r,
                    &RankSource::ALL,
                    RankSource::name,
                )
            })
            .transpose()?,
        module_markers,
        device_memory: device_memory_of(device_memory)?,
        grad_accum,
        replica_groups: named(
            &CONFIG,
            "replica-group form",
            replica_groups,
            &ReplicaGroupForm::ALL,
            ReplicaGroupForm::name,
        )?,
        pp_send: pp_send
            .map(|f| named(&CONFIG, "send form", f, &StageSend::ALL, StageSend::name))
            .transpose()?,
        kernels: kernel_requests(kernels)?,
    };
    let (programs, fallbacks) = py.allow_threads(|| {
        guarded(|| {
            compile(&options)
                .and_then(|c| {
                    let fallbacks = c.kernel_fallbacks.clone();
                    Ok((step_programs::into_programs(c)?, fallbacks))
                })
                .map_err(to_py)
        })
    })?;
    // As `hlatc compile` notes them: a request that did not apply is said.
    for f in fallbacks {
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(py, &category, &std::ffi::CString::new(f.to_string())?, 1)?;
    }
    Step::of_programs(py, programs)
}

/// `kernels=`: `None`, or a dict of kernel point to implementation
/// (`{"attention": "blocked:128"}`), each read as `--kernel` reads
/// `POINT=IMPL[:ARG]`.
pub(crate) fn kernel_requests(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<KernelRequest>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let refused = || {
        let accepted = "a dict of kernel point to implementation, both str";
        let e = args::argument_error(v.py(), "kernels", v, accepted, true);
        PyErr::from_value(e.into_bound(v.py()))
    };
    let dict = v.downcast::<PyDict>().map_err(|_| refused())?;
    let mut out = Vec::new();
    for (point, implementation) in dict.iter() {
        let (Ok(point), Ok(implementation)) = (
            point.extract::<String>(),
            implementation.extract::<String>(),
        ) else {
            return Err(refused());
        };
        let request = KernelRequest::parse(&format!("{point}={implementation}"))
            .map_err(|e| CONFIG.err(e.to_string()))?;
        out.push(request);
    }
    Ok(out)
}

/// `device_memory=`: `None` (the target's default), bytes, or a size as
/// `--device-memory` reads it (`"16GiB"`, `"none"`).
fn device_memory_of(v: Option<&Bound<'_, PyAny>>) -> PyResult<DeviceMemory> {
    const TAKES: &str = "bytes (an int 0 or more), a size such as '16GiB', or 'none'";
    let Some(v) = v else {
        return Ok(DeviceMemory::TargetDefault);
    };
    if let Ok(s) = v.extract::<String>() {
        return s.parse().map_err(|e: hlatc::memory_plan::SizeError| {
            args::out_of_range("device_memory", format!("device_memory={s:?}: {e}"))
        });
    }
    match <u64 as args::Accepted>::read("device_memory", v) {
        Ok(bytes) => Ok(DeviceMemory::Bytes(bytes)),
        Err(why) => Err(args::refuse(why, "device_memory", v, TAKES)),
    }
}
