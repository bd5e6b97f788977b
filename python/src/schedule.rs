//! A pipeline-parallel step's schedule, as `Step.schedule` gives it: the
//! train crate's `Schedule`, so the JAX engine drives the ticks by the same
//! rules as hlatc's trainer rather than a copy of them.

use crate::args;
use hlatc::pipeline::{Phase, Schedule as Inner};
use hlatc::usage::UsageKind;
use pyo3::prelude::*;

/// Which program runs at each tick of an optimizer step, and which
/// micro-batch each stage's forward and backward slot takes.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct Schedule {
    inner: Inner,
}

impl Schedule {
    pub(crate) fn new(inner: Inner) -> Self {
        Schedule { inner }
    }

    fn check_tick(&self, tick: i64) -> PyResult<()> {
        check_tick(self.inner.ticks(), tick)
    }

    fn check_stage(&self, stage: i64) -> PyResult<()> {
        let stages = self.inner.stages;
        match (0..stages).contains(&stage) {
            true => Ok(()),
            false => Err(crate::errors::argument_usage(
                UsageKind::OutOfRange,
                "stage",
                format!("stage {stage}: the pipeline has stages 0 to {}", stages - 1),
            )),
        }
    }
}

#[pymethods]
impl Schedule {
    /// Pipeline stages (`pp`).
    #[getter]
    fn stages(&self) -> i64 {
        self.inner.stages
    }

    /// Micro-batches per optimizer step (`grad_accum`).
    #[getter]
    fn micro_batches(&self) -> i64 {
        self.inner.micro_batches
    }

    /// Ticks per optimizer step: micro_batches + 2 stages - 1.
    #[getter]
    fn ticks(&self) -> i64 {
        self.inner.ticks()
    }

    /// The fraction of a step each stage idles: (stages - 1) /
    /// (micro_batches + stages - 1).
    #[getter]
    fn bubble(&self) -> f64 {
        self.inner.bubble()
    }

    /// The program that runs tick `tick`: `warm_up`, `steady` or
    /// `cool_down`.
    fn phase(&self, #[pyo3(from_py_with = args::tick)] tick: i64) -> PyResult<&'static str> {
        self.check_tick(tick)?;
        Ok(self.inner.phase(tick).name())
    }

    /// The ticks each program runs, `(program, first, end)` in order.
    fn phases(&self) -> Vec<(&'static str, i64, i64)> {
        Phase::ALL
            .iter()
            .map(|&p| match self.inner.ticks_of(p) {
                // An empty phase (no steady tick for one micro-batch).
                r if r.is_empty() => (p.name(), 0, 0),
                r => (p.name(), r.start, r.end),
            })
            .collect()
    }

    /// The micro-batch stage `stage` runs forward at tick `tick`, if any.
    fn forward_micro_batch(
        &self,
        #[pyo3(from_py_with = args::tick)] tick: i64,
        #[pyo3(from_py_with = args::stage)] stage: i64,
    ) -> PyResult<Option<i64>> {
        self.check_tick(tick)?;
        self.check_stage(stage)?;
        Ok(self.inner.forward_micro_batch(tick, stage))
    }

    /// The micro-batch stage `stage` runs backward at tick `tick`, if any.
    fn backward_micro_batch(
        &self,
        #[pyo3(from_py_with = args::tick)] tick: i64,
        #[pyo3(from_py_with = args::stage)] stage: i64,
    ) -> PyResult<Option<i64>> {
        self.check_tick(tick)?;
        self.check_stage(stage)?;
        Ok(self.inner.backward_micro_batch(tick, stage))
    }

    fn __repr__(&self) -> String {
        format!(
            "Schedule(stages={}, micro_batches={}, ticks={}, bubble={:.4})",
            self.inner.stages,
            self.inner.micro_batches,
            self.inner.ticks(),
            self.inner.bubble()
        )
    }
}

/// Refuses a tick outside an optimizer step of `ticks` ticks.
pub(crate) fn check_tick(ticks: i64, tick: i64) -> PyResult<()> {
    match (0..ticks).contains(&tick) {
        true => Ok(()),
        false => Err(crate::errors::argument_usage(
            UsageKind::OutOfRange,
            "tick",
            format!(
                "tick {tick}: an optimizer step runs ticks 0 to {}",
                ticks - 1
            ),
        )),
    }
}
