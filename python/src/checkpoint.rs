//! The metrics CSV a checkpoint holds (`hlatc::metrics`, what `--metrics`
//! writes), and the per-rank checkpoints of `hlatc.jax.Trainer`
//! (`sharded_*`: the train crate's `checkpoint::sharded`, each process's
//! own part of the protocol whose collectives JAX runs).

use crate::arrays::{from_raw, RawIn};
use crate::errors::{guarded, sharded_checkpoint_error, to_py, usage};
use crate::identity::RunIdentity;
use hlatc::artifacts::checkpoint::sharded::{self, Marker};
use hlatc::metrics::{MetricsLog, StepMetrics};
use hlatc::usage::UsageKind;
use hlatc::Literal;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The metrics CSV (`hlatc train --metrics`'s) of `rows`, one dict per
/// step (`step`, `loss`, `grad_norm`, `learning_rate`, and
/// `held_out_loss` where measured; `step` the row's place from 1 if
/// absent).
#[pyfunction]
pub fn metrics_csv(rows: Vec<BTreeMap<String, Option<f64>>>) -> PyResult<String> {
    Ok(metrics_log(&rows)?.to_csv())
}

/// The metrics of `rows` (as [`metrics_csv`] takes them); a row's other
/// keys (a mixture of experts' routing) are not kept.
pub fn metrics_log(rows: &[BTreeMap<String, Option<f64>>]) -> PyResult<MetricsLog> {
    let mut log = MetricsLog::default();
    for (i, row) in rows.iter().enumerate() {
        let get = |k: &str| {
            row.get(k).copied().flatten().ok_or_else(|| {
                usage(
                    UsageKind::NotFound,
                    format!("metrics row {}: no '{k}'", i + 1),
                )
            })
        };
        let step = match row.get("step").copied().flatten() {
            Some(s) if s >= 1.0 && s.fract() == 0.0 => s as u64,
            Some(s) => {
                return Err(usage(
                    UsageKind::OutOfRange,
                    format!("metrics row {}: step {s} is not a step number", i + 1),
                ))
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
    Ok(log)
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
    // Coded as the CLI codes a checkpoint's metrics it cannot read.
    let log = MetricsLog::parse(text, what).map_err(|e| {
        to_py(hlatc::Error::RunCheckpoint(
            hlatc::fit::checkpoints::RunCheckpointError::Metrics(e),
        ))
    })?;
    metrics_rows(py, &log)
}

/// `log` as Python's rows: a dict per step, `held_out_loss` only where
/// measured.
pub fn metrics_rows<'py>(py: Python<'py>, log: &MetricsLog) -> PyResult<Vec<Bound<'py, PyDict>>> {
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

/// A per-rank checkpoint's marker as Python takes it: the steps done, the
/// run's identity (None if it records none) and each file's sha256.
type MarkerOut = (u64, Option<RunIdentity>, BTreeMap<String, String>);

fn marker_out(m: Marker) -> MarkerOut {
    let identity = m.identity.map(|inner| RunIdentity { inner });
    (m.steps_done, identity, m.files)
}

/// Runs the file work `f` without the GIL, its error as Python's.
fn sharded_io<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, sharded::ShardedCheckpointError> + Send,
) -> PyResult<T> {
    py.allow_threads(|| guarded(|| f().map_err(|e| sharded_checkpoint_error(&e))))
}

/// The name of the directory of the checkpoint at `step` (`step-NNNNNNNN`,
/// a run's checkpoints' and per-rank ones').
#[pyfunction]
pub fn step_dir_name(step: u64) -> String {
    hlatc::artifacts::checkpoint::step_dir_name(step)
}

/// The file of DP replica `replica`'s loader position in a per-rank
/// checkpoint.
#[pyfunction]
pub fn loader_file(replica: usize) -> String {
    sharded::loader_file_name(replica)
}

/// Makes `dir` ready for a save of `world_size` ranks; on process 0
/// (`first`), removes its marker and the rank files past the world size.
#[pyfunction]
pub fn sharded_prepare_save(
    py: Python<'_>,
    dir: PathBuf,
    world_size: usize,
    first: bool,
) -> PyResult<()> {
    sharded_io(py, || sharded::prepare_save(&dir, world_size, first))
}

/// Writes rank `rank`'s `tensors` (`(name, (dtype, shape, bytes))`, in
/// order) as its file in `dir`, synced and renamed into place; its sha256.
#[pyfunction]
pub fn sharded_write_rank(
    py: Python<'_>,
    dir: PathBuf,
    rank: usize,
    tensors: Vec<(String, RawIn<'_>)>,
) -> PyResult<String> {
    let named = tensors
        .into_iter()
        .map(|(name, raw)| Ok((name.clone(), from_raw(&name, raw)?)))
        .collect::<PyResult<Vec<(String, Literal)>>>()?;
    sharded_io(py, || sharded::write_rank_file(&dir, rank, &named))
}

/// Writes `data` as the file `name` in `dir`, synced and renamed into
/// place; its sha256.
#[pyfunction]
pub fn sharded_write_file(
    py: Python<'_>,
    dir: PathBuf,
    name: String,
    data: Vec<u8>,
) -> PyResult<String> {
    sharded_io(py, || sharded::write_file(&dir, &name, &data))
}

/// Writes the `COMPLETE` marker of `dir`, last: `config` as JSON, the
/// run's `identity`, `files` each file's sha256.
#[pyfunction]
pub fn sharded_write_marker(
    py: Python<'_>,
    dir: PathBuf,
    steps_done: u64,
    world_size: usize,
    config: &str,
    identity: Option<PyRef<'_, RunIdentity>>,
    files: BTreeMap<String, String>,
) -> PyResult<()> {
    let config = serde_json::from_str::<serde_json::Value>(config).map_err(|e| {
        usage(
            UsageKind::Invalid,
            format!("the marker's config is not JSON: {e}"),
        )
    })?;
    let identity = identity.map(|i| i.inner.clone());
    let marker = Marker::new(steps_done, world_size, config, identity, files);
    sharded_io(py, || marker.write(&dir))
}

/// Checkpoint `dir` opened for a load of `world_size` ranks: its marker
/// read and checked, the files of `ranks` against their sha256s. Its
/// `(steps_done, identity, files)`.
#[pyfunction]
pub fn sharded_open(
    py: Python<'_>,
    dir: PathBuf,
    world_size: usize,
    ranks: Vec<usize>,
) -> PyResult<MarkerOut> {
    sharded_io(py, || sharded::open_for_load(&dir, world_size, &ranks)).map(marker_out)
}

/// The marker of checkpoint `dir`, read and checked against `world_size`:
/// `(steps_done, identity, files)`.
#[pyfunction]
pub fn sharded_read_marker(py: Python<'_>, dir: PathBuf, world_size: usize) -> PyResult<MarkerOut> {
    let marker = sharded_io(py, || {
        let m = Marker::read(&dir)?;
        m.check_world(&dir, world_size)?;
        Ok(m)
    })?;
    Ok(marker_out(marker))
}

/// Why this process cannot resume from checkpoint `dir` (its `ranks`'
/// files, its `replicas`' loader files, the shared files), in words; None
/// if it can. Another world size raises.
#[pyfunction]
pub fn sharded_problem(
    py: Python<'_>,
    dir: PathBuf,
    world_size: usize,
    ranks: Vec<usize>,
    replicas: Vec<usize>,
) -> PyResult<Option<String>> {
    let why = sharded_io(py, || sharded::problem(&dir, world_size, &ranks, &replicas))?;
    Ok(why.map(|r| r.to_string()))
}

/// The steps of the checkpoint directories in `root`, complete or not,
/// oldest first.
#[pyfunction]
pub fn sharded_steps(py: Python<'_>, root: PathBuf) -> PyResult<Vec<u64>> {
    sharded_io(py, || sharded::steps(&root))
}

/// After the save of step `saved`: the checkpoints before it past the
/// newest `keep` complete ones removed, and on process 0 (`first`) the
/// incomplete ones before it.
#[pyfunction]
pub fn sharded_prune(
    py: Python<'_>,
    root: PathBuf,
    saved: u64,
    keep: usize,
    first: bool,
) -> PyResult<()> {
    sharded_io(py, || sharded::prune(&root, saved, keep, first))
}
