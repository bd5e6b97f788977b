//! Building the training step: what `hlatc compile` emits and every
//! later stage (its bundle, `hlatc_artifacts`; its run, `hlatc_train`)
//! reads by role.
//!
//! - [`optimizer`]: AdamW, global grad-norm clipping and the learning-rate
//!   schedule, built into the graph;
//! - [`precision`]: the precision presets (storage type, cast and rounding
//!   policy);
//! - [`train_step`]: forward, backward and update in one module, every
//!   input and output described by its role ([`train_step::StateLayout`]);
//! - [`grad_accum`] and [`pipeline`]: the step as micro steps and an apply
//!   step, or as a pipeline's tick programs ([`pipeline_form`]: how those
//!   are written);
//! - [`sharding`]: a sharded step's gradient all-reduce and global norm;
//!   [`spmd`]: the step as one SPMD program; [`rank_inputs`]: which part of
//!   each input a rank takes; [`zero1`]: the optimizer state divided over
//!   the DP replicas; [`memory_plan`]: what a rank needs in device memory;
//! - [`kernel_choice`]: which hand-written kernels the step calls;
//! - [`data`]: the step's batch and the synthetic language the checks run
//!   on; [`batch_check`]: token, target and segment ids checked against
//!   the step's inputs; [`expert_tokens`]: a mixture of experts' routing
//!   counts as a step reports them.

pub mod batch_check;
pub mod data;
pub mod expert_tokens;
mod fsdp_prefetch;
pub mod grad_accum;
pub mod kernel_choice;
mod memory_parts;
pub mod memory_plan;
pub mod optimizer;
pub mod pipeline;
pub mod pipeline_form;
pub mod precision;
pub mod rank_inputs;
pub mod sharding;
pub mod spmd;
pub mod train_step;
pub mod zero1;
