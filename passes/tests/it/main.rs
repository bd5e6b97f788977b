//! Integration tests of the passes crate: the rewriter, inlining,
//! pipelines, cast policy, passes over shardings and control dependencies,
//! the CPU and Neuron rewrites one by one, the Neuron pre-flight's tables,
//! and the filetests of the passes and the pre-flight. One binary.

mod bound_loops;
mod cast_policy;
mod conditional_to_select;
mod control_dependencies;
mod cpu_rewrites;
mod filetests;
mod inline;
mod layering;
mod narrow_64_bit;
mod narrow_f64;
mod neuron_check;
mod neuron_check_rules;
mod orient_dots;
mod pipeline;
mod rewriter;
mod sharding;
mod sort_to_topk;
