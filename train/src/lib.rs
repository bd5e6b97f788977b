//! Running the training step: the XLA CPU trainer and the data it trains
//! on. `hlatc_step` builds the step and `hlatc_artifacts` writes and reads
//! what it leaves on disk; this crate is what `hlatc train`, `--verify`
//! and Python's trainers run.
//!
//! - [`trainer`]: the step (one program, micro steps and an apply step,
//!   or a pipeline's ticks: [`pipeline`]) run on XLA CPU, its state kept
//!   on the device between steps;
//! - [`loader`]: text or token ids, tokenized and packed as training runs;
//!   [`token_data`]: token ids from a file, batch by batch;
//! - [`check`]: a written bundle read back and run (`compile --verify`);
//! - [`run_error`]: a run's programs, state and inputs that do not fit
//!   together;
//! - [`Error`]: what any of it can fail with.

pub mod check;
pub mod device_state;
mod error;
pub mod loader;
pub mod pipeline;
pub mod run_error;
mod run_stage;
pub mod token_data;
pub mod trainer;
pub mod verify_failure;

pub use error::Error;
