//! The `Step` `compile_step` returns: the training step `hlatc compile`
//! builds, its signature by role, its manifest and bundle, and runs of it
//! on XLA CPU with hlatc's own runtime; under gradient accumulation or
//! pipeline parallelism, its programs, each a `Step` of its own. What a
//! step does is the library's (`hlatc::step_programs`); this is its Python
//! face.

use crate::args;
use crate::arrays::{dict_of, ids, literals, RawIn};
use crate::errors::{guarded, to_py, usage};
use crate::schedule::Schedule;
use crate::tensor_info::{info, TensorInfo};
use crate::tick_plan::TickPlan;
use hlatc::bundle::ProgramName;
use hlatc::compile_step::CompiledStep;
use hlatc::data::Batch;
use hlatc::pipeline::Phase;
use hlatc::runtime::Program;
use hlatc::step_programs::{self, Borrowed, Pipeline, PipelineShape, RunFailure, StepPrograms};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::collections::HashMap;
use std::sync::OnceLock;

/// A compiled training step: one program, gradient accumulation's two, or
/// pipeline parallelism's four.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct Step {
    programs: Programs,
}

enum Programs {
    One(Box<OneProgram>),
    /// `grad_accum` above 1: each program a `Step` of its own.
    Accumulated {
        micro: Py<Step>,
        apply: Py<Step>,
        micro_batches: i64,
    },
    /// `pp` above 1: the tick programs (in `Phase::ALL` order) and the
    /// apply step, each a `Step` of its own.
    Pipelined {
        ticks: [Py<Step>; 3],
        apply: Py<Step>,
        shape: Box<PipelineShape>,
    },
}

/// A step of one program.
struct OneProgram {
    compiled: CompiledStep,
    /// The step compiled on XLA CPU, once a run asks for it.
    program: OnceLock<Program>,
    /// Under pipeline parallelism, which of the step's programs this is.
    stage_program: Option<StageProgram>,
}

/// One of a pipeline-parallel step's programs: its state names one stage's
/// layers as the stage model's, so what needs the whole model is asked of
/// the pipelined step.
struct StageProgram {
    name: &'static str,
    /// Whether the compile measured this program on its own (its
    /// instructions built and its passes' time): not the warm-up and
    /// cool-down programs (see `PipelineShape`).
    measured: bool,
}

impl Step {
    fn one(compiled: CompiledStep, stage_program: Option<StageProgram>) -> Step {
        Step {
            programs: Programs::One(Box::new(OneProgram {
                compiled,
                program: OnceLock::new(),
                stage_program,
            })),
        }
    }

    pub(crate) fn of_programs(py: Python<'_>, programs: StepPrograms) -> PyResult<Step> {
        Ok(match programs {
            StepPrograms::One(c) => Step::one(c, None),
            StepPrograms::Accumulated {
                micro,
                apply,
                micro_batches,
            } => Step {
                programs: Programs::Accumulated {
                    micro: Py::new(py, Step::one(micro, None))?,
                    apply: Py::new(py, Step::one(apply, None))?,
                    micro_batches,
                },
            },
            StepPrograms::Pipelined {
                ticks,
                apply,
                shape,
            } => {
                let [warm_up, steady, cool_down] = ticks;
                let part = |c, phase: Phase| {
                    let measured = phase == Phase::Steady;
                    let name = ProgramName::from(phase).name();
                    Py::new(py, Step::one(c, Some(StageProgram { name, measured })))
                };
                let apply_part = StageProgram {
                    name: ProgramName::ApplyStep.name(),
                    measured: true,
                };
                Step {
                    programs: Programs::Pipelined {
                        ticks: [
                            part(warm_up, Phase::WarmUp)?,
                            part(steady, Phase::Steady)?,
                            part(cool_down, Phase::CoolDown)?,
                        ],
                        apply: Py::new(py, Step::one(apply, Some(apply_part)))?,
                        shape: Box::new(shape),
                    },
                }
            }
        })
    }

    /// The one program, or a `UsageError` for several, naming what to use
    /// instead.
    fn single(&self) -> PyResult<&OneProgram> {
        match &self.programs {
            Programs::One(one) => Ok(one),
            Programs::Accumulated { micro_batches, .. } => Err(usage(format!(
                "this step is gradient accumulation's two programs (grad_accum={micro_batches}): use its micro_step and apply_step, each a Step of one program; write_bundle and Trainer take the pair"
            ))),
            Programs::Pipelined { shape, .. } => Err(usage(format!(
                "this step is pipeline parallelism's four programs (pp={}, {} micro-batches): use its warm_up, steady, cool_down and apply_step, each a Step of one stage's program; write_bundle, Trainer, hlatc.jax.Trainer, init_state, shard_state, gather_state, hugging_face_params and tick_batches take the pipeline",
                shape.schedule.stages, shape.schedule.micro_batches
            ))),
        }
    }

    /// The one program's step, or the apply step's of several: for what
    /// every program shares (the SPMD form, the ranks, the batch).
    pub(crate) fn any_compiled(&self) -> PyResult<&CompiledStep> {
        match &self.programs {
            Programs::One(one) => Ok(&one.compiled),
            Programs::Accumulated { apply, .. } | Programs::Pipelined { apply, .. } => {
                apply.get().compiled()
            }
        }
    }

    /// Refuses what needs the whole model on one of a pipeline's programs,
    /// whose state names one stage's layers: a share of it would be
    /// silently another stage's.
    fn whole_model(&self, what: &str) -> PyResult<()> {
        match &self.programs {
            Programs::One(one) => match &one.stage_program {
                Some(p) => Err(usage(format!(
                    "{what}: '{}' is one program of a pipeline-parallel step, whose state names one stage's layers as the stage model's, whatever the stage; ask the pipelined step, whose {what} knows which stage holds which of the whole model's layers",
                    p.name
                ))),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// The pipeline's programs, for a pipeline-parallel step.
    fn pipeline(&self) -> PyResult<Option<Pipeline<'_>>> {
        Ok(self.programs()?.pipeline())
    }

    /// A pipeline's tick program of `phase`, a `Step` of one stage's
    /// program; `None` for a step without pipeline parallelism.
    fn tick_program(&self, py: Python<'_>, phase: Phase) -> Option<Py<Step>> {
        match &self.programs {
            Programs::Pipelined { ticks, .. } => {
                let at = Phase::ALL.iter().position(|&p| p == phase)?;
                Some(ticks[at].clone_ref(py))
            }
            _ => None,
        }
    }

    /// The one program's step, or the `UsageError` of [`Step::single`].
    fn compiled(&self) -> PyResult<&CompiledStep> {
        Ok(&self.single()?.compiled)
    }

    /// The step's programs, borrowed: what a bundle is written from and a
    /// trainer runs.
    pub(crate) fn programs(&self) -> PyResult<Borrowed<'_>> {
        Ok(match &self.programs {
            Programs::One(one) => StepPrograms::One(&one.compiled),
            Programs::Accumulated {
                micro,
                apply,
                micro_batches,
            } => StepPrograms::Accumulated {
                micro: micro.get().compiled()?,
                apply: apply.get().compiled()?,
                micro_batches: *micro_batches,
            },
            Programs::Pipelined {
                ticks,
                apply,
                shape,
            } => StepPrograms::Pipelined {
                ticks: [
                    ticks[0].get().compiled()?,
                    ticks[1].get().compiled()?,
                    ticks[2].get().compiled()?,
                ],
                apply: apply.get().compiled()?,
                shape,
            },
        })
    }

    fn world(&self) -> PyResult<usize> {
        Ok(self.any_compiled()?.cfg.parallel.world() as usize)
    }

    /// The step on XLA CPU, compiled on first use.
    fn program(&self) -> PyResult<&Program> {
        let one = self.single()?;
        if let Some(p) = one.program.get() {
            return Ok(p);
        }
        let program = guarded(|| step_programs::cpu_program(&one.compiled).map_err(to_py))?;
        Ok(one.program.get_or_init(|| program))
    }
}

#[pymethods]
impl Step {
    /// The serialized `HloModuleProto`: the bundle's `model.hlo_module.pb`.
    #[getter]
    fn hlo_proto<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let c = self.compiled()?;
        Ok(PyBytes::new(
            py,
            &hlatc::proto::encode_module(&c.step.module),
        ))
    }

    /// The HLO text: the bundle's `model.hlo.txt`.
    #[getter]
    fn hlo_text(&self) -> PyResult<String> {
        Ok(hlatc::text::print_module(&self.compiled()?.step.module))
    }

    #[getter]
    fn inputs(&self) -> PyResult<Vec<TensorInfo>> {
        Ok(self.compiled()?.step.inputs.iter().map(info).collect())
    }

    #[getter]
    fn outputs(&self) -> PyResult<Vec<TensorInfo>> {
        Ok(self.compiled()?.step.outputs.iter().map(info).collect())
    }

    /// How many ranks run the step (TP x DP x PP).
    #[getter]
    fn world_size(&self) -> PyResult<usize> {
        self.world()
    }

    /// The SPMD form the step is written in: `replicas` (`replica_count=N`,
    /// as torch-xla compiles) or `partitions` (`num_partitions=N`, manual
    /// shardings, as JAX compiles).
    #[getter]
    fn spmd(&self) -> PyResult<&'static str> {
        Ok(self.any_compiled()?.cfg.spmd.form.name())
    }

    /// Where its ranks read their numbers: `device` (`replica-id` or
    /// `partition-id`) or `input` (an `s32[1]` input named `rank`).
    #[getter]
    fn rank_source(&self) -> PyResult<&'static str> {
        Ok(self.any_compiled()?.cfg.spmd.rank_source.name())
    }

    /// The manifest, as the bundle's `manifest.json` holds it.
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = step_programs::manifest(self.compiled()?);
        py.import("json")?
            .call_method1("loads", (PyString::new(py, &json),))
    }

    /// What the compile did: sizes, passes and time per stage (ms); for
    /// gradient accumulation's pair, `grad_accum` and each program's; for
    /// a pipeline, its stages and schedule and each program's.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (c, measured) = match &self.programs {
            Programs::One(one) => (
                &one.compiled,
                one.stage_program.as_ref().is_none_or(|p| p.measured),
            ),
            Programs::Pipelined {
                ticks,
                apply,
                shape,
            } => return pipeline_summary(py, ticks, apply, shape),
            Programs::Accumulated {
                micro,
                apply,
                micro_batches,
            } => {
                let d = PyDict::new(py);
                let micro = micro.get().summary(py)?;
                d.set_item("model", micro.get_item("model")?)?;
                d.set_item("target", micro.get_item("target")?)?;
                d.set_item("grad_accum", *micro_batches)?;
                d.set_item(ProgramName::MicroStep.name(), micro)?;
                d.set_item(ProgramName::ApplyStep.name(), apply.get().summary(py)?)?;
                return Ok(d);
            }
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let d = PyDict::new(py);
        d.set_item("model", &c.name)?;
        d.set_item("target", c.target.name())?;
        d.set_item("chip", c.target.chip().map(|chip| chip.name()))?;
        d.set_item("parameters", c.cfg.model.parameter_count())?;
        // A warm-up or cool-down program's were not measured on their own:
        // None rather than a number that is not its.
        d.set_item(
            "instructions_built",
            measured.then_some(c.instructions_built),
        )?;
        d.set_item("instructions", c.step.module.instruction_count())?;
        d.set_item("passes", c.step.passes.clone())?;
        d.set_item("precision", c.step.precision.name())?;
        d.set_item("forward_ms", ms(c.step.times.forward))?;
        d.set_item("autodiff_ms", ms(c.step.times.autodiff))?;
        d.set_item("optimizer_ms", ms(c.step.times.optimizer))?;
        d.set_item("passes_ms", measured.then_some(ms(c.passes_time)))?;
        Ok(d)
    }

    /// Writes the bundle `hlatc compile --out path` writes: whole, or
    /// nothing (an earlier bundle there is replaced whole).
    fn write_bundle(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::path)] path: std::path::PathBuf,
    ) -> PyResult<()> {
        let programs = self.programs()?;
        py.allow_threads(|| guarded(|| step_programs::write_bundle(programs, &path).map_err(to_py)))
    }

    /// Rank `rank`'s carried state at the start, by input name, as its
    /// roles call for: parameters initialized as the model is (from
    /// `seed`), or read from the Hugging Face safetensors `checkpoint`
    /// (only the slices the rank holds), Adam moments and the step counter
    /// zero, the rounding RNG seeded.
    #[pyo3(signature = (seed=0, rank=0, checkpoint=None))]
    fn init_state<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = args::seed)] seed: u64,
        #[pyo3(from_py_with = args::rank)] rank: usize,
        #[pyo3(from_py_with = args::checkpoint)] checkpoint: Option<std::path::PathBuf>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if let Some(p) = self.pipeline()? {
            if checkpoint.is_some() {
                return Err(usage(
                    "init_state(checkpoint=...) of a pipeline-parallel step: reading each stage's slices of a Hugging Face checkpoint is not supported yet; start from the model's initialization, or train with hlatc.Trainer and resume() a whole state made from the checkpoint",
                ));
            }
            let named =
                py.allow_threads(|| guarded(|| p.start_state(seed, rank).map_err(to_py)))?;
            return dict_of(py, named);
        }
        self.whole_model("init_state")?;
        let c = self.compiled()?;
        let named = py.allow_threads(|| {
            guarded(|| {
                let Some(path) = &checkpoint else {
                    return step_programs::start_values(c, seed, rank, true).map_err(to_py);
                };
                step_programs::check_rank(c, rank).map_err(to_py)?;
                hlatc::rank_checkpoint::rank_state_from_file(
                    &c.cfg,
                    &c.step.inputs,
                    path,
                    rank as i64,
                    seed,
                )
                .map(|start| start.state)
                .map_err(|e| to_py(e.into()))
            })
        })?;
        dict_of(py, named)
    }

    /// Rank `rank`'s share of batch 0 of the synthetic language (tokens,
    /// targets and, for packed rows, segment ids), drawn from `seed`.
    #[pyo3(signature = (seed=0, rank=0))]
    fn example_batch<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = args::seed)] seed: u64,
        #[pyo3(from_py_with = args::rank)] rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let c = self.compiled()?;
        let named = guarded(|| step_programs::start_values(c, seed, rank, false).map_err(to_py))?;
        dict_of(py, named)
    }

    /// One step on XLA CPU from every input by name (state and batch); the
    /// outputs by name. The batch is checked first (ids in the
    /// vocabulary, segment ids a packing).
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: HashMap<String, RawIn<'py>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut outs = self.run_ranks(py, vec![inputs])?;
        Ok(outs.remove(0))
    }

    /// [`Step::run`] for a sharded step: one dict of inputs per rank, one
    /// dict of outputs per rank.
    fn run_ranks<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<HashMap<String, RawIn<'py>>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let c = self.compiled()?;
        let per_rank = inputs
            .into_iter()
            .map(literals)
            .collect::<PyResult<Vec<_>>>()?;
        let args = step_programs::checked_inputs(c, per_rank).map_err(|f| match f {
            RunFailure::Other(e) => to_py(e),
            RunFailure::Batch { rank, error } => {
                let e = to_py(error.into());
                if c.cfg.parallel.world() > 1 {
                    let _ = e.value(py).setattr("rank", rank);
                }
                e
            }
        })?;
        let program = self.program()?;
        let outputs = py.allow_threads(|| {
            guarded(|| step_programs::run_ranks(c, program, &args).map_err(to_py))
        })?;
        outputs.into_iter().map(|o| dict_of(py, o)).collect()
    }

    /// Rank `rank`'s share of a global batch (`[batch_size, seq_len]`
    /// integer ids, every rank's rows): its batch inputs by name, the rows
    /// `Trainer` gives it. The batch is checked first, as a run checks it.
    #[pyo3(signature = (tokens, targets, segment_ids=None, rank=0))]
    fn rank_batch<'py>(
        &self,
        py: Python<'py>,
        tokens: RawIn<'py>,
        targets: RawIn<'py>,
        segment_ids: Option<RawIn<'py>>,
        #[pyo3(from_py_with = args::rank)] rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let c = self.compiled()?;
        step_programs::check_rank(c, rank).map_err(to_py)?;
        let batch = Batch {
            tokens: ids("tokens", tokens)?,
            targets: ids("targets", targets)?,
            segment_ids: segment_ids.map(|s| ids("segment_ids", s)).transpose()?,
        };
        let named = guarded(|| step_programs::rank_batch(c, &batch, rank).map_err(to_py))?;
        dict_of(py, named)
    }

    /// Rank `rank`'s share of every state input, by name, from the whole
    /// state (`Trainer.state()`'s, or `hlatc unshard`'s file): what that
    /// rank's program takes.
    fn shard_state<'py>(
        &self,
        py: Python<'py>,
        state: HashMap<String, RawIn<'py>>,
        #[pyo3(from_py_with = args::rank)] rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        if let Some(p) = self.pipeline()? {
            let state = literals(state)?;
            let named = guarded(|| p.shard_state(state, rank).map_err(to_py))?;
            return dict_of(py, named);
        }
        self.whole_model("shard_state")?;
        let c = self.compiled()?;
        step_programs::check_rank(c, rank).map_err(to_py)?;
        let state = literals(state)?;
        let named = guarded(|| step_programs::shard_state(c, state, rank).map_err(to_py))?;
        dict_of(py, named)
    }

    /// The whole state, by input name, from every rank's state (one dict
    /// per rank, in rank order), each checked against the step: what
    /// `hlatc unshard` joins.
    fn gather_state<'py>(
        &self,
        py: Python<'py>,
        per_rank: Vec<HashMap<String, RawIn<'py>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let per_rank = per_rank
            .into_iter()
            .map(literals)
            .collect::<PyResult<Vec<_>>>()?;
        if let Some(p) = self.pipeline()? {
            let named = guarded(|| p.gather_state(per_rank).map_err(to_py))?;
            return dict_of(py, named);
        }
        self.whole_model("gather_state")?;
        let c = self.compiled()?;
        let named = guarded(|| step_programs::gather_state(c, per_rank).map_err(to_py))?;
        dict_of(py, named)
    }

    /// The parameters of a whole state as Hugging Face tensors (fused
    /// ones split back), in Hugging Face order.
    fn hugging_face_params<'py>(
        &self,
        py: Python<'py>,
        state: HashMap<String, RawIn<'py>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let state = literals(state)?;
        if let Some(p) = self.pipeline()? {
            let named = guarded(|| p.hugging_face_params(state).map_err(to_py))?;
            return dict_of(py, named);
        }
        self.whole_model("hugging_face_params")?;
        let c = self.compiled()?;
        let named = guarded(|| step_programs::hugging_face_params(c, state).map_err(to_py))?;
        dict_of(py, named)
    }

    /// K for gradient accumulation's pair, the micro-batches of a
    /// pipeline's optimizer step, 1 for a step of one program.
    #[getter]
    pub(crate) fn grad_accum(&self) -> i64 {
        match &self.programs {
            Programs::One(_) => 1,
            Programs::Accumulated { micro_batches, .. } => *micro_batches,
            Programs::Pipelined { shape, .. } => shape.schedule.micro_batches,
        }
    }

    /// The pipeline stages its ranks form (1 without pipeline parallelism).
    #[getter]
    fn pp(&self) -> PyResult<i64> {
        Ok(self.any_compiled()?.cfg.parallel.pp)
    }

    /// A pipeline-parallel step's schedule; `None` otherwise.
    #[getter]
    fn schedule(&self) -> Option<Schedule> {
        match &self.programs {
            Programs::Pipelined { shape, .. } => Some(Schedule::new(shape.schedule)),
            _ => None,
        }
    }

    /// The config the step was built from, as its bundle's manifest records
    /// it: the whole model and the optimizer step's batch, whatever the
    /// programs.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = serde_json::to_string(self.programs()?.cfg())
            .map_err(|e| crate::errors::INTERNAL.err(format!("the config: {e}")))?;
        py.import("json")?
            .call_method1("loads", (PyString::new(py, &json),))
    }

    /// A pipeline's warm-up tick program (forward slots only).
    #[getter]
    fn warm_up(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.tick_program(py, Phase::WarmUp)
    }

    /// A pipeline's steady tick program (a forward and a backward slot).
    #[getter]
    fn steady(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.tick_program(py, Phase::Steady)
    }

    /// A pipeline's cool-down tick program (backward slots only).
    #[getter]
    fn cool_down(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.tick_program(py, Phase::CoolDown)
    }

    /// How a pipeline-parallel step's ticks run: each tick's program, and
    /// where each program's inputs come from and outputs go; `None`
    /// otherwise.
    #[getter]
    fn tick_plan(&self) -> PyResult<Option<TickPlan>> {
        let Some(p) = self.pipeline()? else {
            return Ok(None);
        };
        let plan = guarded(|| p.tick_plan().map_err(to_py))?;
        Ok(Some(TickPlan::new(plan)))
    }

    /// Rank `rank`'s batch inputs of every tick of a pipeline-parallel
    /// step's optimizer step on a global batch (`[batch_size, seq_len]`
    /// integer ids, every rank's rows), in tick order: `tick`,
    /// `token_count`, `tokens`, `backward_tokens` and `targets` as the
    /// schedule's rules give them. The batch is checked first.
    #[pyo3(signature = (tokens, targets, rank=0))]
    fn tick_batches<'py>(
        &self,
        py: Python<'py>,
        tokens: RawIn<'py>,
        targets: RawIn<'py>,
        #[pyo3(from_py_with = args::rank)] rank: usize,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let Some(p) = self.pipeline()? else {
            return Err(usage(
                "tick_batches: only a pipeline-parallel step (pp above 1) runs ticks; a step of one program takes rank_batch's inputs",
            ));
        };
        let batch = Batch {
            tokens: ids("tokens", tokens)?,
            targets: ids("targets", targets)?,
            segment_ids: None,
        };
        let ticks = guarded(|| p.tick_batches(&batch, rank).map_err(to_py))?;
        ticks.into_iter().map(|t| dict_of(py, t)).collect()
    }

    /// Gradient accumulation's micro step (forward and backward over one
    /// micro-batch, added into the `grad.NAME` accumulators), a `Step` of
    /// one program; `None` for a step of one program.
    #[getter]
    fn micro_step(&self, py: Python<'_>) -> Option<Py<Step>> {
        match &self.programs {
            Programs::Accumulated { micro, .. } => Some(micro.clone_ref(py)),
            _ => None,
        }
    }

    /// The apply step of gradient accumulation or of a pipeline (the sum
    /// over ranks, the clip and AdamW), a `Step` of one program; `None` for
    /// a step of one program.
    #[getter]
    fn apply_step(&self, py: Python<'_>) -> Option<Py<Step>> {
        match &self.programs {
            Programs::One(_) => None,
            Programs::Accumulated { apply, .. } | Programs::Pipelined { apply, .. } => {
                Some(apply.clone_ref(py))
            }
        }
    }

    fn __repr__(&self) -> PyResult<String> {
        let world = self.world()?;
        Ok(match self.programs()? {
            StepPrograms::One(c) => format!(
                "<hlatc.Step {} for {}: {} instructions, {} inputs, {world} rank(s)>",
                c.name,
                c.target.name(),
                c.step.module.instruction_count(),
                c.step.inputs.len(),
            ),
            StepPrograms::Accumulated {
                apply,
                micro_batches,
                ..
            } => format!(
                "<hlatc.Step {} for {}: gradient accumulation over {micro_batches} micro-batches (micro_step, apply_step), {world} rank(s)>",
                apply.name,
                apply.target.name(),
            ),
            StepPrograms::Pipelined { apply, shape, .. } => format!(
                "<hlatc.Step {} for {}: {} pipeline stages over {} micro-batches, {} ticks (warm_up, steady, cool_down, apply_step), {world} rank(s)>",
                apply.name,
                apply.target.name(),
                shape.schedule.stages,
                shape.schedule.micro_batches,
                shape.schedule.ticks(),
            ),
        })
    }
}

/// A pipelined step's summary: its model, stages and schedule, and each
/// program's summary by name.
fn pipeline_summary<'py>(
    py: Python<'py>,
    ticks: &[Py<Step>; 3],
    apply: &Py<Step>,
    shape: &PipelineShape,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let c = apply.get().compiled()?;
    d.set_item("model", &c.name)?;
    d.set_item("target", c.target.name())?;
    d.set_item("chip", c.target.chip().map(|chip| chip.name()))?;
    d.set_item("parameters", shape.cfg.model.parameter_count())?;
    d.set_item("pp", shape.schedule.stages)?;
    d.set_item("grad_accum", shape.schedule.micro_batches)?;
    d.set_item("ticks", shape.schedule.ticks())?;
    d.set_item("bubble", shape.schedule.bubble())?;
    for (phase, tick) in Phase::ALL.iter().zip(ticks) {
        d.set_item(ProgramName::from(*phase).name(), tick.get().summary(py)?)?;
    }
    d.set_item(ProgramName::ApplyStep.name(), apply.get().summary(py)?)?;
    // The warm-up and cool-down programs' pipeline, timed together.
    let ms = shape.ticks_passes_time.as_secs_f64() * 1e3;
    d.set_item("warm_up_and_cool_down_passes_ms", ms)?;
    Ok(d)
}
