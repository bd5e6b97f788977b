//! Integration tests of the step as built, before anything runs it: what
//! a step refuses and what its programs hold. One binary, one module per
//! topic; the tests that run steps on XLA CPU are the train crate's (and,
//! through the CLI, the root crate's).

mod configs;
mod duplicate_values;
mod kernels;
mod orient_dots;
mod pipeline_build;
