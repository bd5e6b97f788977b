//! The training step as a library: what `hlatc compile` and `hlatc train`
//! are built from, and what a training stack embeds.
//!
//! - [`optimizer`]: AdamW, global grad-norm clipping and the learning-rate
//!   schedule, built into the graph;
//! - [`precision`]: the precision presets (storage type, cast and rounding
//!   policy);
//! - [`train_step`]: forward, backward and update in one module, every
//!   input and output described by its role ([`train_step::StateLayout`]);
//! - [`sharding`]: a sharded step's gradient all-reduce and global norm;
//!   [`rank_inputs`]: which part of each input a rank takes; [`zero1`]:
//!   the optimizer state divided over the DP replicas; [`memory_plan`]:
//!   what a rank needs in device memory;
//! - [`bundle`]: the module, its manifest and the Neuron compile flags on
//!   disk, written whole or not at all; [`check`] re-reads and runs one;
//! - [`trainer`], [`data`], [`token_data`]: running the step on XLA CPU;
//!   [`loader`]: text or token ids, tokenized and packed as training runs;
//!   [`checkpoint`]: the checkpoints a run saves as it goes and resumes from;
//!   [`run_identity`]: what defines a run, recorded in them and checked on resume;
//!   [`checkpoint_lock`]: one run per checkpoint directory; [`state_metadata`]:
//!   whose rank, layout, step and run a state file holds;
//!   [`initial_inputs`]: every input's start value, from its role;
//!   [`batch_check`]: token, target and segment ids checked before a run;
//! - [`Error`]: what any of it can fail with.

pub mod batch_check;
pub mod bundle;
pub mod check;
pub mod checkpoint;
pub mod checkpoint_lock;
pub mod data;
pub mod device_state;
mod error;
pub mod expert_tokens;
pub mod grad_accum;
pub mod initial_inputs;
pub mod kernel_choice;
pub mod loader;
mod memory_parts;
pub mod memory_plan;
pub mod optimizer;
pub mod pipeline;
mod pipeline_form;
pub mod precision;
pub mod rank_checkpoint;
pub mod rank_inputs;
pub mod run_error;
pub mod run_identity;
mod run_stage;
pub mod sharding;
pub mod spmd;
pub mod state_error;
pub mod state_metadata;
pub mod state_shards;
pub mod token_data;
pub mod train_step;
pub mod trainer;
mod verify_failure;
pub mod zero1;

pub use error::Error;
