//! hlatc's errors as Python exceptions, all under `hlatc.Error`, each
//! carrying the fields that say where the problem is (a syntax error's
//! line and column, a config's key, a batch's row and column).

use hlatc::models::ConfigError as RustConfigError;
use hlatc::train::checkpoint::CheckpointError as RustCheckpointError;
use hlatc::train::loader::LoaderError;
use hlatc::train_step::StepError;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::IntoPyObjectExt;
use pyo3::{create_exception, PyTypeInfo};

create_exception!(_hlatc, Error, PyException, "Every error hlatc raises.");
create_exception!(
    _hlatc,
    HloSyntaxError,
    Error,
    "HLO text that does not parse: `path`, `line` and `column` (1-based) say where."
);
create_exception!(
    _hlatc,
    ConfigError,
    Error,
    "A model config or option hlatc refuses: `key` names it (None for a file-level problem), `source` the file or preset."
);
create_exception!(
    _hlatc,
    BatchError,
    Error,
    "Token data a step cannot take: `input`, `row`, `column` and `value` say which id."
);
create_exception!(
    _hlatc,
    FileError,
    Error,
    "A file that cannot be read or written, or is not what it should be: `path` names it."
);
create_exception!(
    _hlatc,
    ProtoError,
    Error,
    "An HloModuleProto hlatc cannot read (an unmodeled field is named)."
);
create_exception!(
    _hlatc,
    VerifyError,
    Error,
    "A module that parses but is not valid HLO (shapes that do not agree, say)."
);
create_exception!(
    _hlatc,
    PassError,
    Error,
    "A pass that is unknown or failed."
);
create_exception!(
    _hlatc,
    NeuronRefusedError,
    Error,
    "neuronx-cc would refuse the step (the Neuron pre-flight found a refusal); nothing was written to `path`. `findings` lists the refusals, a line each."
);
create_exception!(
    _hlatc,
    RunError,
    Error,
    "XLA CPU refused or failed to run a program, or it would not fit in memory."
);
create_exception!(
    _hlatc,
    UsageError,
    Error,
    "Arguments that do not fit together (inputs against a step, options)."
);

/// Registers every exception type in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", Error::type_object(py))?;
    m.add("HloSyntaxError", HloSyntaxError::type_object(py))?;
    m.add("ConfigError", ConfigError::type_object(py))?;
    m.add("BatchError", BatchError::type_object(py))?;
    m.add("FileError", FileError::type_object(py))?;
    m.add("ProtoError", ProtoError::type_object(py))?;
    m.add("VerifyError", VerifyError::type_object(py))?;
    m.add("PassError", PassError::type_object(py))?;
    m.add("NeuronRefusedError", NeuronRefusedError::type_object(py))?;
    m.add("RunError", RunError::type_object(py))?;
    m.add("UsageError", UsageError::type_object(py))?;
    m.add("DataError", DATA_ERROR.get(py)?)?;
    m.add("CheckpointError", CHECKPOINT_ERROR.get(py)?)?;
    Ok(())
}

/// An exception type with two bases: an `hlatc.Error` that is also one of
/// Python's own (`except ValueError` catches a bad corpus, `except OSError`
/// a checkpoint that cannot be written). `create_exception!` makes types
/// of one base, so these are made by calling `type`, once.
struct TwoBased {
    cell: GILOnceCell<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
    /// Attributes every instance has, `None` unless the error sets them.
    fields: &'static [&'static str],
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
}

impl TwoBased {
    fn get<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || {
            let dict = PyDict::new(py);
            dict.set_item("__module__", "hlatc._hlatc")?;
            dict.set_item("__doc__", self.doc)?;
            for f in self.fields {
                dict.set_item(*f, py.None())?;
            }
            let bases = PyTuple::new(py, [Error::type_object(py), (self.builtin)(py)])?;
            py.get_type::<PyType>()
                .call1((self.name, bases, dict))?
                .downcast_into::<PyType>()
                .map(Bound::unbind)
                .map_err(PyErr::from)
        })?;
        Ok(ty.bind(py))
    }
}

static DATA_ERROR: TwoBased = TwoBased {
    cell: GILOnceCell::new(),
    name: "DataError",
    doc: "A corpus, tokenizer or loader setting the data loader refuses (also a ValueError): \
          `path` names the file (or glob), `line` and `column` (1-based) or `offset` (a byte, \
          or in a token-id file an id's index) the place, `field` a JSONL field, `setting` a \
          loader setting; `tokenizer_vocab` and `model_vocab` the sizes of a tokenizer too \
          large for the model. Attributes that do not apply are None.",
    fields: &[
        "path",
        "line",
        "column",
        "offset",
        "field",
        "setting",
        "tokenizer_vocab",
        "model_vocab",
    ],
    builtin: PyValueError::type_object,
};

static CHECKPOINT_ERROR: TwoBased = TwoBased {
    cell: GILOnceCell::new(),
    name: "CheckpointError",
    doc: "A checkpoint directory that cannot be read or written (also an OSError): `path` \
          names the file or directory.",
    fields: &["path"],
    builtin: PyOSError::type_object,
};

/// An exception of type `T` with `message` and attributes `fields`.
fn raise<T: PyTypeInfo>(message: String, fields: &[(&str, PyObject)]) -> PyErr {
    Python::with_gil(|py| raise_as(T::type_object(py), message, fields))
}

/// An exception of the type `ty` with `message` and attributes `fields`.
fn raise_as(ty: Bound<'_, PyType>, message: String, fields: &[(&str, PyObject)]) -> PyErr {
    let py = ty.py();
    let err = PyErr::from_type(ty, message);
    let value = err.value(py);
    for (name, v) in fields {
        // Setting an attribute on a fresh exception object cannot fail.
        let _ = value.setattr(*name, v);
    }
    err
}

/// An exception of the two-based type `kind` (an `hlatc.Error` should
/// the type not be made).
fn raise_two(kind: &TwoBased, message: String, fields: &[(&str, PyObject)]) -> PyErr {
    Python::with_gil(|py| match kind.get(py) {
        Ok(ty) => raise_as(ty.clone(), message, fields),
        Err(_) => raise_as(Error::type_object(py), message, fields),
    })
}

/// The Python exception for a loader's error: a `DataError` with the
/// fields the variant names.
pub(crate) fn loader_error(e: &LoaderError) -> PyErr {
    use LoaderError as L;
    let message = e.to_string();
    Python::with_gil(|py| {
        let path = |p: &std::path::Path| ("path", obj(py, p.display().to_string()));
        let fields: Vec<(&str, PyObject)> = match e {
            L::NoMatch { pattern } | L::BadPattern { pattern, .. } => {
                vec![("path", obj(py, pattern.as_str()))]
            }
            L::Io { path: p, .. }
            | L::TokenFile { path: p, .. }
            | L::Tokenizer { path: p, .. }
            | L::NeedsTokenizer { path: p } => vec![path(p)],
            L::MalformedJson {
                path: p,
                line,
                column,
                ..
            } => vec![
                path(p),
                ("line", obj(py, *line)),
                ("column", obj(py, *column)),
            ],
            L::NotAnObject { path: p, line, .. } | L::Encode { path: p, line, .. } => {
                vec![path(p), ("line", obj(py, *line))]
            }
            L::MissingField {
                path: p,
                line,
                field,
            }
            | L::FieldNotText {
                path: p,
                line,
                field,
                ..
            } => vec![
                path(p),
                ("line", obj(py, *line)),
                ("field", obj(py, field.as_str())),
            ],
            L::NotUtf8 { path: p, offset } => vec![path(p), ("offset", obj(py, *offset))],
            L::IdOutsideVocabulary {
                path: p,
                index,
                vocab,
                ..
            } => vec![
                path(p),
                ("offset", obj(py, *index)),
                ("model_vocab", obj(py, *vocab)),
            ],
            L::TokenizerPastVocabulary {
                path: p,
                tokenizer_vocab,
                model_vocab,
            } => vec![
                path(p),
                ("tokenizer_vocab", obj(py, *tokenizer_vocab)),
                ("model_vocab", obj(py, *model_vocab)),
            ],
            L::NoSuchToken { path: p, .. } => vec![path(p)],
            L::EmptyCorpus { sources, .. } => vec![("path", obj(py, sources.as_str()))],
            L::Setting { setting, .. } => vec![("setting", obj(py, *setting))],
            L::NoSources | L::Position { .. } | L::WorkerGone => Vec::new(),
        };
        raise_two(&DATA_ERROR, message, &fields)
    })
}

/// A `CheckpointError` about the file or directory `path`.
pub(crate) fn checkpoint_file_error(message: String, path: &str) -> PyErr {
    let path = Python::with_gil(|py| obj(py, path));
    raise_two(&CHECKPOINT_ERROR, message, &[("path", path)])
}

/// The Python exception for a checkpoint directory's error: an I/O
/// failure is a `CheckpointError` naming its path; a bad argument (no
/// checkpoint kept, a file name a checkpoint cannot hold) a `UsageError`.
pub(crate) fn checkpoint_error(e: &RustCheckpointError) -> PyErr {
    let message = e.to_string();
    match e {
        RustCheckpointError::Io { path, .. } => {
            checkpoint_file_error(message, &path.display().to_string())
        }
        RustCheckpointError::BadName { .. } | RustCheckpointError::KeepNone { .. } => {
            raise::<UsageError>(message, &[])
        }
    }
}

fn obj<'py, T: IntoPyObjectExt<'py>>(py: Python<'py>, v: T) -> PyObject {
    v.into_py_any(py).unwrap_or_else(|_| py.None())
}

fn config_error(e: &RustConfigError) -> PyErr {
    let message = e.to_string();
    Python::with_gil(|py| {
        let (key, source) = match e {
            RustConfigError::Field {
                source_name, field, ..
            }
            | RustConfigError::RopeScaling {
                source_name, field, ..
            } => (obj(py, field.as_str()), obj(py, source_name.as_str())),
            RustConfigError::File { source_name, .. } => (py.None(), obj(py, source_name.as_str())),
            RustConfigError::UnknownPreset { .. } => (obj(py, "model"), py.None()),
        };
        raise::<ConfigError>(message, &[("key", key), ("source", source)])
    })
}

pub(crate) fn path_error<T: PyTypeInfo>(message: String, path: &std::path::Path) -> PyErr {
    let path = Python::with_gil(|py| obj(py, path.display().to_string()));
    raise::<T>(message, &[("path", path)])
}

fn step_error(e: &StepError) -> PyErr {
    match e {
        StepError::Config(c) => config_error(c),
        StepError::Parallel(_) => raise::<ConfigError>(
            e.to_string(),
            &Python::with_gil(|py| [("key", obj(py, "parallel")), ("source", py.None())]),
        ),
        StepError::HostMemory(_) => raise::<RunError>(e.to_string(), &[]),
        _ => raise::<Error>(e.to_string(), &[]),
    }
}

fn train_error(e: &hlatc::train::Error) -> PyErr {
    use hlatc::train::Error as T;
    let message = e.to_string();
    match e {
        T::Io { path, .. } => path_error::<FileError>(message, path),
        T::Tensors(t) => path_error::<FileError>(message, std::path::Path::new(t.path())),
        T::Proto { path, .. } => path_error::<ProtoError>(message, path),
        T::Verify { path, .. } => path_error::<VerifyError>(message, path),
        T::Runtime(_) | T::Verification(_) => raise::<RunError>(message, &[]),
        T::Config(c) => config_error(c),
        T::Step(s) => step_error(s),
        T::Pass(_) => raise::<PassError>(message, &[]),
        T::Batch(b) => batch_error(b),
        T::NeuronRefused { dir, findings } => Python::with_gil(|py| {
            raise::<NeuronRefusedError>(
                message,
                &[
                    ("path", obj(py, dir.display().to_string())),
                    ("findings", obj(py, findings.clone())),
                ],
            )
        }),
        T::Usage(_) => raise::<UsageError>(message, &[]),
        T::Loader(l) => loader_error(l),
        T::Checkpoint(c) => checkpoint_error(c),
    }
}

fn batch_error(e: &hlatc::batch_check::BatchError) -> PyErr {
    use hlatc::batch_check::BatchError as B;
    let message = e.to_string();
    Python::with_gil(|py| {
        let fields = match e {
            B::OutOfVocabulary {
                input,
                row,
                col,
                value,
                ..
            }
            | B::DocumentResumed {
                input,
                row,
                col,
                value,
                ..
            }
            | B::Decreasing {
                input,
                row,
                col,
                value,
                ..
            }
            | B::DocumentAfterPadding {
                input,
                row,
                col,
                value,
                ..
            } => vec![
                ("input", obj(py, input.as_str())),
                ("row", obj(py, *row)),
                ("column", obj(py, *col)),
                ("value", obj(py, *value)),
            ],
            B::NotIds { input, .. } => vec![("input", obj(py, input.as_str()))],
        };
        raise::<BatchError>(message, &fields)
    })
}

/// The Python exception for `e`.
pub fn to_py(e: hlatc::Error) -> PyErr {
    use hlatc::Error as E;
    let message = e.to_string();
    match &e {
        E::Parse { path, source } => Python::with_gil(|py| {
            raise::<HloSyntaxError>(
                message,
                &[
                    ("path", obj(py, path.display().to_string())),
                    ("line", obj(py, source.line)),
                    ("column", obj(py, source.column)),
                ],
            )
        }),
        E::RunModule { .. } => raise::<RunError>(message, &[]),
        E::Train(t) => train_error(t),
        E::Output { .. } | E::DoesNotFit { .. } => raise::<UsageError>(message, &[]),
    }
}

/// Runs `f`, turning a Rust panic into `hlatc.Error` (a bug in hlatc,
/// never a crash of the interpreter or a `PanicException`).
pub fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(Error::new_err(format!(
                "internal error in hlatc (please report it): {what}"
            )))
        }
    }
}
