//! Measured runs, and the cost model's parameters fitted to them.
//!
//! A calibration file is a CSV of runs, one per row, with the columns of
//! the shared `published-trn1.csv` ([`COLUMNS`]). Each run's layout is
//! compiled and read like any other ([`super::evaluate`]); its step time
//! is `global_batch / seq_per_s`. The fit is linear least squares on
//! relative error, `sum_i (t_i(theta) / y_i - 1)^2`, with a ridge that
//! draws each parameter toward its prior in proportion,
//! `RIDGE * sum_j (theta_j / prior_j - 1)^2`: runs that share a layout (the
//! shared file has three layouts over twelve rows) cannot separate six
//! parameters, and the ridge keeps what they do not decide at its prior
//! instead of anywhere.

use super::cost::{features, Assumptions, CostParams, Row, StepFeatures, PARAMS, PARAM_INFO};
use super::evaluate::{evaluate, Fidelity};
use super::hardware::Instance;
use super::layout::{check_layout, Layout};
use super::row_fault::RowFault;
use super::PlanError;
use crate::compile_step::ModelSource;
use hlatc_compiler::util::input_file;
use hlatc_models::kernels::{KernelPoint, KernelRequest};
use hlatc_passes::RematPolicy;
use hlatc_step::precision::Precision;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The columns of a calibration file, in the shared file's order.
pub const COLUMNS: [&str; 16] = [
    "model",
    "sdk",
    "instance",
    "nodes",
    "tp",
    "pp",
    "dp",
    "sequence_parallel",
    "zero1",
    "remat",
    "micro_batch",
    "global_batch",
    "seq_len",
    "precision",
    "seq_per_s",
    "source",
];

/// The fields a measured run is refused by ([`PlanError::RunRefused`],
/// its code `plan.run_refused.FIELD`): its columns, the FSDP degree a row
/// cannot record, and the layout as a whole.
pub const RUN_FIELDS: [&str; 18] = {
    let mut fields = [""; 18];
    let mut i = 0;
    while i < COLUMNS.len() {
        fields[i] = COLUMNS[i];
        i += 1;
    }
    fields[16] = "fsdp";
    fields[17] = "layout";
    fields
};

/// How strongly the fit draws the parameters toward their priors.
pub const RIDGE: f64 = 0.02;

/// The smallest each fitted parameter may be: no run achieves more than
/// a peak (the reciprocal fractions are at least 1), and no latency or
/// launch is negative.
const FLOOR: [f64; PARAMS] = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0];

/// The runs the built-in parameters are fitted to: the Neuron SDK's
/// published training table (`../shared/planner/published-trn1.csv`).
pub const BUILTIN_FILE: &str = "data/planner/published-trn1.csv";

/// [`BUILTIN_FILE`] and the configs it names, in the binary, so that
/// `hlatc plan --report` reads them from any directory.
const BUILTIN_TEXT: &str = include_str!("../../data/planner/published-trn1.csv");
const BUILTIN_CONFIGS: [(&str, &str); 1] = [(
    "configs/llama2-13b.json",
    include_str!("../../data/planner/configs/llama2-13b.json"),
)];

/// The runs the built-in parameters are fitted to.
pub fn builtin_calibration() -> Result<Calibration, PlanError> {
    Calibration::parse_with(BUILTIN_TEXT, BUILTIN_FILE, &|label| {
        BUILTIN_CONFIGS
            .iter()
            .find(|(path, _)| *path == label)
            .map(|(path, json)| ModelSource::ConfigJson {
                json: json.to_string(),
                name: format!("data/planner/{path}"),
            })
            .ok_or_else(|| RowFault::NotBuiltIn {
                model: label.to_string(),
            })
    })
}

/// The built-in parameters: [`fit`] over [`BUILTIN_FILE`] with the default
/// [`Assumptions`]. A test fits them again and holds them equal.
pub fn builtin_params() -> CostParams {
    CostParams(BUILTIN)
}

const BUILTIN: [f64; PARAMS] = [
    2.0948637685424374,
    2.0597204728625447,
    1.0,
    2.1657426255306254,
    0.4294339822715125,
    0.0009973543240910673,
];

/// One measured run.
#[derive(Clone, Debug)]
pub struct MeasuredRun {
    /// The row's line in its file (1-based).
    pub line: usize,
    pub model: ModelSource,
    /// The model column as written.
    pub model_label: String,
    pub sdk: String,
    pub instance: Instance,
    pub nodes: i64,
    pub layout: Layout,
    pub global_batch: i64,
    pub seq_len: i64,
    pub seq_per_s: f64,
    pub source: String,
}

impl MeasuredRun {
    /// Why the run cannot be a calibration row, in words: a count below 1,
    /// or a layout that does not fill its cluster's cores.
    pub fn problem(&self) -> Option<RowFault> {
        let p = &self.layout.parallel;
        let counts = [
            ("nodes", self.nodes),
            ("tp", p.tp),
            ("pp", p.pp),
            ("dp", p.dp),
            ("micro_batch", self.layout.micro_batch),
            ("global_batch", self.global_batch),
            ("seq_len", self.seq_len),
        ];
        if let Some((column, v)) = counts.into_iter().find(|(_, v)| *v < 1) {
            return Some(RowFault::NotPositiveWhole {
                column,
                value: v.to_string(),
            });
        }
        if p.shards_weights() {
            return Some(RowFault::FsdpUnrecorded { fsdp: p.fsdp });
        }
        if let Some(why) = super::layout::not_on_chip(self.layout.precision, self.instance.chip()) {
            return Some(RowFault::PrecisionNotOnTrainium {
                value: self.layout.precision.name().to_string(),
                why,
            });
        }
        let cores = self.nodes * self.instance.hardware().cores_per_node;
        (self.layout.ranks() != cores).then(|| RowFault::CoresUnfilled {
            tp: p.tp,
            pp: p.pp,
            dp: p.dp,
            ranks: self.layout.ranks(),
            nodes: self.nodes,
            instance: self.instance.to_string(),
            cores,
        })
    }

    /// The measured optimizer step, seconds.
    pub fn step_seconds(&self) -> f64 {
        self.global_batch as f64 / self.seq_per_s
    }
}

/// A calibration file's runs.
#[derive(Clone, Debug)]
pub struct Calibration {
    pub path: String,
    pub runs: Vec<MeasuredRun>,
}

impl Calibration {
    /// Reads `path`; models that are not presets are config paths relative
    /// to it.
    pub fn read(path: &Path) -> Result<Calibration, PlanError> {
        let text = input_file::read_to_string(path, |source| PlanError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Calibration::parse(&text, &path.display().to_string(), &base)
    }

    /// Reads a calibration file's text; `label` names it in errors, and
    /// models that are not presets are config paths relative to `base`.
    pub fn parse(text: &str, label: &str, base: &Path) -> Result<Calibration, PlanError> {
        Calibration::parse_with(text, label, &|model| {
            let path: PathBuf = base.join(model);
            if path.is_file() {
                Ok(ModelSource::ConfigFile(path))
            } else {
                Err(RowFault::NoSuchModel {
                    model: model.to_string(),
                    path,
                })
            }
        })
    }

    /// [`Calibration::parse`], with `config` finding the models that are
    /// not presets.
    pub fn parse_with(
        text: &str,
        label: &str,
        config: &dyn Fn(&str) -> Result<ModelSource, RowFault>,
    ) -> Result<Calibration, PlanError> {
        let err = |line: usize, message: String| PlanError::Calibration {
            path: label.to_string(),
            line,
            message,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(k, l)| (k + 1, l.trim_start_matches('\u{feff}').trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let (_, header) = lines.next().ok_or_else(|| {
            err(
                1,
                "empty: a header row and at least one run are needed".into(),
            )
        })?;
        let names: Vec<&str> = header.split(',').map(str::trim).collect();
        for n in &names {
            if !COLUMNS.contains(n) {
                return Err(err(
                    1,
                    format!("unknown column '{n}' (the columns: {})", COLUMNS.join(",")),
                ));
            }
        }
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(k, n)| (*n, k)).collect();
        if let Some(missing) = COLUMNS.iter().find(|c| !index.contains_key(*c)) {
            return Err(err(1, format!("no '{missing}' column")));
        }
        let mut runs = Vec::new();
        for (line, row) in lines {
            let cells: Vec<&str> = row.split(',').map(str::trim).collect();
            if cells.len() != names.len() {
                return Err(err(
                    line,
                    format!("{} cells for {} columns", cells.len(), names.len()),
                ));
            }
            let row = Cells {
                cells: &cells,
                index: &index,
            };
            runs.push(read_run(line, &row, config).map_err(|f| err(line, f.to_string()))?);
        }
        if runs.is_empty() {
            return Err(err(1, "no runs below the header".into()));
        }
        Ok(Calibration {
            path: label.to_string(),
            runs,
        })
    }

    /// Each run's step at the peaks ([`features`]), compiling each distinct
    /// layout once.
    pub fn features(&self, a: &Assumptions) -> Result<Vec<StepFeatures>, PlanError> {
        self.features_priced_with(a, &KernelRequest::plain(KernelPoint::Attention))
    }

    /// [`Calibration::features`] of hlatc's programs with attention
    /// computed by `attention` (`--kernel attention=blocked`), whatever
    /// the measured runs used.
    pub fn features_priced_with(
        &self,
        a: &Assumptions,
        attention: &KernelRequest,
    ) -> Result<Vec<StepFeatures>, PlanError> {
        let mut seen: HashMap<String, StepFeatures> = HashMap::new();
        let mut out = Vec::new();
        for r in &self.runs {
            let r = &MeasuredRun {
                layout: Layout {
                    attention: attention.clone(),
                    ..r.layout
                },
                ..r.clone()
            };
            let key = format!(
                "{:?} {} {} {} {} {}",
                r.model, r.instance, r.nodes, r.seq_len, r.global_batch, r.layout
            );
            if let Some(f) = seen.get(&key) {
                out.push(f.clone());
                continue;
            }
            let at = |e: PlanError| PlanError::Calibration {
                path: self.path.clone(),
                line: r.line,
                message: e.to_string(),
            };
            let (cfg, name) = r
                .model
                .resolve(false)
                .map_err(|e| at(PlanError::Cluster(e.to_string())))?;
            if let Some(fault) = experts_unrecorded(&cfg) {
                return Err(at(PlanError::Cluster(fault.to_string())));
            }
            let hw = r.instance.hardware();
            check_layout(
                &cfg,
                &r.layout,
                r.seq_len,
                r.global_batch,
                r.nodes * hw.cores_per_node,
            )
            .map_err(at)?;
            let e = evaluate(
                &cfg,
                &name,
                r.seq_len,
                r.global_batch,
                &r.layout,
                hw.cores_per_node,
                r.instance.chip(),
                Fidelity::Extrapolated,
            )
            .map_err(at)?;
            let f = features(&e.work, &hw, a);
            seen.insert(key, f.clone());
            out.push(f);
        }
        Ok(out)
    }
}

/// One row's cells, by column name.
struct Cells<'a> {
    cells: &'a [&'a str],
    index: &'a HashMap<&'a str, usize>,
}

impl Cells<'_> {
    fn get(&self, column: &str) -> &str {
        self.index.get(column).map_or("", |&k| self.cells[k])
    }
}

/// Reads one row's cells.
fn read_run(
    line: usize,
    row: &Cells,
    config: &dyn Fn(&str) -> Result<ModelSource, RowFault>,
) -> Result<MeasuredRun, RowFault> {
    let cell = |c: &str| row.get(c);
    let int = |column: &'static str| -> Result<i64, RowFault> {
        match cell(column).parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(RowFault::NotPositiveWhole {
                column,
                value: cell(column).to_string(),
            }),
        }
    };
    let flag = |column: &'static str| -> Result<bool, RowFault> {
        match cell(column) {
            "true" => Ok(true),
            "false" => Ok(false),
            v => Err(RowFault::NotTrueOrFalse {
                column,
                value: v.to_string(),
            }),
        }
    };
    let model_label = cell("model").to_string();
    let model = if hlatc_models::PRESETS.contains(&model_label.as_str()) {
        ModelSource::Preset(model_label.clone())
    } else {
        config(&model_label)?
    };
    let instance = Instance::from_name(cell("instance")).ok_or_else(|| {
        let known: Vec<&str> = Instance::ALL.iter().map(|i| i.name()).collect();
        RowFault::UnknownInstance {
            value: cell("instance").to_string(),
            known: known.join(", "),
        }
    })?;
    let remat = RematPolicy::from_name(cell("remat")).ok_or_else(|| RowFault::UnknownRemat {
        value: cell("remat").to_string(),
    })?;
    let precision =
        Precision::from_name(cell("precision")).ok_or_else(|| RowFault::UnknownPrecision {
            value: cell("precision").to_string(),
        })?;
    let seq_per_s = match cell("seq_per_s").parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => v,
        _ => {
            return Err(RowFault::NotPositiveRate {
                value: cell("seq_per_s").to_string(),
            })
        }
    };
    let layout = Layout {
        parallel: hlatc_models::Parallelism {
            tp: int("tp")?,
            pp: int("pp")?,
            dp: int("dp")?,
            sequence_parallel: flag("sequence_parallel")?,
            zero1: flag("zero1")?,
            ..hlatc_models::Parallelism::SINGLE
        },
        remat,
        micro_batch: int("micro_batch")?,
        precision,
        attention: KernelRequest::plain(KernelPoint::Attention),
    };
    let run = MeasuredRun {
        line,
        model,
        model_label,
        sdk: cell("sdk").to_string(),
        instance,
        nodes: int("nodes")?,
        layout,
        global_batch: int("global_batch")?,
        seq_len: int("seq_len")?,
        seq_per_s,
        source: cell("source").to_string(),
    };
    match run.problem() {
        Some(p) => Err(p),
        None => Ok(run),
    }
}

/// The parameters that best predict `measured` (step seconds) from each
/// run's `features`, by relative least squares drawn toward the priors.
/// A step is linear in the parameters once it is known which of each
/// program's engine terms is the longer; the fit alternates between
/// deciding that at the current parameters and solving, until the
/// decisions stand (a few rounds).
pub fn fit(features: &[StepFeatures], measured: &[f64]) -> CostParams {
    let mut p = CostParams::priors();
    for _ in 0..ROUNDS {
        let rows: Vec<Row> = features.iter().map(|f| f.linear_at(&p)).collect();
        let next = fit_linear(&rows, measured);
        if next == p {
            break;
        }
        p = next;
    }
    p
}

/// Most rounds [`fit`] takes.
const ROUNDS: usize = 20;

/// [`fit`] for steps already linear in the parameters.
fn fit_linear(features: &[Row], measured: &[f64]) -> CostParams {
    let prior = CostParams::priors().0;
    // In units of the prior: theta_j = prior_j * u_j, so every unknown is
    // near 1 and the ridge treats them alike.
    let rows: Vec<[f64; PARAMS]> = features
        .iter()
        .zip(measured)
        .map(|(f, y)| std::array::from_fn(|j| f[j] * prior[j] / y))
        .collect();
    let mut pinned = [false; PARAMS];
    let mut u = [1.0; PARAMS];
    // An unknown the solution drives below the floor is pinned there and
    // the rest solved again: at most once per unknown.
    for _ in 0..=PARAMS {
        let free: Vec<usize> = (0..PARAMS).filter(|&j| !pinned[j]).collect();
        let n = free.len();
        let mut a = vec![vec![0.0; n]; n];
        let mut b = vec![0.0; n];
        for r in &rows {
            let fixed: f64 = (0..PARAMS)
                .filter(|&j| pinned[j])
                .map(|j| r[j] * u[j])
                .sum();
            for (p, &i) in free.iter().enumerate() {
                b[p] += r[i] * (1.0 - fixed);
                for (q, &k) in free.iter().enumerate() {
                    a[p][q] += r[i] * r[k];
                }
            }
        }
        for p in 0..n {
            a[p][p] += RIDGE;
            b[p] += RIDGE;
        }
        let x = solve(a, b);
        let mut changed = false;
        for (p, &j) in free.iter().enumerate() {
            let floor = FLOOR[j] / prior[j];
            u[j] = x[p];
            if x[p] < floor {
                u[j] = floor;
                pinned[j] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    CostParams(std::array::from_fn(|j| prior[j] * u[j]))
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting (`a` is
/// symmetric positive definite here: a Gram matrix plus the ridge).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (done, rest) = a.split_at_mut(col + 1);
        let top = &done[col];
        for (k, row) in rest.iter_mut().enumerate() {
            let m = row[col] / top[col];
            for (x, t) in row[col..].iter_mut().zip(&top[col..]) {
                *x -= m * t;
            }
            b[col + 1 + k] -= m * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x
}

/// The predicted step of a run from its features, seconds.
pub fn predict(features: &StepFeatures, p: &CostParams) -> f64 {
    features.breakdown(p).total()
}

/// Each run predicted from a fit to all the others: the seconds of its
/// step. None with fewer than two runs: a fit to no runs predicts
/// nothing.
pub fn leave_one_out(features: &[StepFeatures], measured: &[f64]) -> Vec<f64> {
    if features.len() < 2 {
        return Vec::new();
    }
    (0..features.len())
        .map(|k| {
            let (f, y): (Vec<StepFeatures>, Vec<f64>) = features
                .iter()
                .zip(measured)
                .enumerate()
                .filter(|(i, _)| *i != k)
                .map(|(_, (f, y))| (f.clone(), *y))
                .unzip();
            predict(&features[k], &fit(&f, &y))
        })
        .collect()
}

/// The names of the parameters, for reports.
pub fn param_names() -> [&'static str; PARAMS] {
    PARAM_INFO.map(|p| p.name)
}

/// How well the parameters predict a file's runs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunError {
    /// `FILE:LINE`.
    pub run: String,
    pub model: String,
    pub layout: String,
    pub seq_len: i64,
    pub measured_seq_per_s: f64,
    pub predicted_seq_per_s: f64,
    /// `predicted / measured - 1`.
    pub relative_error: f64,
}

/// A calibration's fit, its in-sample errors, and each run predicted from
/// a fit to the others.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FitReport {
    pub params: CostParams,
    pub in_sample: Vec<RunError>,
    pub leave_one_out: Vec<RunError>,
}

impl Calibration {
    /// The parameters fitted to every run.
    pub fn fitted(&self, a: &Assumptions) -> Result<CostParams, PlanError> {
        self.fitted_priced_with(a, &KernelRequest::plain(KernelPoint::Attention))
    }

    /// [`Calibration::fitted`] to hlatc's programs with attention computed
    /// by `attention`.
    pub fn fitted_priced_with(
        &self,
        a: &Assumptions,
        attention: &KernelRequest,
    ) -> Result<CostParams, PlanError> {
        let f = self.features_priced_with(a, attention)?;
        let y: Vec<f64> = self.runs.iter().map(MeasuredRun::step_seconds).collect();
        Ok(fit(&f, &y))
    }

    /// Fits the parameters to every run, and reports the errors.
    pub fn fit_report(&self, a: &Assumptions) -> Result<FitReport, PlanError> {
        self.fit_report_priced_with(a, &KernelRequest::plain(KernelPoint::Attention))
    }

    /// [`Calibration::fit_report`] of hlatc's programs with attention
    /// computed by `attention`.
    pub fn fit_report_priced_with(
        &self,
        a: &Assumptions,
        attention: &KernelRequest,
    ) -> Result<FitReport, PlanError> {
        let f = self.features_priced_with(a, attention)?;
        let y: Vec<f64> = self.runs.iter().map(MeasuredRun::step_seconds).collect();
        let params = fit(&f, &y);
        let in_sample: Vec<f64> = f.iter().map(|f| predict(f, &params)).collect();
        let loo = leave_one_out(&f, &y);
        Ok(FitReport {
            params,
            in_sample: self.errors(&in_sample),
            leave_one_out: self.errors(&loo),
        })
    }

    /// Each run predicted by `params`, never fitted to it.
    pub fn predict_with(
        &self,
        params: &CostParams,
        a: &Assumptions,
    ) -> Result<Vec<RunError>, PlanError> {
        self.predict_priced_with(params, a, &KernelRequest::plain(KernelPoint::Attention))
    }

    /// [`Calibration::predict_with`] pricing hlatc's programs with
    /// attention computed by `attention`.
    pub fn predict_priced_with(
        &self,
        params: &CostParams,
        a: &Assumptions,
        attention: &KernelRequest,
    ) -> Result<Vec<RunError>, PlanError> {
        let f = self.features_priced_with(a, attention)?;
        let t: Vec<f64> = f.iter().map(|f| predict(f, params)).collect();
        Ok(self.errors(&t))
    }

    fn errors(&self, predicted_seconds: &[f64]) -> Vec<RunError> {
        self.runs
            .iter()
            .zip(predicted_seconds)
            .map(|(r, t)| {
                let predicted = r.global_batch as f64 / t;
                RunError {
                    run: format!("{}:{}", self.path, r.line),
                    model: r.model_label.clone(),
                    layout: r.layout.to_string(),
                    seq_len: r.seq_len,
                    measured_seq_per_s: r.seq_per_s,
                    predicted_seq_per_s: predicted,
                    relative_error: predicted / r.seq_per_s - 1.0,
                }
            })
            .collect()
    }
}

/// The median and the worst of `errors`' magnitudes.
pub fn median_and_worst(errors: &[RunError]) -> (f64, f64) {
    let mut e: Vec<f64> = errors.iter().map(|r| r.relative_error.abs()).collect();
    e.sort_by(f64::total_cmp);
    let median = match e.len() {
        0 => 0.0,
        n if n % 2 == 1 => e[n / 2],
        n => (e[n / 2 - 1] + e[n / 2]) / 2.0,
    };
    (median, e.last().copied().unwrap_or(0.0))
}

/// `errors` as the book's tables list them, with the median and the worst
/// under them.
pub fn errors_markdown(errors: &[RunError]) -> String {
    let mut out = String::from(
        "| run | model | layout | seq | measured seq/s | predicted | error |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for e in errors {
        out += &format!(
            "| {} | `{}` | `{}` | {} | {:.2} | {:.2} | {:+.1}% |\n",
            e.run,
            e.model,
            e.layout,
            e.seq_len,
            e.measured_seq_per_s,
            e.predicted_seq_per_s,
            100.0 * e.relative_error
        );
    }
    let (median, worst) = median_and_worst(errors);
    out += &format!(
        "\nMedian error {:.1}%, worst {:.1}%.\n",
        100.0 * median,
        100.0 * worst
    );
    out
}

impl MeasuredRun {
    /// The run as a calibration file's row, in [`COLUMNS`]' order.
    pub fn csv_row(&self) -> String {
        let l = &self.layout;
        [
            self.model_label.clone(),
            self.sdk.clone(),
            self.instance.name().to_string(),
            self.nodes.to_string(),
            l.parallel.tp.to_string(),
            l.parallel.pp.to_string(),
            l.parallel.dp.to_string(),
            l.parallel.sequence_parallel.to_string(),
            l.parallel.zero1.to_string(),
            l.remat.name().to_string(),
            l.micro_batch.to_string(),
            self.global_batch.to_string(),
            self.seq_len.to_string(),
            l.precision.name().to_string(),
            format!("{}", self.seq_per_s),
            self.source.clone(),
        ]
        .join(",")
    }
}

/// Refuses a run that reading it back would refuse, before anything is
/// written, naming the field (the column, and Python's argument): each
/// cell as the reader reads it, the model, and the layout as pricing it
/// checks (SP at TP 1, `remat=stage` without a pipeline, a global batch
/// the replicas do not divide).
fn check_appendable(run: &MeasuredRun) -> Result<(), PlanError> {
    let refuse = |field: &'static str, message: String| {
        debug_assert!(RUN_FIELDS.contains(&field), "{field} is not in RUN_FIELDS");
        PlanError::RunRefused { field, message }
    };
    for (field, text) in [
        ("model", &run.model_label),
        ("sdk", &run.sdk),
        ("source", &run.source),
    ] {
        if text.contains([',', '\n', '\r']) || text.trim().is_empty() {
            return Err(refuse(
                field,
                format!("'{text}': a calibration cell is non-empty, without commas or line breaks"),
            ));
        }
    }
    if !(run.seq_per_s.is_finite() && run.seq_per_s > 0.0) {
        return Err(refuse(
            "seq_per_s",
            format!("{}: a positive number", run.seq_per_s),
        ));
    }
    if let Some(p) = run.problem() {
        let field = match &p {
            RowFault::NotPositiveWhole { column, .. } => column,
            RowFault::FsdpUnrecorded { .. } => "fsdp",
            RowFault::PrecisionNotOnTrainium { .. } => "precision",
            _ => "nodes",
        };
        return Err(refuse(field, p.to_string()));
    }
    let (cfg, _) = run
        .model
        .resolve(false)
        .map_err(|e| refuse("model", e.to_string()))?;
    if let Some(fault) = experts_unrecorded(&cfg) {
        return Err(refuse("model", fault.to_string()));
    }
    let l = &run.layout;
    let cores = run.nodes * run.instance.hardware().cores_per_node;
    check_layout(&cfg, l, run.seq_len, run.global_batch, cores).map_err(|e| {
        let field = if l.parallel.sequence_parallel && l.parallel.tp == 1 {
            "sequence_parallel"
        } else if l.remat.needs_stages() && l.parallel.pp <= 1 {
            "remat"
        } else if run.global_batch % (l.parallel.dp * l.micro_batch) != 0 {
            "global_batch"
        } else {
            "layout"
        };
        refuse(field, e.to_string())
    })
}

/// Appends `run` to the calibration file at `path`, writing the header
/// first when the file is new or empty: how a measured run joins the runs
/// `hlatc plan --calibration` fits. A file whose header is not a
/// calibration file's is refused, naming it, and left as it was; so is a
/// run that could not be read back ([`MeasuredRun::problem`]).
pub fn append_run(path: &Path, run: &MeasuredRun) -> Result<(), PlanError> {
    use std::io::Write;
    check_appendable(run)?;
    let at = |line: usize, message: String| PlanError::Calibration {
        path: path.display().to_string(),
        line,
        message,
    };
    let existing = match input_file::read_to_string(path, |source| PlanError::Io {
        path: path.display().to_string(),
        source,
    }) {
        Ok(text) => text,
        Err(PlanError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            String::new()
        }
        Err(e) => return Err(e),
    };
    let header = existing
        .lines()
        .map(|l| l.trim_start_matches('\u{feff}').trim())
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    let mut text = String::new();
    match header {
        None => text += &format!("{}\n", COLUMNS.join(",")),
        Some(h) if h.split(',').map(str::trim).eq(COLUMNS) => {}
        Some(h) => {
            return Err(at(
                1,
                format!(
                    "its header '{h}' is not a calibration file's ({})",
                    COLUMNS.join(",")
                ),
            ))
        }
    }
    if !existing.is_empty() && !existing.ends_with('\n') {
        text.push('\n');
    }
    text += &run.csv_row();
    text.push('\n');
    let io = |source| PlanError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Why a run of `cfg` cannot be a calibration row: a mixture of experts'
/// layout has an EP degree, an exchange and a capacity factor that the
/// file's columns do not record, so its row would be read back as another
/// layout.
fn experts_unrecorded(cfg: &hlatc_models::ModelConfig) -> Option<RowFault> {
    cfg.moe.as_ref().map(|_| RowFault::ExpertsUnrecorded {
        model_type: cfg.model_type.name(),
    })
}
