//! What a host of a compiled step does with it, beyond compiling: its
//! programs split (gradient accumulation's pair, pipeline parallelism's
//! four), compiled for XLA CPU, written as a bundle, started as a trainer,
//! run rank by rank, and its inputs and state divided among the ranks and
//! gathered back. The Python package is a thin layer over these.

use crate::batch_check::{check_batch_input, check_batch_inputs, BatchError};
use crate::bundle::{
    for_cpu, manifest_json, sha256_hex, stage_accumulation_bundle, stage_bundle,
    stage_pipeline_bundle,
};
use crate::compile_step::{ApplyStep, CompiledStep, PipelinePrograms};
use crate::data::Batch;
use crate::grad_accum::micro_config;
use crate::initial_inputs::StartValues;
use crate::memory_plan::{MemoryCheck, MemoryPlan};
use crate::models::init::init_params;
use crate::models::parallel::stages::Stages;
use crate::models::param_specs;
use crate::passes::Target;
use crate::pipeline::{tick_config, Phase, PipelineView, Schedule, StageNames, StageStates};
use crate::rank_inputs::RankInputs;
use crate::runtime::{Program, Runtime};
use crate::state_shards::{start_state, state_inputs, unshard_state, whole_state};
use crate::train_step::{Role, StepConfig, TensorSpec, TrainStep};
use crate::trainer::Trainer;
use crate::Literal;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

type Result<T> = std::result::Result<T, crate::Error>;

fn usage(message: String) -> crate::Error {
    crate::train::Error::Usage(message).into()
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
    /// The passes' time over the warm-up and cool-down programs, which
    /// `compile_step` measures together: their `CompiledStep`s hold no
    /// time of their own (and no count of the instructions built, which
    /// it does not keep), only the steady program and the apply step do.
    pub ticks_passes_time: Duration,
}

/// What each program split from one compile keeps of it.
struct Origin {
    name: String,
    target: Target,
    memory_check: MemoryCheck,
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
        }));
    };
    let origin = Origin {
        name,
        target,
        memory_check,
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
        } => Trainer::accumulating_programs(
            [cpu_program(micro)?, cpu_program(apply)?],
            cfg,
            [&micro.step, &apply.step],
            micro_batches,
            params,
        )?,
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
    inner.seed_rounding(seed);
    Ok(inner)
}

/// A pipeline-parallel step's programs, borrowed
/// ([`StepPrograms::Pipelined`]): what its bundle, trainer, state and
/// batches are made from. Every rank runs every program; rank `r` is rank
/// `r % (tp * dp)` of stage `r / (tp * dp)`, whose programs name its layers
/// as the stage model's (`model.layers.0.` and on). The state outside
/// names them as the whole model's, so it is the single-device step's.
#[derive(Clone, Copy)]
pub struct Pipeline<'a> {
    /// In [`Phase::ALL`] order.
    pub ticks: [&'a CompiledStep; 3],
    pub apply: &'a CompiledStep,
    pub shape: &'a PipelineShape,
}

impl<'a> Pipeline<'a> {
    /// The tick programs' steps, in [`Phase::ALL`] order.
    pub fn tick_steps(&self) -> [&'a TrainStep; 3] {
        self.ticks.map(|c| &c.step)
    }

    /// The programs as the train crate's trainer, bundle and check read
    /// them (`ticks`: [`Pipeline::tick_steps`]).
    pub fn view<'b>(&self, ticks: &'b [&'b TrainStep]) -> PipelineView<'b>
    where
        'a: 'b,
    {
        PipelineView {
            ticks,
            apply: &self.apply.step,
            schedule: self.shape.schedule,
            stage_config: &self.apply.cfg,
        }
    }

    /// The tick program of `phase`.
    pub fn tick(&self, phase: Phase) -> &'a CompiledStep {
        let at = Phase::ALL.iter().position(|&p| p == phase);
        self.ticks[at.expect("a phase")]
    }

    /// How the whole state divides over the stages' ranks.
    fn states(&self) -> StageStates {
        StageStates::new(&self.shape.cfg, &self.apply.cfg, &self.apply.step.inputs)
    }

    /// The whole model's names of each stage's state.
    fn names(&self) -> StageNames {
        StageNames::new(&self.shape.cfg.model, &self.shape.stages)
    }

    /// How one stage's ranks divide its state (ranks numbered within it).
    fn stage_ranks(&self) -> RankInputs {
        RankInputs::new(&StepConfig {
            parallel: self.apply.cfg.parallel.one_stage(),
            ..self.apply.cfg.clone()
        })
    }

    /// Rank `rank`'s stage, and its rank within the stage.
    fn place(&self, rank: usize) -> Result<(usize, i64)> {
        check_rank(self.apply, rank)?;
        let per_stage = self.apply.cfg.parallel.stage_world() as usize;
        Ok((rank / per_stage, (rank % per_stage) as i64))
    }

    /// A rank's share (rank `local` of its stage) of its stage's whole
    /// state `whole` (in the order of [`state_inputs`]), by input name.
    fn share(&self, ranks: &RankInputs, whole: &[Literal], local: i64) -> Vec<(String, Literal)> {
        state_inputs(&self.apply.step.inputs)
            .into_iter()
            .zip(whole)
            .map(|(s, w)| (s.name.clone(), ranks.take(s, w, local)))
            .collect()
    }

    /// Rank `rank`'s state at the start, by its programs' input names: its
    /// stage's layers and the shared parameters of the whole model's
    /// initialization drawn from `seed` (what a single-device step starts
    /// from), fresh moments, accumulators and step counter, the rounding
    /// RNG seeded. Only this rank's stage is divided.
    pub fn start_state(&self, seed: u64, rank: usize) -> Result<Vec<(String, Literal)>> {
        let (stage, local) = self.place(rank)?;
        let whole = &self.shape.cfg;
        let mut params: BTreeMap<String, Literal> =
            init_params(&whole.model, whole.precision.storage(), seed)
                .into_iter()
                .collect();
        let names = self.names();
        let inputs = &self.apply.step.inputs;
        let by_name = inputs
            .iter()
            .filter(|s| s.role == Role::Parameter)
            .map(|s| {
                let value = params.remove(&names.whole_name(s, stage));
                let value = value.expect("the whole model holds each stage's parameters");
                (s.name.clone(), value)
            })
            .collect();
        let ranks = self.stage_ranks();
        let start = start_state(&ranks, inputs, &by_name, seed)?;
        Ok(self.share(&ranks, &start, local))
    }

    /// Stage `stage`'s tensors of a whole state, under its programs' names.
    fn stage_tensors(
        &self,
        names: &StageNames,
        state: &BTreeMap<String, Literal>,
        stage: usize,
    ) -> BTreeMap<String, Literal> {
        state_inputs(&self.apply.step.inputs)
            .into_iter()
            .filter_map(|s| {
                let t = state.get(&names.whole_name(s, stage))?;
                Some((s.name.clone(), t.clone()))
            })
            .collect()
    }

    /// Refuses a whole state without one of stage `stage`'s tensors (the
    /// gradient accumulators, zero between steps, may be left out), naming
    /// it as the whole model does: the stage's own check would name its
    /// stage model's tensor, another layer.
    fn require_stage(
        &self,
        names: &StageNames,
        state: &BTreeMap<String, Literal>,
        stage: usize,
    ) -> Result<()> {
        for spec in state_inputs(&self.apply.step.inputs) {
            let whole = names.whole_name(spec, stage);
            if spec.role != Role::GradAccumulator && !state.contains_key(&whole) {
                return Err(usage(format!(
                    "state: no tensor '{whole}' ({:?} state of this step; was it saved with another --precision or projection layout?)",
                    spec.role
                )));
            }
        }
        Ok(())
    }

    /// Refuses a tensor of a whole state that no stage holds, as a resume
    /// of the whole state refuses it.
    fn refuse_strangers(
        &self,
        names: &StageNames,
        state: &BTreeMap<String, Literal>,
    ) -> Result<()> {
        let specs = state_inputs(&self.apply.step.inputs);
        let known: HashSet<String> = (0..names.count())
            .flat_map(|s| specs.iter().map(move |spec| (s, spec)))
            .map(|(s, spec)| names.whole_name(spec, s))
            .collect();
        match state.keys().find(|k| !known.contains(*k)) {
            Some(extra) => Err(usage(format!(
                "state: tensor '{extra}' is not state of this step (a state of another model or precision?)"
            ))),
            None => Ok(()),
        }
    }

    /// Rank `rank`'s share of a whole state (the whole model's names), by
    /// its programs' input names: what `hlatc shard --pp` writes for it.
    /// Every tensor of its stage must be there at its whole shape, and none
    /// that no stage holds; only this rank's stage is divided.
    pub fn shard_state(
        &self,
        state: BTreeMap<String, Literal>,
        rank: usize,
    ) -> Result<Vec<(String, Literal)>> {
        let (stage, local) = self.place(rank)?;
        let names = self.names();
        self.refuse_strangers(&names, &state)?;
        self.require_stage(&names, &state, stage)?;
        let mine = self.stage_tensors(&names, &state, stage);
        let ranks = self.stage_ranks();
        let whole = whole_state(&ranks, &self.apply.step.inputs, mine, "state")?;
        Ok(self.share(&ranks, &whole, local))
    }

    /// The whole state, by the whole model's names, from every rank's (in
    /// rank order), as `hlatc unshard --pp` joins rank files; the gradient
    /// accumulators, zero between optimizer steps, left out.
    pub fn gather_state(
        &self,
        per_rank: Vec<BTreeMap<String, Literal>>,
    ) -> Result<Vec<(String, Literal)>> {
        Ok(self.states().unshard(per_rank, |r| format!("rank {r}"))?)
    }

    /// The parameters of a whole state as Hugging Face tensors, checked
    /// first as a resume checks it (every stage's state there, at its
    /// whole shape, and nothing else).
    pub fn hugging_face_params(
        &self,
        state: BTreeMap<String, Literal>,
    ) -> Result<Vec<(String, Literal)>> {
        let names = self.names();
        self.refuse_strangers(&names, &state)?;
        let ranks = self.stage_ranks();
        for stage in 0..names.count() {
            self.require_stage(&names, &state, stage)?;
            let tensors = self.stage_tensors(&names, &state, stage);
            whole_state(&ranks, &self.apply.step.inputs, tensors, "state")?;
        }
        let model = &self.shape.cfg.model;
        let stored: BTreeMap<String, Literal> = param_specs(model)
            .into_iter()
            .filter_map(|p| state.get(&p.name).map(|t| (p.name, t.clone())))
            .collect();
        crate::models::layout::split(model, &stored).map_err(|e| usage(format!("state: {e}")))
    }

    /// Rank `rank`'s batch inputs of every tick of one optimizer step on
    /// the global `batch`, in tick order, each by input name, as the
    /// schedule's rules give them (the bundle's manifest states them):
    /// `tick`; `token_count`, the batch's targets that are not the ignore
    /// index; `tokens`, micro-batch `t`; `backward_tokens`, micro-batch
    /// `t - (2 pp - 1)`; `targets`, micro-batch `t - pp`; zeros where that
    /// is no micro-batch. Micro-batch `m` is each DP replica's `m`-th run of
    /// its rows, and the rank takes its replica's. The batch is checked
    /// first, as a trainer checks it.
    pub fn tick_batches(&self, batch: &Batch, rank: usize) -> Result<Vec<Vec<(String, Literal)>>> {
        self.place(rank)?;
        self.check_batch(batch)?;
        let schedule = self.shape.schedule;
        let rows = MicroRows::of(&self.shape.cfg, schedule.micro_batches, rank);
        let count = batch.token_count();
        let last = schedule.stages - 1;
        let tick_inputs = |t: i64| -> Vec<(String, Literal)> {
            let inputs = &self.tick(schedule.phase(t)).step.inputs;
            let value = |role: Role| match role {
                Role::Tick => Some(Literal::from_s32(vec![], &[t as i32]).expect("one s32")),
                Role::TokenCount => Some(count.clone()),
                Role::Tokens => {
                    Some(rows.of_micro_batch(&batch.tokens, schedule.forward_micro_batch(t, 0)))
                }
                Role::BackwardTokens => {
                    Some(rows.of_micro_batch(&batch.tokens, schedule.backward_micro_batch(t, 0)))
                }
                Role::Targets => Some(
                    rows.of_micro_batch(&batch.targets, schedule.backward_micro_batch(t, last)),
                ),
                _ => None,
            };
            inputs
                .iter()
                .filter_map(|s| Some((s.name.clone(), value(s.role)?)))
                .collect()
        };
        Ok((0..schedule.ticks()).map(tick_inputs).collect())
    }

    /// Refuses a global batch the step cannot take: another shape than the
    /// optimizer step's, ids outside the vocabulary, segment ids (the
    /// pipeline takes no packed rows).
    fn check_batch(&self, batch: &Batch) -> Result<()> {
        if batch.segment_ids.is_some() {
            return Err(usage(
                "a pipeline-parallel step takes no segment ids (packed rows are not pipelined)"
                    .into(),
            ));
        }
        let cfg = &self.shape.cfg;
        let want = [cfg.batch.batch_size, cfg.batch.seq_len];
        let steady = &self.tick(Phase::Steady).step.inputs;
        for (value, role) in [
            (&batch.tokens, Role::Tokens),
            (&batch.targets, Role::Targets),
        ] {
            let spec = steady.iter().find(|s| s.role == role);
            let spec = spec.expect("a tick program takes tokens and targets");
            if value.dims() != want {
                return Err(usage(format!(
                    "'{}' is {:?}; the step's global batch is {:?} ([batch_size, seq_len], every rank's rows)",
                    spec.name,
                    value.dims(),
                    want
                )));
            }
            check_batch_input(spec, value, cfg.model.vocab_size).map_err(crate::Error::from)?;
        }
        Ok(())
    }
}

/// The rows of a global batch one rank takes of each micro-batch: its DP
/// replica's `m`-th run of `rows` rows.
struct MicroRows {
    /// The replica's first row in the global batch.
    first: i64,
    rows: i64,
    micro_batches: i64,
}

impl MicroRows {
    fn of(cfg: &StepConfig, micro_batches: i64, rank: usize) -> Self {
        let per_replica = cfg.parallel.local_batch(cfg.batch).batch_size;
        MicroRows {
            first: cfg.parallel.dp_rank(rank as i64) * per_replica,
            rows: per_replica / micro_batches,
            micro_batches,
        }
    }

    /// The rank's rows of micro-batch `m` of `value` (`[batch, seq]`), or
    /// zeros of their shape where there is no micro-batch.
    fn of_micro_batch(&self, value: &Literal, m: Option<i64>) -> Literal {
        let dims = value.dims();
        let row_bytes = value.bytes().len() / dims[0].max(1) as usize;
        let mut out = dims.to_vec();
        out[0] = self.rows;
        let Some(m) = m.filter(|m| (0..self.micro_batches).contains(m)) else {
            return Literal::zeros(value.ty(), out);
        };
        let a = (self.first + m * self.rows) as usize * row_bytes;
        let bytes = value.bytes()[a..a + self.rows as usize * row_bytes].to_vec();
        Literal::from_bytes(value.ty(), out, bytes).expect("a run of whole rows")
    }
}
