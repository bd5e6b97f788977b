//! Pipeline parallelism: the decoder layers divided into stages
//! (`hlatc_models::parallel::stages`), each on its own `tp * dp` ranks,
//! and an optimizer step run as a schedule of ticks over micro-batches.
//!
//! A step is four programs, each the size of one micro-batch on one stage
//! whatever the number of micro-batches, since neuronx-cc unrolls loops
//! (see [`crate::grad_accum`]): the warm-up, steady and cool-down tick
//! programs ([`schedule`]) run `M + 2P - 1` times between them, adding
//! each stage's gradients into its accumulators, and the apply step of
//! gradient accumulation runs once, summing each gradient over the ranks
//! that hold its parameter (the embedding, final norm and LM head over
//! every stage too), clipping by the global norm (each stage's layers
//! counted once, the shared parameters once) and updating with AdamW.
//!
//! How the tick programs are written is a [`PipelineForm`]: what the
//! forward slot keeps for the backward slot ([`kept`], by the remat
//! policy) and how stages send to each other ([`send`]). How a host
//! drives them, tick by tick, is `hlatc_train::pipeline`'s.

mod kept;
mod names;
mod ring;
mod schedule;
mod send;
mod steps;
mod tick;

pub use crate::pipeline_form::{FormError, PipelineForm, StageSend};

pub use names::StageNames;
pub use schedule::{Phase, Schedule, TickFeed};
pub use steps::{build_pipeline_steps, tick_config, PipelineSteps, PipelineView};
pub use tick::{ACTIVATION, GRADIENT, KEPT, STASH};
