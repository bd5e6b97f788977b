//! A compiled step's programs by value, by the step's shape: the one
//! place the three shapes are told apart, so building, writing, verifying,
//! measuring and listing them are each one call whatever the shape.

use crate::Error;
use hlatc_artifacts::bundle::{
    stage_accumulation_bundle, stage_bundle, stage_pipeline_bundle, BundleTarget, ProgramName,
    StagedBundle,
};
use hlatc_step::grad_accum::{build_accumulation_steps, AccumulationSteps};
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::pipeline::{
    build_pipeline_steps, Phase, PipelineForm, PipelineSteps, PipelineView,
};
use hlatc_step::train_step::{build_train_step, StepConfig, TrainStep};
use hlatc_train::check::{
    verify_accumulation_bundle, verify_bundle, verify_pipeline_bundle, CheckReport,
};
use hlatc_train::Error as TrainError;
use std::path::Path;
use std::time::Duration;

/// The programs of a step, as built and then through the passes.
pub enum StepPrograms {
    /// One program.
    One(Box<TrainStep>),
    /// Gradient accumulation's micro step, run `micro_batches` times, and
    /// its apply step.
    Accumulated(Box<AccumulationSteps>),
    /// Pipeline parallelism's tick programs, its apply step, its schedule
    /// and stages.
    Pipelined(Box<PipelineSteps>),
}

impl StepPrograms {
    /// The programs of `cfg` over `micro_batches` micro-batches: one
    /// program for 1, accumulation's pair above 1, and under pipeline
    /// parallelism its ticks in `form` whatever the count.
    pub fn build(cfg: &StepConfig, micro_batches: i64, form: PipelineForm) -> Result<Self, Error> {
        Ok(match micro_batches {
            m if cfg.parallel.pp > 1 => {
                StepPrograms::Pipelined(Box::new(build_pipeline_steps(cfg, m, form)?))
            }
            1 => StepPrograms::One(Box::new(build_train_step(cfg)?)),
            k => StepPrograms::Accumulated(Box::new(build_accumulation_steps(cfg, k)?)),
        })
    }

    /// Every program, named as its bundle's folder is: the step alone;
    /// the micro and apply steps; or the three ticks and the apply step.
    pub fn named(&self) -> Vec<(ProgramName, &TrainStep)> {
        match self {
            StepPrograms::One(step) => vec![(ProgramName::Step, step)],
            StepPrograms::Accumulated(a) => ProgramName::ACCUMULATION
                .into_iter()
                .zip([&a.micro, &a.apply])
                .collect(),
            StepPrograms::Pipelined(p) => ProgramName::PIPELINE
                .into_iter()
                .zip(p.programs())
                .collect(),
        }
    }

    /// Every program, to change (passes, rounding, replica groups), in
    /// [`StepPrograms::named`]'s order.
    pub fn each_mut(&mut self) -> Vec<&mut TrainStep> {
        match self {
            StepPrograms::One(step) => vec![step],
            StepPrograms::Accumulated(a) => vec![&mut a.micro, &mut a.apply],
            StepPrograms::Pipelined(p) => p.programs_mut().collect(),
        }
    }

    /// Each program with the times it runs per optimizer step: the step
    /// once; the micro step K times and the apply step once; or each tick
    /// program as often as the schedule has ticks of its phase, and the
    /// apply step once.
    pub fn runs_per_step(&self) -> Vec<(&TrainStep, i64)> {
        match self {
            StepPrograms::One(step) => vec![(step, 1)],
            StepPrograms::Accumulated(a) => vec![(&a.micro, a.micro_batches), (&a.apply, 1)],
            StepPrograms::Pipelined(p) => {
                let runs = |phase| p.schedule.ticks_of(phase).count() as i64;
                Phase::ALL
                    .into_iter()
                    .map(|phase| (p.tick(phase), runs(phase)))
                    .chain([(&p.apply, 1)])
                    .collect()
            }
        }
    }

    /// The program run most often, which a summary leads with: the step,
    /// the micro step, or the steady tick.
    pub fn main(&self) -> &TrainStep {
        match self {
            StepPrograms::One(step) => step,
            StepPrograms::Accumulated(a) => &a.micro,
            StepPrograms::Pipelined(p) => p.tick(Phase::Steady),
        }
    }

    /// The program that runs the optimizer: the step, or the apply step.
    pub fn update(&self) -> &TrainStep {
        match self {
            StepPrograms::One(step) => step,
            StepPrograms::Accumulated(a) => &a.apply,
            StepPrograms::Pipelined(p) => &p.apply,
        }
    }

    /// The micro-batches of an optimizer step: K of accumulation, a
    /// pipeline's, 1 for one program.
    pub fn micro_batches(&self) -> i64 {
        match self {
            StepPrograms::One(_) => 1,
            StepPrograms::Accumulated(a) => a.micro_batches,
            StepPrograms::Pipelined(p) => p.schedule.micro_batches,
        }
    }

    /// A pipeline-parallel step's programs; `None` for another shape.
    pub fn pipeline(&self) -> Option<&PipelineSteps> {
        match self {
            StepPrograms::Pipelined(p) => Some(p),
            _ => None,
        }
    }

    /// The programs of a pipeline-parallel step, as its trainer and its
    /// check read them; `None` for another shape.
    pub fn pipeline_view(&self) -> Option<PipelineView<'_>> {
        self.pipeline().map(|p| p.view())
    }

    /// What the programs are, in words naming each as its bundle's folder
    /// is: `gradient accumulation over 4 micro-batches (micro_step,
    /// apply_step)`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.named().iter().map(|(n, _)| n.name()).collect();
        let names = names.join(", ");
        match self {
            StepPrograms::One(_) => format!("one program ({names})"),
            StepPrograms::Accumulated(a) => format!(
                "gradient accumulation over {} micro-batches ({names})",
                a.micro_batches
            ),
            StepPrograms::Pipelined(p) => format!(
                "{} pipeline stages over {} micro-batches, {} ticks ({names})",
                p.schedule.stages,
                p.schedule.micro_batches,
                p.schedule.ticks()
            ),
        }
    }

    /// Every program's passes' time together.
    pub fn passes_time(&self) -> Duration {
        self.named().iter().map(|(_, s)| s.times.passes).sum()
    }

    /// What each rank needs in device memory: the programs' peaks with
    /// the state they share counted once.
    pub fn memory_plan(&self) -> MemoryPlan {
        match self {
            StepPrograms::One(step) => MemoryPlan::of(step),
            StepPrograms::Accumulated(a) => MemoryPlan::of_accumulation(&a.micro, &a.apply),
            StepPrograms::Pipelined(p) => MemoryPlan::of_pipeline(&p.view().ticks, &p.apply),
        }
    }

    /// Writes the bundle of every program to a staging directory beside
    /// `dir` (`cfg` the whole step's config); nothing under `dir` changes
    /// until it is committed.
    pub fn stage_bundle(
        &self,
        cfg: &StepConfig,
        target: BundleTarget,
        dir: &Path,
    ) -> Result<StagedBundle, Error> {
        Ok(match self {
            StepPrograms::One(step) => stage_bundle(step, cfg, target, dir)?,
            StepPrograms::Accumulated(a) => {
                stage_accumulation_bundle(&a.micro, &a.apply, cfg, a.micro_batches, target, dir)?
            }
            StepPrograms::Pipelined(p) => stage_pipeline_bundle(p.view(), cfg, target, dir)?,
        })
    }

    /// `--verify` of a bundle staged at `dir`: its bytes read back and run
    /// on XLA CPU.
    pub fn verify_bundle(&self, cfg: &StepConfig, dir: &Path) -> Result<CheckReport, TrainError> {
        match self {
            StepPrograms::One(step) => verify_bundle(dir, step, cfg),
            StepPrograms::Accumulated(a) => {
                verify_accumulation_bundle(dir, [&a.micro, &a.apply], a.micro_batches, cfg)
            }
            StepPrograms::Pipelined(p) => verify_pipeline_bundle(dir, p.view(), cfg),
        }
    }
}
