//! Runs a pipeline-parallel step on XLA CPU: the tick programs over the
//! schedule, each stage's buffers carried from tick to tick, before the
//! trainer's apply step (see [`crate::trainer::Trainer::pipelined`]).

use super::{Phase, Schedule, StageNames};
use crate::data::Batch;
use crate::rank_inputs::RankInputs;
use crate::state_shards::{start_state, state_inputs};
use crate::train_step::{Role, StepConfig, TensorSpec, TrainStep};
use crate::trainer::{micro_batch, run_stage, scalar, Stage};
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::parallel::stages::Stages;
use hlatc_models::param_specs;
use hlatc_runtime::Program;
use std::collections::BTreeMap;

/// The tick programs of a pipeline-parallel trainer, and what they carry.
pub(crate) struct PipelineRun {
    /// By [`Phase::ALL`]: each program with its signature.
    ticks: Vec<(Program, TrainStep)>,
    /// How the tick programs' ranks divide a micro-batch.
    ranks: RankInputs,
    schedule: Schedule,
    pub(crate) names: StageNames,
    /// The buffers' inputs, and each rank's values of them.
    buffer_specs: Vec<TensorSpec>,
    buffers: Vec<Vec<Literal>>,
    dp: i64,
    world: usize,
}

impl PipelineRun {
    /// The run of the tick programs `ticks` (each compiled, in
    /// [`Phase::ALL`] order) of a step of `cfg` divided into `stages`,
    /// each stage's programs built from `stage_config`.
    pub(crate) fn new(
        cfg: &StepConfig,
        ticks: Vec<(Program, TrainStep)>,
        schedule: Schedule,
        stages: &Stages,
        stage_config: &StepConfig,
    ) -> Result<Self, Error> {
        for (p, _) in &ticks {
            p.ensure_fits()?;
        }
        let world = cfg.parallel.world() as usize;
        let buffer_specs: Vec<TensorSpec> = ticks[0]
            .1
            .inputs
            .iter()
            .filter(|s| s.role == Role::StageBuffer)
            .cloned()
            .collect();
        let zeros: Vec<Literal> = buffer_specs
            .iter()
            .map(|s| Literal::zeros(s.dtype, s.shape.clone()))
            .collect();
        let micro = super::tick_config(stage_config, schedule.micro_batches);
        Ok(PipelineRun {
            ticks,
            ranks: RankInputs::new(&micro),
            schedule,
            names: StageNames::new(&cfg.model, stages),
            buffer_specs,
            buffers: vec![zeros; world],
            dp: cfg.parallel.dp,
            world,
        })
    }

    /// Each stage's whole state from `params` (the whole model's, in its
    /// `param_specs` order), as `inputs` (the apply step's) lay it out,
    /// and every rank's share of it.
    pub(crate) fn start(
        &self,
        model: &hlatc_models::ModelConfig,
        ranks: &RankInputs,
        inputs: &[TensorSpec],
        params: Vec<Literal>,
    ) -> Result<Vec<Vec<Literal>>, Error> {
        let names: Vec<String> = param_specs(model).into_iter().map(|p| p.name).collect();
        if names.len() != params.len() {
            return Err(Error::Usage(format!(
                "the model has {} parameters, {} were given",
                names.len(),
                params.len()
            )));
        }
        let global: BTreeMap<String, Literal> = names.into_iter().zip(params).collect();
        let mut state = Vec::with_capacity(self.world);
        for s in 0..self.names.count() {
            let by_name: BTreeMap<String, Literal> = inputs
                .iter()
                .filter(|spec| spec.role == Role::Parameter)
                .map(|spec| {
                    (
                        spec.name.clone(),
                        global[&self.names.whole_name(spec, s)].clone(),
                    )
                })
                .collect();
            let whole = start_state(ranks, inputs, &by_name, 0)?;
            state.extend(self.stage_shards(ranks, inputs, &whole, s));
        }
        Ok(state)
    }

    /// The ranks of stage `stage`, each its share of the stage's whole
    /// state `whole` (in the order of `state_inputs(inputs)`).
    pub(crate) fn stage_shards(
        &self,
        ranks: &RankInputs,
        inputs: &[TensorSpec],
        whole: &[Literal],
        stage: usize,
    ) -> Vec<Vec<Literal>> {
        let per_stage = self.world / self.names.count();
        let specs = state_inputs(inputs);
        (stage * per_stage..(stage + 1) * per_stage)
            .map(|r| {
                specs
                    .iter()
                    .zip(whole)
                    .map(|(spec, w)| ranks.take(spec, w, r as i64))
                    .collect()
            })
            .collect()
    }

    /// A whole state by the whole model's names (`tensors`, read from
    /// `source`), as each stage's whole state by its own names (`inputs`,
    /// the apply step's, name them). A tensor no stage holds is refused.
    pub(crate) fn stage_states(
        &self,
        inputs: &[TensorSpec],
        mut tensors: BTreeMap<String, Literal>,
        source: &str,
    ) -> Result<Vec<BTreeMap<String, Literal>>, Error> {
        let specs = state_inputs(inputs);
        let stages: Vec<BTreeMap<String, Literal>> = (0..self.names.count())
            .map(|s| {
                specs
                    .iter()
                    .filter_map(|spec| {
                        let whole = self.names.whole_name(spec, s);
                        let t = tensors.get(&whole)?.clone();
                        Some((spec.name.clone(), t))
                    })
                    .collect()
            })
            .collect();
        for s in 0..self.names.count() {
            for spec in &specs {
                tensors.remove(&self.names.whole_name(spec, s));
            }
        }
        match tensors.keys().next() {
            Some(extra) => Err(Error::Usage(format!(
                "{source}: tensor '{extra}' is not state of this step (a state of another model or precision?)"
            ))),
            None => Ok(stages),
        }
    }

    /// Every tick of the schedule over `batch` (the optimizer step's),
    /// the ranks' state (`held` names it) and buffers carried: the step's
    /// loss.
    pub(crate) fn run_ticks(
        &mut self,
        state: &mut [Vec<Literal>],
        held: &[(&str, Role)],
        vocab_size: i64,
        batch: &Batch,
    ) -> Result<f64, Error> {
        let count = batch.token_count();
        let schedule = self.schedule;
        let (m, dp, last) = (schedule.micro_batches, self.dp, schedule.stages - 1);
        let micro = |index: Option<i64>| match index {
            Some(j) => micro_batch(batch, j, m, dp),
            None => {
                let mut b = micro_batch(batch, 0, m, dp);
                b.tokens = Literal::zeros(ElementType::S32, b.tokens.dims().to_vec());
                b.targets = b.tokens.clone();
                b
            }
        };
        let mut held: Vec<(&str, Role)> = held.to_vec();
        let kept = held.len();
        held.extend(self.buffer_specs.iter().map(|s| (s.name.as_str(), s.role)));
        let mut loss = 0.0;
        for tick in 0..schedule.ticks() {
            let phase = schedule.phase(tick);
            let at = Phase::ALL
                .iter()
                .position(|&p| p == phase)
                .expect("a phase");
            let (program, step) = &self.ticks[at];
            let tick_batch = Batch {
                tokens: micro(schedule.forward_micro_batch(tick, 0)).tokens,
                targets: micro(schedule.backward_micro_batch(tick, last)).targets,
                segment_ids: None,
            };
            let backward_tokens = micro(schedule.backward_micro_batch(tick, 0)).tokens;
            let tick_value = Literal::from_s32(vec![], &[tick as i32]).expect("one s32");
            let given = [
                (Role::TokenCount, &count),
                (Role::Tick, &tick_value),
                (Role::BackwardTokens, &backward_tokens),
            ];
            for (rank, buffers) in state.iter_mut().zip(&mut self.buffers) {
                rank.append(buffers);
            }
            let stage = Stage {
                program,
                inputs: &step.inputs,
                outputs: &step.outputs,
                ranks: &self.ranks,
            };
            let out = run_stage(&stage, state, &held, vocab_size, Some(&tick_batch), &given);
            for (rank, buffers) in state.iter_mut().zip(&mut self.buffers) {
                *buffers = rank.split_off(kept);
            }
            loss += scalar(&step.outputs, &out?, Role::Loss)?;
        }
        Ok(loss)
    }
}
