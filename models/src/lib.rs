//! Llama / HLAT model definitions for hlatc: configurations (presets and
//! Hugging Face `config.json`), the model families, the forward graph,
//! parameter specs and the scaled initialization.

pub mod config;
mod expert_slots;
mod experts;
pub mod family;
pub mod field_problem;
pub mod hf_config;
pub mod imported_kernel;
pub mod init;
pub mod kernel_layout;
pub mod kernels;
pub mod layout;
pub mod llama;
mod micro_batch;
pub mod moe;
pub mod option_name;
pub mod parallel;
pub mod params;
pub mod presets;
pub mod rope;
mod softmax;
mod swiglu;
mod token_ops;
pub mod weights;

pub use config::{BatchShape, ConfigError, ModelConfig, ModelType, RopeScaling, RopeScalingError};
pub use experts::{ExpertCounts, LayerRouting};
pub use family::Family;
pub use field_problem::FieldProblem;
pub use kernels::{AttentionKernel, KernelPoint, KernelRequest, Kernels, SoftmaxKernel};
pub use llama::{
    forward, forward_on_rank, ForwardInputs, ForwardOutputs, ForwardParts, PartsContext,
    IGNORE_INDEX,
};
pub use micro_batch::MicroBatch;
pub use parallel::{
    CpBalance, CpExchange, EpExchange, ParallelError, Parallelism, Piece, Reshard, TpSplit,
};
pub use params::{
    declare_params, param_specs, weight_specs, HfPart, Init, ParamRole, ParamSpec, Projection,
    FUSED_PROJECTIONS,
};
pub use presets::PRESETS;
pub use weights::{LayerWeights, Placement, Weights, WeightsError};
