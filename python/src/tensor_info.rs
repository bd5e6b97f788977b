//! A step's inputs and outputs as Python sees them: name, shape, dtype,
//! role, whether the step carries it, and the parameter and layer it
//! belongs to.

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
    /// For a parameter, its master weight, Adam moments or gradient
    /// accumulator: the parameter's stored name; `None` for the others.
    parameter: Option<String>,
    /// That parameter's decoder layer; `None` for the embedding, the final
    /// norm, the LM head and every tensor of no parameter.
    layer: Option<i64>,
}

#[pymethods]
impl TensorInfo {
    fn __repr__(&self) -> String {
        format!(
            "TensorInfo(name={:?}, shape={:?}, dtype={:?}, role={:?}, is_state={}, parameter={}, layer={})",
            self.name,
            self.shape,
            self.dtype,
            self.role,
            if self.is_state { "True" } else { "False" },
            self.parameter
                .as_ref()
                .map_or("None".to_string(), |p| format!("{p:?}")),
            self.layer.map_or("None".to_string(), |l| l.to_string()),
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
        parameter: s.parameter.clone(),
        layer: s.layer,
    }
}
