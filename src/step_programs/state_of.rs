//! A step's training state divided over its ranks and joined back, one
//! way for every shape: [`StateOf`] is the state of one program's
//! signature on every rank (a step of one program, or one program of
//! several on its own), or of a pipeline's stages, each stage's share of
//! the whole model's state. `hlatc shard` and `unshard` and the Python
//! package's state methods are each one call on it.

use super::{check_rank, start_values, OneProgram, Pipeline, Result};
use crate::compile_step::{CompiledStep, StepPrograms};
use crate::pipeline::RankStates;
use crate::rank_checkpoint::rank_state_from_file;
use crate::rank_inputs::RankInputs;
use crate::state_shards::{
    params_by_name, rank_share, shard_state, start_state, state_inputs, unshard_state, whole_state,
};
use crate::train_step::{Role, TensorSpec};
use crate::Literal;
use std::collections::BTreeMap;
use std::path::Path;

/// Whose state a state operation divides or joins.
pub enum StateOf<'a> {
    /// One program's signature, the same on every rank.
    Program(Box<OneProgram<'a>>),
    /// A pipeline's stages: the whole model's state, each stage holding
    /// its layers.
    Stages(Pipeline<'a>),
}

impl CompiledStep {
    /// The whole step's state; refused for gradient accumulation's pair,
    /// whose state is its two programs' together (each is a
    /// [`StateOf::Program`] of its own).
    pub fn state_of(&self) -> Result<StateOf<'_>> {
        match &self.programs {
            StepPrograms::One(_) => {
                let step = self.program(crate::bundle::ProgramName::Step)?;
                Ok(StateOf::Program(Box::new(step)))
            }
            StepPrograms::Accumulated(a) => Err(crate::Error::unsupported(format!(
                "the state of gradient accumulation's two programs together ({}): each \
                 program's is its own",
                hlatc_models::option_name::OptionName::GradAccum.set(a.micro_batches)
            ))),
            StepPrograms::Pipelined(programs) => {
                Ok(StateOf::Stages(Pipeline::over(self, programs)))
            }
        }
    }
}

impl StateOf<'_> {
    /// How many ranks hold the state, and how they divide it, for
    /// messages and rank files' metadata.
    pub fn world(&self) -> (usize, String) {
        match self {
            StateOf::Program(c) => {
                let p = c.cfg.parallel;
                (p.world() as usize, p.to_string())
            }
            StateOf::Stages(p) => {
                let s = p.states();
                let stages = s.names().count();
                let layout = format!("{stages} stages of {}", s.stage_parallelism());
                (s.ranks_per_stage() * stages, layout)
            }
        }
    }

    /// The state's signature: the program's inputs, or a pipeline's apply
    /// step's.
    pub fn inputs(&self) -> Vec<TensorSpec> {
        match self {
            StateOf::Program(c) => c.step.inputs.clone(),
            StateOf::Stages(p) => p.states().inputs().to_vec(),
        }
    }

    /// Rank `rank`'s state at the start, by input name: the model's
    /// initialization drawn from `seed` (what a single-device step starts
    /// from), fresh moments, accumulators and step counter, the rounding
    /// RNG seeded.
    pub fn start_state(&self, seed: u64, rank: usize) -> Result<Vec<(String, Literal)>> {
        match self {
            StateOf::Program(c) => start_values(c, seed, rank, true),
            StateOf::Stages(p) => p.start_state(seed, rank),
        }
    }

    /// Rank `rank`'s state at the start from the Hugging Face safetensors
    /// checkpoint at `path`: only the slices the rank holds are read.
    pub fn start_from_checkpoint(
        &self,
        path: &Path,
        seed: u64,
        rank: usize,
    ) -> Result<Vec<(String, Literal)>> {
        match self {
            StateOf::Program(c) => {
                check_rank(&c.cfg, rank)?;
                let start = rank_state_from_file(&c.cfg, &c.step.inputs, path, rank as i64, seed)?;
                Ok(start.state)
            }
            StateOf::Stages(_) => Err(crate::Error::unsupported(
                "a pipeline-parallel step's start from a Hugging Face checkpoint: reading each stage's slices of it is not supported yet; start from the model's initialization, or join a whole state from the checkpoint and resume from it",
            )),
        }
    }

    /// Every rank's start from the whole model's `params` (in its
    /// `param_specs` order): what `hlatc shard` writes from Hugging Face
    /// weights. Moments and the step counter are zero.
    pub fn start_every_rank(&self, params: Vec<Literal>) -> Result<RankStates> {
        match self {
            StateOf::Program(c) => {
                let (ranks, inputs) = (RankInputs::new(&c.cfg), &c.step.inputs);
                let by_name = params_by_name(inputs, params)?;
                let whole = start_state(&ranks, inputs, &by_name, 0)?;
                Ok(shard_state(&ranks, inputs, &whole))
            }
            StateOf::Stages(p) => Ok(p.states().start(params)?),
        }
    }

    /// Rank `rank`'s share of the whole state `state` (what
    /// `Trainer.state()` gives, or `hlatc unshard` writes), by input name,
    /// each tensor checked against the step.
    pub fn shard_state(
        &self,
        state: BTreeMap<String, Literal>,
        rank: usize,
    ) -> Result<Vec<(String, Literal)>> {
        match self {
            StateOf::Program(c) => {
                check_rank(&c.cfg, rank)?;
                let ranks = RankInputs::new(&c.cfg);
                let whole = whole_state(&ranks, &c.step.inputs, state, "state")?;
                Ok(rank_share(&ranks, &c.step.inputs, &whole, rank as i64))
            }
            StateOf::Stages(p) => p.shard_state(state, rank),
        }
    }

    /// Every rank's share of the whole state in `tensors` (read from
    /// `source`): what `hlatc shard` writes.
    pub fn shard_every_rank(
        &self,
        tensors: BTreeMap<String, Literal>,
        source: &str,
    ) -> Result<RankStates> {
        match self {
            StateOf::Program(c) => {
                let (ranks, inputs) = (RankInputs::new(&c.cfg), &c.step.inputs);
                let whole = whole_state(&ranks, inputs, tensors, source)?;
                Ok(shard_state(&ranks, inputs, &whole))
            }
            StateOf::Stages(p) => Ok(p.states().shard(tensors, source)?),
        }
    }

    /// The whole state from every rank's (in rank order, rank `r`'s read
    /// from `source(r)`), each checked against its program's signature;
    /// a pipeline's gradient accumulators, zero between optimizer steps,
    /// left out.
    pub fn gather_state(
        &self,
        per_rank: Vec<BTreeMap<String, Literal>>,
        source: impl Fn(usize) -> String,
    ) -> Result<Vec<(String, Literal)>> {
        Ok(match self {
            StateOf::Program(c) => {
                unshard_state(&RankInputs::new(&c.cfg), &c.step.inputs, per_rank, source)?
            }
            StateOf::Stages(p) => p.states().unshard(per_rank, source)?,
        })
    }

    /// The parameters of a whole state as Hugging Face tensors (fused
    /// ones split back), the state checked first as a resume checks it.
    pub fn hugging_face_params(
        &self,
        state: BTreeMap<String, Literal>,
    ) -> Result<Vec<(String, Literal)>> {
        match self {
            StateOf::Program(c) => {
                let ranks = RankInputs::new(&c.cfg);
                let whole = whole_state(&ranks, &c.step.inputs, state, "state")?;
                let stored: BTreeMap<String, Literal> = state_inputs(&c.step.inputs)
                    .into_iter()
                    .zip(whole)
                    .filter(|(s, _)| s.role == Role::Parameter)
                    .map(|(s, w)| (s.name.clone(), w))
                    .collect();
                crate::models::layout::split(&c.cfg.model, &stored).map_err(crate::Error::from)
            }
            StateOf::Stages(p) => p.hugging_face_params(state),
        }
    }
}
