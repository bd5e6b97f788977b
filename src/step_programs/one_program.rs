//! One program of a compiled step, as a host runs it on its own: the
//! program and the config it runs on, which differs from the whole step's
//! under gradient accumulation (the micro step takes a K-th of the batch)
//! and pipeline parallelism (each program holds one stage's layers).

use super::Result;
use crate::bundle::ProgramName;
use crate::compile_step::CompiledStep;
use crate::grad_accum::micro_config;
use crate::pipeline::tick_config;
use crate::train_step::{StepConfig, TrainStep};
use std::time::Duration;

/// One program of a [`CompiledStep`] ([`CompiledStep::program`]).
pub struct OneProgram<'a> {
    /// The compile it is one program of.
    pub compiled: &'a CompiledStep,
    pub name: ProgramName,
    pub step: &'a TrainStep,
    /// The config it runs on: the whole step's for a step of one program
    /// and for accumulation's apply step; the micro-batch's for the micro
    /// step; one stage's for a pipeline's programs (a tick's over one
    /// micro-batch).
    pub cfg: StepConfig,
    /// Its instructions before the passes and its passes' time, where the
    /// compile measured this program on its own: not a pipeline's warm-up
    /// and cool-down programs, which are timed together
    /// ([`crate::compile_step::PipelinePrograms::passes_time`]).
    pub measured: Option<(usize, Duration)>,
}

impl CompiledStep {
    /// Its program `name` (one of [`CompiledStep::programs`]'), with the
    /// config it runs on.
    pub fn program(&self, name: ProgramName) -> Result<OneProgram<'_>> {
        let missing = || {
            let names: Vec<&str> = self.programs().iter().map(|(n, _)| n.name()).collect();
            crate::Error::not_found(format!(
                "the step has no program '{}' (its programs: {})",
                name.name(),
                names.join(", ")
            ))
        };
        let programs = self.programs();
        let (_, step) = programs
            .into_iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(missing)?;
        let whole = Some((self.instructions_built, self.passes_time));
        let apply = self
            .apply
            .as_ref()
            .map(|a| (a.instructions_built, a.passes_time));
        use ProgramName as N;
        let (cfg, measured) = match (name, &self.pipeline, &self.apply) {
            (N::Step, ..) => (self.cfg.clone(), whole),
            (N::MicroStep, None, Some(a)) => (
                micro_config(&self.cfg, a.micro_batches).map_err(crate::Error::from)?,
                whole,
            ),
            (N::ApplyStep, Some(p), _) => (p.stage_config.clone(), apply),
            (N::ApplyStep, None, _) => (self.cfg.clone(), apply),
            (tick @ (N::WarmUp | N::Steady | N::CoolDown), Some(p), _) => (
                tick_config(&p.stage_config, p.schedule.micro_batches),
                whole.filter(|_| tick == N::Steady),
            ),
            _ => return Err(missing()),
        };
        Ok(OneProgram {
            compiled: self,
            name,
            step,
            cfg,
            measured,
        })
    }
}
