//! The checkpoints a training run saves as it goes (`hlatc train
//! --checkpoint-dir`'s directory, the train crate's `CheckpointDir`: the
//! same layout from Python and the CLI, so each resumes the other's), and
//! the metrics CSV a checkpoint holds (`hlatc::metrics`, what `--metrics`
//! writes).

use crate::errors::{checkpoint_error, checkpoint_file_error, guarded, usage};
use hlatc::metrics::{MetricsLog, StepMetrics};
use hlatc::train::checkpoint::CheckpointDir as RustCheckpointDir;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A run's checkpoint directory: `step-NNNNNNNN` directories, each made
/// whole (its files synced, renamed into place, then marked `COMPLETE`
/// with their sha256s) or not at all, the newest `keep` kept.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct CheckpointDir {
    inner: RustCheckpointDir,
}

/// A checkpoint found: its step, its directory and its files by name.
type Found<'py> = (u64, String, Bound<'py, PyDict>);
/// What `latest` finds: the newest good checkpoint, and those passed over
/// (directory, why).
type Latest<'py> = (Option<Found<'py>>, Vec<(String, String)>);

#[pymethods]
impl CheckpointDir {
    /// `dir` (made if missing), keeping the newest `keep` checkpoints.
    #[new]
    #[pyo3(signature = (dir, keep=3))]
    fn new(dir: PathBuf, keep: usize) -> PyResult<CheckpointDir> {
        let inner = RustCheckpointDir::open(&dir, keep).map_err(|e| checkpoint_error(&e))?;
        Ok(CheckpointDir { inner })
    }

    #[getter]
    fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// The directory the checkpoint of `step` is (or would be) in.
    fn step_dir(&self, step: u64) -> String {
        self.inner.step_dir(step).display().to_string()
    }

    /// Saves `files` (name, bytes) as the checkpoint of `step`, then
    /// prunes to the newest `keep`; its directory. The GIL is released
    /// while it writes and syncs.
    fn save(&self, py: Python<'_>, step: u64, files: Vec<(String, Vec<u8>)>) -> PyResult<String> {
        let inner = &self.inner;
        py.allow_threads(|| {
            guarded(|| {
                let named: Vec<(&str, &[u8])> = files
                    .iter()
                    .map(|(n, b)| (n.as_str(), b.as_slice()))
                    .collect();
                inner
                    .save(step, &named)
                    .map(|p| p.display().to_string())
                    .map_err(|e| checkpoint_error(&e))
            })
        })
    }

    /// The newest complete checkpoint whose files match their sha256s, as
    /// `(step, directory, {name: bytes})` (None if there is none), and
    /// every newer one passed over, as `(directory, why)`.
    fn latest<'py>(&self, py: Python<'py>) -> PyResult<Latest<'py>> {
        let inner = &self.inner;
        let (found, skipped) =
            py.allow_threads(|| guarded(|| inner.latest().map_err(|e| checkpoint_error(&e))))?;
        let found = found
            .map(|c| -> PyResult<Found<'py>> {
                let files = PyDict::new(py);
                for (name, bytes) in &c.files {
                    files.set_item(name, PyBytes::new(py, bytes))?;
                }
                Ok((c.step, c.path.display().to_string(), files))
            })
            .transpose()?;
        let skipped = skipped
            .into_iter()
            .map(|s| (s.path.display().to_string(), s.reason.to_string()))
            .collect();
        Ok((found, skipped))
    }

    fn __repr__(&self) -> String {
        format!(
            "CheckpointDir({:?})",
            self.inner.path().display().to_string()
        )
    }
}

/// The metrics CSV (`hlatc train --metrics`'s) of `rows`, one dict per
/// step (`step`, `loss`, `grad_norm`, `learning_rate`, and
/// `held_out_loss` where measured; `step` the row's place from 1 if
/// absent).
#[pyfunction]
pub fn metrics_csv(rows: Vec<BTreeMap<String, Option<f64>>>) -> PyResult<String> {
    let mut log = MetricsLog::default();
    for (i, row) in rows.iter().enumerate() {
        let get = |k: &str| {
            row.get(k)
                .copied()
                .flatten()
                .ok_or_else(|| usage(format!("metrics row {}: no '{k}'", i + 1)))
        };
        let step = match row.get("step").copied().flatten() {
            Some(s) if s >= 1.0 && s.fract() == 0.0 => s as u64,
            Some(s) => {
                return Err(usage(format!(
                    "metrics row {}: step {s} is not a step number",
                    i + 1
                )))
            }
            None => i as u64 + 1,
        };
        log.push(StepMetrics {
            step,
            loss: get("loss")?,
            grad_norm: get("grad_norm")?,
            learning_rate: get("learning_rate")?,
            held_out_loss: row.get("held_out_loss").copied().flatten(),
        });
    }
    Ok(log.to_csv())
}

/// The rows of a metrics CSV (`what` names it in errors): a dict per
/// step, `held_out_loss` only where measured. A CSV hlatc cannot read is a
/// `CheckpointError`: a checkpoint's metrics that are not what hlatc
/// wrote.
#[pyfunction]
pub fn read_metrics_csv<'py>(
    py: Python<'py>,
    text: &str,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let log =
        MetricsLog::parse(text, what).map_err(|e| checkpoint_file_error(e.to_string(), what))?;
    log.steps
        .iter()
        .map(|m| {
            let d = PyDict::new(py);
            d.set_item("step", m.step)?;
            d.set_item("loss", m.loss)?;
            d.set_item("grad_norm", m.grad_norm)?;
            d.set_item("learning_rate", m.learning_rate)?;
            if let Some(h) = m.held_out_loss {
                d.set_item("held_out_loss", h)?;
            }
            Ok(d)
        })
        .collect()
}
