//! Llama / HLAT model definitions for hlatc: configurations (presets and
//! Hugging Face `config.json`), the forward graph, parameter specs and the
//! scaled initialization.

pub mod config;
pub mod hf_config;
pub mod init;
pub mod layout;
pub mod llama;
pub mod parallel;
pub mod presets;
pub mod rope;

pub use config::{BatchShape, ConfigError, ModelConfig, ModelType, RopeScaling, PRESETS};
pub use llama::{
    declare_params, forward, forward_on_rank, param_specs, ForwardInputs, ForwardOutputs, HfPart,
    Init, ParamSpec, FUSED_PROJECTIONS, IGNORE_INDEX,
};
pub use parallel::{ParallelError, Parallelism, Piece, TpSplit};
