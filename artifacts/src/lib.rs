//! What the training step leaves on disk and reads back: its bundle, the
//! checkpoints a run saves and resumes from, the state files of each rank,
//! and the identity that ties a checkpoint to its run. `hlatc_step` builds
//! the step; `hlatc_train` runs it.
//!
//! - [`bundle`]: the module, its manifest and the Neuron compile flags on
//!   disk, written whole or not at all, and opened again;
//! - [`checkpoint`]: the checkpoints a run saves as it goes and resumes
//!   from; [`checkpoint_lock`]: one run per checkpoint directory;
//! - [`run_identity`]: what defines a run, recorded in its checkpoints and
//!   checked on resume; [`state_metadata`]: whose rank, layout, step and
//!   run a state file holds;
//! - [`initial_inputs`]: every input's start value, from its role;
//!   [`state_shards`] and [`rank_checkpoint`]: a state divided over the
//!   ranks and put back together; [`state_error`]: a state that does not
//!   fit the step;
//! - [`Error`]: what any of it can fail with.

pub mod bundle;
pub mod checkpoint;
pub mod checkpoint_lock;
mod error;
pub mod initial_inputs;
pub mod rank_checkpoint;
pub mod run_identity;
pub mod state_error;
pub mod state_metadata;
pub mod state_shards;

pub use error::Error;
