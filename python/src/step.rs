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
use hlatc::compile_step::{CompiledStep, StepPrograms};
use hlatc::data::Batch;
use hlatc::pipeline::{Phase, PipelineSteps};
use hlatc::runtime::Program;
use hlatc::step_programs::{self, OneProgram, Pipeline, RunFailure, StateOf};
use hlatc::train_step::StepConfig;
use hlatc::usage::UsageKind;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A compiled training step: one program, gradient accumulation's two, or
/// pipeline parallelism's four; or one program of such a step.
#[pyclass(module = "hlatc._hlatc", frozen)]
pub struct Step {
    compiled: Arc<CompiledStep>,
    /// The program of `compiled` this is; `None`: the whole step.
    part: Option<ProgramName>,
    /// A whole step's programs, each a `Step` of its own, in
    /// [`CompiledStep::programs`] order; empty for a step of one program.
    parts: Vec<(ProgramName, Py<Step>)>,
    /// The one program compiled on XLA CPU, once a run asks for it.
    program: OnceLock<Program>,
}

impl Step {
    pub(crate) fn new(py: Python<'_>, compiled: CompiledStep) -> PyResult<Step> {
        let compiled = Arc::new(compiled);
        let names: Vec<ProgramName> = compiled.programs().iter().map(|(n, _)| *n).collect();
        let parts = match names.as_slice() {
            [_] => Vec::new(),
            _ => names
                .into_iter()
                .map(|name| {
                    let part = Step {
                        compiled: compiled.clone(),
                        part: Some(name),
                        parts: Vec::new(),
                        program: OnceLock::new(),
                    };
                    Ok((name, Py::new(py, part)?))
                })
                .collect::<PyResult<_>>()?,
        };
        Ok(Step {
            compiled,
            part: None,
            parts,
            program: OnceLock::new(),
        })
    }

    /// Whether this is a whole step of several programs.
    fn several(&self) -> bool {
        self.part.is_none() && !self.parts.is_empty()
    }

    /// The one program, or a `UsageError` for several, naming what to use
    /// instead.
    fn single(&self) -> PyResult<OneProgram<'_>> {
        let name = match self.part {
            Some(name) => name,
            None if self.parts.is_empty() => ProgramName::Step,
            None => return Err(self.several_programs()),
        };
        self.compiled.program(name).map_err(to_py)
    }

    /// Why a whole step of several programs cannot answer for one.
    fn several_programs(&self) -> PyErr {
        let message = match &self.compiled.programs {
            StepPrograms::Pipelined(p) => format!(
                "this step is pipeline parallelism's four programs (pp={}, {} micro-batches): use its warm_up, steady, cool_down and apply_step, each a Step of one stage's program; write_bundle, Trainer, hlatc.jax.Trainer, init_state, shard_state, gather_state, hugging_face_params and tick_batches take the pipeline",
                p.schedule.stages, p.schedule.micro_batches
            ),
            _ => format!(
                "this step is gradient accumulation's two programs (grad_accum={}): use its micro_step and apply_step, each a Step of one program; write_bundle and Trainer take the pair",
                self.grad_accum()
            ),
        };
        usage(UsageKind::Conflict, message)
    }

    /// The whole step, for what runs all its programs (`what`); one
    /// program of a step of several is refused.
    pub(crate) fn whole(&self, what: &str) -> PyResult<&CompiledStep> {
        match self.part {
            None => Ok(&self.compiled),
            Some(name) => Err(usage(
                UsageKind::Conflict,
                format!(
                    "{what}: '{}' is one program of a step of several; {what} runs the whole step (the Step compile_step returned)",
                    name.name()
                ),
            )),
        }
    }

    /// The rounding its program runs with; of several programs, the
    /// update's (the apply step's).
    pub(crate) fn rounding(&self) -> PyResult<String> {
        Ok(match self.part {
            Some(_) => self.single()?.step.rounding.to_string(),
            None => self.compiled.rounding().to_string(),
        })
    }

    /// The config it runs on: one program's, or the whole step's (the
    /// whole model, the optimizer step's batch).
    pub(crate) fn step_config(&self) -> PyResult<StepConfig> {
        match self.part {
            Some(_) => Ok(self.single()?.cfg),
            None => Ok(self.compiled.cfg.clone()),
        }
    }

    /// Refuses what needs the whole model on one of a pipeline's programs,
    /// whose state names one stage's layers: a share of it would be
    /// silently another stage's.
    fn whole_model(&self, what: &str) -> PyResult<()> {
        match self.part {
            Some(name) if self.compiled.cfg.parallel.pp > 1 => Err(usage(
                UsageKind::Conflict,
                format!(
                    "{what}: '{}' is one program of a pipeline-parallel step, whose state names one stage's layers as the stage model's, whatever the stage; ask the pipelined step, whose {what} knows which stage holds which of the whole model's layers",
                    name.name()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The pipeline's programs, for a whole pipeline-parallel step.
    fn pipeline(&self) -> Option<Pipeline<'_>> {
        match self.part {
            None => Pipeline::of(&self.compiled),
            Some(_) => None,
        }
    }

    /// The state `what` divides or joins: the whole step's (a pipeline's
    /// by stage), or one program's; not accumulation's pair, nor one of a
    /// pipeline's programs, whose state names one stage's layers.
    fn state_of(&self, what: &str) -> PyResult<StateOf<'_>> {
        match self.part {
            None => self
                .compiled
                .state_of()
                .map_err(|_| self.several_programs()),
            Some(name) => {
                self.whole_model(what)?;
                let program = self.compiled.program(name).map_err(to_py)?;
                Ok(StateOf::Program(Box::new(program)))
            }
        }
    }

    /// A whole step's program `name`, a `Step` of its own; `None` for a
    /// step without it.
    fn part(&self, py: Python<'_>, name: ProgramName) -> Option<Py<Step>> {
        self.parts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.clone_ref(py))
    }

    fn world(&self) -> usize {
        self.compiled.cfg.parallel.world() as usize
    }

    /// The one program (`one`, [`Step::single`]'s) on XLA CPU, compiled
    /// on first use.
    fn program(&self, one: &OneProgram) -> PyResult<&Program> {
        if let Some(p) = self.program.get() {
            return Ok(p);
        }
        let program = guarded(|| step_programs::cpu_program(one).map_err(to_py))?;
        Ok(self.program.get_or_init(|| program))
    }
}

#[pymethods]
impl Step {
    /// The serialized `HloModuleProto`: the bundle's `model.hlo_module.pb`.
    #[getter]
    fn hlo_proto<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let c = self.single()?;
        Ok(PyBytes::new(
            py,
            &hlatc::proto::encode_module(&c.step.module),
        ))
    }

    /// The HLO text: the bundle's `model.hlo.txt`.
    #[getter]
    fn hlo_text(&self) -> PyResult<String> {
        Ok(hlatc::text::print_module(&self.single()?.step.module))
    }

    #[getter]
    fn inputs(&self) -> PyResult<Vec<TensorInfo>> {
        Ok(self.single()?.step.inputs.iter().map(info).collect())
    }

    #[getter]
    fn outputs(&self) -> PyResult<Vec<TensorInfo>> {
        Ok(self.single()?.step.outputs.iter().map(info).collect())
    }

    /// How many ranks run the step (TP x DP x PP).
    #[getter]
    fn world_size(&self) -> usize {
        self.world()
    }

    /// The SPMD form the step is written in: `replicas` (`replica_count=N`,
    /// as torch-xla compiles) or `partitions` (`num_partitions=N`, manual
    /// shardings, as JAX compiles).
    #[getter]
    fn spmd(&self) -> &'static str {
        self.compiled.cfg.spmd.form.name()
    }

    /// Where its ranks read their numbers: `device` (`replica-id` or
    /// `partition-id`) or `input` (an `s32[1]` input named `rank`).
    #[getter]
    fn rank_source(&self) -> &'static str {
        self.compiled.cfg.spmd.rank_source.name()
    }

    /// The manifest, as the bundle's `manifest.json` holds it.
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = step_programs::manifest(&self.single()?);
        py.import("json")?
            .call_method1("loads", (PyString::new(py, &json),))
    }

    /// What the compile did: sizes, passes and time per stage (ms); for
    /// gradient accumulation's pair, `grad_accum` and each program's; for
    /// a pipeline, its stages and schedule and each program's.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.several() {
            return self.programs_summary(py);
        }
        let c = self.single()?;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let d = PyDict::new(py);
        let target = c.compiled.target;
        d.set_item("model", &c.compiled.name)?;
        d.set_item("target", target.name())?;
        d.set_item("chip", target.chip().map(|chip| chip.name()))?;
        d.set_item("parameters", c.cfg.model.parameter_count())?;
        d.set_item("instructions_built", c.step.instructions_built())?;
        d.set_item("instructions", c.step.module.instruction_count())?;
        d.set_item("passes", c.step.passes.clone())?;
        d.set_item("precision", c.step.precision.name())?;
        d.set_item("forward_ms", ms(c.step.times.forward))?;
        d.set_item("autodiff_ms", ms(c.step.times.autodiff))?;
        d.set_item("optimizer_ms", ms(c.step.times.optimizer))?;
        d.set_item("passes_ms", ms(c.step.times.passes))?;
        Ok(d)
    }

    /// Writes the bundle `hlatc compile --out path` writes: whole, or
    /// nothing (an earlier bundle there is replaced whole).
    fn write_bundle(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = args::path)] path: std::path::PathBuf,
    ) -> PyResult<()> {
        let one = match self.part {
            Some(_) => Some(self.single()?),
            None => None,
        };
        let write = || match &one {
            Some(one) => step_programs::write_program_bundle(one, &path),
            None => step_programs::write_bundle(&self.compiled, &path),
        };
        py.allow_threads(|| guarded(|| write().map_err(to_py)))
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
        let state = self.state_of("init_state")?;
        let named = py.allow_threads(|| {
            guarded(|| {
                match &checkpoint {
                    None => state.start_state(seed, rank),
                    Some(path) => state.start_from_checkpoint(path, seed, rank),
                }
                .map_err(to_py)
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
        let c = &self.single()?;
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
        let c = &self.single()?;
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
        let program = self.program(c)?;
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
        let c = &self.single()?;
        step_programs::check_rank(&c.cfg, rank).map_err(to_py)?;
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
        let of = self.state_of("shard_state")?;
        let state = literals(state)?;
        let named = guarded(|| of.shard_state(state, rank).map_err(to_py))?;
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
        let of = self.state_of("gather_state")?;
        let source = |r| format!("rank {r}");
        let named = guarded(|| of.gather_state(per_rank, source).map_err(to_py))?;
        dict_of(py, named)
    }

    /// The parameters of a whole state as Hugging Face tensors (fused
    /// ones split back), in Hugging Face order.
    fn hugging_face_params<'py>(
        &self,
        py: Python<'py>,
        state: HashMap<String, RawIn<'py>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let of = self.state_of("hugging_face_params")?;
        let state = literals(state)?;
        let named = guarded(|| of.hugging_face_params(state).map_err(to_py))?;
        dict_of(py, named)
    }

    /// K for gradient accumulation's pair, the micro-batches of a
    /// pipeline's optimizer step, 1 for a step of one program.
    #[getter]
    pub(crate) fn grad_accum(&self) -> i64 {
        match self.several() {
            true => self.compiled.programs.micro_batches(),
            false => 1,
        }
    }

    /// The pipeline stages its ranks form (1 without pipeline parallelism).
    #[getter]
    fn pp(&self) -> i64 {
        self.compiled.cfg.parallel.pp
    }

    /// A pipeline-parallel step's schedule; `None` otherwise.
    #[getter]
    fn schedule(&self) -> Option<Schedule> {
        Some(Schedule::new(self.pipeline()?.schedule()))
    }

    /// The config the step was built from, as its bundle's manifest records
    /// it: the whole model and the optimizer step's batch, whatever the
    /// programs.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = serde_json::to_string(&self.step_config()?)
            .map_err(|e| crate::errors::INTERNAL.err(format!("the config: {e}")))?;
        py.import("json")?
            .call_method1("loads", (PyString::new(py, &json),))
    }

    /// A pipeline's warm-up tick program (forward slots only).
    #[getter]
    fn warm_up(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.part(py, Phase::WarmUp.into())
    }

    /// A pipeline's steady tick program (a forward and a backward slot).
    #[getter]
    fn steady(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.part(py, Phase::Steady.into())
    }

    /// A pipeline's cool-down tick program (backward slots only).
    #[getter]
    fn cool_down(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.part(py, Phase::CoolDown.into())
    }

    /// How a pipeline-parallel step's ticks run: each tick's program, and
    /// where each program's inputs come from and outputs go; `None`
    /// otherwise.
    #[getter]
    fn tick_plan(&self) -> PyResult<Option<TickPlan>> {
        let Some(p) = self.pipeline() else {
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
        let Some(p) = self.pipeline() else {
            return Err(usage(
                UsageKind::Conflict,
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
        self.part(py, ProgramName::MicroStep)
    }

    /// The apply step of gradient accumulation or of a pipeline (the sum
    /// over ranks, the clip and AdamW), a `Step` of one program; `None` for
    /// a step of one program.
    #[getter]
    fn apply_step(&self, py: Python<'_>) -> Option<Py<Step>> {
        self.part(py, ProgramName::ApplyStep)
    }

    fn __repr__(&self) -> PyResult<String> {
        let (c, world) = (&self.compiled, self.world());
        let (name, target) = (&c.name, c.target.name());
        if !self.several() {
            let one = self.single()?;
            return Ok(format!(
                "<hlatc.Step {name} for {target}: {} instructions, {} inputs, {world} rank(s)>",
                one.step.module.instruction_count(),
                one.step.inputs.len(),
            ));
        }
        Ok(format!(
            "<hlatc.Step {name} for {target}: {}, {world} rank(s)>",
            c.programs.describe()
        ))
    }
}

impl Step {
    /// A whole step's summary of its programs: its model and target, and
    /// each program's summary by name; for gradient accumulation K, for a
    /// pipeline its stages and schedule.
    fn programs_summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.compiled;
        let d = PyDict::new(py);
        d.set_item("model", &c.name)?;
        d.set_item("target", c.target.name())?;
        match &c.programs {
            StepPrograms::Pipelined(p) => {
                d.set_item("chip", c.target.chip().map(|chip| chip.name()))?;
                pipeline_summary(&d, &c.cfg, p)?;
            }
            _ => d.set_item("grad_accum", self.grad_accum())?,
        }
        for (name, part) in &self.parts {
            d.set_item(name.name(), part.get().summary(py)?)?;
        }
        Ok(d)
    }
}

/// A pipelined step's stages and schedule, into its summary `d`.
fn pipeline_summary(d: &Bound<'_, PyDict>, whole: &StepConfig, p: &PipelineSteps) -> PyResult<()> {
    d.set_item("parameters", whole.model.parameter_count())?;
    d.set_item("pp", p.schedule.stages)?;
    d.set_item("grad_accum", p.schedule.micro_batches)?;
    d.set_item("ticks", p.schedule.ticks())?;
    d.set_item("bubble", p.schedule.bubble())?;
    Ok(())
}
