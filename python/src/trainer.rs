//! A `Trainer` that carries a step's state from one step to the next on
//! XLA CPU, taking batches and giving back statistics and state.

use crate::args;
use crate::arrays::{dict_of, ids, literals, RawIn};
use crate::errors::{guarded, to_py};
use crate::step::Step;
use hlatc::data::Batch;
use hlatc::runtime::{safetensors_bytes, safetensors_from_bytes};
use hlatc::step_programs;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::HashMap;

#[pyclass(module = "hlatc._hlatc")]
pub struct Trainer {
    inner: hlatc::trainer::Trainer,
}

#[pymethods]
impl Trainer {
    /// Starts `step` from the model's initialization drawn from `seed`,
    /// zero Adam state and step 0 (on as many XLA CPU devices as the step
    /// has ranks). A step compiled with `grad_accum=K` runs its micro step
    /// K times and its apply step once per `step`.
    #[new]
    #[pyo3(signature = (step, seed=0))]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = args::step)] step: Bound<'_, Step>,
        #[pyo3(from_py_with = args::seed)] seed: u64,
    ) -> PyResult<Trainer> {
        let compiled = step.get().whole("Trainer")?;
        let inner =
            py.allow_threads(|| guarded(|| step_programs::trainer(compiled, seed).map_err(to_py)))?;
        Ok(Trainer { inner })
    }

    /// One optimizer step on a global batch (`[batch, seq]` integer
    /// tokens and targets; segment ids for a packed step): its loss, grad
    /// norm and learning rate; of a mixture of experts, also the token
    /// slots routed (`routed_tokens`) and dropped by a capacity
    /// (`dropped_tokens`), and the busiest expert's slots over the mean
    /// (`expert_imbalance`).
    #[pyo3(signature = (tokens, targets, segment_ids=None))]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        tokens: RawIn<'py>,
        targets: RawIn<'py>,
        segment_ids: Option<RawIn<'py>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let batch = Batch {
            tokens: ids("tokens", tokens)?,
            targets: ids("targets", targets)?,
            segment_ids: segment_ids.map(|s| ids("segment_ids", s)).transpose()?,
        };
        let inner = &mut self.inner;
        let stats =
            py.allow_threads(|| guarded(|| inner.step(&batch).map_err(|e| to_py(e.into()))))?;
        let d = PyDict::new(py);
        d.set_item("loss", stats.loss)?;
        d.set_item("grad_norm", stats.grad_norm)?;
        d.set_item("learning_rate", stats.learning_rate)?;
        if let Some(e) = &stats.experts {
            d.set_item("routed_tokens", e.routed.iter().sum::<f64>())?;
            d.set_item("dropped_tokens", e.dropped)?;
            d.set_item("expert_imbalance", e.imbalance())?;
        }
        Ok(d)
    }

    /// The whole carried state by input name (a sharded step's shares and
    /// ZeRO-1 shards gathered): parameters as stored, master weights, Adam
    /// moments, the step counter and the rounding RNG. What `hlatc train
    /// --save-state` writes, and what `resume` takes.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = &self.inner;
        let state = py.allow_threads(|| {
            guarded(|| inner.try_training_state().map_err(|e| to_py(e.into())))
        })?;
        dict_of(py, state)
    }

    /// Continues from `state` (a `state()` of this model and precision, from
    /// any layout): every state tensor by name, at its whole shape.
    fn resume(&mut self, py: Python<'_>, state: HashMap<String, RawIn<'_>>) -> PyResult<()> {
        let tensors = literals(state)?;
        let inner = &mut self.inner;
        py.allow_threads(|| guarded(|| inner.resume(tensors, "state").map_err(|e| to_py(e.into()))))
    }

    /// `state()` as the bytes of a safetensors file: what `hlatc train
    /// --save-state` writes and a checkpoint's `state.safetensors` holds.
    fn state_safetensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &self.inner;
        let bytes = py.allow_threads(|| {
            guarded(|| {
                let state = inner.try_training_state().map_err(|e| to_py(e.into()))?;
                safetensors_bytes(&state, "state").map_err(|e| to_py(hlatc::Error::from(e)))
            })
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// `resume` from the bytes of a safetensors file of the whole state
    /// (`what` names them in errors).
    fn resume_safetensors(&mut self, py: Python<'_>, data: &[u8], what: &str) -> PyResult<()> {
        let inner = &mut self.inner;
        py.allow_threads(|| {
            guarded(|| {
                let tensors =
                    safetensors_from_bytes(data, what).map_err(|e| to_py(hlatc::Error::from(e)))?;
                inner.resume(tensors, what).map_err(|e| to_py(e.into()))
            })
        })
    }

    /// The parameters as Hugging Face tensors (fused ones split back).
    fn hugging_face_params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = &self.inner;
        let params = py.allow_threads(|| {
            guarded(|| inner.try_hugging_face_params().map_err(|e| to_py(e.into())))
        })?;
        dict_of(py, params)
    }

    /// Completed steps.
    #[getter]
    fn steps_done(&self) -> PyResult<i64> {
        self.inner.try_steps_done().map_err(|e| to_py(e.into()))
    }
}
