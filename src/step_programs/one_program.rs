//! One program of a compiled step, as a host runs it on its own: the
//! program and the config it runs on, which differs from the whole step's
//! under gradient accumulation (the micro step takes a K-th of the batch)
//! and pipeline parallelism (each program holds one stage's layers).

use super::Result;
use crate::bundle::ProgramName;
use crate::compile_step::{CompiledStep, StepPrograms};
use crate::grad_accum::micro_config;
use crate::pipeline::tick_config;
use crate::train_step::{StepConfig, TrainStep};

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
}

impl CompiledStep {
    /// Its program `name` (one of [`CompiledStep::programs`]'), with the
    /// config it runs on.
    pub fn program(&self, name: ProgramName) -> Result<OneProgram<'_>> {
        let programs = self.programs();
        let Some(&(_, step)) = programs.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = programs.iter().map(|(n, _)| n.name()).collect();
            return Err(crate::Error::not_found(format!(
                "the step has no program '{}' (its programs: {})",
                name.name(),
                names.join(", ")
            )));
        };
        use ProgramName as N;
        let cfg = match (&self.programs, name) {
            (StepPrograms::Accumulated(a), N::MicroStep) => {
                micro_config(&self.cfg, a.micro_batches).map_err(crate::Error::from)?
            }
            (StepPrograms::Pipelined(p), N::ApplyStep) => p.stage_config.clone(),
            (StepPrograms::Pipelined(p), _) => {
                tick_config(&p.stage_config, p.schedule.micro_batches)
            }
            _ => self.cfg.clone(),
        };
        Ok(OneProgram {
            compiled: self,
            name,
            step,
            cfg,
        })
    }
}
