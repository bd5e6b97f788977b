//! Training curves drawn by hlatc's own plotter (what `hlatc plot` and
//! `train --plot` draw), from the statistics `Trainer.step` returns.

use crate::args;
use crate::errors::{guarded, to_py, usage};
use hlatc::metrics::{MetricsLog, Series, StepMetrics};
use hlatc::plot::{plot_to_file, Curve, PlotOptions};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use std::collections::BTreeMap;

/// Draws `runs` (label -> one dict of `loss`, `grad_norm` and
/// `learning_rate` per step, as `Trainer.step` returns them) into a PNG.
#[pyfunction]
#[pyo3(signature = (runs, path, series="loss", title=None, log_y=false))]
pub fn plot_metrics(
    runs: BTreeMap<String, Vec<BTreeMap<String, f64>>>,
    #[pyo3(from_py_with = args::path)] path: std::path::PathBuf,
    #[pyo3(from_py_with = args::series)] series: &str,
    #[pyo3(from_py_with = args::title)] title: Option<String>,
    #[pyo3(from_py_with = args::log_y)] log_y: bool,
) -> PyResult<()> {
    let series = Series::from_column(series).ok_or_else(|| {
        let known: Vec<&str> = Series::ALL.iter().map(|s| s.column()).collect();
        crate::errors::argument_usage(
            UsageKind::OutOfRange,
            "series",
            format!("unknown series '{series}' (known: {})", known.join(", ")),
        )
    })?;
    let mut logs = Vec::with_capacity(runs.len());
    for (label, steps) in runs {
        let mut log = MetricsLog::default();
        for (i, s) in steps.iter().enumerate() {
            let get = |k: &str| {
                s.get(k).copied().ok_or_else(|| {
                    usage(
                        UsageKind::NotFound,
                        format!("{label}: step {}: no '{k}'", i + 1),
                    )
                })
            };
            log.push(StepMetrics {
                step: i as u64 + 1,
                loss: get("loss")?,
                grad_norm: get("grad_norm")?,
                learning_rate: get("learning_rate")?,
                held_out_loss: s.get("held_out_loss").copied(),
            });
        }
        logs.push((label, log));
    }
    let curves: Vec<Curve> = logs
        .iter()
        .map(|(label, log)| Curve {
            label: label.clone(),
            log,
        })
        .collect();
    let mut opts = PlotOptions::new(series);
    if let Some(t) = title {
        opts.title = t;
    }
    opts.log_y = log_y;
    guarded(|| {
        plot_to_file(&curves, &opts, &path)
            .map_err(|source| to_py(hlatc::Error::Plot { path, source }))
    })
}
