//! Model configuration: the architecture (Hugging Face `LlamaConfig` fields)
//! and the training shape (batch, sequence length).

pub use crate::field_problem::FieldProblem;
pub use crate::moe::MoeConfig;
pub use crate::rope::{RopeScaling, RopeScalingError};
use serde::{Deserialize, Serialize};

/// Which member of the Llama family: they share the graph and differ in
/// what `config.json` may ask of it ([`ModelType::family`] says how).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelType {
    Llama,
    /// Llama with a sliding attention window.
    Mistral,
    /// Llama with q/k/v projection biases.
    Qwen2,
    /// Llama with an RMSNorm on each query and key head.
    Qwen3,
    /// Mistral with a mixture of experts for its MLP.
    Mixtral,
    /// Qwen2 with a mixture of experts and a shared expert.
    Qwen2Moe,
    /// Qwen3 with a mixture of experts.
    Qwen3Moe,
}

impl ModelType {
    /// Its `model_type` in `config.json`.
    pub fn name(self) -> &'static str {
        self.family().name
    }
}

/// A Llama-family architecture. Field names are Hugging Face's, so a
/// `config.json` maps one to one; the manifest records every value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub model_type: ModelType,
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_attention_heads: i64,
    pub num_key_value_heads: i64,
    /// Width of one attention head (Hugging Face's default is
    /// `hidden_size / num_attention_heads`; some models set it apart).
    pub head_dim: i64,
    pub num_hidden_layers: i64,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<RopeScaling>,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: i64,
    /// Biases on the q, k and v projections (Llama's `attention_bias`,
    /// always on for Qwen2).
    pub qkv_bias: bool,
    /// A bias on the output projection (Llama's `attention_bias`).
    pub o_proj_bias: bool,
    /// Biases on gate, up and down projections (`mlp_bias`).
    pub mlp_bias: bool,
    /// Each query attends to at most this many positions, itself included
    /// (Mistral's `sliding_window`).
    pub sliding_window: Option<i64>,
    /// How the weights are stored, not a `config.json` key: q/k/v as one
    /// `self_attn.qkv_proj` and gate/up as one `mlp.gate_up_proj` (their
    /// rows stacked in that order), so each layer's forward reads its input
    /// with 4 dots instead of 7. Checkpoints still use the Hugging Face
    /// tensors: [`crate::layout`] maps between the two.
    #[serde(default)]
    pub fused_projections: bool,
    /// Standard deviation of the normal initialization (Hugging Face's
    /// `initializer_range`); output projections start smaller, at
    /// [`ModelConfig::output_projection_std`]. Recorded in the manifest's
    /// `init` block, not twice.
    #[serde(skip, default = "default_initializer_range")]
    pub initializer_range: f64,
    /// An RMSNorm over each query and key head, before the rotary
    /// embedding (Qwen3's `q_norm` and `k_norm`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm: bool,
    /// The mixture of experts that replaces the MLP of its sparse layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeConfig>,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// Hugging Face's default `initializer_range`, and HLAT's.
pub const DEFAULT_INITIALIZER_RANGE: f64 = 0.02;

fn default_initializer_range() -> f64 {
    DEFAULT_INITIALIZER_RANGE
}

/// Where a config is wrong: the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum ConfigError {
    #[error("{source_name}: {field}: {problem}")]
    Field {
        source_name: String,
        field: String,
        /// Boxed: a config's every check returns it.
        problem: Box<FieldProblem>,
    },
    /// The RoPE scaling under `field` (the key the file used) is out of
    /// range.
    #[error("{source_name}: {field}: {source}")]
    RopeScaling {
        source_name: String,
        field: String,
        #[source]
        source: RopeScalingError,
    },
    #[error("{source_name}: {message}")]
    File {
        source_name: String,
        message: String,
    },
    /// The file could not be read at all (missing, a directory, no
    /// permission): an I/O failure, which front ends report as one.
    #[error("{}: {message}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("unknown model '{name}' (presets: {known})")]
    UnknownPreset { name: String, known: String },
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

impl ConfigError {
    /// `field` of `source_name` breaks a rule: `problem`.
    pub fn field(source_name: &str, field: &str, problem: FieldProblem) -> Self {
        ConfigError::Field {
            source_name: source_name.to_string(),
            field: field.to_string(),
            problem: Box::new(problem),
        }
    }
}

/// The widest attention head a config may ask for. The rotary frequency
/// table is computed on the host, one value per pair of head dimensions;
/// published models use 64 to 256.
pub const MAX_HEAD_DIM: i64 = 1 << 16;

impl ModelConfig {
    /// The fields a plain Llama leaves at Hugging Face's defaults; sizes
    /// are placeholders every preset and config sets.
    pub fn llama_defaults() -> Self {
        ModelConfig {
            model_type: ModelType::Llama,
            vocab_size: 0,
            hidden_size: 0,
            intermediate_size: 0,
            num_attention_heads: 0,
            num_key_value_heads: 0,
            head_dim: 0,
            num_hidden_layers: 0,
            rms_norm_eps: 1e-6,
            rope_theta: 10000.0,
            rope_scaling: None,
            tie_word_embeddings: false,
            max_position_embeddings: 2048,
            qkv_bias: false,
            o_proj_bias: false,
            mlp_bias: false,
            sliding_window: None,
            fused_projections: false,
            initializer_range: DEFAULT_INITIALIZER_RANGE,
            qk_norm: false,
            moe: None,
        }
    }

    /// A 2-layer model with GQA, small enough that a whole training step runs
    /// on XLA CPU in milliseconds.
    pub fn tiny() -> Self {
        ModelConfig {
            head_dim: 8,
            vocab_size: 64,
            hidden_size: 32,
            intermediate_size: 48,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            num_hidden_layers: 2,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            tie_word_embeddings: false,
            max_position_embeddings: 16,
            ..Self::llama_defaults()
        }
    }

    /// 4 layers, d 128, 8 heads over 4 KV heads, 512 positions: small
    /// enough that XLA CPU compiles its step in seconds, with Llama's
    /// balance at S = 512 (attention's `[B, H, S, S]` tensors are about two
    /// thirds of a layer's activations, as in HLAT-7B at S = 4096). What
    /// the remat measurements and the runtime bench use.
    pub fn small() -> Self {
        ModelConfig {
            head_dim: 16,
            vocab_size: 256,
            hidden_size: 128,
            intermediate_size: 256,
            num_attention_heads: 8,
            num_key_value_heads: 4,
            num_hidden_layers: 4,
            max_position_embeddings: 512,
            ..Self::tiny()
        }
    }

    /// HLAT-7B: the Llama-2-7B shapes.
    pub fn hlat_7b() -> Self {
        ModelConfig {
            head_dim: 128,
            vocab_size: 32000,
            hidden_size: 4096,
            intermediate_size: 11008,
            num_attention_heads: 32,
            num_key_value_heads: 32,
            num_hidden_layers: 32,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            tie_word_embeddings: false,
            max_position_embeddings: 4096,
            ..Self::llama_defaults()
        }
    }

    /// HLAT-70B: the Llama-2-70B shapes, GQA with 8 KV heads.
    pub fn hlat_70b() -> Self {
        ModelConfig {
            head_dim: 128,
            vocab_size: 32000,
            hidden_size: 8192,
            intermediate_size: 28672,
            num_attention_heads: 64,
            num_key_value_heads: 8,
            num_hidden_layers: 80,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            tie_word_embeddings: false,
            max_position_embeddings: 4096,
            ..Self::llama_defaults()
        }
    }

    /// The output projections' (`o_proj`, `down_proj`) initial standard
    /// deviation: they write into the residual stream once per layer, so
    /// they start at `initializer_range / sqrt(2 * layers)`.
    pub fn output_projection_std(&self) -> f64 {
        self.initializer_range / (2.0 * self.num_hidden_layers as f64).sqrt()
    }

    pub fn head_dim(&self) -> i64 {
        self.head_dim
    }

    /// Checks that the fields describe a buildable model; errors name the field.
    pub fn validate(&self, source_name: &str) -> Result<(), ConfigError> {
        let err = |field: &str, problem| Err(ConfigError::field(source_name, field, problem));
        for (field, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("num_hidden_layers", self.num_hidden_layers),
            ("max_position_embeddings", self.max_position_embeddings),
        ] {
            if v <= 0 {
                return err(field, FieldProblem::NotPositive(v));
            }
        }
        if self.head_dim <= 0 {
            return err("head_dim", FieldProblem::NotPositive(self.head_dim));
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return err(
                "num_key_value_heads",
                FieldProblem::KvHeadsDoNotDivide {
                    kv_heads: self.num_key_value_heads,
                    heads: self.num_attention_heads,
                },
            );
        }
        if self.head_dim() % 2 != 0 {
            return err("head_dim", FieldProblem::OddHeadDim(self.head_dim()));
        }
        if self.head_dim() > MAX_HEAD_DIM {
            return err(
                "head_dim",
                FieldProblem::HeadDimTooLarge {
                    head_dim: self.head_dim(),
                    max: MAX_HEAD_DIM,
                },
            );
        }
        if let Some((field, problem)) = self
            .moe
            .as_ref()
            .and_then(|m| m.problem(self.num_hidden_layers))
        {
            return err(field, problem);
        }
        if self.checked_parameter_count().is_none() {
            return err("hidden_size", FieldProblem::TooManyParameters);
        }
        if !(self.initializer_range > 0.0 && self.initializer_range.is_finite()) {
            return err(
                "initializer_range",
                FieldProblem::NotPositiveNumber(self.initializer_range),
            );
        }
        if !(self.rms_norm_eps > 0.0 && self.rms_norm_eps.is_finite()) {
            return err(
                "rms_norm_eps",
                FieldProblem::NotPositiveNumber(self.rms_norm_eps),
            );
        }
        if !(self.rope_theta > 1.0 && self.rope_theta.is_finite()) {
            return err("rope_theta", FieldProblem::NotAboveOne(self.rope_theta));
        }
        if let Some(r) = &self.rope_scaling {
            r.validate().map_err(|source| ConfigError::RopeScaling {
                source_name: source_name.to_string(),
                field: "rope_scaling".to_string(),
                source,
            })?;
        }
        if let Some(w) = self.sliding_window {
            if w <= 0 {
                return err("sliding_window", FieldProblem::NotPositive(w));
            }
        }
        Ok(())
    }

    /// Whether a sequence may be longer than `max_position_embeddings`:
    /// only when the RoPE scaling grows with the length (dynamic NTK).
    pub fn rope_scales_with_length(&self) -> bool {
        self.rope_scaling
            .as_ref()
            .is_some_and(RopeScaling::scales_with_length)
    }

    /// The RoPE base a step over `seq_len` positions rotates with (dynamic
    /// NTK's grows past `max_position_embeddings`; every other stays
    /// `rope_theta`).
    pub fn rope_theta_for(&self, seq_len: i64) -> f64 {
        self.rope_scaling.as_ref().map_or(self.rope_theta, |r| {
            r.theta_for(
                self.rope_theta,
                self.head_dim(),
                seq_len,
                self.max_position_embeddings,
            )
        })
    }

    /// Why a sequence of `seq_len` positions is refused, past
    /// `max_position_embeddings`: both numbers, and which RoPE would allow it.
    pub fn too_long(&self, seq_len: i64) -> FieldProblem {
        let rope = match &self.rope_scaling {
            None => "RoPE without scaling".to_string(),
            Some(r) => format!("RoPE type '{}'", r.name()),
        };
        FieldProblem::SeqLenTooLong {
            seq_len,
            max: self.max_position_embeddings,
            rope,
        }
    }

    /// The same architecture at toy scale: the GQA ratio, tying, norm and
    /// rotary settings and the FFN/hidden ratio are kept; widths, depth and
    /// vocabulary shrink so a step runs on XLA CPU in milliseconds.
    pub fn miniature(&self) -> ModelConfig {
        self.miniature_for_tp(1)
    }

    /// [`ModelConfig::miniature`] that tensor parallelism of degree `tp`
    /// divides as it divides this model: the fewest KV heads (at least
    /// two, at most this model's) whose query heads `tp` divides and
    /// which divide `tp` or are divided by it, and an MLP width in
    /// multiples of `8 * tp`.
    pub fn miniature_for_tp(&self, tp: i64) -> ModelConfig {
        let ratio = self.num_attention_heads / self.num_key_value_heads;
        let fits = |k: i64| (k * ratio) % tp == 0 && (k % tp == 0 || tp % k == 0);
        let least = self.num_key_value_heads.min(2);
        let kv = (least..=self.num_key_value_heads)
            .find(|&k| fits(k))
            .unwrap_or(least);
        let heads = kv * ratio;
        let hidden = heads * 8;
        let unit = 8 * tp.max(1);
        let ffn = ((hidden * self.intermediate_size) as f64 / self.hidden_size as f64 / unit as f64)
            .round()
            .max(1.0) as i64
            * unit;
        ModelConfig {
            vocab_size: 256,
            hidden_size: hidden,
            intermediate_size: ffn,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim: 8,
            num_hidden_layers: self.num_hidden_layers.min(2),
            max_position_embeddings: 16,
            // A window shorter than the miniature's sequence keeps the band.
            sliding_window: self.sliding_window.map(|w| w.min(8)),
            ..self.clone()
        }
    }
}

/// The shape of one training batch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchShape {
    pub batch_size: i64,
    pub seq_len: i64,
}

impl BatchShape {
    pub fn validate(&self, cfg: &ModelConfig) -> Result<(), ConfigError> {
        let err = |field: &str, problem| Err(ConfigError::field("batch", field, problem));
        if self.batch_size <= 0 {
            return err("batch_size", FieldProblem::NotPositive(self.batch_size));
        }
        if self.seq_len <= 1 {
            return err("seq_len", FieldProblem::BelowTwo(self.seq_len));
        }
        if self.seq_len > cfg.max_position_embeddings && !cfg.rope_scales_with_length() {
            return err("seq_len", cfg.too_long(self.seq_len));
        }
        Ok(())
    }
}
