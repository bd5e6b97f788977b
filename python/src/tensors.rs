//! safetensors files as hlatc writes and reads them (`hlatc shard`'s rank
//! files, `train --save-state`), so a checkpoint written from Python is
//! the CLI's format, byte for byte.

use crate::arrays::{dict_of, from_raw, RawIn};
use crate::errors::{guarded, to_py};
use hlatc::Literal;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// The name of rank `rank`'s file among per-rank state files (`hlatc
/// shard`'s, `hlatc unshard`'s).
#[pyfunction]
pub fn rank_file(rank: usize) -> String {
    hlatc::state_shards::rank_file_name(rank)
}

/// `tensors` (`(name, (dtype, shape, bytes))`, in the order given) to a
/// safetensors file at `path`.
#[pyfunction]
pub fn write_safetensors(
    py: Python<'_>,
    path: PathBuf,
    tensors: Vec<(String, RawIn<'_>)>,
) -> PyResult<()> {
    let named = tensors
        .into_iter()
        .map(|(name, raw)| Ok((name.clone(), from_raw(&name, raw)?)))
        .collect::<PyResult<Vec<(String, Literal)>>>()?;
    py.allow_threads(|| {
        guarded(|| {
            hlatc::runtime::write_safetensors(&path, &named)
                .map_err(|e| to_py(hlatc::Error::from(e)))
        })
    })
}

/// Every tensor of the safetensors file at `path`, by name.
#[pyfunction]
pub fn read_safetensors(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let tensors = py.allow_threads(|| {
        guarded(|| {
            hlatc::runtime::read_safetensors(&path).map_err(|e| to_py(hlatc::Error::from(e)))
        })
    })?;
    dict_of(py, tensors)
}
