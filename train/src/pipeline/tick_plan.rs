//! How a host drives a pipeline-parallel step's tick programs: which
//! program each tick runs, what each of its inputs is, and where each of
//! its outputs goes. The XLA CPU trainer, `Step.tick_batches` and the JAX
//! engine all follow this one plan, so a rule changed here changes them
//! together. Everything is found by role, so a program written otherwise
//! (more buffers, other names) is driven without a change here.

use crate::run_error::RunError;
use crate::run_stage::micro_rows;
use hlatc_compiler::Literal;
use hlatc_step::data::Batch;
use hlatc_step::pipeline::{tick_config, PipelineView};
use hlatc_step::pipeline::{Phase, Schedule};
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{Role, TensorSpec};

/// Where a tick program's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickInput {
    /// The rank's state: its stage's parameters and accumulators.
    State,
    /// The stage buffers ([`Role::StageBuffer`]): only the ticks read
    /// them, so they live beside the state for one optimizer step.
    Buffer,
    /// The tick's batch ([`TickBatch`]).
    Batch,
    /// The rank's own number ([`Role::Rank`]), whoever runs it.
    Rank,
}

impl TickInput {
    pub fn of(role: Role) -> TickInput {
        match role {
            Role::StageBuffer => TickInput::Buffer,
            Role::Tick | Role::TokenCount | Role::Tokens | Role::BackwardTokens | Role::Targets => {
                TickInput::Batch
            }
            Role::Rank => TickInput::Rank,
            _ => TickInput::State,
        }
    }
}

/// Where a tick program's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickOutput {
    /// Back into the rank's state (the accumulators the tick adds to).
    State,
    /// Back into the stage buffers, for the next tick.
    Buffer,
    /// Summed over the ticks: the step's loss.
    Loss,
    /// Summed over the ticks: a mixture of experts' routing counts
    /// (every rank holds the whole model's for its tick).
    Routing,
}

impl TickOutput {
    /// `None`: nothing reads it.
    pub fn of(role: Role) -> Option<TickOutput> {
        match role {
            Role::StageBuffer => Some(TickOutput::Buffer),
            Role::Loss => Some(TickOutput::Loss),
            Role::ExpertTokens | Role::DroppedTokens => Some(TickOutput::Routing),
            r if r.is_state() => Some(TickOutput::State),
            _ => None,
        }
    }
}

/// One phase's tick program, its signature routed by role.
pub struct TickRouting {
    pub phase: Phase,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// Which output is the loss: every phase has one.
    loss: usize,
}

impl TickRouting {
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    pub fn inputs_from(&self, from: TickInput) -> impl Iterator<Item = &TensorSpec> {
        self.inputs
            .iter()
            .filter(move |s| TickInput::of(s.role) == from)
    }

    pub fn outputs_to(&self, to: TickOutput) -> impl Iterator<Item = &TensorSpec> {
        self.outputs
            .iter()
            .filter(move |s| TickOutput::of(s.role) == Some(to))
    }

    /// The output summed into the step's loss.
    pub fn loss(&self) -> &TensorSpec {
        &self.outputs[self.loss]
    }
}

/// A tick's batch inputs, every DP replica's rows of each micro-batch, so
/// one run over every rank takes them, each rank its part.
pub struct TickBatch {
    pub tick: i64,
    pub phase: Phase,
    /// `tokens` and `targets`, which a run checks as it checks a batch.
    pub batch: Batch,
    /// `tick`, `token_count` and `backward_tokens`.
    pub given: Vec<(Role, Literal)>,
}

impl TickBatch {
    pub fn value(&self, role: Role) -> Option<&Literal> {
        let given = || self.given.iter().find(|(r, _)| *r == role).map(|(_, l)| l);
        self.batch.for_role(role).or_else(given)
    }

    /// [`TickBatch::given`], borrowed, as a run over the ranks takes it.
    pub fn given_refs(&self) -> Vec<(Role, &Literal)> {
        self.given.iter().map(|(r, l)| (*r, l)).collect()
    }
}

/// A pipeline-parallel step's ticks: the schedule's phases and feeds, each
/// phase's routing, and the buffers the ticks carry.
pub struct TickPlan {
    schedule: Schedule,
    /// In [`Phase::ALL`] order.
    routings: Vec<TickRouting>,
    /// Zero at a step's first tick: a slot without a micro-batch is
    /// weighed by zero, so what they hold then never counts.
    buffers: Vec<TensorSpec>,
    /// How the tick programs' ranks divide a tick's batch.
    ranks: RankInputs,
}

impl TickPlan {
    /// The plan of `view`'s tick programs. Refused where a phase has no
    /// loss or reads or writes a buffer the others do not carry.
    pub fn new(view: &PipelineView) -> Result<TickPlan, RunError> {
        let routings = Phase::ALL
            .iter()
            .zip(view.ticks)
            .map(|(&phase, step)| {
                let is_loss = |s: &TensorSpec| TickOutput::of(s.role) == Some(TickOutput::Loss);
                Ok(TickRouting {
                    phase,
                    inputs: step.inputs.clone(),
                    outputs: step.outputs.clone(),
                    loss: step
                        .outputs
                        .iter()
                        .position(is_loss)
                        .ok_or(RunError::NoOutput { role: Role::Loss })?,
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        let buffers: Vec<TensorSpec> = routings[0]
            .inputs_from(TickInput::Buffer)
            .cloned()
            .collect();
        let carried = |s: &TensorSpec| buffers.iter().any(|b| b.name == s.name);
        for r in &routings {
            if let Some(s) = r.inputs_from(TickInput::Buffer).find(|s| !carried(s)) {
                return Err(RunError::NoStateFor {
                    input: s.name.clone(),
                });
            }
            if let Some(s) = r.outputs_to(TickOutput::Buffer).find(|s| !carried(s)) {
                return Err(RunError::UnknownOutput {
                    output: s.name.clone(),
                });
            }
        }
        let micro = tick_config(view.stage_config, view.schedule.micro_batches);
        Ok(TickPlan {
            schedule: view.schedule,
            routings,
            buffers,
            ranks: RankInputs::new(&micro),
        })
    }

    pub fn ticks(&self) -> i64 {
        self.schedule.ticks()
    }

    pub fn phase(&self, tick: i64) -> Phase {
        self.schedule.phase(tick)
    }

    pub fn routing(&self, phase: Phase) -> &TickRouting {
        self.routings
            .iter()
            .find(|r| r.phase == phase)
            .expect("a routing of every phase")
    }

    pub fn buffers(&self) -> &[TensorSpec] {
        &self.buffers
    }

    pub fn ranks(&self) -> &RankInputs {
        &self.ranks
    }

    /// Every tick's batch of one optimizer step on the global `batch`:
    /// `tick`; `token_count`, the whole step's; `tokens`,
    /// `backward_tokens` and `targets`, the micro-batch the schedule's
    /// feed names, zeros where none.
    pub fn batches<'a>(&'a self, batch: &'a Batch) -> impl Iterator<Item = TickBatch> + 'a {
        let count = batch.token_count();
        let (k, dp) = (self.schedule.micro_batches, self.ranks.parallelism().dp);
        (0..self.ticks()).map(move |tick| {
            let feed = self.schedule.feed(tick);
            let tick_value = Literal::from_s32(vec![], &[tick as i32]).expect("one s32");
            TickBatch {
                tick,
                phase: self.phase(tick),
                batch: Batch {
                    tokens: micro_rows(&batch.tokens, feed.tokens, k, dp),
                    targets: micro_rows(&batch.targets, feed.targets, k, dp),
                    segment_ids: None,
                },
                given: vec![
                    (Role::TokenCount, count.clone()),
                    (Role::Tick, tick_value),
                    (
                        Role::BackwardTokens,
                        micro_rows(&batch.tokens, feed.backward_tokens, k, dp),
                    ),
                ],
            }
        })
    }

    /// Rank `rank`'s batch inputs of `tick`: its DP replica's rows.
    pub fn rank_inputs(&self, tick: &TickBatch, rank: i64) -> Vec<(&TensorSpec, Literal)> {
        self.routing(tick.phase)
            .inputs_from(TickInput::Batch)
            .filter_map(|s| Some((s, self.ranks.take(s, tick.value(s.role)?, rank))))
            .collect()
    }
}
