//! The compile `hlatc compile` runs, as one library call: options under
//! the CLI's names and with its defaults in, the step built and through
//! its target's pipeline out. The CLI and the Python package both call
//! [`compile_step`], so a bundle is the same bytes from either.

mod command_line;
mod memory_fit;
mod option_codec;
mod option_error;
mod programs;
pub mod spellings;

pub use option_error::OptionError;

pub use command_line::{OptionChange, Setting, Unspellable};
pub use memory_fit::Fit;
pub use option_codec::{parse_name, PyValue, Takes, WordError};
pub use programs::StepPrograms;
use spellings::CompileOption;

use crate::Error;
use hlatc_artifacts::bundle::{BundleTarget, ProgramName, StagedBundle};
use hlatc_models::kernels::KernelRequest;
use hlatc_models::{BatchShape, ModelConfig, Parallelism};
use hlatc_passes::neuron_check::Chip;
use hlatc_passes::{pipeline_from_names, CheckPolicy, RematPolicy, RoundingPolicy, Target};
use hlatc_step::kernel_choice::{softmax_as_run, step_pipeline, KernelChoice, KernelFallback};
use hlatc_step::memory_plan::{DeviceMemory, MemoryCheck, MemoryPlan};
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::pipeline::{PipelineForm, StageSend};
use hlatc_step::precision::Precision;
use hlatc_step::spmd::{RankSource, Spmd, SpmdForm};
use hlatc_step::train_step::{optimize, StepConfig, TrainStep};
use hlatc_train::check::CheckReport;
use hlatc_train::Error as TrainError;
use std::path::{Path, PathBuf};

/// Where the model's definition comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// A built-in model (`hlatc_models::PRESETS`).
    Preset(String),
    /// A Hugging Face `config.json` on disk.
    ConfigFile(PathBuf),
    /// A Hugging Face config's JSON text; `name` stands for it in messages.
    ConfigJson { json: String, name: String },
    /// A model already read (the planner's, with some layers left out);
    /// `name` stands for it in messages.
    Config { cfg: Box<ModelConfig>, name: String },
}

impl ModelSource {
    /// The model, stored fused unless `separate_projections`, and the name
    /// messages use for it (the preset or the file).
    pub fn resolve(&self, separate_projections: bool) -> Result<(ModelConfig, String), Error> {
        let (mut cfg, name) = match self {
            ModelSource::Preset(name) => (ModelConfig::preset(name)?, name.clone()),
            ModelSource::ConfigFile(path) => {
                (ModelConfig::from_hf_file(path)?, path.display().to_string())
            }
            ModelSource::ConfigJson { json, name } => {
                (ModelConfig::from_hf_json(json, name)?, name.clone())
            }
            ModelSource::Config { cfg, name } => ((**cfg).clone(), name.clone()),
        };
        cfg.fused_projections = !separate_projections;
        Ok((cfg, name))
    }
}

/// `model` with each expert's capacity set by `factor`, as
/// `--capacity-factor` (Python's `capacity_factor=`) asks: a factor that is
/// not a positive number is the option's refusal (`option.capacity_factor`),
/// one a dense model cannot take the step's.
pub fn set_capacity_factor(model: &mut ModelConfig, factor: Option<f64>) -> Result<(), Error> {
    if let Some(f) = factor.filter(|f| !(*f > 0.0 && f.is_finite())) {
        let problem = "must be a positive number";
        return Err(OptionError::new(CompileOption::CapacityFactor, f, problem).into());
    }
    model
        .set_capacity_factor(factor)
        .map_err(hlatc_step::train_step::StepError::from)?;
    Ok(())
}

/// The shortest sequence a step trains on: each token's target is the
/// next token, so one token has none.
pub const MIN_SEQ_LEN: i64 = 2;

/// Why a sequence under [`MIN_SEQ_LEN`] is refused, in every command.
pub const TOO_SHORT: &str = "must be at least 2 (each token's target is the next token)";

/// The batch asked for, with a command's defaults: `seq_len` defaults to
/// `default_seq` capped at the model's `max_position_embeddings`. A
/// `seq_len` past that is refused naming `--seq-len`, the key and the
/// model `name`, unless the model's RoPE scales with the length.
pub fn batch_shape(
    cfg: &ModelConfig,
    name: &str,
    batch_size: Option<i64>,
    seq_len: Option<i64>,
    (default_batch, default_seq): (i64, i64),
) -> Result<BatchShape, Error> {
    if let Some(b) = batch_size.filter(|&b| b < 1) {
        return Err(OptionError::new(CompileOption::BatchSize, b, "must be at least 1").into());
    }
    if let Some(s) = seq_len.filter(|&s| s < MIN_SEQ_LEN) {
        return Err(OptionError::new(CompileOption::SeqLen, s, TOO_SHORT).into());
    }
    if let Some(s) =
        seq_len.filter(|&s| s > cfg.max_position_embeddings && !cfg.rope_scales_with_length())
    {
        let problem = format!("{} (max_position_embeddings of {name})", cfg.too_long(s));
        return Err(OptionError::new(CompileOption::SeqLen, s, problem).into());
    }
    Ok(BatchShape {
        batch_size: batch_size.unwrap_or(default_batch),
        seq_len: seq_len.unwrap_or(default_seq.min(cfg.max_position_embeddings)),
    })
}

/// AdamW and schedule settings that replace a command's defaults; `None`
/// keeps the default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptimizerOverrides {
    pub lr_max: Option<f64>,
    pub lr_min: Option<f64>,
    pub warmup_steps: Option<i64>,
    pub total_steps: Option<i64>,
    pub beta1: Option<f64>,
    pub beta2: Option<f64>,
    pub adam_eps: Option<f64>,
    pub weight_decay: Option<f64>,
    /// 0 turns clipping off.
    pub clip_norm: Option<f64>,
}

impl OptimizerOverrides {
    /// `defaults` with these settings in place, validated.
    pub fn apply(&self, defaults: AdamWConfig) -> Result<AdamWConfig, Error> {
        let mut c = defaults;
        let set = |slot: &mut f64, v: Option<f64>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut c.max_lr, self.lr_max);
        set(&mut c.min_lr, self.lr_min);
        set(&mut c.beta1, self.beta1);
        set(&mut c.beta2, self.beta2);
        set(&mut c.eps, self.adam_eps);
        set(&mut c.weight_decay, self.weight_decay);
        if let Some(v) = self.warmup_steps {
            c.warmup_steps = v;
        }
        if let Some(v) = self.total_steps {
            c.total_steps = v;
        }
        if let Some(v) = self.clip_norm {
            // Only an exact 0 turns clipping off; a negative or NaN value is
            // a mistake, not a request to disable it.
            c.clip_norm = (v != 0.0).then_some(v);
        }
        c.validate().map_err(|e| OptionError::of_optimizer(&e))?;
        Ok(c)
    }
}

/// Everything `hlatc compile` takes but where it writes, under its names
/// and with its defaults ([`CompileOptions::default`]).
#[derive(Clone, Debug)]
pub struct CompileOptions {
    pub model: ModelSource,
    pub separate_projections: bool,
    /// Sequences per step (default 1).
    pub batch_size: Option<i64>,
    /// Tokens per sequence (default min(4096, `max_position_embeddings`)).
    pub seq_len: Option<i64>,
    pub packed: bool,
    /// Each expert's capacity per sequence under a mixture of experts
    /// (`--capacity-factor`); `None`: dropless.
    pub capacity_factor: Option<f64>,
    pub optimizer: OptimizerOverrides,
    pub precision: Precision,
    /// The preset's rounding policy when `None`.
    pub rounding: Option<RoundingPolicy>,
    pub target: Target,
    /// The Trainium chip a `neuron` bundle is for (`--chip`): its
    /// neuronx-cc flags, its runtime environment, its pre-flight and the
    /// core its memory plan is held to. `None`: trn1 on `neuron`; a chip
    /// on `cpu` is refused.
    pub chip: Option<Chip>,
    /// Exactly these passes instead of the target's default pipeline.
    pub passes: Option<Vec<String>>,
    /// Passes left out of the default pipeline.
    pub disable_passes: Vec<String>,
    pub verify_each_pass: bool,
    pub remat: RematPolicy,
    pub parallel: Parallelism,
    /// The SPMD form of a sharded step; `None`: the target's
    /// ([`Spmd::default_for`]).
    pub spmd: Option<SpmdForm>,
    /// Where a sharded step's ranks read their numbers; `None`: the
    /// target's ([`Spmd::default_for`]).
    pub rank_source: Option<RankSource>,
    /// Mark each decoder layer with neuronx-cc's module markers.
    pub module_markers: bool,
    /// What each rank's memory plan is checked against.
    pub device_memory: DeviceMemory,
    /// Micro-batches per optimizer step (1: none; above 1 the step is the
    /// two programs of gradient accumulation). Under pipeline parallelism
    /// (`parallel.pp` above 1), the micro-batches the schedule runs.
    pub grad_accum: i64,
    /// How a sharded step's collectives write their replica groups.
    pub replica_groups: ReplicaGroupForm,
    /// How pipeline stages send to each other; `None`: the target's
    /// ([`StageSend::default_for`]). Refused without pipeline parallelism.
    pub pp_send: Option<StageSend>,
    /// The implementations asked for at kernel points (`--kernel`); every
    /// other point takes the target's ([`KernelChoice::choose`]).
    pub kernels: Vec<KernelRequest>,
}

/// How a sharded step's collectives write their replica groups
/// (`--replica-groups`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplicaGroupForm {
    /// Every group's ids listed (`{{0,1},{2,3}}`): what every XLA reads,
    /// and the one form known to reach neuronx-cc. The default.
    #[default]
    Explicit,
    /// XLA's iota form (`[2,2]<=[4]`, and `iota_collective_device_list` in
    /// the proto beside the listed groups), wherever an iota lays the
    /// groups out. XLA CPU reads it; whether neuronx-cc does is not known.
    Iota,
}

impl ReplicaGroupForm {
    pub const ALL: [ReplicaGroupForm; 2] = [ReplicaGroupForm::Explicit, ReplicaGroupForm::Iota];

    /// The name `--replica-groups` and Python's `replica_groups=` take.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaGroupForm::Explicit => "explicit",
            ReplicaGroupForm::Iota => "iota",
        }
    }
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            model: ModelSource::Preset("hlat-7b".into()),
            separate_projections: false,
            batch_size: None,
            seq_len: None,
            packed: false,
            capacity_factor: None,
            optimizer: OptimizerOverrides::default(),
            precision: Precision::default(),
            rounding: None,
            target: Target::Neuron,
            chip: None,
            passes: None,
            disable_passes: Vec::new(),
            verify_each_pass: false,
            remat: RematPolicy::CoreAttention,
            parallel: Parallelism::SINGLE,
            spmd: None,
            rank_source: None,
            module_markers: false,
            device_memory: DeviceMemory::TargetDefault,
            grad_accum: 1,
            replica_groups: ReplicaGroupForm::Explicit,
            pp_send: None,
            kernels: Vec::new(),
        }
    }
}

/// A step built and through its target's pipeline, with what a summary
/// reports of how it got there.
pub struct CompiledStep {
    /// The model's name (its preset or config file).
    pub name: String,
    /// The whole step's config: the whole model, the optimizer step's
    /// batch.
    pub cfg: StepConfig,
    /// Its programs, by the step's shape.
    pub programs: StepPrograms,
    /// The compiler and, for Neuron, the chip the bundle is for.
    pub target: BundleTarget,
    /// What each rank needs in device memory.
    pub memory: MemoryPlan,
    /// What the plan was checked against (a refused plan is an error).
    pub memory_check: MemoryCheck,
    /// Kernels asked for whose constraints did not hold, and what their
    /// points took instead.
    pub kernel_fallbacks: Vec<KernelFallback>,
}

impl CompiledStep {
    /// The rounding the update runs with: the apply step's under
    /// accumulation or a pipeline, else the one program's.
    pub fn rounding(&self) -> &RoundingPolicy {
        &self.programs.update().rounding
    }

    /// Every program, named as its bundle's folder is
    /// ([`StepPrograms::named`]).
    pub fn programs(&self) -> Vec<(ProgramName, &TrainStep)> {
        self.programs.named()
    }

    /// Writes the bundle of every program to a staging directory beside
    /// `dir`; nothing under `dir` changes until it is committed.
    pub fn stage_bundle(&self, dir: &Path) -> Result<StagedBundle, Error> {
        self.programs.stage_bundle(&self.cfg, self.target, dir)
    }

    /// `--verify` of a bundle staged at `dir`: its bytes read back and run
    /// on XLA CPU.
    pub fn verify_bundle(&self, dir: &Path) -> Result<CheckReport, TrainError> {
        self.programs.verify_bundle(&self.cfg, dir)
    }
}

impl CompileOptions {
    /// The model these options build, stored as `separate_projections`
    /// says and with their capacity factor, and the name messages use for
    /// it.
    pub fn model_config(&self) -> Result<(ModelConfig, String), Error> {
        let (mut model, name) = self.model.resolve(self.separate_projections)?;
        set_capacity_factor(&mut model, self.capacity_factor)?;
        Ok((model, name))
    }

    /// How a sharded step is written: the form and rank source asked for,
    /// each the target's default where not. On one device there is nothing
    /// to choose, and a choice is refused rather than ignored.
    pub fn spmd(&self) -> Result<Spmd, Error> {
        Ok(
            Spmd::choose(self.spmd, self.rank_source, self.target, self.parallel)
                .map_err(hlatc_step::train_step::StepError::from)?,
        )
    }

    /// How a pipeline's tick programs are written
    /// ([`PipelineForm::choose`]).
    pub fn pipeline_form(&self) -> Result<PipelineForm, Error> {
        PipelineForm::choose(self.remat, self.pp_send, self.target, self.parallel.pp)
            .map_err(|e| hlatc_step::train_step::StepError::from(e).into())
    }

    /// Every degree of the layout, and the micro-batch count, at least
    /// one: refused as the option that set it. So is a precision the
    /// chip has no form for (mxfp8 before trn3), before any work.
    fn check_degrees(&self) -> Result<(), OptionError> {
        OptionError::check_degrees(&self.parallel)?;
        if self.grad_accum < 1 {
            return Err(OptionError::new(
                CompileOption::GradAccum,
                self.grad_accum,
                "must be at least 1 (1 takes the whole batch at once)",
            ));
        }
        let trn3 = self.chip == Some(Chip::Trn3);
        if self.precision == Precision::Mxfp8 && self.target == Target::Neuron && !trn3 {
            return Err(OptionError::new(
                CompileOption::Precision,
                self.precision,
                format!(
                    "needs --chip trn3 on --target neuron: Trainium3 has the first MX matmul, and {} has none (neuronx-cc refuses QuantizeMX's f8e4m3fn there, NCC_EVRF051)",
                    self.chip.unwrap_or(Chip::Trn1)
                ),
            ));
        }
        Ok(())
    }
}

/// Builds the step `o` describes and runs its pipeline over it. Without a
/// batch size, each DP replica takes one sequence.
pub fn compile_step(o: &CompileOptions) -> Result<CompiledStep, Error> {
    o.check_degrees()?;
    let o = &CompileOptions {
        parallel: o.parallel.with_fsdp_replicas(),
        ..o.clone()
    };
    let target = BundleTarget::choose(o.target, o.chip)?;
    let (model, name) = o.model_config()?;
    let default_batch = o.parallel.dp.max(1);
    let batch = batch_shape(
        &model,
        &name,
        o.batch_size,
        o.seq_len,
        (default_batch, 4096),
    )?;
    let step = hlatc_step::kernel_choice::step_shape(
        &model,
        batch,
        o.packed,
        o.parallel,
        o.grad_accum,
        o.precision.compute(),
    );
    let mut kernels = KernelChoice::choose(&o.kernels, o.target, &step)?;
    let mut pipeline = match &o.passes {
        None => step_pipeline(o.target, &kernels.kernels, &o.disable_passes)?,
        Some(names) => {
            let names: Vec<&String> = names.iter().filter(|n| !n.trim().is_empty()).collect();
            pipeline_from_names(o.target.name(), &names)?
        }
    };
    kernels.kernels.softmax = softmax_as_run(&o.kernels, &pipeline)?;
    let cfg = StepConfig {
        model,
        batch,
        optimizer: o.optimizer.apply(AdamWConfig::default())?,
        precision: o.precision,
        packed: o.packed,
        parallel: o.parallel,
        spmd: o.spmd()?,
        fault: None,
        module_markers: o.module_markers,
        kernels: kernels.kernels,
    };
    let mut programs = StepPrograms::build(&cfg, o.grad_accum, o.pipeline_form()?)?;
    pipeline.check_policy(if o.verify_each_pass {
        CheckPolicy::EachPass
    } else {
        CheckPolicy::for_build()
    });
    for step in programs.each_mut() {
        if let Some(r) = &o.rounding {
            step.rounding = r.clone();
        }
        optimize(step, &pipeline, o.target, o.remat)?;
        if o.replica_groups == ReplicaGroupForm::Iota {
            hlatc_compiler::graph::collectives::iota_replica_groups(&mut step.module);
        }
    }
    let memory = programs.memory_plan();
    let memory_check = o.device_memory.check(target.chip(), o.parallel.world());
    if let MemoryCheck::Refuse(limit) = memory_check {
        if memory.total() > limit {
            return Err(Error::DoesNotFit {
                plan: memory,
                device_memory: limit,
                fix: memory_fit::smallest_fit(o, batch.batch_size, limit),
            });
        }
    }
    Ok(CompiledStep {
        name,
        cfg,
        programs,
        target,
        memory,
        memory_check,
        kernel_fallbacks: kernels.fallbacks,
    })
}
