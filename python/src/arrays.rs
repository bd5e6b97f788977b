//! Tensors across the boundary, as NumPy arrays of their bytes: a tensor
//! is `(dtype, shape, data)`, `dtype` XLA's type name and `data` a 1-D
//! NumPy array over its little-endian row-major bytes. The Python side
//! (`hlatc/_arrays.py`) views a caller's array as bytes and the bytes as
//! the tensor's dtype, neither a copy, so the native module needs no
//! dtype table (bf16 and the f8 types are ml_dtypes' in Python).
//!
//! Into Rust a tensor is copied once, the array's bytes into the
//! literal's; out of Rust it is not copied: the array takes the literal's
//! buffer as its own.

use crate::errors::{literal_kind, usage};
use hlatc::compiler::ElementType;
use hlatc::usage::UsageKind;
use hlatc::Literal;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::{BTreeMap, HashMap};

/// A tensor as Python hands it over: its bytes, borrowed (read-only)
/// from the caller's array.
pub type RawIn<'py> = (String, Vec<i64>, PyReadonlyArray1<'py, u8>);

/// A tensor as Python gets it: its bytes, owned by the array.
pub type RawOut<'py> = (&'static str, Vec<i64>, Bound<'py, PyArray1<u8>>);

/// `l` as a `(dtype, shape, data)` triple, its buffer handed to NumPy.
pub fn to_raw(py: Python<'_>, l: Literal) -> RawOut<'_> {
    let (name, dims) = (l.ty().name(), l.dims().to_vec());
    (name, dims, PyArray1::from_vec(py, l.into_bytes()))
}

/// The literal of a `(dtype, shape, data)` triple named `name`: the one
/// copy into Rust. A dtype hlatc has not is invalid, as the Python side's
/// check of the array's type (a `UsageTypeError`) sorts it.
pub fn from_raw(name: &str, (dtype, shape, data): RawIn<'_>) -> PyResult<Literal> {
    let ty = ElementType::from_name(&dtype).ok_or_else(|| {
        usage(
            UsageKind::Invalid,
            format!("'{name}': unknown dtype '{dtype}'"),
        )
    })?;
    let bytes = data
        .as_slice()
        .map_err(|e| usage(UsageKind::Invalid, format!("'{name}': {e}")))?
        .to_vec();
    Literal::from_bytes(ty, shape, bytes)
        .map_err(|e| usage(literal_kind(&e), format!("'{name}': {e}")))
}

/// A dict of name to triple from named literals.
pub fn dict_of<'py>(
    py: Python<'py>,
    named: impl IntoIterator<Item = (String, Literal)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, l) in named {
        d.set_item(name, to_raw(py, l))?;
    }
    Ok(d)
}

/// Token data of any integer type as the step's `s32` ids.
pub(crate) fn ids(name: &str, raw: RawIn<'_>) -> PyResult<Literal> {
    from_raw(name, raw)?
        .converted(ElementType::S32)
        .map_err(|e| usage(literal_kind(&e), format!("{name}: {e}")))
}

/// Tensors by name from Python's triples (each copied once, into Rust).
pub(crate) fn literals(tensors: HashMap<String, RawIn<'_>>) -> PyResult<BTreeMap<String, Literal>> {
    tensors
        .into_iter()
        .map(|(name, raw)| Ok((name.clone(), from_raw(&name, raw)?)))
        .collect()
}
