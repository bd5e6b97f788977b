//! Integration tests of the model definitions, configs and families, and
//! of how parameters are split over ranks and pipeline stages. One binary.

mod config;
mod experts;
mod families;
mod imported_kernel;
mod kernels;
mod pipeline_stages;
mod rope;
// A fresh directory for a test, every crate's tests' own.
#[path = "../../../step/tests/it/scratch.rs"]
mod scratch;
use scratch::scratch;
mod tp_split;
mod weights;
