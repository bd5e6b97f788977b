//! A step's inputs and outputs as Python sees them: name, shape, dtype,
//! role, and whether the step carries it.

use hlatc::train_step::TensorSpec;
use pyo3::prelude::*;

/// One input or output of a step.
#[pyclass(module = "hlatc._hlatc", frozen, get_all)]
pub struct TensorInfo {
    name: String,
    shape: Vec<i64>,
    dtype: String,
    /// `parameter`, `adam_m`, `adam_v`, `step`, `tokens`, `targets`,
    /// `segment_ids`, `rng_state`, `loss`, `grad_norm`, `learning_rate`.
    role: String,
    /// Whether the input is carried state (an output of the same name
    /// updates it each step): what `init_state` makes and checkpoints hold.
    is_state: bool,
}

#[pymethods]
impl TensorInfo {
    fn __repr__(&self) -> String {
        format!(
            "TensorInfo(name={:?}, shape={:?}, dtype={:?}, role={:?}, is_state={})",
            self.name,
            self.shape,
            self.dtype,
            self.role,
            if self.is_state { "True" } else { "False" }
        )
    }
}

pub(crate) fn info(s: &TensorSpec) -> TensorInfo {
    TensorInfo {
        name: s.name.clone(),
        shape: s.shape.clone(),
        dtype: s.dtype.name().to_string(),
        role: serde_json::to_value(s.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        is_state: s.role.is_state(),
    }
}
