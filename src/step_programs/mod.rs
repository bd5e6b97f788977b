//! What a host of a compiled step does with it, beyond compiling: each
//! of its programs on its own ([`OneProgram`]: gradient accumulation's
//! pair, pipeline parallelism's four) compiled for XLA CPU and run rank by
//! rank, the step written as a bundle and started as a trainer, its inputs
//! and state divided among the ranks and gathered back. The CLI's `train`
//! and the Python package are thin layers over these; the shapes are told
//! apart by [`StepPrograms`].

use crate::batch_check::{check_batch_input, check_batch_inputs, BatchError};
use crate::bundle::{for_cpu, manifest_json, sha256_hex, stage_bundle};
use crate::compile_step::{CompiledStep, StepPrograms};
use crate::data::Batch;
use crate::initial_inputs::StartValues;
use crate::models::init::init_params;
use crate::rank_inputs::RankInputs;
use crate::runtime::{Program, Runtime};
use crate::train_step::{Role, StepConfig, TensorSpec, TrainStep};
use crate::trainer::Trainer;
use crate::Literal;
use std::collections::BTreeMap;
use std::path::Path;

mod one_program;
mod pipeline;
mod state_of;

pub use one_program::OneProgram;
pub use pipeline::Pipeline;
pub use state_of::StateOf;

type Result<T> = std::result::Result<T, crate::Error>;

/// One program compiled by XLA CPU on as many devices as the step has
/// ranks, its Neuron custom calls as plain HLO.
pub fn cpu_program(c: &OneProgram) -> Result<Program> {
    let rt = Runtime::for_ranks(c.cfg.parallel.world() as usize)?;
    compile_on(&rt, c.step, &c.cfg)
}

/// `step` (a program run on `cfg`'s ranks) compiled by XLA CPU on `rt`'s
/// devices, its Neuron custom calls as plain HLO.
fn compile_on(rt: &Runtime, step: &TrainStep, cfg: &StepConfig) -> Result<Program> {
    let (module, _) = for_cpu(step.module.clone(), cfg)?;
    Ok(rt.compile(&module)?)
}

/// One program's `manifest.json`, as a bundle of it alone holds it.
pub fn manifest(c: &OneProgram) -> String {
    let proto = crate::proto::encode_module(&c.step.module);
    manifest_json(c.step, &c.cfg, c.compiled.target, &sha256_hex(&proto))
}

/// Writes the step's bundle to `dir`, staged and committed: whole or
/// nothing, `hlatc compile`'s bytes.
pub fn write_bundle(c: &CompiledStep, dir: &Path) -> Result<()> {
    c.stage_bundle(dir)?.commit()?;
    Ok(())
}

/// Writes a bundle of one program alone (its own config's) to `dir`.
pub fn write_program_bundle(c: &OneProgram, dir: &Path) -> Result<()> {
    stage_bundle(c.step, &c.cfg, c.compiled.target, dir)?.commit()?;
    Ok(())
}

/// Refuses a rank the step does not run on.
pub fn check_rank(cfg: &StepConfig, rank: usize) -> Result<()> {
    let world = cfg.parallel.world() as usize;
    if rank >= world {
        return Err(crate::Error::out_of_range(format!(
            "rank {rank}: the step runs on {world} rank(s)"
        )));
    }
    Ok(())
}

/// Rank `rank`'s start value of every state input (`state`) or every batch
/// input, by name.
pub fn start_values(
    c: &OneProgram,
    seed: u64,
    rank: usize,
    state: bool,
) -> Result<Vec<(String, Literal)>> {
    check_rank(&c.cfg, rank)?;
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
    c: &OneProgram,
    rank: Option<usize>,
    mut named: BTreeMap<String, Literal>,
) -> Result<Vec<Literal>> {
    let specs = &c.step.inputs;
    let at = rank.map(|r| format!("rank {r}: ")).unwrap_or_default();
    let mut list = Vec::with_capacity(specs.len());
    for s in specs {
        let value = named.remove(&s.name).ok_or_else(|| {
            crate::Error::not_found(format!(
                "{at}no input '{}' (the step takes {} inputs, by name)",
                s.name,
                specs.len()
            ))
        })?;
        list.push(value);
    }
    if !named.is_empty() {
        let extra: Vec<String> = named.into_keys().collect();
        return Err(crate::Error::not_found(format!(
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
    c: &OneProgram,
    per_rank: Vec<BTreeMap<String, Literal>>,
) -> std::result::Result<Vec<Vec<Literal>>, RunFailure> {
    let world = c.cfg.parallel.world() as usize;
    if per_rank.len() != world {
        return Err(crate::Error::conflict(format!(
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
    c: &OneProgram,
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
pub fn rank_batch(c: &OneProgram, batch: &Batch, rank: usize) -> Result<Vec<(String, Literal)>> {
    check_rank(&c.cfg, rank)?;
    let ranks = RankInputs::new(&c.cfg);
    let global = c.cfg.batch;
    let mut out = Vec::new();
    for spec in &c.step.inputs {
        let Some(value) = batch.for_role(spec.role) else {
            if spec.role == Role::SegmentIds {
                return Err(crate::Error::conflict(
                    "the step was compiled for packed rows (packed=True): give segment_ids",
                ));
            }
            continue;
        };
        let want = [global.batch_size, global.seq_len];
        if value.dims() != want {
            return Err(crate::Error::invalid(format!(
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
        return Err(crate::Error::conflict(
            "the step was compiled unpacked but the batch has segment ids",
        ));
    }
    Ok(out)
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
    let on_cpu = |step: &TrainStep| compile_on(rt, step, &c.cfg);
    let mut trainer = match &c.programs {
        StepPrograms::One(step) => Trainer::with_program(on_cpu(step)?, &c.cfg, step, params)?,
        StepPrograms::Accumulated(a) => Trainer::accumulating_programs(
            [on_cpu(&a.micro)?, on_cpu(&a.apply)?],
            &c.cfg,
            [&a.micro, &a.apply],
            a.micro_batches,
            params,
        )?,
        StepPrograms::Pipelined(p) => {
            let programs = p.programs().map(on_cpu).collect::<Result<Vec<_>>>()?;
            Trainer::pipelined_programs(programs, &c.cfg, p.view(), params)?
        }
    };
    trainer.try_seed_rounding(seed)?;
    Ok(trainer)
}

/// [`start_trainer`] on a runtime of its own, from the model's
/// initialization drawn from `seed`.
pub fn trainer(c: &CompiledStep, seed: u64) -> Result<Trainer> {
    let rt = Runtime::for_ranks(c.cfg.parallel.world() as usize)?;
    let params = init_params(&c.cfg.model, c.cfg.precision.storage(), seed)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    start_trainer(&rt, c, params, seed)
}
