//! A run's identity from Python: the CLI's own (`hlatc::run_identity`),
//! held as a class so its fields and its comparison stay Rust's:
//! `hlatc.Trainer.fit` and `hlatc train --checkpoint-dir` record and check
//! the same `run.json`, and `hlatc.jax.Trainer` the same fields.

use crate::errors::{guarded, to_py};
use crate::step::Step;
use hlatc::run_identity::{
    files_fingerprint, init_from_seed, tokenizer_hash, Coverage, FieldChange, RunIdentity as Rust,
    FIELD_GROUPS,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What defines a run (`hlatc::run_identity::RunIdentity`): its fields,
/// each a value as text, and the changes resumes were allowed to make.
#[pyclass(module = "hlatc._hlatc", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct RunIdentity {
    pub(crate) inner: Rust,
}

#[pymethods]
impl RunIdentity {
    /// The identity of a run of `step` on `corpus` (the loader's sources:
    /// files and globs, expanded as `hlatc train --corpus` expands them)
    /// tokenized by `tokenizer`: what `hlatc train` records for the same
    /// step and data. Without `corpus`, the data's fields are left out
    /// (compared only where both sides record them). What the weights
    /// started from is `seed` (hlatc's initialization drawn from it, as
    /// `hlatc train --seed` records it) or `init` (a state's description);
    /// without either it is left out (not compared).
    #[staticmethod]
    #[pyo3(signature = (step, tokenizer=None, corpus=None, seed=None, init=None))]
    fn of_step(
        step: &Step,
        tokenizer: Option<PathBuf>,
        corpus: Option<Vec<String>>,
        seed: Option<u64>,
        init: Option<String>,
    ) -> PyResult<RunIdentity> {
        guarded(|| {
            let cfg = step.step_config()?;
            let mut id = Rust::of_step(&cfg, &step.rounding()?, step.grad_accum());
            if let Some(start) = init.or(seed.map(init_from_seed)) {
                id = id.with_init(&start);
            }
            let Some(sources) = corpus else {
                return Ok(RunIdentity { inner: id });
            };
            let tokenizer = tokenizer
                .map(|p| tokenizer_hash(&p))
                .transpose()
                .map_err(|e| to_py(e.into()))?;
            let files = hlatc::loader::sources::expand(&sources)
                .map_err(|e| crate::errors::loader_error(&e))?;
            // The loader's record of what it read checks the rest.
            let corpus =
                files_fingerprint(&files, Coverage::Sampled).map_err(|e| to_py(e.into()))?;
            Ok(RunIdentity {
                inner: id.with_tokenizer(tokenizer.as_deref()).with_corpus(&corpus),
            })
        })
    }

    /// The identity in `text` (a `run.json`), read from `source` (named by
    /// its errors): `CheckpointError` where it is not one, an unknown
    /// field named.
    #[staticmethod]
    fn from_json(text: &str, source: &str) -> PyResult<RunIdentity> {
        Ok(RunIdentity {
            inner: Rust::from_json(text, source).map_err(|e| to_py(e.into()))?,
        })
    }

    /// The identity as `run.json` holds it, byte for byte the CLI's.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// Each field's value, by name.
    #[getter]
    fn fields(&self) -> BTreeMap<String, String> {
        self.inner.fields.clone()
    }

    /// The changes resumes were allowed to make, oldest first, each
    /// `{"step", "field", "was", "now"}`.
    #[getter]
    fn allowed_changes<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .allowed_changes
            .iter()
            .map(|c| {
                let d = PyDict::new(py);
                d.set_item("step", c.step)?;
                d.set_item("field", &c.field)?;
                d.set_item("was", &c.was)?;
                d.set_item("now", &c.now)?;
                Ok(d)
            })
            .collect()
    }

    /// The names `allow_changes` may use with this identity: the groups
    /// (`model`, `tokenizer`, ...) and each field.
    #[getter]
    fn names(&self) -> Vec<String> {
        FIELD_GROUPS
            .iter()
            .map(|g| g.to_string())
            .chain(self.inner.fields.keys().cloned())
            .collect()
    }

    /// This identity with `other`'s allowed changes: a run's own fields
    /// and the history its resumes made.
    fn with_allowed_changes_of(&self, other: &RunIdentity) -> RunIdentity {
        let mut inner = self.inner.clone();
        inner.allowed_changes = other.inner.allowed_changes.clone();
        RunIdentity { inner }
    }

    /// Whether a run of this identity may resume a checkpoint (`where`)
    /// whose identity is `recorded`, at `step`, `allowed` the fields or
    /// groups the caller lets change. Returns the identity to record from
    /// now on (the data's and the start's fields one side lacks taken from
    /// the other, the changes allowed appended) and each change allowed,
    /// in the words of its warning. `IdentityError` names each field
    /// changed but not allowed, with both values.
    #[pyo3(signature = (recorded, allowed, step, r#where))]
    fn check(
        &self,
        recorded: &RunIdentity,
        allowed: Vec<String>,
        step: u64,
        r#where: &str,
    ) -> PyResult<(RunIdentity, Vec<String>)> {
        match self
            .inner
            .check_resume(&recorded.inner, &allowed, step, r#where)
        {
            Ok((inner, changes)) => Ok((
                RunIdentity { inner },
                changes
                    .iter()
                    .map(|c| allowed_change_message(r#where, c))
                    .collect(),
            )),
            Err(e) => Err(to_py(e.into())),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "RunIdentity({} fields, {} allowed changes)",
            self.inner.fields.len(),
            self.inner.allowed_changes.len()
        )
    }
}

/// The warning of a change a resume of `checkpoint` was allowed to make,
/// as Python words it (`allow_changes`).
pub(crate) fn allowed_change_message(checkpoint: &str, change: &FieldChange) -> String {
    format!(
        "{checkpoint}: resuming with {} changed on purpose (allow_changes): {} in the \
         checkpoint, {} in this run",
        change.field,
        change.saved.as_deref().unwrap_or("(not recorded)"),
        change.now.as_deref().unwrap_or("(not recorded)")
    )
}

/// What a run's weights start from when they are read from the file at
/// `path` (a Hugging Face checkpoint): its content hash, as `hlatc train
/// --init` records it.
#[pyfunction]
pub fn init_of_file(path: PathBuf) -> PyResult<String> {
    hlatc::run_identity::init_from_file(&path).map_err(|e| to_py(e.into()))
}
