//! A run's identity from Python: the CLI's own (`hlatc::run_identity`),
//! so `hlatc.Trainer.fit` and `hlatc train --checkpoint-dir` record and
//! check the same `run.json`, and `hlatc.jax.Trainer` the same fields.

use crate::errors::{guarded, usage, CHECKPOINT, FILE};
use crate::step::Step;
use hlatc::run_identity::{
    changed_message, files_fingerprint, init_from_seed, tokenizer_hash, Coverage, FrontEnd,
    RunIdentity, RunIdentityError,
};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use std::path::PathBuf;

/// The fields and groups `allow_changes` may name, given `identity`'s
/// fields: the groups (`model`, `tokenizer`, ...) and each field.
#[pyfunction]
pub fn identity_names(identity: &str) -> PyResult<Vec<String>> {
    let id = RunIdentity::from_json(identity, "this run").map_err(|e| identity_error(&e))?;
    Ok(hlatc::run_identity::FIELD_GROUPS
        .iter()
        .map(|g| g.to_string())
        .chain(id.fields.into_keys())
        .collect())
}

pub(crate) fn identity_error(e: &RunIdentityError) -> PyErr {
    let message = e.to_string();
    match e {
        RunIdentityError::Changed { .. } => usage(UsageKind::Conflict, message),
        // A field of this run's identity, as `allow_changes` names it.
        RunIdentityError::UnknownField { .. } => usage(UsageKind::NotFound, message),
        RunIdentityError::Malformed { .. } => CHECKPOINT.err(message),
        RunIdentityError::Io { path, .. } => crate::errors::path_error(&FILE, message, path),
    }
}

/// The identity of a run of `step` on `corpus` (the loader's sources:
/// files and globs, expanded as `hlatc train --corpus` expands them)
/// tokenized by `tokenizer`, as JSON: what `hlatc train` records for the
/// same step and data. Without `corpus`, the data's fields are left out.
/// What the weights started from is `seed` (hlatc's initialization drawn
/// from it, as `hlatc train --seed` records it) or `init` (a state's
/// description); without either it is left out (not compared).
#[pyfunction]
#[pyo3(signature = (step, tokenizer=None, corpus=None, seed=None, init=None))]
pub fn run_identity(
    step: &Step,
    tokenizer: Option<PathBuf>,
    corpus: Option<Vec<String>>,
    seed: Option<u64>,
    init: Option<String>,
) -> PyResult<String> {
    guarded(|| {
        let cfg = step.step_config()?;
        let mut id = RunIdentity::of_step(&cfg, &step.rounding()?);
        id.set(
            "layout",
            format!("{}, grad-accum {}", cfg.parallel, step.grad_accum()),
        );
        if let Some(start) = init.or(seed.map(init_from_seed)) {
            id = id.with_init(&start);
        }
        // Without the data, its fields are left out (not compared), as a
        // checkpoint saved without a loader records none.
        let Some(sources) = corpus else {
            return Ok(id.to_json());
        };
        let tokenizer = tokenizer
            .map(|p| tokenizer_hash(&p))
            .transpose()
            .map_err(|e| identity_error(&e))?;
        let files = hlatc::loader::sources::expand(&sources)
            .map_err(|e| crate::errors::loader_error(&e))?;
        // The loader's record of what it read checks the rest.
        let corpus =
            files_fingerprint(&files, Coverage::Sampled).map_err(|e| identity_error(&e))?;
        Ok(id
            .with_tokenizer(tokenizer.as_deref())
            .with_corpus(&corpus)
            .to_json())
    })
}

/// Changes of a run's identity, each `(field, saved, now)`.
type Changes = Vec<(String, Option<String>, Option<String>)>;

/// Whether a run of identity `current` may resume a checkpoint whose
/// identity is `saved` (read from `source`) at `step`, `allowed` the
/// fields or groups the caller lets change. Returns `(True, identity to
/// record from now on, changes allowed)` or `(False, the refusal's
/// message, the changes refused)`; each change is `(field, saved, now)`.
#[pyfunction]
pub fn check_run_identity(
    current: &str,
    saved: &str,
    allowed: Vec<String>,
    step: u64,
    source: &str,
) -> PyResult<(bool, String, Changes)> {
    let current = RunIdentity::from_json(current, "this run").map_err(|e| identity_error(&e))?;
    let saved = RunIdentity::from_json(saved, source).map_err(|e| identity_error(&e))?;
    let triple = |c: hlatc::run_identity::FieldChange| (c.field, c.saved, c.now);
    match current.check_resume(&saved, &allowed, step, source) {
        Ok((next, changes)) => Ok((
            true,
            next.to_json(),
            changes.into_iter().map(triple).collect(),
        )),
        Err(RunIdentityError::Changed {
            source_name,
            changes,
        }) => {
            let message = changed_message(&source_name, &changes, FrontEnd::Python);
            Ok((false, message, changes.into_iter().map(triple).collect()))
        }
        Err(e) => Err(identity_error(&e)),
    }
}

/// What a run's weights start from when they are read from the file at
/// `path` (a Hugging Face checkpoint): its content hash, as `hlatc train
/// --init` records it.
#[pyfunction]
pub fn init_of_file(path: PathBuf) -> PyResult<String> {
    hlatc::run_identity::init_from_file(&path).map_err(|e| identity_error(&e))
}
