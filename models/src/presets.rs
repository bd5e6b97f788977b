//! Built-in models: HLAT's two and the common shapes of the Llama family,
//! each copied from its published `config.json` (the values, not the file:
//! tokenizer ids and the like do not change the step), over its family's
//! defaults ([`crate::family`]).

use crate::config::{ConfigError, ModelConfig, ModelType, MoeConfig, RopeScaling};

/// Every preset `--model` accepts, with what it is.
pub const PRESET_TABLE: [(&str, &str); 13] = [
    (
        "tiny",
        "2 layers, 4 heads over 2 KV heads, vocab 64: runs on XLA CPU in milliseconds",
    ),
    ("hlat-7b", "HLAT-7B: the Llama-2-7B shapes"),
    ("hlat-70b", "HLAT-70B: the Llama-2-70B shapes, 8 KV heads"),
    ("llama3-8b", "Meta-Llama-3-8B"),
    ("llama3.1-8b", "Llama-3.1-8B: llama3 RoPE scaling to 128K"),
    ("llama3.2-1b", "Llama-3.2-1B: tied embeddings, head_dim 64"),
    ("mistral-7b", "Mistral-7B-v0.1: 4096-token sliding window"),
    ("qwen2-0.5b", "Qwen2-0.5B: q/k/v biases, tied embeddings"),
    ("tinyllama", "TinyLlama-1.1B"),
    ("smollm-135m", "SmolLM-135M: tied embeddings"),
    (
        "tiny-moe",
        "tiny with a Mixtral MLP: 4 experts, 2 per token, load-balancing loss on; runs on XLA CPU",
    ),
    (
        "mixtral-8x7b",
        "Mixtral-8x7B-v0.1: 8 experts, 2 per token, load-balancing loss on",
    ),
    (
        "qwen3-30b-a3b",
        "Qwen3-30B-A3B: 128 experts, 8 per token, q/k norms, load-balancing loss on",
    ),
];

/// The names alone, for `--model`'s accepted values.
pub const PRESETS: [&str; 13] = {
    let mut names = [""; 13];
    let mut i = 0;
    while i < PRESET_TABLE.len() {
        names[i] = PRESET_TABLE[i].0;
        i += 1;
    }
    names
};

/// A Llama-3-style model at these sizes (128K vocabulary, theta 500000).
fn llama3(hidden: i64, ffn: i64, layers: i64, head_dim: i64, tied: bool) -> ModelConfig {
    ModelConfig {
        vocab_size: 128256,
        hidden_size: hidden,
        intermediate_size: ffn,
        num_attention_heads: 32,
        num_key_value_heads: 8,
        head_dim,
        num_hidden_layers: layers,
        rms_norm_eps: 1e-5,
        rope_theta: 500000.0,
        tie_word_embeddings: tied,
        max_position_embeddings: 8192,
        ..ModelConfig::llama_defaults()
    }
}

/// A mixture of experts trained as Hugging Face trains one: with its
/// load-balancing loss (`output_router_logits`, which published configs
/// leave off for inference).
fn experts(num_experts: i64, per_token: i64, width: i64, coef: f64) -> Option<MoeConfig> {
    Some(MoeConfig {
        num_experts,
        num_experts_per_tok: per_token,
        expert_intermediate_size: width,
        norm_topk_prob: true,
        shared_expert_intermediate_size: None,
        decoder_sparse_step: 1,
        mlp_only_layers: Vec::new(),
        output_router_logits: true,
        router_aux_loss_coef: coef,
        capacity_factor: None,
    })
}

/// Llama 3.1's scaling from 8K to 128K positions.
fn llama31_scaling(factor: f64) -> Option<RopeScaling> {
    Some(RopeScaling::Llama3 {
        factor,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    })
}

impl ModelConfig {
    /// The built-in model `name` (one of [`PRESETS`]).
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        preset(name).ok_or_else(|| ConfigError::UnknownPreset {
            name: name.to_string(),
            known: PRESETS.join(", "),
        })
    }
}

/// The preset called `name`.
pub fn preset(name: &str) -> Option<ModelConfig> {
    Some(match name {
        "tiny" => ModelConfig::tiny(),
        "hlat-7b" => ModelConfig::hlat_7b(),
        "hlat-70b" => ModelConfig::hlat_70b(),
        "llama3-8b" => llama3(4096, 14336, 32, 128, false),
        "llama3.1-8b" => ModelConfig {
            max_position_embeddings: 131072,
            rope_scaling: llama31_scaling(8.0),
            ..llama3(4096, 14336, 32, 128, false)
        },
        "llama3.2-1b" => ModelConfig {
            max_position_embeddings: 131072,
            rope_scaling: llama31_scaling(32.0),
            ..llama3(2048, 8192, 16, 64, true)
        },
        "mistral-7b" => ModelConfig {
            vocab_size: 32000,
            hidden_size: 4096,
            intermediate_size: 14336,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
            num_hidden_layers: 32,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            max_position_embeddings: 32768,
            sliding_window: Some(4096),
            ..ModelType::Mistral.family().defaults()
        },
        "qwen2-0.5b" => ModelConfig {
            vocab_size: 151936,
            hidden_size: 896,
            intermediate_size: 4864,
            num_attention_heads: 14,
            num_key_value_heads: 2,
            head_dim: 64,
            num_hidden_layers: 24,
            rms_norm_eps: 1e-6,
            rope_theta: 1000000.0,
            tie_word_embeddings: true,
            max_position_embeddings: 131072,
            ..ModelType::Qwen2.family().defaults()
        },
        "tinyllama" => ModelConfig {
            vocab_size: 32000,
            hidden_size: 2048,
            intermediate_size: 5632,
            num_attention_heads: 32,
            num_key_value_heads: 4,
            head_dim: 64,
            num_hidden_layers: 22,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            max_position_embeddings: 2048,
            ..ModelConfig::llama_defaults()
        },
        "smollm-135m" => ModelConfig {
            vocab_size: 49152,
            hidden_size: 576,
            intermediate_size: 1536,
            num_attention_heads: 9,
            num_key_value_heads: 3,
            head_dim: 64,
            num_hidden_layers: 30,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            tie_word_embeddings: true,
            max_position_embeddings: 2048,
            ..ModelConfig::llama_defaults()
        },
        "tiny-moe" => ModelConfig {
            moe: experts(4, 2, 48, 0.02),
            ..ModelConfig {
                model_type: ModelType::Mixtral,
                ..ModelConfig::tiny()
            }
        },
        "mixtral-8x7b" => ModelConfig {
            vocab_size: 32000,
            hidden_size: 4096,
            intermediate_size: 14336,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
            num_hidden_layers: 32,
            rms_norm_eps: 1e-5,
            rope_theta: 1000000.0,
            max_position_embeddings: 32768,
            moe: experts(8, 2, 14336, 0.02),
            ..ModelType::Mixtral.family().defaults()
        },
        "qwen3-30b-a3b" => ModelConfig {
            vocab_size: 151936,
            hidden_size: 2048,
            intermediate_size: 6144,
            num_attention_heads: 32,
            num_key_value_heads: 4,
            head_dim: 128,
            num_hidden_layers: 48,
            rms_norm_eps: 1e-6,
            rope_theta: 1000000.0,
            max_position_embeddings: 40960,
            moe: experts(128, 8, 768, 0.001),
            ..ModelType::Qwen3Moe.family().defaults()
        },
        _ => return None,
    })
}
