//! Integration tests of the passes crate: the rewriter, pipelines, cast
//! policy and passes over shardings and control dependencies. One binary.

mod cast_policy;
mod control_dependencies;
mod pipeline;
mod rewriter;
mod sharding;
