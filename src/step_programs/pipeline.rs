//! A pipeline-parallel step's four programs as a host drives them rank by
//! rank: each rank's start and share of the whole state (only its stage is
//! divided), the whole state gathered back, and each tick's batch inputs
//! by the train crate's tick plan. The division itself is the train crate's
//! (`hlatc_train::pipeline`).

use super::{check_rank, Result};
use crate::batch_check::check_batch_input;
use crate::compile_step::CompiledStep;
use crate::data::Batch;
use crate::models::init::init_params;
use crate::models::param_specs;
use crate::pipeline::{Phase, PipelineSteps, StageStates, TickPlan};
use crate::train_step::{Role, StepConfig};
use crate::Literal;
use std::collections::BTreeMap;

/// A pipeline-parallel step's programs ([`Pipeline::of`]): what its
/// state and batches are made from. Every rank runs every program; rank
/// `r` is rank `r % (tp * dp)` of stage `r / (tp * dp)`, whose programs
/// name its layers as the stage model's (`model.layers.0.` and on). The
/// state outside names them as the whole model's, so it is the
/// single-device step's.
#[derive(Clone, Copy)]
pub struct Pipeline<'a> {
    compiled: &'a CompiledStep,
    programs: &'a PipelineSteps,
}

impl<'a> Pipeline<'a> {
    /// The pipeline of a pipeline-parallel step; `None` for another.
    pub fn of(compiled: &'a CompiledStep) -> Option<Pipeline<'a>> {
        Some(Pipeline::over(compiled, compiled.programs.pipeline()?))
    }

    /// The pipeline of `programs`, `compiled`'s.
    pub(super) fn over(compiled: &'a CompiledStep, programs: &'a PipelineSteps) -> Pipeline<'a> {
        Pipeline { compiled, programs }
    }

    /// How its ticks run the micro-batches.
    pub fn schedule(&self) -> crate::pipeline::Schedule {
        self.programs.schedule
    }

    /// What every stage's programs are built from.
    fn stage_config(&self) -> &'a StepConfig {
        &self.programs.stage_config
    }

    /// The whole step's config: the whole model, the optimizer step's
    /// batch.
    fn whole(&self) -> &'a StepConfig {
        &self.compiled.cfg
    }

    /// How the whole state divides over the stages' ranks.
    pub(super) fn states(&self) -> StageStates {
        StageStates::new(
            self.whole(),
            self.stage_config(),
            &self.programs.apply.inputs,
        )
    }

    /// Rank `rank`'s stage, and its rank within the stage.
    fn place(&self, rank: usize) -> Result<(usize, usize)> {
        check_rank(self.whole(), rank)?;
        let per_stage = self.stage_config().parallel.stage_world() as usize;
        Ok((rank / per_stage, rank % per_stage))
    }

    /// Rank `rank`'s state at the start, by its programs' input names: its
    /// stage's layers and the shared parameters of the whole model's
    /// initialization drawn from `seed` (what a single-device step starts
    /// from), fresh moments, accumulators and step counter, the rounding
    /// RNG seeded. Only this rank's stage is divided.
    pub fn start_state(&self, seed: u64, rank: usize) -> Result<Vec<(String, Literal)>> {
        let (stage, local) = self.place(rank)?;
        let whole = self.whole();
        let params: BTreeMap<String, Literal> =
            init_params(&whole.model, whole.precision.storage(), seed)
                .into_iter()
                .collect();
        let states = self.states();
        let start = states.stage_start(&params, stage, seed)?;
        Ok(states.share(&start, local))
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
        let states = self.states();
        states.refuse_strangers(&state, "state")?;
        let whole = states.stage_whole(&state, stage, "state")?;
        Ok(states.share(&whole, local))
    }

    /// The parameters of a whole state as Hugging Face tensors, checked
    /// first as a resume checks it (every stage's state there, at its
    /// whole shape, and nothing else).
    pub fn hugging_face_params(
        &self,
        state: BTreeMap<String, Literal>,
    ) -> Result<Vec<(String, Literal)>> {
        let states = self.states();
        states.refuse_strangers(&state, "state")?;
        for stage in 0..states.names().count() {
            states.stage_whole(&state, stage, "state")?;
        }
        let model = &self.whole().model;
        let stored: BTreeMap<String, Literal> = param_specs(model)
            .into_iter()
            .filter_map(|p| state.get(&p.name).map(|t| (p.name, t.clone())))
            .collect();
        crate::models::layout::split(model, &stored).map_err(crate::Error::from)
    }

    /// How a host drives the tick programs: each tick's program and
    /// batch, and where each input comes from and each output goes.
    pub fn tick_plan(&self) -> Result<TickPlan> {
        TickPlan::new(&self.programs.view()).map_err(|e| crate::Error::Train(e.into()))
    }

    /// Rank `rank`'s batch inputs of every tick of one optimizer step on
    /// the global `batch`, in tick order, each by input name, as the
    /// [`TickPlan`] gives them (the bundle's manifest states its rules).
    /// The batch is checked first, as a trainer checks it.
    pub fn tick_batches(&self, batch: &Batch, rank: usize) -> Result<Vec<Vec<(String, Literal)>>> {
        self.place(rank)?;
        self.check_batch(batch)?;
        let plan = self.tick_plan()?;
        let rank_inputs = |tick| -> Vec<(String, Literal)> {
            let inputs = plan.rank_inputs(&tick, rank as i64);
            inputs
                .into_iter()
                .map(|(s, l)| (s.name.clone(), l))
                .collect()
        };
        Ok(plan.batches(batch).map(rank_inputs).collect())
    }

    /// Refuses a global batch the step cannot take: another shape than the
    /// optimizer step's, ids outside the vocabulary, segment ids (the
    /// pipeline takes no packed rows).
    fn check_batch(&self, batch: &Batch) -> Result<()> {
        if batch.segment_ids.is_some() {
            return Err(crate::Error::unsupported(
                "a pipeline-parallel step takes no segment ids (packed rows are not pipelined)",
            ));
        }
        let cfg = self.whole();
        let want = [cfg.batch.batch_size, cfg.batch.seq_len];
        let steady = &self.programs.tick(Phase::Steady).inputs;
        for (value, role) in [
            (&batch.tokens, Role::Tokens),
            (&batch.targets, Role::Targets),
        ] {
            let spec = steady.iter().find(|s| s.role == role);
            let spec = spec.expect("a tick program takes tokens and targets");
            if value.dims() != want {
                return Err(crate::Error::invalid(format!(
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
