//! Trainers of steps the tests build by hand (the train crate's tests'
//! own; the root crate's tests include this file). The facade starts a
//! trainer from a compiled step (`hlatc::step_programs::start_trainer`, what
//! `hlatc train` and Python's `Trainer` run); a test that makes its own
//! `StepConfig` (a fault injected, a model no preset has) or changes a
//! built step's policies starts it here: the step, or the programs of its
//! accumulation or pipeline, through the `cpu` target's pipeline with a
//! checkpointing policy, compiled on XLA CPU and given to the trainer's
//! constructor for programs already compiled.

use hlatc_compiler::Literal;
use hlatc_passes::{RematPolicy, Target};
use hlatc_runtime::Runtime;
use hlatc_step::grad_accum::AccumulationSteps;
use hlatc_step::pipeline::{build_pipeline_steps, PipelineForm, PipelineSteps};
use hlatc_step::train_step::{build_train_step, optimize, StepConfig, TrainStep};
use hlatc_train::trainer::Trainer;
use hlatc_train::Error;

/// `cfg`'s step as built, no pass run on it.
pub fn unoptimized(rt: &Runtime, cfg: &StepConfig, params: Vec<Literal>) -> Result<Trainer, Error> {
    let step = build_train_step(cfg)?;
    Trainer::with_program(rt.compile(&step.module)?, cfg, &step, params)
}

/// `cfg`'s step through the `cpu` pipeline with `remat`: the program
/// `hlatc compile --target cpu` writes.
pub fn optimized(
    rt: &Runtime,
    cfg: &StepConfig,
    remat: RematPolicy,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    optimized_step(rt, cfg, build_train_step(cfg)?, remat, params)
}

/// [`optimized`] for a step already built for `cfg`, whose cast and
/// rounding policies the test may have changed.
pub fn optimized_step(
    rt: &Runtime,
    cfg: &StepConfig,
    mut step: TrainStep,
    remat: RematPolicy,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    cpu_pipeline(cfg, [&mut step], remat)?;
    Trainer::with_program(rt.compile(&step.module)?, cfg, &step, params)
}

/// Gradient accumulation's micro and apply steps through the `cpu`
/// pipeline with `remat`; each `step` of the trainer runs the micro step
/// once per micro-batch and the apply step once.
pub fn accumulating(
    rt: &Runtime,
    cfg: &StepConfig,
    steps: AccumulationSteps,
    remat: RematPolicy,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    let AccumulationSteps {
        mut micro,
        mut apply,
        micro_batches,
    } = steps;
    cpu_pipeline(cfg, [&mut micro, &mut apply], remat)?;
    let programs = [rt.compile(&micro.module)?, rt.compile(&apply.module)?];
    Trainer::accumulating_programs(programs, cfg, [&micro, &apply], micro_batches, params)
}

/// Pipeline parallelism over `micro_batches` micro-batches: the programs
/// of `hlatc_step::pipeline` for the `cpu` target, started from the whole
/// model's `params`.
pub fn pipelined(
    rt: &Runtime,
    cfg: &StepConfig,
    micro_batches: i64,
    remat: RematPolicy,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    let form = PipelineForm::for_target(Target::Cpu, remat);
    let steps = build_pipeline_steps(cfg, micro_batches, form)?;
    pipelined_steps(rt, cfg, steps, remat, params)
}

/// [`pipelined`] for programs already built for `cfg`, whose cast and
/// rounding policies the test may have changed.
pub fn pipelined_steps(
    rt: &Runtime,
    cfg: &StepConfig,
    mut steps: PipelineSteps,
    remat: RematPolicy,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    cpu_pipeline(cfg, steps.programs_mut(), remat)?;
    let programs = steps
        .programs()
        .map(|s| rt.compile(&s.module))
        .collect::<Result<Vec<_>, _>>()?;
    Trainer::pipelined_programs(programs, cfg, steps.view(), params)
}

/// Each of `steps` through the `cpu` target's pipeline for `cfg`'s
/// kernels, with `remat`.
fn cpu_pipeline<'a>(
    cfg: &StepConfig,
    steps: impl IntoIterator<Item = &'a mut TrainStep>,
    remat: RematPolicy,
) -> Result<(), Error> {
    let pipeline =
        hlatc_step::kernel_choice::step_pipeline::<&str>(Target::Cpu, &cfg.kernels, &[])?;
    for step in steps {
        optimize(step, &pipeline, Target::Cpu, remat)?;
    }
    Ok(())
}
