//! Integration tests of the passes crate: the rewriter, pipelines, cast
//! policy, passes over shardings and control dependencies, and the
//! filetests of the passes and the Neuron pre-flight. One binary.

mod cast_policy;
mod control_dependencies;
mod filetests;
mod pipeline;
mod rewriter;
mod sharding;
