//! hlatc's errors as Python exceptions, all under `hlatc.Error`, each
//! carrying the fields that say where the problem is (a syntax error's
//! line and column, a config's key, a batch's row and column).

use hlatc::models::ConfigError as RustConfigError;
use hlatc::train_step::StepError;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
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
    Ok(())
}

/// An exception of type `T` with `message` and attributes `fields`.
fn raise<T: PyTypeInfo>(message: String, fields: &[(&str, PyObject)]) -> PyErr {
    Python::with_gil(|py| {
        let err = PyErr::from_type(T::type_object(py), message);
        let value = err.value(py);
        for (name, v) in fields {
            // Setting an attribute on a fresh exception object cannot fail.
            let _ = value.setattr(*name, v);
        }
        err
    })
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
        T::Loader(_) | T::Checkpoint(_) => raise::<UsageError>(message, &[]),
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
