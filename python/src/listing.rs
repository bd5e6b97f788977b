//! A bundle's manifests read from Python: the library's own reader
//! (`hlatc::bundle::ListedBundle`, `expand_listing`), so `hlatc.Bundle`
//! expands the runs of layers exactly as `hlatc` does, and takes the
//! manifests as Python values rather than JSON text to parse again.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;
use serde_json::Value;
use std::path::PathBuf;

/// Every entry of the listing `listing` (a manifest's `inputs`, `outputs`
/// or `parallel.tp_split`, as JSON), each run of layers read out layer by
/// layer, as JSON: a `ValueError` names what cannot be read.
#[pyfunction]
pub fn expand_listing(listing: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(listing)
        .map_err(|e| PyValueError::new_err(format!("not JSON: {e}")))?;
    if !value.is_array() {
        return Err(PyValueError::new_err("a listing is a JSON array"));
    }
    let flat =
        hlatc::bundle::expand_listing(&value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(serde_json::Value::Array(flat).to_string())
}

/// A bundle's manifests, read (`hlatc::bundle::ListedBundle`, the
/// library's reader of a bundle's listings, which `hlatc.Bundle` wraps):
/// the top manifest and each program's inputs and outputs, runs of layers
/// read out. A bundle it cannot read raises `FileError` naming the file.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct ListedBundle {
    inner: hlatc::bundle::ListedBundle,
}

#[pymethods]
impl ListedBundle {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        // A bundle that cannot be listed is the artifacts' file error, as
        // the CLI's reader of a bundle raises it (`artifact.file`).
        let inner = hlatc::bundle::ListedBundle::read(&path).map_err(|e| {
            crate::errors::to_py(hlatc::Error::Artifact(hlatc::artifacts::Error::File {
                path: e.path,
                message: e.message,
            }))
        })?;
        Ok(ListedBundle { inner })
    }

    /// The top manifest's format.
    #[getter]
    fn format(&self) -> &str {
        &self.inner.format
    }

    /// The top manifest, as read.
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.inner.manifest)
    }

    /// Each program in the order the bundle lists them (`step` for a
    /// bundle of one).
    #[getter]
    fn programs(&self) -> Vec<ListedProgram> {
        self.inner
            .programs
            .iter()
            .map(|p| ListedProgram {
                name: p.name.name().to_string(),
                manifest: p.manifest.display().to_string(),
                inputs: p.inputs.clone(),
                outputs: p.outputs.clone(),
            })
            .collect()
    }
}

/// One program of a bundle: its name (its folder's), the manifest it was
/// read from, and its inputs and outputs, each an entry of the manifest's
/// listing (a dict) with its runs of layers read out.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct ListedProgram {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    manifest: String,
    inputs: Vec<Value>,
    outputs: Vec<Value>,
}

#[pymethods]
impl ListedProgram {
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.inputs.iter().map(|v| json_to_py(py, v)).collect()
    }

    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.outputs.iter().map(|v| json_to_py(py, v)).collect()
    }
}

/// A JSON value as `json.loads` gives it: None, bool, int (float where
/// it has a fraction or exponent), str, list, dict.
fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::Null => Ok(py.None().into_bound(py)),
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_bound_py_any(py),
            (None, Some(u), _) => u.into_bound_py_any(py),
            (None, None, f) => f.unwrap_or(f64::NAN).into_bound_py_any(py),
        },
        Value::String(s) => s.into_bound_py_any(py),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            Ok(list.into_any())
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            Ok(dict.into_any())
        }
    }
}
