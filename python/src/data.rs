//! The data loader (`hlatc.data.Loader`): the train crate's streaming
//! loader, one per DP replica, as `hlatc train --corpus` runs it. Batches
//! cross as `(dtype, shape, data)` triples, `data` a NumPy array that
//! takes the batch's buffer (no copy); waiting for one releases the GIL,
//! so Python threads run while the loader's own threads tokenize.

use crate::args;
use crate::errors::{guarded, loader_error, named, usage, Unknown};
use crate::step::Step;
use hlatc::token_data::RawDtype;
use hlatc::train::loader::{
    positions_from_json, positions_to_json, LoaderConfig, LoaderError, LoaderPosition, Packing,
    ReplicaLoaders, RowBatch, SourceFormat, SpecialToken, DEFAULT_SHUFFLE_BUFFER,
};
use hlatc::usage::UsageKind;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The loader's batches, and where it is.
#[pyclass(module = "hlatc._hlatc")]
pub struct Loader {
    config: LoaderConfig,
    replicas: usize,
    owned: Vec<usize>,
    /// `None` once closed. A pyclass is shared between threads, and a
    /// loader's channel is not `Sync`: the mutex makes it so (`&mut self`
    /// methods reach it without locking).
    inner: Mutex<Option<ReplicaLoaders>>,
}

#[pymethods]
impl Loader {
    /// A loader of `sources` for global batches of `batch_size` rows (each
    /// of `replicas` DP replicas reading its own shard of the documents
    /// for its `batch_size / replicas` rows), of which this one makes the
    /// rows of replicas `owned` (all when None), at `position` (a JSON array
    /// of the owned replicas' positions) or at the start. The files, the
    /// tokenizer and its vocabulary are checked before it returns.
    #[new]
    #[pyo3(signature = (
        sources, *, vocab_size, batch_size, seq_len, replicas=1, owned=None, tokenizer=None,
        text_field=args::Text::of("text"), format=None, packing="segments",
        shuffle_buffer=DEFAULT_SHUFFLE_BUFFER, seed=0, epochs=None, bos, eos, eos_id=None,
        raw_dtype="u16", position=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = args::sources)] sources: Vec<String>,
        #[pyo3(from_py_with = args::vocab_size)] vocab_size: i64,
        #[pyo3(from_py_with = args::batch_size)] batch_size: usize,
        #[pyo3(from_py_with = args::seq_len)] seq_len: usize,
        #[pyo3(from_py_with = args::replicas)] replicas: usize,
        #[pyo3(from_py_with = args::owned)] owned: Option<Vec<usize>>,
        #[pyo3(from_py_with = args::tokenizer)] tokenizer: Option<PathBuf>,
        #[pyo3(from_py_with = args::text_field)] text_field: args::Text,
        #[pyo3(from_py_with = args::format)] format: Option<String>,
        #[pyo3(from_py_with = args::packing)] packing: &str,
        #[pyo3(from_py_with = args::shuffle_buffer)] shuffle_buffer: usize,
        #[pyo3(from_py_with = args::seed)] seed: u64,
        #[pyo3(from_py_with = args::epochs)] epochs: Option<u64>,
        bos: &Bound<'_, PyAny>,
        eos: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = args::eos_id)] eos_id: Option<u32>,
        #[pyo3(from_py_with = args::raw_dtype)] raw_dtype: &str,
        #[pyo3(from_py_with = args::position)] position: Option<String>,
    ) -> PyResult<Loader> {
        if replicas == 0 || !batch_size.is_multiple_of(replicas) {
            return Err(loader_error(&LoaderError::Setting {
                setting: "batch_size",
                value: batch_size.to_string(),
                reason: "the global batch divides into equal rows for each replica",
            }));
        }
        let mut config = LoaderConfig::new(sources, vocab_size, batch_size / replicas, seq_len);
        config.format = format.as_deref().map(source_format).transpose()?;
        config.text_field = text_field.0.into_owned();
        config.tokenizer = tokenizer;
        config.bos = special(bos, "bos")?;
        config.eos = special(eos, "eos")?;
        config.raw_dtype = RawDtype::ALL
            .into_iter()
            .find(|t| t.name() == raw_dtype)
            .ok_or_else(|| {
                crate::errors::argument_usage(
                    UsageKind::OutOfRange,
                    "raw_dtype",
                    format!(
                        "raw_dtype '{raw_dtype}': a raw token-id file holds 'u16' or 'u32' ids"
                    ),
                )
            })?;
        config.eos_id = eos_id;
        config.packing = packing_of(packing)?;
        config.shuffle_buffer = shuffle_buffer;
        config.seed = seed;
        config.epochs = epochs;
        let owned = owned.unwrap_or_else(|| (0..replicas).collect());
        let from = position.as_deref().map(positions_of).transpose()?;
        let inner = py.allow_threads(|| {
            guarded(|| {
                ReplicaLoaders::open_some(&config, replicas, &owned, from)
                    .map_err(|e| loader_error(&e))
            })
        })?;
        Ok(Loader {
            config,
            replicas,
            owned,
            inner: Mutex::new(Some(inner)),
        })
    }

    /// The next batch (`tokens`, `targets` and, for segment packing,
    /// `segment_ids`, each `s32[rows, seq]`), or None after the last pass
    /// over the corpus. The GIL is released while it waits.
    fn next_batch<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let inner = self.open_loaders()?;
        let batch =
            py.allow_threads(|| guarded(|| inner.next_batch().map_err(|e| loader_error(&e))))?;
        batch.map(|b| batch_dict(py, b)).transpose()
    }

    /// The owned replicas' positions after the last batch, as the JSON
    /// array a checkpoint's `loader.json` holds.
    fn position(&self) -> PyResult<String> {
        let positions = open_ref(&self.locked())?.positions();
        Ok(positions_to_json(&positions))
    }

    /// Goes on from `position` (`position()` of a loader of the same
    /// settings): the replicas' pipelines start again there.
    fn seek(&mut self, py: Python<'_>, position: String) -> PyResult<()> {
        let from = positions_of(&position)?;
        // The old pipelines stop first, so they take no cores from the new.
        self.close(py);
        let (config, replicas, owned) = (&self.config, self.replicas, &self.owned);
        let inner = py.allow_threads(|| {
            guarded(|| {
                ReplicaLoaders::open_some(config, replicas, owned, Some(from))
                    .map_err(|e| loader_error(&e))
            })
        })?;
        *self.slot() = Some(inner);
        Ok(())
    }

    /// What the owned replicas have packed so far (from their start, over
    /// resumes): `rows`, `slots`, `filled`, `documents`, `batches`,
    /// `efficiency`, `documents_per_row`, and `wait_seconds`, the time
    /// `next_batch` waited for the pipeline since this loader opened.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let guard = self.locked();
        let inner = open_ref(&guard)?;
        let t = inner.totals();
        let d = PyDict::new(py);
        d.set_item("rows", t.rows)?;
        d.set_item("slots", t.slots)?;
        d.set_item("filled", t.filled)?;
        d.set_item("documents", t.documents)?;
        let batches = inner.positions().first().map_or(0, |p| p.batches);
        d.set_item("batches", batches)?;
        d.set_item("efficiency", t.efficiency())?;
        d.set_item("documents_per_row", t.documents_per_row())?;
        d.set_item("wait_seconds", inner.waited().as_secs_f64())?;
        Ok(d)
    }

    /// How many ids the tokenizer has (None without one).
    #[getter]
    fn tokenizer_vocab(&self) -> PyResult<Option<usize>> {
        Ok(open_ref(&self.locked())?.tokenizer_vocab())
    }

    /// Rows of one replica's share of a batch.
    #[getter]
    fn rows_per_replica(&self) -> usize {
        self.config.rows
    }

    #[getter]
    fn replicas(&self) -> usize {
        self.replicas
    }

    #[getter]
    fn owned(&self) -> Vec<usize> {
        self.owned.clone()
    }

    #[getter]
    fn seq_len(&self) -> usize {
        self.config.seq_len
    }

    #[getter]
    fn packing(&self) -> String {
        self.config.packing.name().to_string()
    }

    /// Stops the pipelines; the loader gives no batch after.
    fn close(&mut self, py: Python<'_>) {
        if let Some(inner) = self.slot().take() {
            // Dropping joins the worker threads, which may be mid-chunk.
            py.allow_threads(move || drop(inner));
        }
    }
}

impl Loader {
    fn slot(&mut self) -> &mut Option<ReplicaLoaders> {
        // A panic caught while a batch was made poisons nothing that
        // matters: the loaders are as the panic left them.
        self.inner.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    fn open_loaders(&mut self) -> PyResult<&mut ReplicaLoaders> {
        self.slot().as_mut().ok_or_else(closed)
    }

    fn locked(&self) -> MutexGuard<'_, Option<ReplicaLoaders>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn open_ref(slot: &Option<ReplicaLoaders>) -> PyResult<&ReplicaLoaders> {
    slot.as_ref().ok_or_else(closed)
}

/// A call the loader's state (closed) does not allow.
fn closed() -> PyErr {
    usage(UsageKind::Conflict, "the loader is closed")
}

/// The batch as triples by input name, each array taking its buffer.
fn batch_dict(py: Python<'_>, b: RowBatch) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let shape = vec![b.rows as i64, b.seq as i64];
    let raw = |v: Vec<i32>| ("s32", shape.clone(), PyArray1::from_vec(py, v));
    d.set_item("tokens", raw(b.tokens))?;
    d.set_item("targets", raw(b.targets))?;
    if let Some(s) = b.segment_ids {
        d.set_item("segment_ids", raw(s))?;
    }
    Ok(d)
}

/// A JSON array of positions (a checkpoint's `loader.json`).
fn positions_of(text: &str) -> PyResult<Vec<LoaderPosition>> {
    positions_from_json(text).map_err(|e| loader_error(&e))
}

/// `format=`, by the names `hlatc train --corpus-format` takes.
fn source_format(name: &str) -> PyResult<SourceFormat> {
    named(
        Unknown::Argument,
        ("format", "format"),
        name,
        &SourceFormat::ALL,
        SourceFormat::name,
    )
}

fn packing_of(name: &str) -> PyResult<Packing> {
    named(
        Unknown::Argument,
        ("packing", "packing"),
        name,
        &Packing::ALL,
        Packing::name,
    )
}

/// `bos=`/`eos=`: True the tokenizer's own, False or None none, a
/// string that token. (Required of the native class: an `Option` here
/// could not tell None from absent.)
fn special(v: &Bound<'_, PyAny>, what: &str) -> PyResult<SpecialToken> {
    if v.is_none() {
        return Ok(SpecialToken::None);
    }
    if let Ok(b) = v.extract::<bool>() {
        return Ok(if b {
            SpecialToken::Detect
        } else {
            SpecialToken::None
        });
    }
    v.extract::<String>().map(SpecialToken::Named).map_err(|_| {
        crate::errors::argument_usage(
            UsageKind::Invalid,
            what,
            format!("{what}: True (the tokenizer's own), False or None (none), or a token's text"),
        )
    })
}

/// What a loader for `step` must make: its global batch, its vocabulary,
/// its DP replicas and whether it takes segment ids, and the DP replica
/// whose rows each rank takes.
#[pyfunction]
pub fn data_layout<'py>(py: Python<'py>, step: &Step) -> PyResult<Bound<'py, PyDict>> {
    let cfg = &step.step_config()?;
    let d = PyDict::new(py);
    d.set_item("batch_size", cfg.batch.batch_size)?;
    d.set_item("seq_len", cfg.batch.seq_len)?;
    d.set_item("vocab_size", cfg.model.vocab_size)?;
    d.set_item("replicas", cfg.parallel.dp)?;
    d.set_item("packed", cfg.packed)?;
    let replica_of: Vec<i64> = (0..cfg.parallel.world())
        .map(|r| cfg.parallel.dp_rank(r))
        .collect();
    d.set_item("replica_of_rank", replica_of)?;
    Ok(d)
}
