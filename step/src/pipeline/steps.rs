//! The programs of a pipeline-parallel step, built: the tick programs of
//! every phase and the apply step.

use super::schedule::{Phase, Schedule};
use super::tick;
use crate::grad_accum::build_apply_step;
use crate::pipeline_form::PipelineForm;
use crate::train_step::{check, StepConfig, StepError, TrainStep};
use hlatc_models::parallel::stages::Stages;
use hlatc_models::{BatchShape, ParallelError};

/// The programs of a pipeline-parallel step.
pub struct PipelineSteps {
    /// The tick programs, in the order of [`Phase::ALL`].
    pub ticks: [TrainStep; 3],
    /// The update from the accumulated gradients (the apply step of
    /// gradient accumulation, on a stage's parameters).
    pub apply: TrainStep,
    pub schedule: Schedule,
    pub stages: Stages,
    /// The config every stage's programs are built from: the step's, with
    /// one stage's layers.
    pub stage_config: StepConfig,
    /// How the tick programs are written.
    pub form: PipelineForm,
}

/// The programs of a pipeline-parallel step by reference, with what
/// runs them: `hlatc_train::trainer::Trainer::pipelined_programs`' input.
#[derive(Clone, Copy)]
pub struct PipelineView<'a> {
    /// The tick programs, in the order of [`Phase::ALL`].
    pub ticks: [&'a TrainStep; 3],
    pub apply: &'a TrainStep,
    pub schedule: Schedule,
    pub stage_config: &'a StepConfig,
    pub form: PipelineForm,
}

impl PipelineSteps {
    /// Every program: the tick programs, then the apply step.
    pub fn programs(&self) -> impl Iterator<Item = &TrainStep> {
        self.ticks.iter().chain([&self.apply])
    }

    /// [`PipelineSteps::programs`], to change (run passes over them).
    pub fn programs_mut(&mut self) -> impl Iterator<Item = &mut TrainStep> {
        self.ticks.iter_mut().chain([&mut self.apply])
    }

    /// The programs by reference.
    pub fn view(&self) -> PipelineView<'_> {
        PipelineView {
            ticks: self.ticks.each_ref(),
            apply: &self.apply,
            schedule: self.schedule,
            stage_config: &self.stage_config,
            form: self.form,
        }
    }

    /// The tick program of `phase`.
    pub fn tick(&self, phase: Phase) -> &TrainStep {
        let i = Phase::ALL
            .iter()
            .position(|&p| p == phase)
            .expect("a phase");
        &self.ticks[i]
    }
}

/// The config of a stage's tick programs: the stage's model over one
/// micro-batch (the global batch over `micro_batches`).
pub fn tick_config(stage_config: &StepConfig, micro_batches: i64) -> StepConfig {
    StepConfig {
        batch: BatchShape {
            batch_size: stage_config.batch.batch_size / micro_batches,
            ..stage_config.batch
        },
        ..stage_config.clone()
    }
}

/// Builds the programs of `cfg` (`cfg.parallel.pp` stages, its batch the
/// optimizer step's) over `micro_batches` micro-batches, in `form`.
pub fn build_pipeline_steps(
    cfg: &StepConfig,
    micro_batches: i64,
    form: PipelineForm,
) -> Result<PipelineSteps, StepError> {
    check(cfg)?;
    let par = cfg.parallel;
    if cfg.packed {
        return Err(ParallelError::PackedStages.into());
    }
    let per_replica = par.local_batch(cfg.batch).batch_size;
    if micro_batches < 1 || per_replica % micro_batches != 0 {
        return Err(ParallelError::MicroBatches {
            pp: par.pp,
            per_replica,
            micro_batches,
        }
        .into());
    }
    let stages = Stages::new(&cfg.model, par.pp)?;
    let schedule = Schedule {
        stages: par.pp,
        micro_batches,
    };
    let stage_config = StepConfig {
        model: stages.stage_model(&cfg.model),
        ..cfg.clone()
    };
    let micro = tick_config(&stage_config, micro_batches);
    // The steady program has both slots: it finds what the forward slot
    // keeps, which the warm-up (forward alone) is told and the cool-down
    // checks.
    let (steady, kept) = tick::build_tick(&micro, schedule, Phase::Steady, form, None)?;
    let told = |phase| tick::build_tick(&micro, schedule, phase, form, Some(&kept));
    let warm_up = told(Phase::WarmUp)?.0;
    let cool_down = told(Phase::CoolDown)?.0;
    Ok(PipelineSteps {
        ticks: [warm_up, steady, cool_down],
        apply: build_apply_step(&stage_config)?,
        schedule,
        stages,
        stage_config,
        form,
    })
}
