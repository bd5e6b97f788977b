//! Tensors across the boundary: `(dtype, shape, bytes)` triples, raw
//! little-endian row-major data under XLA's type names. The Python side
//! (`hlatc/_arrays.py`) makes NumPy arrays of them, so the native module
//! needs no NumPy headers and one wheel serves every NumPy.

use crate::errors::UsageError;
use hlatc::compiler::ElementType;
use hlatc::Literal;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// A tensor as Python hands it over.
pub type RawIn<'py> = (String, Vec<i64>, Bound<'py, PyBytes>);

/// `l` as a `(dtype, shape, bytes)` triple.
pub fn to_raw<'py>(py: Python<'py>, l: &Literal) -> (String, Vec<i64>, Bound<'py, PyBytes>) {
    (
        l.ty().name().to_string(),
        l.dims().to_vec(),
        PyBytes::new(py, l.bytes()),
    )
}

/// The literal of a `(dtype, shape, bytes)` triple named `name`.
pub fn from_raw(name: &str, (dtype, shape, data): RawIn<'_>) -> PyResult<Literal> {
    let ty = ElementType::from_name(&dtype)
        .ok_or_else(|| UsageError::new_err(format!("'{name}': unknown dtype '{dtype}'")))?;
    Literal::from_bytes(ty, shape, data.as_bytes().to_vec())
        .map_err(|e| UsageError::new_err(format!("'{name}': {e}")))
}

/// A dict of name to triple from named literals.
pub fn dict_of<'py>(
    py: Python<'py>,
    named: impl IntoIterator<Item = (String, Literal)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, l) in named {
        d.set_item(name, to_raw(py, &l))?;
    }
    Ok(d)
}
