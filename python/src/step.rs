//! `compile_step` and the `Step` it returns: the training step `hlatc
//! compile` builds, its signature by role, its manifest and bundle, and
//! runs of it on XLA CPU with hlatc's own runtime.

use crate::arrays::{dict_of, from_raw, RawIn};
use crate::errors::{guarded, to_py, ConfigError, UsageError};
use crate::ranks;
use crate::trainer::ids;
use hlatc::bundle::{for_cpu, manifest_json, sha256_hex, stage_accumulation_bundle, stage_bundle};
use hlatc::compile_step::{
    compile_step as compile, CompileOptions, CompiledStep, ModelSource, OptimizerOverrides,
};
use hlatc::data::Batch;
use hlatc::grad_accum::micro_config;
use hlatc::initial_inputs::StartValues;
use hlatc::memory_plan::{DeviceMemory, MemoryPlan};
use hlatc::models::Parallelism;
use hlatc::passes::{RematPolicy, RoundingPolicy, Target};
use hlatc::precision::Precision;
use hlatc::runtime::{Program, Runtime};
use hlatc::spmd::{RankSource, SpmdForm};
use hlatc::train_step::TensorSpec;
use hlatc::Literal;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::collections::HashMap;
use std::sync::OnceLock;

/// One input or output of a step.
#[pyclass(module = "hlatc._hlatc", frozen, get_all)]
pub struct TensorInfo {
    name: String,
    shape: Vec<i64>,
    dtype: String,
    /// `parameter`, `adam_m`, `adam_v`, `step`, `tokens`, `targets`,
    /// `segment_ids`, `rng_state`, `loss`, `grad_norm`, `learning_rate`.
    role: String,
    /// Whether the input is carried state (an output of the same name
    /// updates it each step): what `init_state` makes and checkpoints hold.
    is_state: bool,
}

#[pymethods]
impl TensorInfo {
    fn __repr__(&self) -> String {
        format!(
            "TensorInfo(name={:?}, shape={:?}, dtype={:?}, role={:?}, is_state={})",
            self.name,
            self.shape,
            self.dtype,
            self.role,
            if self.is_state { "True" } else { "False" }
        )
    }
}

fn info(s: &TensorSpec) -> TensorInfo {
    TensorInfo {
        name: s.name.clone(),
        shape: s.shape.clone(),
        dtype: s.dtype.name().to_string(),
        role: serde_json::to_value(s.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        is_state: s.role.is_state(),
    }
}

fn named<T: Copy>(
    what: &str,
    name: &str,
    all: &[T],
    name_of: fn(T) -> &'static str,
) -> PyResult<T> {
    all.iter()
        .copied()
        .find(|t| name_of(*t) == name)
        .ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|t| name_of(*t)).collect();
            ConfigError::new_err(format!(
                "unknown {what} '{name}' (known: {})",
                known.join(", ")
            ))
        })
}

/// Where the model comes from: `model` (a preset) or `config` (a path to
/// a `config.json`, or its contents as a dict).
fn source(model: Option<String>, config: Option<&Bound<'_, PyAny>>) -> PyResult<ModelSource> {
    match (model, config) {
        (Some(_), Some(_)) => Err(UsageError::new_err(
            "give model (a preset) or config (a config.json), not both",
        )),
        (Some(m), None) => Ok(ModelSource::Preset(m)),
        (None, None) => Ok(ModelSource::Preset("hlat-7b".into())),
        (None, Some(c)) => {
            if c.is_instance_of::<PyDict>() {
                let json = c.py().import("json")?.call_method1("dumps", (c,))?;
                Ok(ModelSource::ConfigJson {
                    json: json.extract()?,
                    name: "config (dict)".into(),
                })
            } else {
                Ok(ModelSource::ConfigFile(c.extract()?))
            }
        }
    }
}

/// Compiles a model's training step as `hlatc compile` does: the same
/// options under the same names and defaults (see `hlatc compile --help`),
/// the same bytes. The GIL is released while it compiles.
#[pyfunction]
#[pyo3(signature = (
    model=None, config=None, *, batch_size=None, seq_len=None, packed=false,
    separate_projections=false, precision="bf16-mixed", rounding=None, target="neuron",
    passes=None, disable_pass=Vec::new(), verify_each_pass=false, remat="core-attention",
    tp=1, dp=1, sequence_parallel=false, zero1=false, lr_max=None, lr_min=None, warmup_steps=None,
    total_steps=None, beta1=None, beta2=None, adam_eps=None, weight_decay=None, clip_norm=None,
    module_markers=false, device_memory=None, grad_accum=1, spmd=None, rank_source=None
))]
#[allow(clippy::too_many_arguments)]
pub fn compile_step(
    py: Python<'_>,
    model: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    batch_size: Option<i64>,
    seq_len: Option<i64>,
    packed: bool,
    separate_projections: bool,
    precision: &str,
    rounding: Option<&str>,
    target: &str,
    passes: Option<Vec<String>>,
    disable_pass: Vec<String>,
    verify_each_pass: bool,
    remat: &str,
    tp: i64,
    dp: i64,
    sequence_parallel: bool,
    zero1: bool,
    lr_max: Option<f64>,
    lr_min: Option<f64>,
    warmup_steps: Option<i64>,
    total_steps: Option<i64>,
    beta1: Option<f64>,
    beta2: Option<f64>,
    adam_eps: Option<f64>,
    weight_decay: Option<f64>,
    clip_norm: Option<f64>,
    module_markers: bool,
    device_memory: Option<&Bound<'_, PyAny>>,
    grad_accum: i64,
    spmd: Option<&str>,
    rank_source: Option<&str>,
) -> PyResult<Step> {
    let rounding = rounding
        .map(|r| {
            RoundingPolicy::from_name(r).ok_or_else(|| {
                ConfigError::new_err(format!(
                    "unknown rounding policy '{r}' (known: {})",
                    RoundingPolicy::NAMES.join(", ")
                ))
            })
        })
        .transpose()?;
    let options = CompileOptions {
        model: source(model, config)?,
        separate_projections,
        batch_size,
        seq_len,
        packed,
        optimizer: OptimizerOverrides {
            lr_max,
            lr_min,
            warmup_steps,
            total_steps,
            beta1,
            beta2,
            adam_eps,
            weight_decay,
            clip_norm,
        },
        precision: named("precision", precision, &Precision::ALL, Precision::name)?,
        rounding,
        target: named("target", target, &Target::ALL, Target::name)?,
        passes,
        disable_passes: disable_pass,
        verify_each_pass,
        remat: named("remat policy", remat, &RematPolicy::ALL, RematPolicy::name)?,
        parallel: Parallelism {
            tp,
            dp,
            sequence_parallel,
            zero1,
        },
        spmd: spmd
            .map(|f| named("SPMD form", f, &SpmdForm::ALL, SpmdForm::name))
            .transpose()?,
        rank_source: rank_source
            .map(|r| named("rank source", r, &RankSource::ALL, RankSource::name))
            .transpose()?,
        module_markers,
        device_memory: device_memory_of(device_memory)?,
        grad_accum,
    };
    let compiled = py.allow_threads(|| guarded(|| compile(&options).map_err(to_py)))?;
    Step::of_compiled(py, compiled)
}

/// `device_memory=`: `None` (the target's default), bytes, or a size as
/// `--device-memory` reads it (`"16GiB"`, `"none"`).
fn device_memory_of(v: Option<&Bound<'_, PyAny>>) -> PyResult<DeviceMemory> {
    let Some(v) = v else {
        return Ok(DeviceMemory::TargetDefault);
    };
    if let Ok(bytes) = v.extract::<u64>() {
        return Ok(DeviceMemory::Bytes(bytes));
    }
    let s: String = v.extract().map_err(|_| {
        ConfigError::new_err(
            "device_memory: expected bytes (an int), a size such as '16GiB', or 'none'",
        )
    })?;
    s.parse().map_err(|e: hlatc::memory_plan::SizeError| {
        ConfigError::new_err(format!("device_memory: {e}"))
    })
}

/// `c`'s step compiled by XLA CPU on as many devices as it has ranks, its
/// Neuron custom calls as plain HLO.
pub(crate) fn cpu_program(c: &CompiledStep) -> Result<Program, hlatc::Error> {
    let world = c.cfg.parallel.world();
    let (module, _) = for_cpu(c.step.module.clone(), &c.cfg)?;
    Ok(Runtime::for_ranks(world as usize)?.compile(&module)?)
}

/// A compiled training step: one program, or gradient accumulation's two.
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
}

/// A step of one program.
struct OneProgram {
    compiled: CompiledStep,
    /// The step compiled on XLA CPU, once a run asks for it.
    program: OnceLock<Program>,
}

/// A step's programs, borrowed: what a bundle is written from and a
/// trainer runs.
pub(crate) enum Borrowed<'a> {
    One(&'a CompiledStep),
    Pair(Pair<'a>),
}

/// Gradient accumulation's two programs, borrowed.
pub(crate) struct Pair<'a> {
    pub micro: &'a CompiledStep,
    pub apply: &'a CompiledStep,
    pub micro_batches: i64,
}

impl Step {
    fn one(compiled: CompiledStep) -> Step {
        Step {
            programs: Programs::One(Box::new(OneProgram {
                compiled,
                program: OnceLock::new(),
            })),
        }
    }

    /// `c` as a `Step`; under gradient accumulation its micro and apply
    /// steps each become a `Step` of one program (the micro step's config
    /// takes a K-th of the batch, as its bundle's manifest says).
    fn of_compiled(py: Python<'_>, c: CompiledStep) -> PyResult<Step> {
        let CompiledStep {
            name,
            cfg,
            step,
            target,
            apply,
            instructions_built,
            memory,
            memory_check,
            passes_time,
        } = c;
        let Some(apply) = apply else {
            return Ok(Step::one(CompiledStep {
                name,
                cfg,
                step,
                target,
                apply: None,
                instructions_built,
                memory,
                memory_check,
                passes_time,
            }));
        };
        let micro_cfg = micro_config(&cfg, apply.micro_batches).map_err(|e| to_py(e.into()))?;
        let micro = CompiledStep {
            name: name.clone(),
            cfg: micro_cfg,
            memory: MemoryPlan::of(&step),
            step,
            target,
            apply: None,
            instructions_built,
            memory_check,
            passes_time,
        };
        let whole = CompiledStep {
            name,
            cfg,
            memory: MemoryPlan::of(&apply.step),
            step: apply.step,
            target,
            apply: None,
            instructions_built: apply.instructions_built,
            memory_check,
            passes_time: apply.passes_time,
        };
        Ok(Step {
            programs: Programs::Accumulated {
                micro: Py::new(py, Step::one(micro))?,
                apply: Py::new(py, Step::one(whole))?,
                micro_batches: apply.micro_batches,
            },
        })
    }

    /// The one program, or a `UsageError` for gradient accumulation's
    /// pair, naming what to use instead.
    fn single(&self) -> PyResult<&OneProgram> {
        match &self.programs {
            Programs::One(one) => Ok(one),
            Programs::Accumulated { micro_batches, .. } => Err(UsageError::new_err(format!(
                "this step is gradient accumulation's two programs (grad_accum={micro_batches}): use its micro_step and apply_step, each a Step of one program; write_bundle and Trainer take the pair"
            ))),
        }
    }

    /// The one program's step, or under gradient accumulation the apply
    /// step's: for what both programs share (their SPMD form).
    pub(crate) fn any_compiled(&self) -> PyResult<&CompiledStep> {
        match &self.programs {
            Programs::One(one) => Ok(&one.compiled),
            Programs::Accumulated { apply, .. } => apply.get().compiled(),
        }
    }

    /// The one program's step, or the `UsageError` of [`Step::single`].
    fn compiled(&self) -> PyResult<&CompiledStep> {
        Ok(&self.single()?.compiled)
    }

    /// The step's programs: one, or gradient accumulation's pair.
    pub(crate) fn borrowed(&self) -> PyResult<Borrowed<'_>> {
        Ok(match &self.programs {
            Programs::One(one) => Borrowed::One(&one.compiled),
            Programs::Accumulated {
                micro,
                apply,
                micro_batches,
            } => Borrowed::Pair(Pair {
                micro: micro.get().compiled()?,
                apply: apply.get().compiled()?,
                micro_batches: *micro_batches,
            }),
        })
    }

    fn world(&self) -> usize {
        match &self.programs {
            Programs::One(one) => one.compiled.cfg.parallel.world() as usize,
            Programs::Accumulated { micro, .. } => micro.get().world(),
        }
    }

    /// The step on XLA CPU, compiled on first use.
    fn program(&self) -> PyResult<&Program> {
        let one = self.single()?;
        if let Some(p) = one.program.get() {
            return Ok(p);
        }
        let program = guarded(|| cpu_program(&one.compiled).map_err(to_py))?;
        Ok(one.program.get_or_init(|| program))
    }

    /// Every rank's inputs in signature order, from dicts by input name.
    fn inputs_by_name(&self, ranks: Vec<Bound<'_, PyDict>>) -> PyResult<Vec<Vec<Literal>>> {
        let specs = &self.compiled()?.step.inputs;
        let several = self.world() > 1;
        ranks
            .into_iter()
            .enumerate()
            .map(|(rank, d)| {
                let at = if several {
                    format!("rank {rank}: ")
                } else {
                    String::new()
                };
                let mut list = Vec::with_capacity(specs.len());
                for s in specs {
                    let raw: RawIn = d
                        .get_item(&s.name)?
                        .ok_or_else(|| {
                            UsageError::new_err(format!(
                                "{at}no input '{}' (the step takes {} inputs, by name)",
                                s.name,
                                specs.len()
                            ))
                        })?
                        .extract()?;
                    list.push(from_raw(&s.name, raw)?);
                }
                if d.len() != specs.len() {
                    let extra: Vec<String> = d
                        .keys()
                        .iter()
                        .filter_map(|k| k.extract::<String>().ok())
                        .filter(|k| !specs.iter().any(|s| &s.name == k))
                        .collect();
                    return Err(UsageError::new_err(format!(
                        "{at}the step takes no input named {}",
                        extra.join(", ")
                    )));
                }
                Ok(list)
            })
            .collect()
    }

    fn check_rank(&self, rank: usize) -> PyResult<()> {
        if rank >= self.world() {
            return Err(UsageError::new_err(format!(
                "rank {rank}: the step runs on {} rank(s)",
                self.world()
            )));
        }
        Ok(())
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

    /// How many ranks run the step (TP x DP).
    #[getter]
    fn world_size(&self) -> usize {
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
        let c = self.compiled()?;
        let proto = hlatc::proto::encode_module(&c.step.module);
        let json = manifest_json(&c.step, &c.cfg, c.target, &sha256_hex(&proto));
        py.import("json")?
            .call_method1("loads", (PyString::new(py, &json),))
    }

    /// What the compile did: sizes, passes and time per stage (ms); for
    /// gradient accumulation's pair, `grad_accum` and each program's.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = match &self.programs {
            Programs::One(one) => &one.compiled,
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
                d.set_item("micro_step", micro)?;
                d.set_item("apply_step", apply.get().summary(py)?)?;
                return Ok(d);
            }
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let d = PyDict::new(py);
        d.set_item("model", &c.name)?;
        d.set_item("target", c.target.name())?;
        d.set_item("parameters", c.cfg.model.parameter_count())?;
        d.set_item("instructions_built", c.instructions_built)?;
        d.set_item("instructions", c.step.module.instruction_count())?;
        d.set_item("passes", c.step.passes.clone())?;
        d.set_item("precision", c.step.precision.name())?;
        d.set_item("forward_ms", ms(c.step.times.forward))?;
        d.set_item("autodiff_ms", ms(c.step.times.autodiff))?;
        d.set_item("optimizer_ms", ms(c.step.times.optimizer))?;
        d.set_item("passes_ms", ms(c.passes_time))?;
        Ok(d)
    }

    /// Writes the bundle `hlatc compile --out path` writes: whole, or
    /// nothing (an earlier bundle there is replaced whole).
    fn write_bundle(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let programs = self.borrowed()?;
        py.allow_threads(|| {
            guarded(|| {
                let staged = match &programs {
                    Borrowed::Pair(p) => stage_accumulation_bundle(
                        &p.micro.step,
                        &p.apply.step,
                        &p.apply.cfg,
                        p.micro_batches,
                        p.apply.target,
                        &path,
                    ),
                    Borrowed::One(c) => stage_bundle(&c.step, &c.cfg, c.target, &path),
                };
                staged
                    .and_then(|staged| staged.commit())
                    .map(|_| ())
                    .map_err(|e| to_py(e.into()))
            })
        })
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
        seed: u64,
        rank: usize,
        checkpoint: Option<std::path::PathBuf>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let Some(path) = checkpoint else {
            return self.initial(py, seed, rank, true);
        };
        self.check_rank(rank)?;
        let c = self.compiled()?;
        let start = py.allow_threads(|| {
            guarded(|| {
                hlatc::rank_checkpoint::rank_state_from_file(
                    &c.cfg,
                    &c.step.inputs,
                    &path,
                    rank as i64,
                    seed,
                )
                .map_err(|e| to_py(e.into()))
            })
        })?;
        dict_of(py, start.state)
    }

    /// Rank `rank`'s share of batch 0 of the synthetic language (tokens,
    /// targets and, for packed rows, segment ids), drawn from `seed`.
    #[pyo3(signature = (seed=0, rank=0))]
    fn example_batch<'py>(
        &self,
        py: Python<'py>,
        seed: u64,
        rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.initial(py, seed, rank, false)
    }

    /// One step on XLA CPU from every input by name (state and batch); the
    /// outputs by name. The batch is checked first (ids in the
    /// vocabulary, segment ids a packing).
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut outs = self.run_ranks(py, vec![inputs])?;
        Ok(outs.remove(0))
    }

    /// [`Step::run`] for a sharded step: one dict of inputs per rank, one
    /// dict of outputs per rank.
    fn run_ranks<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyDict>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        if inputs.len() != self.world() {
            return Err(UsageError::new_err(format!(
                "the step runs on {} rank(s); {} input dict(s) were given",
                self.world(),
                inputs.len()
            )));
        }
        let args = self.inputs_by_name(inputs)?;
        let c = self.compiled()?;
        let vocab = c.cfg.model.vocab_size;
        for (rank, list) in args.iter().enumerate() {
            let specs = &c.step.inputs;
            hlatc::batch_check::check_batch_inputs(specs, list, vocab).map_err(|e| {
                let e = to_py(e.into());
                if self.world() > 1 {
                    let _ = e.value(py).setattr("rank", rank);
                }
                e
            })?;
        }
        let program = self.program()?;
        let outputs = py.allow_threads(|| {
            guarded(|| {
                match args.as_slice() {
                    [one] => program.run(one).map(|o| vec![o]),
                    _ => program.run_replicas(&args),
                }
                .map_err(|e| to_py(e.into()))
            })
        })?;
        let names: Vec<String> = c.step.outputs.iter().map(|s| s.name.clone()).collect();
        outputs
            .into_iter()
            .map(|outs| dict_of(py, names.iter().cloned().zip(outs)))
            .collect()
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
        rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_rank(rank)?;
        let batch = Batch {
            tokens: ids("tokens", tokens)?,
            targets: ids("targets", targets)?,
            segment_ids: segment_ids.map(|s| ids("segment_ids", s)).transpose()?,
        };
        let c = self.compiled()?;
        let named = guarded(|| ranks::rank_batch(c, &batch, rank as i64))?;
        dict_of(py, named)
    }

    /// Rank `rank`'s share of every state input, by name, from the whole
    /// state (`Trainer.state()`'s, or `hlatc unshard`'s file): what that
    /// rank's program takes.
    fn shard_state<'py>(
        &self,
        py: Python<'py>,
        state: HashMap<String, RawIn<'py>>,
        rank: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_rank(rank)?;
        let c = self.compiled()?;
        let tensors = ranks::literals(state)?;
        let named = guarded(|| ranks::shard_state(c, tensors, rank as i64))?;
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
        let c = self.compiled()?;
        let per_rank = per_rank
            .into_iter()
            .map(ranks::literals)
            .collect::<PyResult<Vec<_>>>()?;
        let named = guarded(|| ranks::gather_state(c, per_rank))?;
        dict_of(py, named)
    }

    /// The parameters of a whole state as Hugging Face tensors (fused
    /// ones split back), in Hugging Face order.
    fn hugging_face_params<'py>(
        &self,
        py: Python<'py>,
        state: HashMap<String, RawIn<'py>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let c = self.compiled()?;
        let tensors = ranks::literals(state)?;
        let named = guarded(|| ranks::hugging_face_params(c, tensors))?;
        dict_of(py, named)
    }

    /// K for gradient accumulation's pair, 1 for a step of one program.
    #[getter]
    fn grad_accum(&self) -> i64 {
        match &self.programs {
            Programs::One(_) => 1,
            Programs::Accumulated { micro_batches, .. } => *micro_batches,
        }
    }

    /// Gradient accumulation's micro step (forward and backward over one
    /// micro-batch, added into the `grad.NAME` accumulators), a `Step` of
    /// one program; `None` for a step of one program.
    #[getter]
    fn micro_step(&self, py: Python<'_>) -> Option<Py<Step>> {
        match &self.programs {
            Programs::One(_) => None,
            Programs::Accumulated { micro, .. } => Some(micro.clone_ref(py)),
        }
    }

    /// Gradient accumulation's apply step (the sum over ranks, the clip
    /// and AdamW), a `Step` of one program; `None` for a step of one
    /// program.
    #[getter]
    fn apply_step(&self, py: Python<'_>) -> Option<Py<Step>> {
        match &self.programs {
            Programs::One(_) => None,
            Programs::Accumulated { apply, .. } => Some(apply.clone_ref(py)),
        }
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(match self.borrowed()? {
            Borrowed::One(c) => format!(
                "<hlatc.Step {} for {}: {} instructions, {} inputs, {} rank(s)>",
                c.name,
                c.target.name(),
                c.step.module.instruction_count(),
                c.step.inputs.len(),
                self.world()
            ),
            Borrowed::Pair(p) => format!(
                "<hlatc.Step {} for {}: gradient accumulation over {} micro-batches (micro_step, apply_step), {} rank(s)>",
                p.apply.name,
                p.apply.target.name(),
                p.micro_batches,
                self.world()
            ),
        })
    }
}

impl Step {
    /// Rank `rank`'s start value of every state input (`state`) or every
    /// batch input, by name.
    fn initial<'py>(
        &self,
        py: Python<'py>,
        seed: u64,
        rank: usize,
        state: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_rank(rank)?;
        let c = self.compiled()?;
        let wanted: Vec<TensorSpec> = c
            .step
            .inputs
            .iter()
            .filter(|s| s.role.is_state() == state)
            .cloned()
            .collect();
        let values = guarded(|| {
            StartValues::new(&c.cfg, &wanted, seed)
                .of_rank(&wanted, rank as i64)
                .map_err(|e| to_py(e.into()))
        })?;
        dict_of(py, wanted.into_iter().map(|s| s.name).zip(values))
    }
}
