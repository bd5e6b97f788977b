//! What a host of a compiled step does with it, beyond compiling: its
//! programs split (gradient accumulation's pair), compiled for XLA CPU,
//! written as a bundle, started as a trainer, run rank by rank, and its
//! inputs and state divided among the ranks and gathered back. The Python
//! package is a thin layer over these.

use crate::batch_check::{check_batch_input, check_batch_inputs, BatchError};
use crate::bundle::{for_cpu, manifest_json, sha256_hex, stage_accumulation_bundle, stage_bundle};
use crate::compile_step::CompiledStep;
use crate::data::Batch;
use crate::grad_accum::micro_config;
use crate::initial_inputs::StartValues;
use crate::memory_plan::MemoryPlan;
use crate::models::init::init_params;
use crate::rank_inputs::RankInputs;
use crate::runtime::{Program, Runtime};
use crate::state_shards::{state_inputs, unshard_state, whole_state};
use crate::train_step::{Role, TensorSpec};
use crate::trainer::Trainer;
use crate::Literal;
use std::collections::BTreeMap;
use std::path::Path;

type Result<T> = std::result::Result<T, crate::Error>;

fn usage(message: String) -> crate::Error {
    crate::train::Error::Usage(message).into()
}

/// A compiled step's programs: one, or gradient accumulation's two, each a
/// `CompiledStep` of one program (the micro step's config takes a K-th of
/// the batch, as its bundle's manifest says).
/// `StepPrograms<&CompiledStep>` is the same programs borrowed (a Python
/// `Step` holds each program of a pair in a `Step` of its own).
#[derive(Clone, Copy)]
pub enum StepPrograms<C = CompiledStep> {
    One(C),
    Accumulated {
        micro: C,
        apply: C,
        micro_batches: i64,
    },
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
    if pipeline.is_some() {
        return Err(usage(
            "a pipeline-parallel step (pp above 1) has four programs, which this host does not drive yet: compile it with `hlatc compile --pp` and train it with `hlatc train --pp`".into(),
        ));
    }
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
    let micro_cfg = micro_config(&cfg, apply.micro_batches).map_err(crate::Error::from)?;
    let micro = CompiledStep {
        name: name.clone(),
        cfg: micro_cfg,
        memory: MemoryPlan::of(&step),
        step,
        target,
        apply: None,
        pipeline: None,
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
        pipeline: None,
        instructions_built: apply.instructions_built,
        memory_check,
        passes_time: apply.passes_time,
    };
    Ok(StepPrograms::Accumulated {
        micro,
        apply: whole,
        micro_batches: apply.micro_batches,
    })
}

/// The step compiled by XLA CPU on as many devices as it has ranks, its
/// Neuron custom calls as plain HLO.
pub fn cpu_program(c: &CompiledStep) -> Result<Program> {
    let world = c.cfg.parallel.world();
    let (module, _) = for_cpu(c.step.module.clone(), &c.cfg)?;
    Ok(Runtime::for_ranks(world as usize)?.compile(&module)?)
}

/// The bundle's `manifest.json`.
pub fn manifest(c: &CompiledStep) -> String {
    let proto = crate::proto::encode_module(&c.step.module);
    manifest_json(&c.step, &c.cfg, c.target, &sha256_hex(&proto))
}

/// Writes the programs' bundle to `dir`, staged and committed: whole or
/// nothing, the CLI's bytes.
pub fn write_bundle(programs: StepPrograms<&CompiledStep>, dir: &Path) -> Result<()> {
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
pub fn trainer(programs: StepPrograms<&CompiledStep>, seed: u64) -> Result<Trainer> {
    let cfg = match programs {
        StepPrograms::One(c) => &c.cfg,
        StepPrograms::Accumulated { apply, .. } => &apply.cfg,
    };
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
    };
    inner.seed_rounding(seed);
    Ok(inner)
}
