//! Runs a pipeline-parallel step on XLA CPU: the tick programs over the
//! schedule, each stage's buffers carried from tick to tick, before the
//! trainer's apply step (see [`crate::trainer::Trainer::pipelined`]).

use super::schedule::{Phase, Schedule};
use super::stage_state::StageStates;
use super::steps::tick_config;
use crate::data::Batch;
use crate::device_state::{self, DeviceState, Slot};
use crate::rank_inputs::RankInputs;
use crate::run_stage::{micro_batch, run_stage, scalar, Stage};
use crate::train_step::{Role, StepConfig, TensorSpec};
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
use hlatc_runtime::Program;

/// A tick program, compiled, and its signature.
pub(crate) struct TickProgram {
    pub(crate) program: Program,
    pub(crate) inputs: Vec<TensorSpec>,
    pub(crate) outputs: Vec<TensorSpec>,
}

/// The tick programs of a pipeline-parallel trainer, and what they carry.
pub(crate) struct PipelineRun {
    /// By [`Phase::ALL`]: each program with its signature.
    ticks: Vec<TickProgram>,
    /// How the tick programs' ranks divide a micro-batch.
    ranks: RankInputs,
    schedule: Schedule,
    pub(crate) states: StageStates,
    /// The buffers' inputs (every input of the role
    /// [`Role::StageBuffer`], whatever their number), and each rank's
    /// values of them, on its device from tick to tick.
    buffer_specs: Vec<TensorSpec>,
    buffers: DeviceState,
    dp: i64,
}

impl PipelineRun {
    /// The run of the tick programs `ticks` (each compiled, in
    /// [`Phase::ALL`] order) of a step of `cfg` over `schedule`, each
    /// stage's programs built from `stage_config`, whose state `states`
    /// divides.
    pub(crate) fn new(
        cfg: &StepConfig,
        ticks: Vec<TickProgram>,
        schedule: Schedule,
        stage_config: &StepConfig,
        states: StageStates,
    ) -> Result<Self, Error> {
        for t in &ticks {
            t.program.ensure_fits()?;
        }
        let world = cfg.parallel.world() as usize;
        let buffer_specs: Vec<TensorSpec> = ticks[0]
            .inputs
            .iter()
            .filter(|s| s.role == Role::StageBuffer)
            .cloned()
            .collect();
        let zeros: Vec<Literal> = buffer_specs
            .iter()
            .map(|s| Literal::zeros(s.dtype, s.shape.clone()))
            .collect();
        let buffers = device_state::upload(&ticks[0].program, vec![zeros; world])?;
        let micro = tick_config(stage_config, schedule.micro_batches);
        Ok(PipelineRun {
            ticks,
            ranks: RankInputs::new(&micro),
            schedule,
            states,
            buffer_specs,
            buffers,
            dp: cfg.parallel.dp,
        })
    }

    /// Every tick of the schedule over `batch` (the optimizer step's),
    /// the ranks' state (`held` names it) and buffers carried: the step's
    /// loss.
    pub(crate) fn run_ticks(
        &mut self,
        state: &mut [Vec<Slot>],
        held: &[(&str, Role)],
        vocab_size: i64,
        batch: &Batch,
    ) -> Result<f64, Error> {
        let count = batch.token_count();
        let schedule = self.schedule;
        let (m, dp) = (schedule.micro_batches, self.dp);
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
            let step = &self.ticks[at];
            let feed = schedule.feed(tick);
            let tick_batch = Batch {
                tokens: micro(feed.tokens).tokens,
                targets: micro(feed.targets).targets,
                segment_ids: None,
            };
            let backward_tokens = micro(feed.backward_tokens).tokens;
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
                program: &step.program,
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
