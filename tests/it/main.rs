//! Integration tests of the hlatc CLI and facade: compiling, training,
//! planning, the facade's filetests and the XLA cross-checks. One binary,
//! one module per topic; each library crate's behaviour is tested in its
//! own `tests/it`.

mod cli;
mod collectives_meet;
mod compile;
// The tiny models and step settings, the step crate's tests' own; the
// loader's small corpus, the trainers of hand-built steps and the runs
// compared, the train crate's tests' own.
#[path = "../../step/tests/it/configs.rs"]
#[allow(dead_code)]
mod configs;
#[path = "../../train/tests/it/corpus.rs"]
mod corpus;
#[path = "../../train/tests/it/cpu_trainers.rs"]
#[allow(dead_code)]
mod cpu_trainers;
mod docs;
mod error_codes;
mod filetests;
mod fit_loop;
mod inputs_checked;
mod kernels;
mod memory_plan;
mod metrics;
mod neuron_check_cli;
mod option_surfaces;
mod pipeline;
mod plan;
mod plan_counts;
mod reliability;
mod replica_groups;
mod resume;
mod run_identity;
#[path = "../../train/tests/it/runs.rs"]
mod runs;
#[path = "../../step/tests/it/scratch.rs"]
mod scratch;
mod sharded;
mod support;
mod training;
mod xla_crosscheck;
