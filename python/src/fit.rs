//! The training loop from Python: the library's ([`hlatc::fit`]), driven
//! over Python objects. `hlatc.Trainer.fit` and `hlatc.jax.Trainer.fit`
//! each hand it their trainer, loader and checkpoint save; the run's
//! policy (when it stops, the divergence rule, when a checkpoint is due)
//! is `hlatc train`'s, written once. `RunCheckpoints` is `hlatc train
//! --checkpoint-dir`'s directory, opened, checked and saved by the same
//! code.

use crate::checkpoint::{metrics_log, metrics_rows};
use crate::errors::{guarded, to_py, usage};
use hlatc::fit::checkpoints::{Notice, RunCheckpoints as Rust};
use hlatc::fit::{FitEnd, FitEngine, FitPolicy};
use hlatc::train::run_error::RunError;
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyMapping};
use std::path::PathBuf;
use std::sync::Mutex;

/// A failure of the loop: a Python exception, as it was raised.
struct Raised(PyErr);

impl From<PyErr> for Raised {
    fn from(e: PyErr) -> Raised {
        Raised(e)
    }
}

impl From<RunError> for Raised {
    fn from(e: RunError) -> Raised {
        Raised(to_py(hlatc::Error::from(e)))
    }
}

/// A Python trainer (`steps_done`, `step(**batch)`), its loader
/// (`next_batch()`, None at the end) and the caller's hooks.
struct PyEngine<'py> {
    trainer: Bound<'py, PyAny>,
    loader: Bound<'py, PyAny>,
    /// Every step's row so far, `{"step": n, **stats}`; appended to.
    metrics: Bound<'py, PyList>,
    save: Option<Bound<'py, PyAny>>,
    on_step: Option<Bound<'py, PyAny>>,
    /// Keywords every `step` call takes besides the batch.
    step_kw: Option<Bound<'py, PyDict>>,
    /// The step just run, until it is recorded; then its row.
    stats: Option<Bound<'py, PyAny>>,
    row: Option<Bound<'py, PyDict>>,
}

impl FitEngine for PyEngine<'_> {
    type Error = Raised;

    fn steps_done(&mut self) -> Result<u64, Raised> {
        Ok(self.trainer.getattr("steps_done")?.extract()?)
    }

    fn step(&mut self) -> Result<Option<f64>, Raised> {
        let batch = self.loader.call_method0("next_batch")?;
        if batch.is_none() {
            return Ok(None);
        }
        let kwargs = PyDict::new(self.trainer.py());
        kwargs.update(batch.downcast::<PyMapping>().map_err(PyErr::from)?)?;
        if let Some(kw) = &self.step_kw {
            kwargs.update(kw.as_mapping())?;
        }
        let stats = self.trainer.call_method("step", (), Some(&kwargs))?;
        let loss = stats.get_item("loss")?.extract()?;
        self.stats = Some(stats);
        Ok(Some(loss))
    }

    fn record(&mut self, done: u64) -> Result<(), Raised> {
        let row = PyDict::new(self.trainer.py());
        row.set_item("step", done)?;
        if let Some(stats) = self.stats.take() {
            row.update(stats.downcast::<PyMapping>().map_err(PyErr::from)?)?;
        }
        self.metrics.append(&row)?;
        self.row = Some(row);
        Ok(())
    }

    fn save(&mut self, done: u64) -> Result<(), Raised> {
        if let Some(save) = &self.save {
            save.call1((done, &self.metrics))?;
        }
        Ok(())
    }

    fn go_on(&mut self, _done: u64) -> Result<bool, Raised> {
        let (Some(on_step), Some(row)) = (&self.on_step, &self.row) else {
            return Ok(true);
        };
        let answer = on_step.call1((row.copy()?,))?;
        Ok(!answer.is(PyBool::new(on_step.py(), false)))
    }
}

/// Steps `trainer` on `loader`'s batches (`trainer.step(**batch,
/// **step_kw)`) to `steps` steps done, appending each step's row to
/// `metrics`; `save(done, metrics)` every `checkpoint_every` steps and
/// after the last, however the run stopped (`save=None`: no checkpoints).
/// `on_step(row)` returning False stops the run. Returns the step the
/// loader's last pass ended at, if it ended first. A loss that is not
/// finite raises `RunError` before the step is recorded or saved.
#[pyfunction]
#[pyo3(signature = (trainer, loader, steps, metrics, save, checkpoint_every, on_step, step_kw=None))]
#[allow(clippy::too_many_arguments)] // Python's keywords, one each
pub fn fit_steps<'py>(
    trainer: Bound<'py, PyAny>,
    loader: Bound<'py, PyAny>,
    steps: u64,
    metrics: Bound<'py, PyList>,
    save: Option<Bound<'py, PyAny>>,
    checkpoint_every: u64,
    on_step: Option<Bound<'py, PyAny>>,
    step_kw: Option<Bound<'py, PyDict>>,
) -> PyResult<Option<u64>> {
    let policy = FitPolicy {
        stop: steps,
        checkpoint_every: save.as_ref().map(|_| checkpoint_every),
    };
    let mut engine = PyEngine {
        trainer,
        loader,
        metrics,
        save,
        on_step,
        step_kw,
        stats: None,
        row: None,
    };
    match policy.run(&mut engine).map_err(|Raised(e)| e)? {
        FitEnd::DataEnded { at } => Ok(Some(at)),
        FitEnd::Reached | FitEnd::Stopped { .. } => Ok(None),
    }
}

/// What the newest complete checkpoint gives a run: `(step, directory,
/// state (safetensors bytes), loader position (JSON bytes, None if the
/// run's data has none), metrics rows)`.
type RestoredOut<'py> = (
    u64,
    String,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Vec<Bound<'py, PyDict>>,
);

/// `hlatc train --checkpoint-dir`'s directory for one run: locked while
/// open, its newest complete checkpoint checked against the run's
/// identity and taken up, checkpoints saved into it.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct RunCheckpoints {
    /// `None` once closed (its lock let go).
    inner: Mutex<Option<Rust>>,
    restored: Mutex<Option<hlatc::fit::checkpoints::Restored>>,
    notices: Vec<(String, String)>,
}

#[pymethods]
impl RunCheckpoints {
    /// Opens `dir` (made if missing) for a run whose identity is
    /// `identity`, keeping the newest `keep` checkpoints; refused
    /// with `IdentityError` if its newest complete checkpoint is another
    /// run's but for the fields (or groups) in `allow_changes`.
    #[new]
    fn new(
        dir: PathBuf,
        keep: usize,
        identity: &crate::identity::RunIdentity,
        allow_changes: Vec<String>,
    ) -> PyResult<Self> {
        let opened = guarded(|| {
            Rust::open(&dir, keep, &identity.inner, &allow_changes)
                .map_err(|e| to_py(hlatc::Error::RunCheckpoint(e)))
        })?;
        Ok(RunCheckpoints {
            inner: Mutex::new(Some(opened.checkpoints)),
            restored: Mutex::new(opened.restored),
            notices: opened.notices.iter().map(python_notice).collect(),
        })
    }

    /// What opening found worth a warning, as `(kind, message)`: kind
    /// `"checkpoint"` (a checkpoint passed over, one without an identity,
    /// a stale lock taken over) or `"identity"` (a change allowed).
    #[getter]
    fn notices(&self) -> Vec<(String, String)> {
        self.notices.clone()
    }

    /// The newest complete checkpoint's contents, once (None if the
    /// directory had none, or it was taken).
    fn take_restored<'py>(&self, py: Python<'py>) -> PyResult<Option<RestoredOut<'py>>> {
        let Some(r) = self.restored.lock().map_err(poisoned)?.take() else {
            return Ok(None);
        };
        Ok(Some((
            r.step,
            r.state_source(),
            PyBytes::new(py, &r.state),
            r.loader.as_deref().map(|l| PyBytes::new(py, l)),
            metrics_rows(py, &r.metrics)?,
        )))
    }

    /// Saves the checkpoint of step `done`: `state` (safetensors bytes),
    /// the `loader`'s position (JSON bytes; None for data without one) and
    /// `metrics` (rows), with the run's identity; its directory. The GIL
    /// is released while it writes and syncs.
    #[pyo3(signature = (done, state, loader, metrics))]
    fn save(
        &self,
        py: Python<'_>,
        done: u64,
        state: Vec<u8>,
        loader: Option<Vec<u8>>,
        metrics: Vec<std::collections::BTreeMap<String, Option<f64>>>,
    ) -> PyResult<String> {
        let metrics = metrics_log(&metrics)?;
        py.allow_threads(|| {
            self.with(|c| {
                c.save(done, &state, loader.as_deref(), &metrics)
                    .map(|p| p.display().to_string())
                    .map_err(|e| to_py(hlatc::Error::RunCheckpoint(e)))
            })
        })
    }

    /// Lets the directory go (its lock), so another run may open it.
    fn close(&self) -> PyResult<()> {
        self.inner.lock().map_err(poisoned)?.take();
        Ok(())
    }
}

impl RunCheckpoints {
    fn with<T>(&self, f: impl FnOnce(&Rust) -> PyResult<T>) -> PyResult<T> {
        let inner = self.inner.lock().map_err(poisoned)?;
        match inner.as_ref() {
            Some(c) => guarded(|| f(c)),
            None => Err(usage(UsageKind::Conflict, "RunCheckpoints: closed")),
        }
    }
}

/// As a closed directory: a state that refuses the call.
fn poisoned<T>(_: std::sync::PoisonError<T>) -> PyErr {
    usage(
        UsageKind::Conflict,
        "RunCheckpoints: a save panicked while it held the directory",
    )
}

/// A notice as Python warns it: its category, and its words where
/// Python's differ from the CLI's (`allow_changes`).
fn python_notice(n: &Notice) -> (String, String) {
    match n {
        Notice::AllowedChange { checkpoint, change } => (
            "identity".into(),
            crate::identity::allowed_change_message(checkpoint, change),
        ),
        Notice::Skipped(s) => (
            "checkpoint".into(),
            format!("skipped checkpoint {}: {}", s.path.display(), s.reason),
        ),
        Notice::StaleLock { .. } | Notice::NoIdentity { .. } => {
            ("checkpoint".into(), n.to_string())
        }
    }
}
