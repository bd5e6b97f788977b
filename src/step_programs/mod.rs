//! What a host of a compiled step does with it, beyond compiling: its
//! programs split (gradient accumulation's pair, pipeline parallelism's
//! four), compiled for XLA CPU, written as a bundle, started as a trainer,
//! run rank by rank, and its inputs and state divided among the ranks and
//! gathered back. The Python package is a thin layer over these.

use crate::batch_check::{check_batch_input, check_batch_inputs, BatchError};
use crate::bundle::{
    for_cpu, manifest_json, sha256_hex, stage_accumulation_bundle, stage_bundle,
    stage_pipeline_bundle, BundleTarget,
};
use crate::compile_step::{ApplyStep, CompiledStep, PipelinePrograms, StepShape};
use crate::data::Batch;
use crate::grad_accum::micro_config;
use crate::initial_inputs::StartValues;
use crate::kernel_choice::KernelFallback;
use crate::memory_plan::{MemoryCheck, MemoryPlan};
use crate::models::init::init_params;
use crate::models::parallel::stages::Stages;
use crate::pipeline::{tick_config, PipelineForm, Schedule};
use crate::rank_inputs::RankInputs;
use crate::runtime::{Program, Runtime};
use crate::state_shards::{state_inputs, unshard_state, whole_state};
use crate::train_step::{Role, StepConfig, TensorSpec, TrainStep};
use crate::trainer::Trainer;
use crate::Literal;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod pipeline;

pub use pipeline::Pipeline;

type Result<T> = std::result::Result<T, crate::Error>;

fn usage(message: String) -> crate::Error {
    crate::Error::Usage(message)
}

/// A compiled step's programs: one, gradient accumulation's two, or
/// pipeline parallelism's four, each a `CompiledStep` of one program (the
/// micro step's config takes a K-th of the batch, as its bundle's manifest
/// says; a pipeline's programs are one stage's, and `S` holds what they
/// share). `StepPrograms<&CompiledStep, &PipelineShape>` ([`Borrowed`]) is
/// the same programs borrowed (a Python `Step` holds each program of a
/// pair or a pipeline in a `Step` of its own).
#[derive(Clone, Copy)]
pub enum StepPrograms<C = CompiledStep, S = PipelineShape> {
    One(C),
    Accumulated {
        micro: C,
        apply: C,
        micro_batches: i64,
    },
    /// Pipeline parallelism (`pp` above 1): the tick programs in
    /// [`Phase::ALL`] order, each one stage over one micro-batch (its
    /// config [`tick_config`]'s), and the apply step (its config the stage
    /// config, the optimizer step's batch).
    Pipelined {
        ticks: [C; 3],
        apply: C,
        shape: S,
    },
}

/// The programs of a compiled step, borrowed.
pub type Borrowed<'a> = StepPrograms<&'a CompiledStep, &'a PipelineShape>;

/// What the four programs of a pipeline-parallel step share, beside
/// themselves: the whole step's config (the whole model; each program's
/// config is one stage's), its schedule and its stages.
pub struct PipelineShape {
    pub cfg: StepConfig,
    pub schedule: Schedule,
    pub stages: Stages,
    /// How the tick programs are written.
    pub form: PipelineForm,
    /// The passes' time over the warm-up and cool-down programs, which
    /// `compile_step` measures together: their `CompiledStep`s hold no
    /// time of their own (and no count of the instructions built, which
    /// it does not keep), only the steady program and the apply step do.
    pub ticks_passes_time: Duration,
}

/// What each program split from one compile keeps of it.
struct Origin {
    name: String,
    target: BundleTarget,
    memory_check: MemoryCheck,
    kernel_fallbacks: Vec<KernelFallback>,
}

impl Origin {
    /// `step` as a `CompiledStep` of one program, run on `cfg`.
    fn program(
        &self,
        step: TrainStep,
        cfg: StepConfig,
        instructions_built: usize,
        passes_time: Duration,
    ) -> CompiledStep {
        CompiledStep {
            name: self.name.clone(),
            cfg,
            memory: MemoryPlan::of(&step),
            step,
            target: self.target,
            apply: None,
            pipeline: None,
            instructions_built,
            memory_check: self.memory_check,
            passes_time,
            kernel_fallbacks: self.kernel_fallbacks.clone(),
        }
    }
}

pub fn into_programs(c: CompiledStep) -> Result<StepPrograms> {
    let CompiledStep {
        name,
        cfg,
        step,
        target,
        apply,
        pipeline,
        instructions_built,
        memory,
        memory_check,
        passes_time,
        kernel_fallbacks,
    } = c;
    let Some(apply) = apply else {
        return Ok(StepPrograms::One(CompiledStep {
            name,
            cfg,
            step,
            target,
            apply: None,
            pipeline: None,
            instructions_built,
            memory,
            memory_check,
            passes_time,
            kernel_fallbacks,
        }));
    };
    let origin = Origin {
        name,
        target,
        memory_check,
        kernel_fallbacks,
    };
    if let Some(p) = pipeline {
        let steady = (step, instructions_built, passes_time);
        return Ok(pipelined(&origin, cfg, steady, apply, p));
    }
    let micro_cfg = micro_config(&cfg, apply.micro_batches).map_err(crate::Error::from)?;
    let ApplyStep {
        step: apply_step,
        micro_batches,
        instructions_built: apply_built,
        passes_time: apply_time,
    } = apply;
    Ok(StepPrograms::Accumulated {
        micro: origin.program(step, micro_cfg, instructions_built, passes_time),
        apply: origin.program(apply_step, cfg, apply_built, apply_time),
        micro_batches,
    })
}

/// A pipeline-parallel compile of `cfg` as its four programs, each on its
/// stage's config: the steady tick's (`steady`: the program, its
/// instructions built and its passes' time), the apply step, and the
/// warm-up and cool-down programs of `p`.
fn pipelined(
    origin: &Origin,
    cfg: StepConfig,
    steady: (TrainStep, usize, Duration),
    apply: ApplyStep,
    p: PipelinePrograms,
) -> StepPrograms {
    let PipelinePrograms {
        warm_up,
        cool_down,
        schedule,
        stages,
        stage_config,
        form,
        passes_time,
    } = p;
    let tick_cfg = tick_config(&stage_config, schedule.micro_batches);
    let (step, built, time) = steady;
    let steady = origin.program(step, tick_cfg.clone(), built, time);
    // compile_step keeps neither figure for these two (see PipelineShape).
    let unmeasured = |step| origin.program(step, tick_cfg.clone(), 0, Duration::ZERO);
    let ticks = [unmeasured(warm_up), steady, unmeasured(cool_down)];
    let apply = origin.program(
        apply.step,
        stage_config,
        apply.instructions_built,
        apply.passes_time,
    );
    StepPrograms::Pipelined {
        ticks,
        apply,
        shape: PipelineShape {
            cfg,
            schedule,
            stages,
            form,
            ticks_passes_time: passes_time,
        },
    }
}

impl<C, S> StepPrograms<C, S> {
    /// The programs borrowed.
    pub fn borrowed(&self) -> StepPrograms<&C, &S> {
        match self {
            StepPrograms::One(c) => StepPrograms::One(c),
            StepPrograms::Accumulated {
                micro,
                apply,
                micro_batches,
            } => StepPrograms::Accumulated {
                micro,
                apply,
                micro_batches: *micro_batches,
            },
            StepPrograms::Pipelined {
                ticks,
                apply,
                shape,
            } => StepPrograms::Pipelined {
                ticks: [&ticks[0], &ticks[1], &ticks[2]],
                apply,
                shape,
            },
        }
    }
}

impl<'a> Borrowed<'a> {
    /// The whole step's config: the optimizer step's batch and, under
    /// pipeline parallelism, the whole model.
    pub fn cfg(self) -> &'a StepConfig {
        match self {
            StepPrograms::One(c) => &c.cfg,
            StepPrograms::Accumulated { apply, .. } => &apply.cfg,
            StepPrograms::Pipelined { shape, .. } => &shape.cfg,
        }
    }

    /// The pipeline's programs, for a pipeline-parallel step.
    pub fn pipeline(self) -> Option<Pipeline<'a>> {
        match self {
            StepPrograms::Pipelined {
                ticks,
                apply,
                shape,
            } => Some(Pipeline {
                ticks,
                apply,
                shape,
            }),
            _ => None,
        }
    }
}

/// The step compiled by XLA CPU on as many devices as it has ranks, its
/// Neuron custom calls as plain HLO.
pub fn cpu_program(c: &CompiledStep) -> Result<Program> {
    let world = c.cfg.parallel.world();
    cpu_program_on(&Runtime::for_ranks(world as usize)?, c)
}

/// [`cpu_program`] on `rt`'s devices.
fn cpu_program_on(rt: &Runtime, c: &CompiledStep) -> Result<Program> {
    let (module, _) = for_cpu(c.step.module.clone(), &c.cfg)?;
    Ok(rt.compile(&module)?)
}

/// The bundle's `manifest.json`.
pub fn manifest(c: &CompiledStep) -> String {
    let proto = crate::proto::encode_module(&c.step.module);
    manifest_json(&c.step, &c.cfg, c.target, &sha256_hex(&proto))
}

/// Writes the programs' bundle to `dir`, staged and committed: whole or
/// nothing, the CLI's bytes.
pub fn write_bundle(programs: Borrowed, dir: &Path) -> Result<()> {
    let staged = match programs {
        StepPrograms::Accumulated {
            micro,
            apply,
            micro_batches,
        } => stage_accumulation_bundle(
            &micro.step,
            &apply.step,
            &apply.cfg,
            micro_batches,
            apply.target,
            dir,
        ),
        StepPrograms::One(c) => stage_bundle(&c.step, &c.cfg, c.target, dir),
        StepPrograms::Pipelined {
            ticks,
            apply,
            shape,
        } => {
            let p = Pipeline {
                ticks,
                apply,
                shape,
            };
            let steps = p.tick_steps();
            stage_pipeline_bundle(p.view(&steps), &shape.cfg, apply.target, dir)
        }
    };
    staged.and_then(|s| s.commit()).map(|_| ())?;
    Ok(())
}
pub fn check_rank(c: &CompiledStep, rank: usize) -> Result<()> {
    let world = c.cfg.parallel.world() as usize;
    if rank >= world {
        return Err(usage(format!(
            "rank {rank}: the step runs on {world} rank(s)"
        )));
    }
    Ok(())
}

/// Rank `rank`'s start value of every state input (`state`) or every batch
/// input, by name.
pub fn start_values(
    c: &CompiledStep,
    seed: u64,
    rank: usize,
    state: bool,
) -> Result<Vec<(String, Literal)>> {
    check_rank(c, rank)?;
    let wanted: Vec<TensorSpec> = c
        .step
        .inputs
        .iter()
        .filter(|s| s.role.is_state() == state)
        .cloned()
        .collect();
    let values = StartValues::new(&c.cfg, &wanted, seed).of_rank(&wanted, rank as i64)?;
    Ok(wanted.into_iter().map(|s| s.name).zip(values).collect())
}

/// The inputs in signature order, each by name, none missing and none left
/// over (`rank` names a sharded step's rank in the message).
pub fn inputs_by_name(
    c: &CompiledStep,
    rank: Option<usize>,
    mut named: BTreeMap<String, Literal>,
) -> Result<Vec<Literal>> {
    let specs = &c.step.inputs;
    let at = rank.map(|r| format!("rank {r}: ")).unwrap_or_default();
    let mut list = Vec::with_capacity(specs.len());
    for s in specs {
        let value = named.remove(&s.name).ok_or_else(|| {
            usage(format!(
                "{at}no input '{}' (the step takes {} inputs, by name)",
                s.name,
                specs.len()
            ))
        })?;
        list.push(value);
    }
    if !named.is_empty() {
        let extra: Vec<String> = named.into_keys().collect();
        return Err(usage(format!(
            "{at}the step takes no input named {}",
            extra.join(", ")
        )));
    }
    Ok(list)
}

/// A run's failure: a rank's batch that a check refused (the rank, for a
/// sharded step), or anything else.
pub enum RunFailure {
    Batch { rank: usize, error: BatchError },
    Other(crate::Error),
}

impl From<crate::Error> for RunFailure {
    fn from(e: crate::Error) -> Self {
        RunFailure::Other(e)
    }
}

/// Every rank's inputs in signature order ([`inputs_by_name`]), its batch
/// checked as a run checks it (ids in the vocabulary, segment ids a
/// packing).
pub fn checked_inputs(
    c: &CompiledStep,
    per_rank: Vec<BTreeMap<String, Literal>>,
) -> std::result::Result<Vec<Vec<Literal>>, RunFailure> {
    let world = c.cfg.parallel.world() as usize;
    if per_rank.len() != world {
        return Err(usage(format!(
            "the step runs on {world} rank(s); {} input dict(s) were given",
            per_rank.len()
        ))
        .into());
    }
    let args = per_rank
        .into_iter()
        .enumerate()
        .map(|(rank, named)| inputs_by_name(c, (world > 1).then_some(rank), named))
        .collect::<Result<Vec<_>>>()?;
    for (rank, list) in args.iter().enumerate() {
        check_batch_inputs(&c.step.inputs, list, c.cfg.model.vocab_size)
            .map_err(|error| RunFailure::Batch { rank, error })?;
    }
    Ok(args)
}

/// One run of [`checked_inputs`]' inputs, every rank's outputs by name.
pub fn run_ranks(
    c: &CompiledStep,
    program: &Program,
    args: &[Vec<Literal>],
) -> Result<Vec<Vec<(String, Literal)>>> {
    let outs = match args {
        [one] => program.run(one).map(|o| vec![o]),
        _ => program.run_replicas(args),
    }
    .map_err(crate::Error::from)?;
    let names = || c.step.outputs.iter().map(|s| s.name.clone());
    Ok(outs.into_iter().map(|o| names().zip(o).collect()).collect())
}

/// Rank `rank`'s batch inputs, by name, from the global `batch`: each batch
/// input's rows as the trainer gives them to the rank, after the checks the
/// trainer makes (the global batch's shape, ids in the vocabulary, segment
/// ids a packing).
pub fn rank_batch(c: &CompiledStep, batch: &Batch, rank: usize) -> Result<Vec<(String, Literal)>> {
    check_rank(c, rank)?;
    let ranks = RankInputs::new(&c.cfg);
    let global = c.cfg.batch;
    let mut out = Vec::new();
    for spec in &c.step.inputs {
        let Some(value) = batch.for_role(spec.role) else {
            if spec.role == Role::SegmentIds {
                return Err(usage(
                    "the step was compiled for packed rows (packed=True): give segment_ids".into(),
                ));
            }
            continue;
        };
        let want = [global.batch_size, global.seq_len];
        if value.dims() != want {
            return Err(usage(format!(
                "'{}' is {:?}; the step's global batch is {:?} ([batch_size, seq_len], every rank's rows)",
                spec.name,
                value.dims(),
                want
            )));
        }
        check_batch_input(spec, value, c.cfg.model.vocab_size).map_err(crate::Error::from)?;
        out.push((spec.name.clone(), ranks.take(spec, value, rank as i64)));
    }
    if batch.segment_ids.is_some() && !c.step.inputs.iter().any(|s| s.role == Role::SegmentIds) {
        return Err(usage(
            "the step was compiled unpacked but the batch has segment ids".into(),
        ));
    }
    Ok(out)
}

/// Rank `rank`'s share of every state input, by name, from the whole state,
/// each checked against the step.
pub fn shard_state(
    c: &CompiledStep,
    state: BTreeMap<String, Literal>,
    rank: usize,
) -> Result<Vec<(String, Literal)>> {
    check_rank(c, rank)?;
    let ranks = RankInputs::new(&c.cfg);
    let whole = whole_state(&ranks, &c.step.inputs, state, "state")?;
    Ok(state_inputs(&c.step.inputs)
        .into_iter()
        .zip(&whole)
        .map(|(s, w)| (s.name.clone(), ranks.take(s, w, rank as i64)))
        .collect())
}

/// The whole state from every rank's share (in rank order), as `hlatc
/// unshard` joins rank files.
pub fn gather_state(
    c: &CompiledStep,
    per_rank: Vec<BTreeMap<String, Literal>>,
) -> Result<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    Ok(unshard_state(&ranks, &c.step.inputs, per_rank, |r| {
        format!("rank {r}")
    })?)
}

/// The parameters of a whole state as Hugging Face tensors (fused ones
/// split back), as the trainer gives them.
pub fn hugging_face_params(
    c: &CompiledStep,
    state: BTreeMap<String, Literal>,
) -> Result<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    let whole = whole_state(&ranks, &c.step.inputs, state, "state")?;
    let stored: BTreeMap<String, Literal> = state_inputs(&c.step.inputs)
        .into_iter()
        .zip(whole)
        .filter(|(s, _)| s.role == Role::Parameter)
        .map(|(s, w)| (s.name.clone(), w))
        .collect();
    crate::models::layout::split(&c.cfg.model, &stored).map_err(|e| usage(format!("state: {e}")))
}

/// A compiled step's trainer on `rt`'s devices (one a rank): each of its
/// programs compiled by XLA CPU (a Neuron step's custom calls as plain
/// HLO), started from `params` (the whole model's, in `param_specs`
/// order) with zero Adam state at step 0, the rounding RNG seeded from
/// `seed`. Accumulation's and a pipeline's programs share `rt`, so the
/// state they share stays on its devices between them.
pub fn start_trainer(
    rt: &Runtime,
    c: &CompiledStep,
    params: Vec<Literal>,
    seed: u64,
) -> Result<Trainer> {
    let on_cpu = |step: &TrainStep| -> Result<Program> {
        let (module, _) = for_cpu(step.module.clone(), &c.cfg)?;
        Ok(rt.compile(&module)?)
    };
    let ticks = c.ticks();
    let mut trainer = match c.shape(&ticks) {
        StepShape::One(step) => Trainer::with_program(on_cpu(step)?, &c.cfg, step, params)?,
        StepShape::Accumulated {
            micro,
            apply,
            micro_batches,
        } => Trainer::accumulating_programs(
            [on_cpu(micro)?, on_cpu(apply)?],
            &c.cfg,
            [micro, apply],
            micro_batches,
            params,
        )?,
        StepShape::Pipelined(view) => {
            let programs = view
                .ticks
                .iter()
                .chain([&view.apply])
                .map(|s| on_cpu(s))
                .collect::<Result<Vec<_>>>()?;
            Trainer::pipelined_programs(programs, &c.cfg, view, params)?
        }
    };
    trainer.try_seed_rounding(seed)?;
    Ok(trainer)
}

/// The step's programs on XLA CPU as a `Trainer` (the train crate's knows
/// nothing of the facade's `CompiledStep`), started from the model's
/// initialization drawn from `seed`, zero Adam state, step 0, the rounding
/// RNG seeded.
pub fn trainer(programs: Borrowed, seed: u64) -> Result<Trainer> {
    let cfg = programs.cfg();
    let params = init_params(&cfg.model, cfg.precision.storage(), seed)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut inner = match programs {
        StepPrograms::One(c) => Trainer::with_program(cpu_program(c)?, cfg, &c.step, params)?,
        StepPrograms::Accumulated {
            micro,
            apply,
            micro_batches,
        } => {
            // One runtime for both: the state they share stays on its
            // devices between them.
            let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
            Trainer::accumulating_programs(
                [cpu_program_on(&rt, micro)?, cpu_program_on(&rt, apply)?],
                cfg,
                [&micro.step, &apply.step],
                micro_batches,
                params,
            )?
        }
        StepPrograms::Pipelined {
            ticks,
            apply,
            shape,
        } => {
            let p = Pipeline {
                ticks,
                apply,
                shape,
            };
            let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
            let compiled = ticks
                .iter()
                .chain([&apply])
                .map(|c| cpu_program_on(&rt, c))
                .collect::<Result<Vec<_>>>()?;
            let steps = p.tick_steps();
            Trainer::pipelined_programs(compiled, cfg, p.view(&steps), params)?
        }
    };
    inner.try_seed_rounding(seed)?;
    Ok(inner)
}
