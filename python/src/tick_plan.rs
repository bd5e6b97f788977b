//! A pipeline-parallel step's tick plan, as `Step.tick_plan` gives it: the
//! train crate's `TickPlan`, so the JAX engine moves each tick's arrays
//! where hlatc's trainer moves them rather than working out for itself
//! what a tick carries.

use crate::args;
use crate::schedule::check_tick;
use crate::tensor_info::{info, TensorInfo};
use hlatc::pipeline::{Phase, TickInput, TickOutput, TickPlan as Inner, TickRouting as Routing};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;

/// Which program each tick of an optimizer step runs, and for each
/// program where its inputs come from and its outputs go.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct TickPlan {
    inner: Inner,
}

impl TickPlan {
    pub(crate) fn new(inner: Inner) -> Self {
        TickPlan { inner }
    }
}

#[pymethods]
impl TickPlan {
    /// Ticks per optimizer step.
    #[getter]
    fn ticks(&self) -> i64 {
        self.inner.ticks()
    }

    /// The program that runs tick `tick`: `warm_up`, `steady` or
    /// `cool_down`.
    fn phase(&self, #[pyo3(from_py_with = args::tick)] tick: i64) -> PyResult<&'static str> {
        check_tick(self.inner.ticks(), tick)?;
        Ok(self.inner.phase(tick).name())
    }

    /// The buffers the ticks carry, zero at a step's first tick.
    #[getter]
    fn buffers(&self) -> Vec<TensorInfo> {
        self.inner.buffers().iter().map(info).collect()
    }

    /// Where program `phase`'s inputs come from and its outputs go.
    fn routing(&self, #[pyo3(from_py_with = args::phase)] phase: String) -> PyResult<TickRouting> {
        let phase = Phase::ALL
            .into_iter()
            .find(|p| p.name() == phase)
            .ok_or_else(|| {
                crate::errors::argument_usage(
                UsageKind::OutOfRange,
                    "phase",
                    format!("phase '{phase}': a pipeline's tick programs are warm_up, steady and cool_down"),
                )
            })?;
        Ok(TickRouting::of(self.inner.routing(phase)))
    }

    fn __repr__(&self) -> String {
        format!(
            "TickPlan(ticks={}, buffers={})",
            self.inner.ticks(),
            self.inner.buffers().len()
        )
    }
}

/// One tick program's inputs and outputs by where they come from and go,
/// each a list of names.
#[pyclass(module = "hlatc._hlatc", frozen, get_all)]
pub struct TickRouting {
    phase: &'static str,
    /// Read from the rank's state.
    from_state: Vec<String>,
    /// Read from the rank's buffers.
    from_buffers: Vec<String>,
    /// The tick's batch (`Step.tick_batches`).
    from_batch: Vec<String>,
    /// Written back into the rank's state.
    to_state: Vec<String>,
    /// Written back into the rank's buffers.
    to_buffers: Vec<String>,
    /// Summed over the ticks into the step's loss.
    loss: String,
}

impl TickRouting {
    fn of(r: &Routing) -> Self {
        let names = |specs: Vec<&hlatc::train_step::TensorSpec>| {
            specs.into_iter().map(|s| s.name.clone()).collect()
        };
        TickRouting {
            phase: r.phase.name(),
            from_state: names(r.inputs_from(TickInput::State).collect()),
            from_buffers: names(r.inputs_from(TickInput::Buffer).collect()),
            from_batch: names(r.inputs_from(TickInput::Batch).collect()),
            to_state: names(r.outputs_to(TickOutput::State).collect()),
            to_buffers: names(r.outputs_to(TickOutput::Buffer).collect()),
            loss: r.loss().name.clone(),
        }
    }
}

#[pymethods]
impl TickRouting {
    fn __repr__(&self) -> String {
        format!(
            "TickRouting(phase={:?}, {} from state, {} from buffers, {} from batch, loss={:?})",
            self.phase,
            self.from_state.len(),
            self.from_buffers.len(),
            self.from_batch.len(),
            self.loss
        )
    }
}
