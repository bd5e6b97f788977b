//! A pipeline-parallel step's four programs as a host drives them rank by
//! rank: each rank's start and share of the whole state (only its stage is
//! divided), the whole state gathered back, and each tick's batch inputs
//! by the schedule's rules. The division itself is the train crate's
//! (`hlatc_train::pipeline`).

use super::{check_rank, usage, PipelineShape, Result};
use crate::batch_check::check_batch_input;
use crate::compile_step::CompiledStep;
use crate::data::Batch;
use crate::models::init::init_params;
use crate::models::param_specs;
use crate::pipeline::{Phase, PipelineView, StageStates};
use crate::train_step::{Role, StepConfig, TrainStep};
use crate::Literal;
use std::collections::BTreeMap;

/// A pipeline-parallel step's programs, borrowed
/// ([`super::StepPrograms::Pipelined`]): what its bundle, trainer, state
/// and batches are made from. Every rank runs every program; rank `r` is
/// rank `r % (tp * dp)` of stage `r / (tp * dp)`, whose programs name its
/// layers as the stage model's (`model.layers.0.` and on). The state
/// outside names them as the whole model's, so it is the single-device
/// step's.
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
            form: self.shape.form,
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

    /// Rank `rank`'s stage, and its rank within the stage.
    fn place(&self, rank: usize) -> Result<(usize, usize)> {
        check_rank(self.apply, rank)?;
        let per_stage = self.apply.cfg.parallel.stage_world() as usize;
        Ok((rank / per_stage, rank % per_stage))
    }

    /// Rank `rank`'s state at the start, by its programs' input names: its
    /// stage's layers and the shared parameters of the whole model's
    /// initialization drawn from `seed` (what a single-device step starts
    /// from), fresh moments, accumulators and step counter, the rounding
    /// RNG seeded. Only this rank's stage is divided.
    pub fn start_state(&self, seed: u64, rank: usize) -> Result<Vec<(String, Literal)>> {
        let (stage, local) = self.place(rank)?;
        let whole = &self.shape.cfg;
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
        let states = self.states();
        states.refuse_strangers(&state, "state")?;
        for stage in 0..states.names().count() {
            states.stage_whole(&state, stage, "state")?;
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
    /// schedule's rules give them (`Schedule::feed`; the bundle's manifest
    /// states them): `tick`; `token_count`, the batch's targets that are
    /// not the ignore index; `tokens`, `backward_tokens` and `targets`, the
    /// rank's DP replica's rows of the micro-batch each holds, zeros where
    /// none. The batch is checked first, as a trainer checks it.
    pub fn tick_batches(&self, batch: &Batch, rank: usize) -> Result<Vec<Vec<(String, Literal)>>> {
        self.place(rank)?;
        self.check_batch(batch)?;
        let schedule = self.shape.schedule;
        let rows = MicroRows::of(&self.shape.cfg, schedule.micro_batches, rank);
        let count = batch.token_count();
        let tick_inputs = |t: i64| -> Vec<(String, Literal)> {
            let feed = schedule.feed(t);
            let inputs = &self.tick(schedule.phase(t)).step.inputs;
            let value = |role: Role| match role {
                Role::Tick => Some(Literal::from_s32(vec![], &[t as i32]).expect("one s32")),
                Role::TokenCount => Some(count.clone()),
                Role::Tokens => Some(rows.of_micro_batch(&batch.tokens, feed.tokens)),
                Role::BackwardTokens => {
                    Some(rows.of_micro_batch(&batch.tokens, feed.backward_tokens))
                }
                Role::Targets => Some(rows.of_micro_batch(&batch.targets, feed.targets)),
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
