//! Integration tests of the hlatc CLI and facade: compiling, training,
//! filetests, parity with JAX, Hugging Face and torch-xla references, the
//! XLA cross-checks and conformance. One binary, one module per topic.

mod cli;
mod collectives_meet;
mod compile;
mod conformance;
mod docs;
mod fault_recovery;
mod filetests;
mod fused_weights;
mod grad_accum;
mod hf_parity;
mod inputs_checked;
mod loader;
mod manifest_schema;
mod memory_plan;
mod metrics;
mod minifloat;
mod mixed_precision;
mod model_gradients;
mod module_markers;
mod narrow_on_xla;
mod neuron_check_cli;
mod neuron_check_rules;
mod neuron_rewrites_on_xla;
mod orient_dots;
mod passes_on_xla;
mod pipeline;
mod plan;
mod plan_counts;
mod plot;
mod rank_checkpoint;
mod reliability;
mod remat_memory;
mod replica_groups;
mod resume;
mod run_devices;
mod run_identity;
mod sharded;
mod sharded_checkpoint;
mod spmd_forms;
mod support;
mod token_data;
mod training;
mod xla_crosscheck;
mod zero1;
