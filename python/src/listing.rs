//! A manifest's listing read out flat from Python: the library's own
//! reader (`hlatc::bundle::expand_listing`), so `hlatc.Bundle` expands the
//! runs of layers exactly as `hlatc` does.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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

/// A program's name, the manifest it was read from, its inputs and its
/// outputs (JSON arrays).
type ProgramListing = (String, String, String, String);

/// A bundle's top manifest's format, the manifest (JSON), and each of its
/// programs with its inputs and outputs (each a JSON array, runs of layers
/// read out): the library's reader of a bundle's listings
/// (`ListedBundle`), which `hlatc.Bundle` wraps. A bundle it cannot read
/// raises `FileError` naming the file.
#[pyfunction]
pub fn read_bundle(path: std::path::PathBuf) -> PyResult<(String, String, Vec<ProgramListing>)> {
    let listed = hlatc::bundle::ListedBundle::read(&path)
        .map_err(|e| crate::errors::path_error(&crate::errors::FILE, e.message.clone(), &e.path))?;
    let programs = listed
        .programs
        .into_iter()
        .map(|p| {
            (
                p.name.name().to_string(),
                p.manifest.display().to_string(),
                serde_json::Value::Array(p.inputs).to_string(),
                serde_json::Value::Array(p.outputs).to_string(),
            )
        })
        .collect();
    Ok((listed.format, listed.manifest.to_string(), programs))
}
