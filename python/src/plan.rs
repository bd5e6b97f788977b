//! `hlatc.plan`: `hlatc plan`'s search from Python, its candidates as
//! typed objects.

use crate::args;
use crate::compile::source;
use crate::errors::{guarded, instance_named, precision_named, remat_named, to_py, Unknown};
use hlatc::models::KernelRequest;
use hlatc::plan::reports::CalibrationRequest;
use hlatc::plan::{Candidate as RustCandidate, PlanOptions, PlanOutcome, PlanRequest};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use std::collections::BTreeMap;

/// One layout's prediction (`hlatc plan`'s printed figures).
#[pyclass(frozen, get_all, module = "hlatc")]
pub struct Candidate {
    layout: String,
    tp: i64,
    pp: i64,
    dp: i64,
    /// A mixture of experts' EP degree (1 for a dense model) and exchange.
    ep: i64,
    ep_exchange: &'static str,
    sequence_parallel: bool,
    zero1: bool,
    /// FSDP's shard group (1: the weights are not divided).
    fsdp: i64,
    remat: String,
    micro_batch: i64,
    precision: String,
    step_seconds: f64,
    seq_per_s: f64,
    tokens_per_s: f64,
    mfu: f64,
    memory_per_rank: u64,
    memory: BTreeMap<&'static str, u64>,
    fits: bool,
    cost_per_4m_tokens: Option<f64>,
    breakdown: BTreeMap<&'static str, f64>,
    command: String,
    exact: bool,
    preflight_warnings: Vec<String>,
}

#[pymethods]
impl Candidate {
    fn __repr__(&self) -> String {
        format!(
            "Candidate({}: {:.2} seq/s, {:.2} GiB per rank{})",
            self.layout,
            self.seq_per_s,
            self.memory_per_rank as f64 / (1u64 << 30) as f64,
            if self.fits { "" } else { ", does not fit" }
        )
    }
}

impl From<&RustCandidate> for Candidate {
    fn from(c: &RustCandidate) -> Self {
        let l = &c.parsed;
        let b = &c.breakdown;
        Candidate {
            layout: c.layout.clone(),
            tp: l.parallel.tp,
            pp: l.parallel.pp,
            dp: l.parallel.dp,
            ep: l.parallel.ep,
            ep_exchange: l.parallel.ep_exchange.name(),
            sequence_parallel: l.parallel.sequence_parallel,
            zero1: l.parallel.zero1,
            fsdp: l.parallel.fsdp,
            remat: l.remat.name().to_string(),
            micro_batch: l.micro_batch,
            precision: l.precision.name().to_string(),
            step_seconds: c.step_seconds,
            seq_per_s: c.seq_per_s,
            tokens_per_s: c.tokens_per_s,
            mfu: c.mfu,
            memory_per_rank: c.memory_per_rank,
            memory: c.memory.parts().into_iter().collect(),
            fits: c.fits,
            cost_per_4m_tokens: c.cost_per_4m_tokens,
            breakdown: BTreeMap::from([
                ("matmul", b.matmul),
                ("memory", b.memory),
                ("overlapped", b.overlapped),
                ("link", b.link),
                ("network", b.network),
                ("latency", b.latency),
                ("launch", b.launch),
            ]),
            command: c.command.clone(),
            exact: c.exact,
            preflight_warnings: c.preflight_warnings.clone(),
        }
    }
}

/// One measured run against its prediction.
#[pyclass(frozen, get_all, module = "hlatc")]
pub struct PredictedRun {
    /// The run: its CSV and line.
    run: String,
    model: String,
    layout: String,
    seq_len: i64,
    measured_seq_per_s: f64,
    predicted_seq_per_s: f64,
    /// `predicted / measured - 1`.
    relative_error: f64,
}

#[pymethods]
impl PredictedRun {
    fn __repr__(&self) -> String {
        format!(
            "PredictedRun({} {}: measured {:.2} seq/s, predicted {:.2} ({:+.1}%))",
            self.run,
            self.layout,
            self.measured_seq_per_s,
            self.predicted_seq_per_s,
            100.0 * self.relative_error
        )
    }
}

fn run_errors(
    py: Python<'_>,
    errors: &[hlatc::plan::calibration::RunError],
) -> PyResult<Vec<Py<PredictedRun>>> {
    errors
        .iter()
        .map(|e| {
            Py::new(
                py,
                PredictedRun {
                    run: e.run.clone(),
                    model: e.model.clone(),
                    layout: e.layout.clone(),
                    seq_len: e.seq_len,
                    measured_seq_per_s: e.measured_seq_per_s,
                    predicted_seq_per_s: e.predicted_seq_per_s,
                    relative_error: e.relative_error,
                },
            )
        })
        .collect()
}

/// The fit in use, reported (`plan(report=True)`, `hlatc plan --report`):
/// its parameters, each run's error, and each run predicted from a fit to
/// the others.
#[pyclass(frozen, get_all, module = "hlatc")]
pub struct CalibrationReport {
    /// The CSV fitted to.
    path: String,
    runs: usize,
    parameters: BTreeMap<&'static str, f64>,
    in_sample: Vec<Py<PredictedRun>>,
    /// Empty for a fit to one run.
    leave_one_out: Vec<Py<PredictedRun>>,
}

#[pymethods]
impl CalibrationReport {
    fn __repr__(&self) -> String {
        format!("CalibrationReport({}: {} runs)", self.path, self.runs)
    }
}

/// Runs of a CSV predicted by the parameters in use, never fitted to
/// (`plan(predict=...)`, `hlatc plan --predict`).
#[pyclass(frozen, get_all, module = "hlatc")]
pub struct Prediction {
    /// The CSV predicted.
    path: String,
    errors: Vec<Py<PredictedRun>>,
}

#[pymethods]
impl Prediction {
    fn __repr__(&self) -> String {
        format!("Prediction({}: {} runs)", self.path, self.errors.len())
    }
}

/// A search's result: every layout evaluated, those that fit first, each
/// group fastest first; and the calibration reports asked for.
/// What a capacity factor gives a dropless mixture of experts: the plan's
/// best layout, dropless, against the best under the factor.
#[pyclass(frozen, get_all, module = "hlatc")]
pub struct CapacityAdvice {
    /// The capacity factor (`capacity_factor=`) advised.
    factor: f64,
    /// The plan's best layout's seq/s, dropless.
    dropless_seq_per_s: f64,
    /// The best layout under the factor, with the command that builds it.
    capped: Py<Candidate>,
}

#[pymethods]
impl CapacityAdvice {
    fn __repr__(&self) -> String {
        let c = self.capped.get();
        format!(
            "CapacityAdvice(capacity_factor={}: {} at {:.2} seq/s, dropless {:.2})",
            self.factor, c.layout, c.seq_per_s, self.dropless_seq_per_s
        )
    }
}

#[pyclass(frozen, get_all, module = "hlatc")]
pub struct Plan {
    /// None when only reports were asked for (no search).
    model: Option<String>,
    instance: String,
    nodes: i64,
    global_batch: i64,
    /// None when only reports were asked for (no search).
    seq_len: Option<i64>,
    /// What the cost model was fitted to, in words.
    calibrated_on: String,
    report: Option<Py<CalibrationReport>>,
    predicted: Option<Py<Prediction>>,
    candidates: Vec<Py<Candidate>>,
    /// Layouts not compiled: their state alone is over a core's memory.
    too_large: Vec<String>,
    /// Layouts not compiled because a twin decides them (by memory or remat), with why.
    pruned: Vec<(String, String)>,
    /// Layouts hlatc could not compile, with why.
    refused: Vec<(String, String)>,
    /// For a dropless mixture of experts, what a capacity factor gives.
    capacity_advice: Option<Py<CapacityAdvice>>,
    seconds: f64,
}

#[pymethods]
impl Plan {
    /// Whether layouts were searched: not when `report` or `predict` was
    /// asked without a model, config or layout, as `hlatc plan` then
    /// prints the reports alone.
    #[getter]
    fn searched(&self) -> bool {
        self.model.is_some()
    }

    /// The best layout that fits, or None.
    fn best(&self, py: Python<'_>) -> Option<Py<Candidate>> {
        self.candidates
            .first()
            .filter(|c| c.get().fits)
            .map(|c| c.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        match &self.model {
            Some(model) => format!(
                "Plan({model} on {} x {}: {} layouts evaluated)",
                self.nodes,
                self.instance,
                self.candidates.len()
            ),
            None => "Plan(calibration reports only: no search)".to_string(),
        }
    }
}

/// Plans a model's layout on a cluster, as `hlatc plan` does (the same
/// options under the same names and defaults; see `hlatc plan --help`).
/// The GIL is released while it compiles.
#[pyfunction]
#[pyo3(signature = (
    *, model=None, config=None, seq_len=None, precision=None, instance="trn1.32xlarge",
    nodes=1, global_batch=1024, top=5, price=None, layout=None, calibration=None, threads=0,
    kernels=None, capacity_factor=None, json=None, plot=None, predict=None, report=false
))]
#[allow(clippy::too_many_arguments)]
pub fn plan(
    py: Python<'_>,
    #[pyo3(from_py_with = args::model)] model: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = args::seq_len)] seq_len: Option<i64>,
    #[pyo3(from_py_with = args::precision)] precision: Option<&str>,
    #[pyo3(from_py_with = args::instance)] instance: &str,
    #[pyo3(from_py_with = args::nodes)] nodes: i64,
    #[pyo3(from_py_with = args::global_batch)] global_batch: i64,
    #[pyo3(from_py_with = args::top)] top: usize,
    #[pyo3(from_py_with = args::price)] price: Option<f64>,
    #[pyo3(from_py_with = args::layout)] layout: Option<String>,
    #[pyo3(from_py_with = args::calibration)] calibration: Option<std::path::PathBuf>,
    #[pyo3(from_py_with = args::threads)] threads: usize,
    kernels: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = args::capacity_factor)] capacity_factor: Option<f64>,
    #[pyo3(from_py_with = args::json)] json: Option<std::path::PathBuf>,
    #[pyo3(from_py_with = args::plot)] plot: Option<std::path::PathBuf>,
    #[pyo3(from_py_with = args::predict)] predict: Option<std::path::PathBuf>,
    #[pyo3(from_py_with = args::report)] report: bool,
) -> PyResult<Plan> {
    let request = PlanRequest {
        model_given: model.is_some() || config.is_some(),
        options: PlanOptions {
            model: source(model, config)?,
            precision: (precision.map(|p| precision_named(Unknown::Config, p))).transpose()?,
            instance: instance_named(instance)?,
            seq_len,
            nodes,
            global_batch,
            top,
            price,
            layout,
            threads,
            attention: priced_attention(kernels)?,
            capacity_factor,
            ..PlanOptions::default()
        },
        calibration: CalibrationRequest {
            calibration,
            report,
            predict,
        },
        json,
        plot,
    };
    let outcome = guarded(|| py.allow_threads(|| request.run()).map_err(to_py))?;
    Plan::of(py, outcome)
}

/// What every layout's programs are priced with, as `hlatc plan --kernel`
/// takes it: the attention point's request among `kernels=`.
fn priced_attention(kernels: Option<&Bound<'_, PyAny>>) -> PyResult<KernelRequest> {
    let requests = crate::compile::kernel_requests(kernels)?;
    hlatc::kernel_choice::attention_request(&requests).map_err(|e| to_py(e.into()))
}

impl Plan {
    /// A plan's outcome as Python's objects.
    fn of(py: Python<'_>, outcome: PlanOutcome) -> PyResult<Plan> {
        let PlanOutcome {
            plan: p,
            reports,
            options,
        } = outcome;
        let report = reports
            .report
            .map(|r| {
                Py::new(
                    py,
                    CalibrationReport {
                        path: r.path,
                        runs: r.runs,
                        parameters: r.fit.params.named().into_iter().collect(),
                        in_sample: run_errors(py, &r.fit.in_sample)?,
                        leave_one_out: run_errors(py, &r.fit.leave_one_out)?,
                    },
                )
            })
            .transpose()?;
        let predicted = reports
            .predicted
            .map(|p| {
                Py::new(
                    py,
                    Prediction {
                        path: p.path,
                        errors: run_errors(py, &p.errors)?,
                    },
                )
            })
            .transpose()?;
        let mut plan = Plan {
            model: None,
            instance: options.instance.to_string(),
            nodes: options.nodes,
            global_batch: options.global_batch,
            seq_len: None,
            calibrated_on: reports.calibrated_on,
            report,
            predicted,
            candidates: Vec::new(),
            too_large: Vec::new(),
            pruned: Vec::new(),
            refused: Vec::new(),
            capacity_advice: None,
            seconds: 0.0,
        };
        if let Some(p) = p {
            plan.candidates = p
                .candidates
                .iter()
                .map(|c| Py::new(py, Candidate::from(c)))
                .collect::<PyResult<Vec<_>>>()?;
            plan.model = Some(p.model);
            plan.seq_len = Some(p.seq_len);
            plan.too_large = p.too_large.into_iter().map(|(l, _)| l).collect();
            plan.pruned = p
                .pruned
                .into_iter()
                .map(|(l, why)| (l, why.to_string()))
                .collect();
            plan.refused = p.refused;
            plan.capacity_advice = p
                .capacity_advice
                .map(|a| -> PyResult<Py<CapacityAdvice>> {
                    let capped = Py::new(py, Candidate::from(&a.capped))?;
                    Py::new(
                        py,
                        CapacityAdvice {
                            factor: a.factor,
                            dropless_seq_per_s: a.dropless_seq_per_s,
                            capped,
                        },
                    )
                })
                .transpose()?;
            plan.seconds = p.seconds;
        }
        Ok(plan)
    }
}

/// Appends one measured run to a calibration CSV (`hlatc plan
/// --calibration` fits such a file), writing the header when the file is
/// new: a run of a few steps on the cluster it names joins the runs the
/// plan is fitted to.
#[pyfunction]
#[pyo3(signature = (
    path, *, model, instance, nodes, tp, dp, seq_per_s, global_batch, seq_len, pp=1,
    sequence_parallel=false, zero1=false, remat="core-attention", micro_batch=1,
    precision="bf16-master", sdk=args::Text::of("unknown"), source=args::Text::of("hlatc")
),
// PyO3 prints a default that is not a literal as `...`; `help()` and
// stubtest read this signature, which gives `sdk`'s and `source`'s.
text_signature = "(path, *, model, instance, nodes, tp, dp, seq_per_s, global_batch, seq_len, \
    pp=1, sequence_parallel=False, zero1=False, remat='core-attention', micro_batch=1, \
    precision='bf16-master', sdk='unknown', source='hlatc')"
)]
#[allow(clippy::too_many_arguments)]
pub fn append_measured_run(
    #[pyo3(from_py_with = args::path)] path: std::path::PathBuf,
    #[pyo3(from_py_with = args::model)] model: String,
    #[pyo3(from_py_with = args::instance)] instance: &str,
    #[pyo3(from_py_with = args::nodes)] nodes: i64,
    #[pyo3(from_py_with = args::tp)] tp: i64,
    #[pyo3(from_py_with = args::dp)] dp: i64,
    #[pyo3(from_py_with = args::seq_per_s)] seq_per_s: f64,
    #[pyo3(from_py_with = args::global_batch)] global_batch: i64,
    #[pyo3(from_py_with = args::seq_len)] seq_len: i64,
    #[pyo3(from_py_with = args::pp)] pp: i64,
    #[pyo3(from_py_with = args::sequence_parallel)] sequence_parallel: bool,
    #[pyo3(from_py_with = args::zero1)] zero1: bool,
    #[pyo3(from_py_with = args::remat)] remat: &str,
    #[pyo3(from_py_with = args::micro_batch)] micro_batch: i64,
    #[pyo3(from_py_with = args::precision)] precision: &str,
    #[pyo3(from_py_with = args::sdk)] sdk: args::Text,
    #[pyo3(from_py_with = args::source)] source: args::Text,
) -> PyResult<()> {
    use hlatc::plan::calibration::{append_run, MeasuredRun};
    use hlatc::plan::Layout;
    use hlatc::plan::PlanError;
    let instance = instance_named(instance)?;
    let layout = Layout {
        parallel: hlatc::models::Parallelism {
            tp,
            pp,
            dp,
            sequence_parallel,
            zero1,
            ..hlatc::models::Parallelism::SINGLE
        },
        remat: remat_named(Unknown::Config, remat)?,
        micro_batch,
        precision: precision_named(Unknown::Config, precision)?,
        attention: hlatc::models::KernelRequest::plain(hlatc::models::KernelPoint::Attention),
    };
    let run = MeasuredRun {
        line: 0,
        model: hlatc::compile_step::ModelSource::Preset(model.clone()),
        model_label: model,
        sdk: sdk.0.into_owned(),
        instance,
        nodes,
        layout,
        global_batch,
        seq_len,
        seq_per_s,
        source: source.0.into_owned(),
    };
    // `RunRefused` names the field, not why: a `nodes` or `global_batch`
    // of 1 or more was refused for the layout (cores it does not fill,
    // replicas that do not divide the batch), which a count below 1 is not.
    append_run(&path, &run).map_err(|e| match &e {
        PlanError::RunRefused { field, .. }
            if (*field == "nodes" && nodes >= 1)
                || (*field == "global_batch" && global_batch >= 1) =>
        {
            crate::errors::argument_usage(UsageKind::Conflict, field, e.to_string())
        }
        _ => to_py(e.into()),
    })
}
