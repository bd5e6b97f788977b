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
