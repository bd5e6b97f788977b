//! A pipeline-parallel step's state: each stage's whole state is the
//! single-device state of the stage's model, divided over the stage's
//! `tp * dp` ranks as a step of one stage divides it, and the state that
//! names no rank is the union of the stages' under the whole model's
//! names (what every stage holds alike, once).

use crate::Error;
use hlatc_artifacts::state_error::StateError;
use hlatc_artifacts::state_shards::{
    rank_share, shard_state, start_state, state_inputs, unshard_state, whole_state,
};
use hlatc_compiler::Literal;
use hlatc_models::parallel::stages::Stages;
use hlatc_models::param_specs;
use hlatc_step::pipeline::StageNames;
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{Role, StepConfig, TensorSpec};
use std::collections::BTreeMap;

/// Each rank's state, by input name.
pub type RankStates = Vec<Vec<(String, Literal)>>;

/// How the state of a pipeline-parallel step is divided.
pub struct StageStates {
    names: StageNames,
    /// How one stage's ranks divide its state (ranks numbered within it).
    ranks: RankInputs,
    /// The state's signature: the apply step's inputs.
    inputs: Vec<TensorSpec>,
    /// The whole model.
    model: hlatc_models::ModelConfig,
}

impl StageStates {
    /// The state of `cfg`'s step (the whole model, `cfg.parallel.pp`
    /// stages) whose programs `stage_config` built, with the apply step's
    /// signature `inputs`.
    pub fn new(cfg: &StepConfig, stage_config: &StepConfig, inputs: &[TensorSpec]) -> Self {
        let stages = Stages::new(&cfg.model, cfg.parallel.pp)
            .expect("a pipelined step's config divides its layers");
        let one_stage = StepConfig {
            parallel: stage_config.parallel.one_stage(),
            ..stage_config.clone()
        };
        StageStates {
            names: StageNames::new(&cfg.model, &stages),
            ranks: RankInputs::new(&one_stage),
            inputs: inputs.to_vec(),
            model: cfg.model.clone(),
        }
    }

    /// The whole model's names of what each stage holds.
    pub fn names(&self) -> &StageNames {
        &self.names
    }

    /// The state's signature: the apply step's inputs.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// How each stage's ranks divide it.
    pub fn stage_parallelism(&self) -> hlatc_models::Parallelism {
        self.ranks.parallelism()
    }

    /// Ranks per stage.
    pub fn ranks_per_stage(&self) -> usize {
        self.ranks.parallelism().world() as usize
    }

    /// Every rank's state at the start of a run from `params` (the whole
    /// model's, in its `param_specs` order): each stage's layers and the
    /// shared parameters, fresh moments and step counter.
    pub fn start(&self, params: Vec<Literal>) -> Result<RankStates, Error> {
        let names: Vec<String> = param_specs(&self.model)
            .into_iter()
            .map(|p| p.name)
            .collect();
        if names.len() != params.len() {
            return Err(StateError::ParameterCount {
                expected: names.len(),
                got: params.len(),
            }
            .into());
        }
        let global: BTreeMap<String, Literal> = names.into_iter().zip(params).collect();
        self.every_stage(|s| self.stage_start(&global, s, 0))
    }

    /// Stage `stage`'s whole state at the start of a run from `params` (by
    /// the whole model's names; the rounding RNG from `seed`), in the order
    /// of `state_inputs`.
    pub fn stage_start(
        &self,
        params: &BTreeMap<String, Literal>,
        stage: usize,
        seed: u64,
    ) -> Result<Vec<Literal>, Error> {
        let by_name = self
            .inputs
            .iter()
            .filter(|spec| spec.role == Role::Parameter)
            .map(|spec| {
                let whole = self.names.whole_name(spec, stage);
                let value = params
                    .get(&whole)
                    .ok_or_else(|| StateError::StageParameter {
                        tensor: whole.clone(),
                        stage,
                    })?;
                Ok((spec.name.clone(), value.clone()))
            })
            .collect::<Result<BTreeMap<_, _>, Error>>()?;
        Ok(start_state(&self.ranks, &self.inputs, &by_name, seed)?)
    }

    /// Every rank's state from a whole state by the whole model's names
    /// (`tensors`, read from `source`): every state input of every stage
    /// must be there at its whole shape, and nothing else.
    pub fn shard(
        &self,
        tensors: BTreeMap<String, Literal>,
        source: &str,
    ) -> Result<RankStates, Error> {
        self.refuse_strangers(&tensors, source)?;
        self.every_stage(|s| self.stage_whole(&tensors, s, source))
    }

    /// Stage `stage`'s whole state from a whole state by the whole model's
    /// names, checked: a tensor missing is named as the whole model names
    /// it (the stage's own check would name its stage model's, another
    /// layer); the gradient accumulators, zero between optimizer steps,
    /// may be left out.
    pub fn stage_whole(
        &self,
        tensors: &BTreeMap<String, Literal>,
        stage: usize,
        source: &str,
    ) -> Result<Vec<Literal>, Error> {
        let mut mine = BTreeMap::new();
        for spec in state_inputs(&self.inputs) {
            let whole = self.names.whole_name(spec, stage);
            match tensors.get(&whole) {
                Some(t) => {
                    mine.insert(spec.name.clone(), t.clone());
                }
                None if spec.role == Role::GradAccumulator => {}
                None => {
                    return Err(StateError::MissingTensor {
                        origin: source.to_string(),
                        tensor: whole,
                        role: spec.role,
                    }
                    .into())
                }
            }
        }
        Ok(whole_state(&self.ranks, &self.inputs, mine, source)?)
    }

    /// Refuses a tensor of a whole state that no stage holds.
    pub fn refuse_strangers(
        &self,
        tensors: &BTreeMap<String, Literal>,
        source: &str,
    ) -> Result<(), Error> {
        let specs = state_inputs(&self.inputs);
        let known: std::collections::HashSet<String> = (0..self.names.count())
            .flat_map(|s| specs.iter().map(move |spec| self.names.whole_name(spec, s)))
            .collect();
        match tensors.keys().find(|k| !known.contains(*k)) {
            Some(extra) => Err(StateError::UnknownTensor {
                origin: source.to_string(),
                tensor: extra.clone(),
            }
            .into()),
            None => Ok(()),
        }
    }

    /// Rank `local` of its stage's share of the stage's whole state
    /// `whole` (in the order of `state_inputs`), by input name.
    pub fn share(&self, whole: &[Literal], local: usize) -> Vec<(String, Literal)> {
        rank_share(&self.ranks, &self.inputs, whole, local as i64)
    }

    /// Every rank's state, stage by stage, from each stage's whole state.
    fn every_stage(
        &self,
        whole: impl Fn(usize) -> Result<Vec<Literal>, Error>,
    ) -> Result<RankStates, Error> {
        let mut out = Vec::new();
        for s in 0..self.names.count() {
            let w = whole(s)?;
            out.extend(shard_state(&self.ranks, &self.inputs, &w));
        }
        Ok(out)
    }

    /// The whole state, by the whole model's names, from every rank's (in
    /// rank order, each read from `source(r)`), each checked against its
    /// program's signature; the gradient accumulators, zero between
    /// optimizer steps, left out.
    pub fn unshard(
        &self,
        per_rank: Vec<BTreeMap<String, Literal>>,
        source: impl Fn(usize) -> String,
    ) -> Result<Vec<(String, Literal)>, Error> {
        let per_stage = self.ranks_per_stage();
        let world = per_stage * self.names.count();
        if per_rank.len() != world {
            return Err(StateError::RankCount {
                got: per_rank.len(),
                world,
                layout: format!(
                    "{} over {} stages",
                    self.ranks.parallelism(),
                    self.names.count()
                ),
            }
            .into());
        }
        let mut ranks = per_rank.into_iter();
        let mut out = Vec::new();
        for s in 0..self.names.count() {
            let stage: Vec<_> = ranks.by_ref().take(per_stage).collect();
            let whole = unshard_state(&self.ranks, &self.inputs, stage, |r| {
                source(s * per_stage + r)
            })?;
            for (spec, (_, value)) in state_inputs(&self.inputs).into_iter().zip(whole) {
                // Zero between optimizer steps, as `Trainer::training_state`
                // leaves them out.
                if spec.role == Role::GradAccumulator {
                    continue;
                }
                if s == 0 || !self.names.held_by_every_stage(spec) {
                    out.push((self.names.whole_name(spec, s), value));
                }
            }
        }
        Ok(out)
    }
}
