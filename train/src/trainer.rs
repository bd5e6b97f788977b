//! Runs the compiled training step on XLA CPU, carrying the parameters and
//! optimizer state from one step to the next.

use crate::device_state::{self, DeviceState, Slot};
use crate::pipeline::{PipelineRun, TickPlan};
use crate::run_error::RunError;
use crate::run_stage::{expert_tokens, micro_batch, run_stage, scalar, Stage};
use crate::Error;
use hlatc_artifacts::initial_inputs::rng_state;
use hlatc_artifacts::state_shards::{params_by_name, shard_state, start_state, whole_state};
use hlatc_compiler::Literal;
use hlatc_models::parallel::Fault;
use hlatc_runtime::Program;
use hlatc_step::data::Batch;
pub use hlatc_step::expert_tokens::ExpertTokens;
use hlatc_step::grad_accum::micro_config;
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{Role, StateLayout, StepConfig, TensorSpec, TrainStep};
use std::collections::BTreeMap;

/// What one step reported.
#[derive(Clone, Debug, PartialEq)]
pub struct StepStats {
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
    /// A mixture of experts' routing over the step (`None` for a dense
    /// model).
    pub experts: Option<ExpertTokens>,
}

pub struct Trainer {
    program: Program,
    vocab_size: i64,
    model: hlatc_models::ModelConfig,
    /// The whole optimizer step's batch, which [`Trainer::step`] takes.
    batch: hlatc_models::BatchShape,
    /// The step's signature, whose roles say where everything goes.
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    layout: StateLayout,
    /// Each rank's carried state on its device, one buffer per state
    /// input, in input order (one rank for a single-device step).
    state: DeviceState,
    /// What each rank takes of the batch, and how its parameters gather.
    ranks: RankInputs,
    /// [`Fault::RoundingSeededPerRank`]: each rank's rounding RNG seeded
    /// with its rank added (only the test that proves the drift check
    /// catches it sets this).
    rounding_seeded_per_rank: bool,
    /// What takes the batch: the program above, or the programs before
    /// it.
    feed: Feed,
}

/// What takes a step's batch.
enum Feed {
    /// The one program.
    Itself,
    /// Gradient accumulation's micro step, a micro-batch at a time; the
    /// trainer's program is the apply step.
    Micro(Box<MicroStep>),
    /// Pipeline parallelism's tick programs and their buffers; the
    /// trainer's program is the apply step, and the state each stage's.
    Ticks(Box<PipelineRun>),
}

/// The micro step of gradient accumulation ([`hlatc_step::grad_accum`]).
struct MicroStep {
    program: Program,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// How the micro step's ranks divide a micro-batch.
    ranks: RankInputs,
    micro_batches: i64,
    dp: i64,
}

impl Trainer {
    /// Gradient accumulation: the micro and apply steps (built for
    /// `cfg`, whose batch is the whole optimizer step's) already compiled
    /// (`programs`, in that order; for instance a bundle's own modules
    /// read back from disk), started from `params` as
    /// [`Trainer::with_program`] starts. Each [`Trainer::step`] then runs
    /// the micro step once per micro-batch and the apply step once.
    pub fn accumulating_programs(
        [micro_program, apply_program]: [Program; 2],
        cfg: &StepConfig,
        [micro, apply]: [&TrainStep; 2],
        micro_batches: i64,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        micro_program.ensure_fits()?;
        let mut trainer = Self::with_program(apply_program, cfg, apply, params)?;
        trainer.feed = Feed::Micro(Box::new(MicroStep {
            program: micro_program,
            inputs: micro.inputs.clone(),
            outputs: micro.outputs.clone(),
            ranks: RankInputs::new(&micro_config(cfg, micro_batches)?),
            micro_batches,
            dp: cfg.parallel.dp,
        }));
        Ok(trainer)
    }

    /// Pipeline parallelism (`cfg.parallel.pp` stages) for programs
    /// already compiled: the tick programs in
    /// [`hlatc_step::pipeline::Phase::ALL`] order, then the apply step (for
    /// instance a bundle's own modules read back from disk), started from
    /// `params` (the whole model's, in its `param_specs` order), each stage
    /// taking its layers. Each [`Trainer::step`] then runs the schedule's
    /// ticks and the apply step once.
    pub fn pipelined_programs(
        programs: Vec<Program>,
        cfg: &StepConfig,
        steps: hlatc_step::pipeline::PipelineView,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        let hlatc_step::pipeline::PipelineView {
            ticks,
            apply,
            stage_config,
            ..
        } = steps;
        let mut programs = programs;
        if programs.len() != ticks.len() + 1 {
            return Err(RunError::ProgramCount {
                want: ticks.len() + 1,
                got: programs.len(),
            }
            .into());
        }
        let program = programs.pop().expect("the apply step");
        program.ensure_fits()?;
        let states = crate::pipeline::StageStates::new(cfg, stage_config, &apply.inputs);
        let state = device_state::upload(&program, by_rank(states.start(params)?))?;
        let plan = TickPlan::new(&steps)?;
        let run = PipelineRun::new(cfg, programs, plan, states)?;
        let layout =
            StateLayout::of(&apply.inputs, &apply.outputs).ok_or(RunError::StateNotReturned {
                program: "apply step",
            })?;
        let mut trainer = Trainer {
            program,
            vocab_size: cfg.model.vocab_size,
            model: cfg.model.clone(),
            batch: cfg.batch,
            inputs: apply.inputs.clone(),
            outputs: apply.outputs.clone(),
            layout,
            state,
            ranks: RankInputs::new(stage_config),
            rounding_seeded_per_rank: cfg.fault == Some(Fault::RoundingSeededPerRank),
            feed: Feed::Ticks(Box::new(run)),
        };
        trainer.try_seed_rounding(0)?;
        Ok(trainer)
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
        let layout = StateLayout::of(&step.inputs, &step.outputs)
            .ok_or(RunError::StateNotReturned { program: "step" })?;
        let by_name = params_by_name(&step.inputs, params)?;
        let ranks = RankInputs::new(cfg);
        let whole = start_state(&ranks, &step.inputs, &by_name, 0)?;
        let state =
            device_state::upload(&program, by_rank(shard_state(&ranks, &step.inputs, &whole)))?;
        let mut trainer = Trainer {
            program,
            vocab_size: cfg.model.vocab_size,
            model: cfg.model.clone(),
            batch: cfg.batch,
            inputs: step.inputs.clone(),
            outputs: step.outputs.clone(),
            layout,
            state,
            ranks,
            rounding_seeded_per_rank: cfg.fault == Some(Fault::RoundingSeededPerRank),
            feed: Feed::Itself,
        };
        trainer.try_seed_rounding(0)?;
        Ok(trainer)
    }

    /// Restarts the RNG of stochastic rounding from `seed` (it starts from
    /// seed 0): the same seed gives the same run, bit for bit.
    ///
    /// # Panics
    ///
    /// When the plugin cannot copy the seed to a device;
    /// [`Trainer::try_seed_rounding`] says so instead.
    pub fn seed_rounding(&mut self, seed: u64) {
        self.try_seed_rounding(seed)
            .expect("the plugin copies a seed to its device")
    }

    /// [`Trainer::seed_rounding`], failing when the plugin cannot copy
    /// the seed to a device.
    pub fn try_seed_rounding(&mut self, seed: u64) -> Result<(), Error> {
        for (k, &(i, _)) in self.layout.updates.iter().enumerate() {
            if self.inputs[i].role == Role::RngState {
                for (r, rank) in self.state.iter_mut().enumerate() {
                    let shift = if self.rounding_seeded_per_rank { r } else { 0 };
                    let value = rng_state(seed + shift as u64);
                    rank[k] = Some(self.program.to_device(&value, r)?);
                }
            }
        }
        Ok(())
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
    /// silently), see [`hlatc_step::batch_check`].
    pub fn step(&mut self, batch: &Batch) -> Result<StepStats, Error> {
        hlatc_step::batch_check::check_batch_shape(batch, self.batch)?;
        let held = held(&self.inputs, &self.layout);
        let main = Stage {
            program: &self.program,
            inputs: &self.inputs,
            outputs: &self.outputs,
            ranks: &self.ranks,
        };
        // Under accumulation the micro step takes the batch, a micro-batch
        // at a time, and the apply step none; under pipeline parallelism
        // the tick programs take it.
        let (accumulated_loss, main_batch) = match &mut self.feed {
            Feed::Ticks(run) => {
                let ran = run.run_ticks(&mut self.state, &held, self.vocab_size, batch)?;
                (Some(ran), None)
            }
            Feed::Itself => (None, Some(batch)),
            Feed::Micro(micro) => {
                let count = batch.token_count();
                let stage = Stage {
                    program: &micro.program,
                    inputs: &micro.inputs,
                    outputs: &micro.outputs,
                    ranks: &micro.ranks,
                };
                let mut loss = 0.0;
                let mut experts: Option<ExpertTokens> = None;
                for j in 0..micro.micro_batches {
                    let part = micro_batch(batch, j, micro.micro_batches, micro.dp);
                    let (state, vocab) = (&mut self.state, self.vocab_size);
                    let given = [(Role::TokenCount, &count)];
                    let out = run_stage(&stage, state, &held, vocab, Some(&part), &given)?;
                    loss += scalar(stage.outputs, &out, Role::Loss)?;
                    ExpertTokens::add_to(&mut experts, expert_tokens(stage.outputs, &out));
                }
                (Some((loss, experts)), None)
            }
        };
        let out = run_stage(
            &main,
            &mut self.state,
            &held,
            self.vocab_size,
            main_batch,
            &[],
        )?;
        let (loss, experts) = match accumulated_loss {
            Some(accumulated) => accumulated,
            None => (
                scalar(main.outputs, &out, Role::Loss)?,
                expert_tokens(main.outputs, &out),
            ),
        };
        Ok(StepStats {
            loss,
            grad_norm: scalar(main.outputs, &out, Role::GradNorm)?,
            learning_rate: scalar(main.outputs, &out, Role::LearningRate)?,
            experts,
        })
    }

    /// The whole value of state input `k` (a sharded parameter or moment
    /// gathered from the ranks, copied from their devices), by its whole
    /// state's name: under pipeline parallelism one per stage (the whole
    /// model's layers each stage holds), or one from stage 0 for what
    /// every stage holds alike.
    fn whole_state(&self, k: usize) -> Result<Vec<(String, Literal)>, Error> {
        let spec = &self.inputs[self.layout.updates[k].0];
        let gather = |ranks: &[Vec<Slot>]| -> Result<Literal, Error> {
            let locals = ranks
                .iter()
                .map(|rank| device_state::read(&rank[k], &spec.name))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(self.ranks.gather(spec, &locals.iter().collect::<Vec<_>>()))
        };
        let Feed::Ticks(run) = &self.feed else {
            return Ok(vec![(spec.name.clone(), gather(&self.state)?)]);
        };
        let names = run.states.names();
        let per_stage = run.states.ranks_per_stage();
        let stages = match names.held_by_every_stage(spec) {
            true => 1,
            false => names.count(),
        };
        (0..stages)
            .map(|s| {
                let ranks = &self.state[s * per_stage..(s + 1) * per_stage];
                Ok((names.whole_name(spec, s), gather(ranks)?))
            })
            .collect()
    }

    /// Each rank's value of every state input with `role`, by name, in
    /// rank order: what the sharded-equals-unsharded checks compare.
    ///
    /// # Panics
    ///
    /// When the state is gone (given to a step that failed) or cannot be
    /// copied from the devices; [`Trainer::try_rank_state`] says so instead.
    pub fn rank_state(&self, role: Role) -> Vec<(String, Vec<Literal>)> {
        self.try_rank_state(role).expect(READABLE)
    }

    /// [`Trainer::rank_state`], failing when the state is gone or cannot
    /// be copied from the devices.
    pub fn try_rank_state(&self, role: Role) -> Result<Vec<(String, Vec<Literal>)>, Error> {
        self.state_with_role(role)
            .map(|(k, s)| {
                let ranks = self
                    .state
                    .iter()
                    .map(|rank| device_state::read(&rank[k], &s.name))
                    .collect::<Result<_, _>>()?;
                Ok((s.name.clone(), ranks))
            })
            .collect()
    }

    /// The whole value of every state input with `role` (Adam moments,
    /// say), by name: sharded ones gathered from the ranks, in the whole
    /// model's parameter order (under pipeline parallelism too, where the
    /// stages hold the layers).
    ///
    /// # Panics
    ///
    /// As [`Trainer::rank_state`]; [`Trainer::try_state`] does not.
    pub fn state(&self, role: Role) -> Vec<(String, Literal)> {
        self.try_state(role).expect(READABLE)
    }

    /// [`Trainer::state`], failing when the state is gone or cannot be
    /// copied from the devices.
    pub fn try_state(&self, role: Role) -> Result<Vec<(String, Literal)>, Error> {
        let mut all = Vec::new();
        for (k, _) in self.state_with_role(role) {
            all.extend(self.whole_state(k)?);
        }
        if let Feed::Ticks(_) = self.feed {
            let order: std::collections::HashMap<String, usize> =
                hlatc_models::param_specs(&self.model)
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| (hlatc_step::train_step::state_name(role, &p.name), i))
                    .collect();
            all.sort_by_key(|(name, _)| order.get(name).copied().unwrap_or(usize::MAX));
        }
        Ok(all)
    }

    /// The current parameters as stored, by name (fused tensors included).
    ///
    /// # Panics
    ///
    /// As [`Trainer::rank_state`]; [`Trainer::try_state`] does not.
    pub fn params(&self) -> Vec<(String, Literal)> {
        self.state(Role::Parameter)
    }

    /// The current parameters as Hugging Face tensors, in Hugging Face
    /// order: fused projections are split back into theirs.
    ///
    /// # Panics
    ///
    /// As [`Trainer::rank_state`]; [`Trainer::try_hugging_face_params`]
    /// does not.
    pub fn hugging_face_params(&self) -> Vec<(String, Literal)> {
        self.try_hugging_face_params().expect(READABLE)
    }

    /// [`Trainer::hugging_face_params`], failing when the state is gone or
    /// cannot be copied from the devices.
    pub fn try_hugging_face_params(&self) -> Result<Vec<(String, Literal)>, Error> {
        let stored: BTreeMap<String, Literal> =
            self.try_state(Role::Parameter)?.into_iter().collect();
        Ok(hlatc_models::layout::split(&self.model, &stored)
            .expect("the trainer holds every parameter of its model"))
    }

    /// Everything the run carries from step to step, whole, by input name:
    /// the weights as stored (fused tensors fused), master weights, Adam
    /// moments, the step counter and the rounding RNG state, each gathered
    /// from its ranks (a ZeRO-1 shard joined to its tensor). It names no
    /// rank, so [`Trainer::resume`] reads it into any layout of the same
    /// model and precision.
    ///
    /// # Panics
    ///
    /// As [`Trainer::rank_state`]; [`Trainer::try_training_state`] does
    /// not.
    pub fn training_state(&self) -> Vec<(String, Literal)> {
        self.try_training_state().expect(READABLE)
    }

    /// [`Trainer::training_state`], failing when the state is gone or
    /// cannot be copied from the devices.
    pub fn try_training_state(&self) -> Result<Vec<(String, Literal)>, Error> {
        let mut all = Vec::new();
        for k in 0..self.layout.updates.len() {
            // Zero between optimizer steps: see `state_shards`.
            if self.inputs[self.layout.updates[k].0].role != Role::GradAccumulator {
                all.extend(self.whole_state(k)?);
            }
        }
        Ok(all)
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
        let host = match &self.feed {
            Feed::Ticks(run) => by_rank(run.states.shard(tensors, source)?),
            Feed::Itself | Feed::Micro(_) => {
                let whole = whole_state(&self.ranks, &self.inputs, tensors, source)?;
                by_rank(shard_state(&self.ranks, &self.inputs, &whole))
            }
        };
        // The old state goes first, so the devices never hold both; should
        // the new one not reach them, every slot says it is gone.
        let slots = host.first().map_or(0, Vec::len);
        let ranks = host.len();
        self.state.clear();
        match device_state::upload(&self.program, host) {
            Ok(state) => self.state = state,
            Err(e) => {
                self.state = (0..ranks)
                    .map(|_| (0..slots).map(|_| None).collect())
                    .collect();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Completed steps.
    ///
    /// # Panics
    ///
    /// As [`Trainer::rank_state`]; [`Trainer::try_steps_done`] does not.
    pub fn steps_done(&self) -> i64 {
        self.try_steps_done().expect(READABLE)
    }

    /// [`Trainer::steps_done`], failing when the step counter is gone or
    /// cannot be copied from the device.
    pub fn try_steps_done(&self) -> Result<i64, Error> {
        match self.state_with_role(Role::Step).next() {
            Some((k, s)) => Ok(device_state::read(&self.state[0][k], &s.name)?.to_i64_vec()[0]),
            None => Ok(0),
        }
    }
}

/// What the readers that cannot fail say when they do.
const READABLE: &str = "the trainer's state is readable (the try_ readers say why not)";

/// Each rank's state values, their names dropped (the trainer keeps them
/// in input order).
fn by_rank(named: Vec<Vec<(String, Literal)>>) -> Vec<Vec<Literal>> {
    named
        .into_iter()
        .map(|rank| rank.into_iter().map(|(_, l)| l).collect())
        .collect()
}

/// The name and role of each state input of the signature `inputs`, in the
/// trainer's state order (`layout`).
fn held<'a>(inputs: &'a [TensorSpec], layout: &StateLayout) -> Vec<(&'a str, Role)> {
    layout
        .updates
        .iter()
        .map(|&(i, _)| (inputs[i].name.as_str(), inputs[i].role))
        .collect()
}
