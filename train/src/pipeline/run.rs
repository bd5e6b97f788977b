//! Runs a pipeline-parallel step on XLA CPU: the tick programs over the
//! [`TickPlan`], each stage's buffers carried from tick to tick, before
//! the trainer's apply step (see [`crate::trainer::Trainer::pipelined_programs`]).

use super::stage_state::StageStates;
use super::tick_plan::TickPlan;
use crate::device_state::{self, DeviceState, Slot};
use crate::run_stage::{expert_tokens, run_stage, scalar, Stage};
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_runtime::Program;
use hlatc_step::data::Batch;
use hlatc_step::expert_tokens::ExpertTokens;
use hlatc_step::pipeline::Phase;
use hlatc_step::train_step::{Role, StepConfig};

/// The tick programs of a pipeline-parallel trainer, and what they carry.
pub(crate) struct PipelineRun {
    /// Each phase's program, compiled.
    programs: Vec<(Phase, Program)>,
    plan: TickPlan,
    pub(crate) states: StageStates,
    /// Each rank's values of the plan's buffers, on its device from tick
    /// to tick.
    buffers: DeviceState,
}

impl PipelineRun {
    /// The run of `plan` with its tick programs `programs` (each
    /// compiled, in [`Phase::ALL`] order) over the ranks of `cfg`, whose
    /// state `states` divides.
    pub(crate) fn new(
        cfg: &StepConfig,
        programs: Vec<Program>,
        plan: TickPlan,
        states: StageStates,
    ) -> Result<Self, Error> {
        for p in &programs {
            p.ensure_fits()?;
        }
        let world = cfg.parallel.world() as usize;
        let zeros: Vec<Literal> = plan
            .buffers()
            .iter()
            .map(|s| Literal::zeros(s.dtype, s.shape.clone()))
            .collect();
        let buffers = device_state::upload(&programs[0], vec![zeros; world])?;
        Ok(PipelineRun {
            programs: Phase::ALL.into_iter().zip(programs).collect(),
            plan,
            states,
            buffers,
        })
    }

    /// Every tick of the plan over `batch` (the optimizer step's), the
    /// ranks' state (`held` names it) and buffers carried: the step's
    /// loss, and a mixture of experts' routing over it.
    pub(crate) fn run_ticks(
        &mut self,
        state: &mut [Vec<Slot>],
        held: &[(&str, Role)],
        vocab_size: i64,
        batch: &Batch,
    ) -> Result<(f64, Option<ExpertTokens>), Error> {
        // The buffers ride behind the state for each tick, so one run
        // finds, donates and updates both by name.
        let mut held: Vec<(&str, Role)> = held.to_vec();
        let kept = held.len();
        held.extend(
            self.plan
                .buffers()
                .iter()
                .map(|s| (s.name.as_str(), s.role)),
        );
        let mut loss = 0.0;
        let mut experts = None;
        for tick in self.plan.batches(batch) {
            let routing = self.plan.routing(tick.phase);
            let program = self
                .programs
                .iter()
                .find(|(p, _)| *p == tick.phase)
                .map(|(_, program)| program)
                .expect("a program of every phase");
            for (rank, buffers) in state.iter_mut().zip(&mut self.buffers) {
                rank.append(buffers);
            }
            let stage = Stage {
                program,
                inputs: routing.inputs(),
                outputs: routing.outputs(),
                ranks: self.plan.ranks(),
            };
            let given = tick.given_refs();
            let out = run_stage(&stage, state, &held, vocab_size, Some(&tick.batch), &given);
            for (rank, buffers) in state.iter_mut().zip(&mut self.buffers) {
                *buffers = rank.split_off(kept);
            }
            let out = out?;
            loss += scalar(routing.outputs(), &out, Role::Loss)?;
            ExpertTokens::add_to(&mut experts, expert_tokens(routing.outputs(), &out));
        }
        Ok((loss, experts))
    }
}
