//! The compiled artifact on disk: the HLO proto `neuronx-cc` compiles, its
//! text, the compile flags, and a manifest that tells a training stack what
//! every buffer is.

mod accumulation;
mod files;
pub mod holdings;
mod listed;
mod listing;
mod manifest;
mod neuron;
mod opened;
mod pipeline;
mod preflight;
mod programs;
pub(crate) mod refusal;
mod staging;
mod target;

pub use accumulation::{stage_accumulation_bundle, ACCUMULATION_FORMAT, APPLY_DIR, MICRO_DIR};
pub use files::{
    sha256_file_hex, sha256_hex, BUNDLE_FORMAT, FLAGS_FILE, MANIFEST_FILE, NEURON_SCRIPT,
    PROTO_FILE, TEXT_FILE,
};
pub use listed::{ListedBundle, ListedProgram, ListingFault};
pub use listing::{expand_json as expand_listing, ListingError};
pub use manifest::manifest_json;
pub use neuron::{NeuronCompile, RoundingSummary, NEURON_MODEL_FLAGS, NEURON_ROUNDING_SEED};
pub use opened::{
    for_cpu, lower_for_cpu, module_from_bytes, read_module, OpenedBundle, PROGRAM_FORMATS,
};
pub use pipeline::{stage_pipeline_bundle, PIPELINE_FORMAT};
pub use preflight::Preflight;
pub use programs::{ProgramName, UnknownProgram};
pub use staging::{check_destination, stage_bundle, write_bundle, BundleReport, StagedBundle};
pub use target::{BundleTarget, ChipWithoutNeuron};

/// Every manifest format hlatc reads: one program's, and the top
/// manifests of gradient accumulation's and a pipeline's programs.
pub const READ_FORMATS: [&str; 4] = [
    PROGRAM_FORMATS[0],
    PROGRAM_FORMATS[1],
    ACCUMULATION_FORMAT,
    PIPELINE_FORMAT,
];

/// Which compiler a bundle is for (the passes' target).
pub use hlatc_passes::Target;
