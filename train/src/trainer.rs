//! Runs the compiled training step on XLA CPU, carrying the parameters and
//! optimizer state from one step to the next.

use crate::batch_check::check_batch_input;
use crate::data::Batch;
use crate::initial_inputs::rng_state;
use crate::rank_inputs::RankInputs;
use crate::state_shards::{shard_state, start_state, whole_state};
use crate::train_step::{
    build_train_step, output_with_role, Role, StateLayout, StepConfig, TensorSpec, TrainStep,
};
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::parallel::Fault;
use hlatc_runtime::{Program, Runtime};
use std::collections::BTreeMap;

/// What one step reported.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
}

pub struct Trainer {
    program: Program,
    vocab_size: i64,
    model: hlatc_models::ModelConfig,
    /// The step's signature, whose roles say where everything goes.
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    layout: StateLayout,
    /// Each rank's carried state, one literal per state input, in input
    /// order (one rank for a single-device step).
    state: Vec<Vec<Literal>>,
    /// What each rank takes of the batch, and how its parameters gather.
    ranks: RankInputs,
    /// [`Fault::RoundingSeededPerRank`]: each rank's rounding RNG seeded
    /// with its rank added (only the test that proves the drift check
    /// catches it sets this).
    rounding_seeded_per_rank: bool,
}

impl Trainer {
    /// Compiles the step for `cfg` and starts from `params` (in
    /// `param_specs` order) with zero optimizer state at step 0.
    pub fn new(rt: &Runtime, cfg: &StepConfig, params: Vec<Literal>) -> Result<Trainer, Error> {
        let step = build_train_step(cfg)?;
        Self::with_program(rt.compile(&step.module)?, cfg, &step, params)
    }

    /// Like [`Trainer::new`], with the step first through the `cpu` target's
    /// default pass pipeline and `remat` as its checkpointing policy: the
    /// program `hlatc compile --target cpu` would write.
    pub fn optimized(
        rt: &Runtime,
        cfg: &StepConfig,
        remat: hlatc_passes::RematPolicy,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        Self::optimized_step(rt, cfg, build_train_step(cfg)?, remat, params)
    }

    /// [`Trainer::optimized`] for a step already built for `cfg`, whose
    /// cast and rounding policies the caller may have changed.
    pub fn optimized_step(
        rt: &Runtime,
        cfg: &StepConfig,
        mut step: TrainStep,
        remat: hlatc_passes::RematPolicy,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        let target = hlatc_passes::Target::Cpu;
        let pipeline = hlatc_passes::default_pipeline::<&str>(target, &[])?;
        crate::train_step::optimize(&mut step, &pipeline, target, remat)?;
        Self::with_program(rt.compile(&step.module)?, cfg, &step, params)
    }

    /// Starts from an already compiled `step` for `cfg` (for instance the
    /// bundle's own module, read back from disk). The state is laid out by
    /// the roles of the step's inputs: `params` (in `param_specs` order,
    /// whole: a sharded step's ranks each take their share) fill the
    /// parameters, the Adam moments start at zero and the step counter
    /// at 0.
    pub fn with_program(
        program: Program,
        cfg: &StepConfig,
        step: &TrainStep,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        // A step that cannot run here is refused before its state and
        // batches are made.
        program.ensure_fits()?;
        let layout = StateLayout::of(&step.inputs, &step.outputs).ok_or_else(|| {
            Error::Usage("the step does not return every piece of its state".into())
        })?;
        let wanted = step
            .inputs
            .iter()
            .filter(|s| s.role == Role::Parameter)
            .count();
        if params.len() != wanted {
            return Err(Error::Usage(format!(
                "the step takes {wanted} parameters, {} were given",
                params.len()
            )));
        }
        let ranks = RankInputs::new(cfg);
        let by_name: BTreeMap<String, Literal> = step
            .inputs
            .iter()
            .filter(|s| s.role == Role::Parameter)
            .map(|s| s.name.clone())
            .zip(params)
            .collect();
        let whole = start_state(&ranks, &step.inputs, &by_name, 0)?;
        let state = by_rank(shard_state(&ranks, &step.inputs, &whole));
        let mut trainer = Trainer {
            program,
            vocab_size: cfg.model.vocab_size,
            model: cfg.model.clone(),
            inputs: step.inputs.clone(),
            outputs: step.outputs.clone(),
            layout,
            state,
            ranks,
            rounding_seeded_per_rank: cfg.fault == Some(Fault::RoundingSeededPerRank),
        };
        trainer.seed_rounding(0);
        Ok(trainer)
    }

    /// Restarts the RNG of stochastic rounding from `seed` (it starts from
    /// seed 0): the same seed gives the same run, bit for bit.
    pub fn seed_rounding(&mut self, seed: u64) {
        for (k, &(i, _)) in self.layout.updates.iter().enumerate() {
            if self.inputs[i].role == Role::RngState {
                for (r, rank) in self.state.iter_mut().enumerate() {
                    let shift = if self.rounding_seeded_per_rank { r } else { 0 };
                    rank[k] = rng_state(seed + shift as u64);
                }
            }
        }
    }

    /// The state inputs with `role`, with their index in the state.
    fn state_with_role(&self, role: Role) -> impl Iterator<Item = (usize, &TensorSpec)> {
        self.layout
            .updates
            .iter()
            .map(|&(i, _)| &self.inputs[i])
            .enumerate()
            .filter(move |(_, s)| s.role == role)
    }

    /// One optimizer step on `batch`. Token ids must lie in the vocabulary,
    /// targets too unless they are the ignore index, and segment ids must
    /// be a packing; the first that is not is named (XLA would take it
    /// silently), see [`crate::batch_check`].
    pub fn step(&mut self, batch: &Batch) -> Result<StepStats, Error> {
        let packed = self.inputs.iter().any(|s| s.role == Role::SegmentIds);
        if batch.segment_ids.is_some() != packed {
            return Err(Error::Usage(
                if packed {
                    "the step was compiled for packed rows but the batch has no segment ids"
                } else {
                    "the step was compiled unpacked but the batch has segment ids"
                }
                .into(),
            ));
        }
        for spec in &self.inputs {
            if let Some(value) = batch.for_role(spec.role) {
                check_batch_input(spec, value, self.vocab_size)?;
            }
        }
        let inputs: Vec<Vec<Literal>> = self
            .state
            .iter()
            .enumerate()
            .map(|(rank, state)| {
                let mut state = state.iter();
                self.inputs
                    .iter()
                    .map(|s| match batch.for_role(s.role) {
                        Some(l) => self.ranks.take(s, l, rank as i64),
                        None => state.next().expect("one literal per state input").clone(),
                    })
                    .collect()
            })
            .collect();
        let outputs = match inputs.as_slice() {
            [one] => vec![self.program.run(one)?],
            _ => self.program.run_replicas(&inputs)?,
        };
        let mut stats = None;
        let mut state = Vec::with_capacity(outputs.len());
        for out in outputs {
            let mut out: Vec<Option<Literal>> = out.into_iter().map(Some).collect();
            let scalar = |role: Role| -> Result<f64, Error> {
                output_with_role(&self.outputs, role)
                    .and_then(|i| out.get(i))
                    .and_then(|l| l.as_ref())
                    .map(|l| l.to_f64_vec()[0])
                    .ok_or_else(|| Error::Usage(format!("the step has no {role:?} output")))
            };
            // Every rank computes the same statistics; rank 0's are reported.
            stats.get_or_insert(StepStats {
                loss: scalar(Role::Loss)?,
                grad_norm: scalar(Role::GradNorm)?,
                learning_rate: scalar(Role::LearningRate)?,
            });
            let rank_state = self
                .layout
                .updates
                .iter()
                .map(|&(_, o)| out.get_mut(o).and_then(Option::take))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    Error::Usage("the step returned fewer outputs than it declares".into())
                })?;
            state.push(rank_state);
        }
        self.state = state;
        stats.ok_or_else(|| Error::Usage("the step ran on no rank".into()))
    }

    /// The whole value of state input `k` (a sharded parameter or moment
    /// gathered from the ranks).
    fn whole_state(&self, k: usize) -> Literal {
        let spec = &self.inputs[self.layout.updates[k].0];
        let locals: Vec<&Literal> = self.state.iter().map(|rank| &rank[k]).collect();
        self.ranks.gather(spec, &locals)
    }

    /// Each rank's value of every state input with `role`, by name, in
    /// rank order: what the sharded-equals-unsharded checks compare.
    pub fn rank_state(&self, role: Role) -> Vec<(String, Vec<Literal>)> {
        self.state_with_role(role)
            .map(|(k, s)| {
                let ranks = self.state.iter().map(|rank| rank[k].clone()).collect();
                (s.name.clone(), ranks)
            })
            .collect()
    }

    /// The whole value of every state input with `role` (Adam moments,
    /// say), by name: sharded ones gathered from the ranks.
    pub fn state(&self, role: Role) -> Vec<(String, Literal)> {
        self.state_with_role(role)
            .map(|(k, s)| (s.name.clone(), self.whole_state(k)))
            .collect()
    }

    /// The current parameters as stored, by name (fused tensors included).
    pub fn params(&self) -> Vec<(String, Literal)> {
        self.state(Role::Parameter)
    }

    /// The current parameters as Hugging Face tensors, in Hugging Face
    /// order: fused projections are split back into theirs.
    pub fn hugging_face_params(&self) -> Vec<(String, Literal)> {
        let stored: BTreeMap<String, Literal> = self.params().into_iter().collect();
        hlatc_models::layout::split(&self.model, &stored)
            .expect("the trainer holds every parameter of its model")
    }

    /// Everything the run carries from step to step, whole, by input name:
    /// the weights as stored (fused tensors fused), master weights, Adam
    /// moments, the step counter and the rounding RNG state, each gathered
    /// from its ranks (a ZeRO-1 shard joined to its tensor). It names no
    /// rank, so [`Trainer::resume`] reads it into any layout of the same
    /// model and precision.
    pub fn training_state(&self) -> Vec<(String, Literal)> {
        (0..self.layout.updates.len())
            .map(|k| {
                let spec = &self.inputs[self.layout.updates[k].0];
                (spec.name.clone(), self.whole_state(k))
            })
            .collect()
    }

    /// Continues from `tensors`, a [`Trainer::training_state`] from
    /// `source`: every state input must be there with its whole shape and
    /// type, and nothing else may be (a checkpoint of another model,
    /// precision or projection layout is refused naming the tensor).
    pub fn resume(
        &mut self,
        tensors: BTreeMap<String, Literal>,
        source: &str,
    ) -> Result<(), Error> {
        let whole = whole_state(&self.ranks, &self.inputs, tensors, source)?;
        self.state = by_rank(shard_state(&self.ranks, &self.inputs, &whole));
        Ok(())
    }

    /// Completed steps.
    pub fn steps_done(&self) -> i64 {
        self.state_with_role(Role::Step)
            .next()
            .map_or(0, |(k, _)| self.state[0][k].to_i64_vec()[0])
    }
}

/// Parameters for `cfg` (in `param_specs` order, fused where `cfg` fuses)
/// from tensors by Hugging Face name (a safetensors checkpoint): every one
/// must be present with its exact shape, and is converted to `ty`. Also
/// returns the names of the tensors the model did not use.
pub fn params_from_tensors(
    cfg: &hlatc_models::ModelConfig,
    ty: ElementType,
    tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<(Vec<Literal>, Vec<String>), Error> {
    let mut tensors = tensors;
    let hf = hlatc_models::layout::hugging_face_config(cfg);
    for p in hlatc_models::param_specs(&hf) {
        if let Some(t) = tensors.get(&p.name).filter(|t| !t.ty().is_float()) {
            return Err(Error::Usage(format!(
                "{source}: tensor '{}' is {}, not a float",
                p.name,
                t.ty()
            )));
        }
    }
    let stored = hlatc_models::layout::join(cfg, &mut tensors)
        .map_err(|e| Error::Usage(format!("{source}: {e}")))?;
    let out = stored
        .into_iter()
        .map(|(_, t)| t.converted(ty).expect("floats convert to floats"))
        .collect();
    Ok((out, tensors.into_keys().collect()))
}

/// Each rank's state values, their names dropped (the trainer keeps them
/// in input order).
fn by_rank(named: Vec<Vec<(String, Literal)>>) -> Vec<Vec<Literal>> {
    named
        .into_iter()
        .map(|rank| rank.into_iter().map(|(_, l)| l).collect())
        .collect()
}
