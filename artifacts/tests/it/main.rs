//! Integration tests of what the step leaves on disk and reads back:
//! checkpoints as each rank writes them, a rank's state read from a
//! checkpoint, a run's identity as a resume compares it. One binary, one
//! module per topic; the tests that resume runs on XLA CPU are the root
//! crate's.

// The tiny models and step settings, the step crate's tests' own (these
// tests take two of them).
#[path = "../../../step/tests/it/configs.rs"]
#[allow(dead_code)]
mod configs;
mod rank_checkpoint;
mod run_identity;
#[path = "../../../step/tests/it/scratch.rs"]
mod scratch;
use scratch::scratch;
mod sharded_checkpoint;
