//! What is wrong with one field of a model config or batch shape, before
//! [`crate::ConfigError::Field`] says which source and which field.

use serde_json::Value;

/// A broken rule about one field, with the values it was found on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldProblem {
    #[error("is missing")]
    Missing,
    #[error("must be an integer, got {0}")]
    NotInteger(Value),
    #[error("must be a number, got {0}")]
    NotNumber(Value),
    #[error("must be true or false, got {0}")]
    NotBool(Value),
    #[error("must be a string, got {0}")]
    NotString(Value),
    #[error("must be an object, got {0}")]
    NotObject(Value),
    #[error("must be positive, got {0}")]
    NotPositive(i64),
    #[error("must be a positive number, got {0}")]
    NotPositiveNumber(f64),
    #[error("must be greater than 1, got {0}")]
    NotAboveOne(f64),
    #[error("must be at least 2, got {0}")]
    BelowTwo(i64),
    #[error("must be 0 or more, got {0}")]
    Negative(f64),
    #[error("{per_token} is more than the {experts} experts a token can be routed to")]
    MoreExpertsPerTokenThanExperts { per_token: i64, experts: i64 },
    #[error("names layer {layer}; the model has layers 0 to {}", layers - 1)]
    NoSuchLayer { layer: i64, layers: i64 },
    #[error("{value} disagrees with {other} = {other_value}; they name the same count")]
    Disagrees {
        value: i64,
        other: &'static str,
        other_value: i64,
    },
    #[error("must be a list of layer numbers, got {0}")]
    NotLayerList(Value),
    /// A key whose only supported value is `expected`.
    #[error("{value} is not supported ({why}; hlatc implements {expected})")]
    OnlyValue {
        value: Value,
        why: &'static str,
        expected: Value,
    },
    #[error("is not a key hlatc knows; it may change the model, so the config is refused rather than half-read")]
    UnknownKey,
    /// A `model_type` outside `families` (every family hlatc builds, named).
    #[error("'{found}' is not supported (hlatc builds {families})")]
    ModelType { found: String, families: String },
    #[error("is missing; it says which architecture the config describes")]
    NoModelType,
    #[error("{found} is not {expected}, the causal LM of model_type '{model_type}'")]
    Architecture {
        found: Value,
        expected: &'static str,
        model_type: &'static str,
    },
    #[error("{kv_heads} does not divide num_attention_heads = {heads}")]
    KvHeadsDoNotDivide { kv_heads: i64, heads: i64 },
    #[error("{hidden} is not divisible by num_attention_heads = {heads}")]
    HeadsDoNotDivide { hidden: i64, heads: i64 },
    #[error("head dimension {0} must be even for rotary embeddings")]
    OddHeadDim(i64),
    #[error("head dimension {head_dim} is above the {max} hlatc supports")]
    HeadDimTooLarge { head_dim: i64, max: i64 },
    #[error("the model would have more than 2^63 parameters; check the sizes")]
    TooManyParameters,
    #[error("Qwen2 has fixed q/k/v biases and no attention_bias key")]
    QwenAttentionBias,
    #[error("Qwen2-MoE's q/k/v biases are set by qkv_bias and its output projection has none; there is no attention_bias key")]
    QwenMoeAttentionBias,
    #[error("true is not supported (Qwen2's per-layer windows); hlatc builds full attention")]
    QwenSlidingWindow,
    #[error("{0} is not supported; hlatc builds full_attention layers")]
    LayerType(Value),
    #[error("Llama attends to every earlier position; a windowed model is model_type \"mistral\"")]
    LlamaWindow,
    #[error("is given beside rope_parameters; a config holds one or the other")]
    BesideRopeParameters,
    #[error("{key} must be a number, got {value}")]
    RopeKeyNotNumber { key: String, value: Value },
    #[error("{key} must be an integer, got {value}")]
    RopeKeyNotInteger { key: String, value: Value },
    #[error("rope_theta {inner} disagrees with the top-level rope_theta {top}")]
    RopeThetaDisagrees { inner: f64, top: f64 },
    #[error("rope_type '{0}' needs a factor")]
    RopeNeedsFactor(String),
    #[error("rope_type 'llama3' needs {0}")]
    Llama3Needs(String),
    #[error(
        "rope_type '{0}' is not supported (hlatc implements default, linear, dynamic and llama3)"
    )]
    RopeType(String),
    #[error("key '{key}' is not understood for rope_type '{kind}'")]
    RopeKey { key: String, kind: String },
    /// A sequence past what the RoPE (`rope`, as the message words it)
    /// is defined for.
    #[error("{seq_len} exceeds max_position_embeddings = {max}; its {rope} is defined only up to it (only 'dynamic' RoPE scaling extends past it)")]
    SeqLenTooLong {
        seq_len: i64,
        max: i64,
        rope: String,
    },
    /// A packed step's rows past `max_position_embeddings`.
    #[error("{seq_len} exceeds max_position_embeddings = {max} in packed rows: dynamic RoPE's base would depend on each batch's longest document, so a packed step stays within max_position_embeddings")]
    PackedPastMaxPositions { seq_len: i64, max: i64 },
}
