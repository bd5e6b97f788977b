//! One layout's programs compiled and read: how many times each runs per
//! step, what each asks of the hardware, and the memory plan of a rank.
//!
//! The search reads each layout from two compiles of the same layout with
//! two and three decoder layers per pipeline stage
//! ([`Fidelity::Extrapolated`]): every layer of a Llama step between the
//! first and the last is the same program, so the counts and the memory
//! plan of a stage of `L` layers are the two-layer figures plus `L - 2`
//! times the third layer's, at about a tenth of the compile time for 70B.
//! (One layer against two does not do: the one layer is both the first and
//! the last, and what the last layer's output feeds differs.) The layouts
//! the search prints are read again from the whole programs
//! ([`Fidelity::Exact`]), and a test holds the two equal.

use super::cost::StepWork;
use super::counts::{Placement, ProgramCounts};
use super::layout::Layout;
use super::PlanError;
use crate::compile_step::{compile_step, CompiledStep, ModelSource};
use hlatc_models::ModelConfig;
use hlatc_train::memory_plan::MemoryPlan;
use hlatc_train::pipeline::Phase;

/// How a layout's programs are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fidelity {
    /// The whole programs compiled.
    Exact,
    /// Two- and three-layer stages compiled, and the rest of the layers
    /// added as the third layer's difference.
    Extrapolated,
}

/// What the planner knows of a layout once its programs are read.
///
/// A pipeline layout is priced as a pipeline runs when each stage keeps
/// its micro-batches' activations by the remat policy (NxD's pipeline,
/// which the measured runs used): hlatc's tick programs run each stage's
/// forward a second time in the backward slot instead (docs/src/pipeline.md,
/// activation checkpointing at the stage's edge). That second forward is
/// the warm-up tick's program less its send, so it is taken off every tick
/// with a backward slot, and the activations of the micro-batches in
/// flight on stage 0 (`min(P, M)` under 1F1B) are added to the memory
/// plan. What hlatc's bundle runs today is kept beside it.
#[derive(Clone, Debug)]
pub struct Evaluated {
    pub work: StepWork,
    pub memory: MemoryPlan,
    /// A pipeline layout's programs and memory as hlatc emits them today.
    pub emitted: Option<(StepWork, MemoryPlan)>,
}

/// Compiles `layout` of `cfg` and reads its programs.
pub fn evaluate(
    cfg: &ModelConfig,
    name: &str,
    seq_len: i64,
    global_batch: i64,
    layout: &Layout,
    cores_per_node: i64,
    fidelity: Fidelity,
) -> Result<Evaluated, PlanError> {
    let placement = Placement {
        parallel: layout.parallel,
        cores_per_node,
    };
    let read = |layers: i64| -> Result<Evaluated, PlanError> {
        let mut c = cfg.clone();
        c.num_hidden_layers = layers;
        let source = ModelSource::Config {
            cfg: Box::new(c),
            name: name.to_string(),
        };
        let options = layout.compile_options(source, seq_len, global_batch)?;
        let compiled = compile_step(&options).map_err(|e| PlanError::Compile {
            layout: layout.to_string(),
            source: Box::new(e),
        })?;
        Ok(read_programs(&compiled, &placement))
    };
    let per_stage = cfg.num_hidden_layers / layout.parallel.pp.max(1);
    match fidelity {
        Fidelity::Exact => read(cfg.num_hidden_layers),
        Fidelity::Extrapolated if per_stage <= 3 => read(cfg.num_hidden_layers),
        Fidelity::Extrapolated => {
            let two = read(2 * layout.parallel.pp)?;
            let three = read(3 * layout.parallel.pp)?;
            Ok(extrapolate(&two, &three, (per_stage - 2) as f64))
        }
    }
}

/// `one` plus `more` times the difference `two - one`, program by program
/// and part by part: `one` and `two` are stages of `L` and `L + 1` layers.
fn extrapolate(one: &Evaluated, two: &Evaluated, more: f64) -> Evaluated {
    Evaluated {
        work: work_between(&one.work, &two.work, more),
        memory: memory_between(&one.memory, &two.memory, more),
        emitted: one
            .emitted
            .as_ref()
            .zip(two.emitted.as_ref())
            .map(|(a, b)| {
                (
                    work_between(&a.0, &b.0, more),
                    memory_between(&a.1, &b.1, more),
                )
            }),
    }
}

/// `a` plus `more` times `b - a`, program by program.
fn work_between(a: &StepWork, b: &StepWork, more: f64) -> StepWork {
    let runs = a
        .runs
        .iter()
        .zip(&b.runs)
        .map(|((x, times), (y, _))| (x.plus_scaled(&y.minus(x), more), *times))
        .collect();
    StepWork { runs }
}

/// `a` plus `more` times `b - a`, part by part.
fn memory_between(a: &MemoryPlan, b: &MemoryPlan, more: f64) -> MemoryPlan {
    let part = |a: u64, b: u64| (a as f64 + more * (b as f64 - a as f64)).max(0.0).round() as u64;
    MemoryPlan {
        parameters: part(a.parameters, b.parameters),
        master_weights: part(a.master_weights, b.master_weights),
        optimizer_state: part(a.optimizer_state, b.optimizer_state),
        gradient_accumulators: part(a.gradient_accumulators, b.gradient_accumulators),
        gradients: part(a.gradients, b.gradients),
        activations: part(a.activations, b.activations),
        backward_working: part(a.backward_working, b.backward_working),
    }
}

/// Each program of a compiled step with the times it runs per optimizer
/// step: the step once; the micro step K times and the apply step once;
/// or each tick program as often as the schedule has ticks of its phase,
/// and the apply step once.
fn read_programs(compiled: &CompiledStep, placement: &Placement) -> Evaluated {
    let counts = |m: &hlatc_compiler::Module| ProgramCounts::of(m, placement);
    let mut runs = Vec::new();
    match (&compiled.pipeline, &compiled.apply) {
        (Some(p), Some(apply)) => {
            let s = p.schedule;
            let mut emitted = Vec::new();
            // Each tick program read once, in `Phase::ALL` order.
            let counted = [&p.warm_up, &compiled.step, &p.cool_down].map(|t| counts(&t.module));
            // The warm-up tick's program is the stage's forward and its send.
            let mut second_forward = counted[0].clone();
            second_forward.sends = Default::default();
            for (phase, c) in Phase::ALL.into_iter().zip(counted) {
                let ticks = (0..s.ticks()).filter(|&t| s.phase(t) == phase).count() as f64;
                let kept = match phase.backward() {
                    true => c.minus(&second_forward),
                    false => c.clone(),
                };
                runs.push((kept, ticks));
                emitted.push((c, ticks));
            }
            let apply = counts(&apply.step.module);
            runs.push((apply.clone(), 1.0));
            emitted.push((apply, 1.0));
            let m = compiled.memory;
            let in_flight = s.stages.min(s.micro_batches).max(1) as u64;
            let memory = MemoryPlan {
                activations: m.activations * in_flight,
                ..m
            };
            return Evaluated {
                work: StepWork { runs },
                memory,
                emitted: Some((StepWork { runs: emitted }, m)),
            };
        }
        (None, Some(apply)) => {
            runs.push((counts(&compiled.step.module), apply.micro_batches as f64));
            runs.push((counts(&apply.step.module), 1.0));
        }
        _ => runs.push((counts(&compiled.step.module), 1.0)),
    }
    Evaluated {
        work: StepWork { runs },
        memory: compiled.memory,
        emitted: None,
    }
}
