//! Running a pipeline-parallel step (`hlatc_step::pipeline` builds its
//! tick programs): how a host drives them tick by tick ([`TickPlan`], the
//! one plan the XLA CPU trainer, `Step.tick_batches` and the JAX engine
//! follow), each stage's state over its ranks ([`StageStates`]), and the
//! run on XLA CPU itself.

mod run;
mod stage_state;
mod tick_plan;

pub(crate) use run::PipelineRun;
pub use stage_state::{RankStates, StageStates};
pub use tick_plan::{TickBatch, TickInput, TickOutput, TickPlan, TickRouting};
