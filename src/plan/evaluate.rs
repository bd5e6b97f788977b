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
use hlatc_passes::neuron_check::{self, Chip, Severity};
use hlatc_step::memory_plan::MemoryPlan;

/// How a layout's programs are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fidelity {
    /// The whole programs compiled.
    Exact,
    /// Two- and three-layer stages compiled, and the rest of the layers
    /// added as the third layer's difference.
    Extrapolated,
}

/// What the planner knows of a layout once its programs are read: the
/// work of each program with the times it runs, and the memory plan. A
/// pipeline layout's programs keep each micro-batch's activations by the
/// remat policy, as NxD's pipeline (which the measured runs used) does,
/// so they are priced as emitted.
#[derive(Clone, Debug)]
pub struct Evaluated {
    pub work: StepWork,
    pub memory: MemoryPlan,
    /// What the Neuron pre-flight warns of in the whole programs (read
    /// exactly; none from stages), each located in its program's text.
    pub warnings: Vec<String>,
}

/// Compiles `layout` of `cfg` and reads its programs; the whole programs
/// ([`Fidelity::Exact`]) go through the Neuron pre-flight for `chip` too,
/// as `hlatc compile` runs it: a refusal refuses the layout, a warning is
/// kept beside it.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    cfg: &ModelConfig,
    name: &str,
    seq_len: i64,
    global_batch: i64,
    layout: &Layout,
    cores_per_node: i64,
    chip: Chip,
    fidelity: Fidelity,
) -> Result<Evaluated, PlanError> {
    let placement = Placement {
        parallel: layout.parallel,
        cores_per_node,
    };
    let preflight = fidelity == Fidelity::Exact;
    let read = |layers: i64| -> Result<Evaluated, PlanError> {
        let mut c = cfg.clone();
        c.num_hidden_layers = layers;
        let source = ModelSource::Config {
            cfg: Box::new(c),
            name: name.to_string(),
        };
        let options = layout.compile_options(source, seq_len, global_batch, chip)?;
        let compiled = compile_step(&options).map_err(|e| PlanError::Compile {
            layout: layout.to_string(),
            source: Box::new(e),
        })?;
        // A kernel that does not apply would price another program than
        // the one asked for.
        if let Some(f) = compiled.kernel_fallbacks.first() {
            return Err(PlanError::Layout {
                layout: layout.to_string(),
                message: format!(
                    "kernel {} does not apply ({}); the planner prices what was asked for",
                    f.request, f.reason
                ),
            });
        }
        let mut e = read_programs(&compiled, &placement);
        if preflight {
            e.warnings =
                preflight_warnings(&compiled, chip).map_err(|message| PlanError::Layout {
                    layout: layout.to_string(),
                    message,
                })?;
        }
        Ok(e)
    };
    let per_stage = cfg.num_hidden_layers / layout.parallel.pp.max(1);
    match fidelity {
        Fidelity::Exact => read(cfg.num_hidden_layers),
        Fidelity::Extrapolated if per_stage <= 3 || !layers_alike(cfg) => {
            read(cfg.num_hidden_layers)
        }
        Fidelity::Extrapolated => {
            let two = read(2 * layout.parallel.pp)?;
            let three = read(3 * layout.parallel.pp)?;
            Ok(extrapolate(&two, &three, (per_stage - 2) as f64))
        }
    }
}

/// Whether every decoder layer is the same program: a mixture of experts
/// with dense layers among its sparse ones is not (its two- and
/// three-layer stages would not be its layers' pattern), so it is read
/// whole.
fn layers_alike(cfg: &ModelConfig) -> bool {
    !cfg.moe
        .as_ref()
        .is_some_and(|m| m.sparse_layer_count(cfg.num_hidden_layers) != cfg.num_hidden_layers)
}

/// `one` plus `more` times the difference `two - one`, program by program
/// and part by part: `one` and `two` are stages of `L` and `L + 1` layers.
fn extrapolate(one: &Evaluated, two: &Evaluated, more: f64) -> Evaluated {
    Evaluated {
        work: work_between(&one.work, &two.work, more),
        memory: memory_between(&one.memory, &two.memory, more),
        warnings: Vec::new(),
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
        gathered_weights: part(a.gathered_weights, b.gathered_weights),
        activations: part(a.activations, b.activations),
        backward_working: part(a.backward_working, b.backward_working),
    }
}

/// Each program of a compiled step read, with the times it runs per
/// optimizer step ([`crate::compile_step::StepPrograms::runs_per_step`]).
fn read_programs(compiled: &CompiledStep, placement: &Placement) -> Evaluated {
    let runs = (compiled.programs.runs_per_step().into_iter())
        .map(|(step, n)| (ProgramCounts::of(&step.module, placement), n as f64))
        .collect();
    Evaluated {
        work: StepWork { runs },
        memory: compiled.memory,
        warnings: Vec::new(),
    }
}

/// The Neuron pre-flight of every program of `compiled` on `chip`, as
/// `hlatc compile` runs it (the memory plan judges memory): the warnings,
/// each under its program's text file, or the refusals as one message.
fn preflight_warnings(compiled: &CompiledStep, chip: Chip) -> Result<Vec<String>, String> {
    use hlatc_artifacts::bundle::{ProgramName, TEXT_FILE};
    let mut warnings = Vec::new();
    let mut refusals = Vec::new();
    for (name, step) in compiled.programs() {
        let flags = neuron_check::pinned_flags(&step.module, chip);
        let report = neuron_check::check_planned_step(&step.module, chip, flags);
        let file = match name {
            ProgramName::Step => TEXT_FILE.to_string(),
            folder => format!("{}/{TEXT_FILE}", folder.name()),
        };
        for f in &report.findings {
            let line = f.located(&file, None).to_string();
            match f.severity {
                Severity::Refusal => refusals.push(line),
                _ => warnings.push(line),
            }
        }
    }
    match refusals.is_empty() {
        true => Ok(warnings),
        false => Err(format!(
            "neuronx-cc would refuse it (the pre-flight): {}",
            refusals.join("; ")
        )),
    }
}
