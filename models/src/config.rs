//! Model configuration: the architecture (Hugging Face `LlamaConfig` fields)
//! and the training shape (batch, sequence length).

use serde::{Deserialize, Serialize};
use std::path::Path;

/// A Llama-family architecture. Field names are Hugging Face's, so a
/// `config.json` maps one to one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_attention_heads: i64,
    pub num_key_value_heads: i64,
    pub num_hidden_layers: i64,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: i64,
}

/// Where a config is wrong: the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{source_name}: {field}: {message}")]
    Field {
        source_name: String,
        field: String,
        message: String,
    },
    #[error("{source_name}: {message}")]
    File {
        source_name: String,
        message: String,
    },
    #[error("unknown model '{name}' (presets: {known})")]
    UnknownPreset { name: String, known: String },
}

/// The widest attention head a config may ask for. The rotary frequency
/// table is computed on the host, one value per pair of head dimensions;
/// published models use 64 to 256.
pub const MAX_HEAD_DIM: i64 = 1 << 16;

/// The presets `--model` accepts.
pub const PRESETS: [&str; 3] = ["tiny", "hlat-7b", "hlat-70b"];

impl ModelConfig {
    /// A 2-layer model with GQA, small enough that a whole training step runs
    /// on XLA CPU in milliseconds.
    pub fn tiny() -> Self {
        ModelConfig {
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
        }
    }

    /// HLAT-7B: the Llama-2-7B shapes.
    pub fn hlat_7b() -> Self {
        ModelConfig {
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
        }
    }

    /// HLAT-70B: the Llama-2-70B shapes, GQA with 8 KV heads.
    pub fn hlat_70b() -> Self {
        ModelConfig {
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
        }
    }

    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        match name {
            "tiny" => Ok(Self::tiny()),
            "hlat-7b" => Ok(Self::hlat_7b()),
            "hlat-70b" => Ok(Self::hlat_70b()),
            _ => Err(ConfigError::UnknownPreset {
                name: name.to_string(),
                known: PRESETS.join(", "),
            }),
        }
    }

    pub fn head_dim(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }

    /// Reads a Hugging Face `config.json`. Unknown keys are ignored;
    /// `num_key_value_heads` defaults to `num_attention_heads`, the others to
    /// Hugging Face's `LlamaConfig` defaults only where HF has one that does
    /// not change the shapes (eps, theta, tying).
    pub fn from_hf_json(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| ConfigError::File {
            source_name: source_name.to_string(),
            message: format!("not valid JSON: {e}"),
        })?;
        let obj = v.as_object().ok_or_else(|| ConfigError::File {
            source_name: source_name.to_string(),
            message: "expected a JSON object".into(),
        })?;
        let field_err = |field: &str, message: String| ConfigError::Field {
            source_name: source_name.to_string(),
            field: field.to_string(),
            message,
        };
        let int = |field: &str| -> Result<Option<i64>, ConfigError> {
            match obj.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(x) => x
                    .as_i64()
                    .map(Some)
                    .ok_or_else(|| field_err(field, format!("must be an integer, got {x}"))),
            }
        };
        let float = |field: &str| -> Result<Option<f64>, ConfigError> {
            match obj.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(x) => x
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| field_err(field, format!("must be a number, got {x}"))),
            }
        };
        let required = |field: &str| -> Result<i64, ConfigError> {
            int(field)?.ok_or_else(|| field_err(field, "is missing".into()))
        };
        if let Some(mt) = obj.get("model_type").and_then(|m| m.as_str()) {
            if mt != "llama" {
                return Err(field_err(
                    "model_type",
                    format!("'{mt}' is not a Llama model (expected \"llama\")"),
                ));
            }
        }
        for unsupported in ["rope_scaling", "attention_bias", "mlp_bias"] {
            match obj.get(unsupported) {
                None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => {}
                Some(x) => return Err(field_err(unsupported, format!("{x} is not supported yet"))),
            }
        }
        let heads = required("num_attention_heads")?;
        let cfg = ModelConfig {
            vocab_size: required("vocab_size")?,
            hidden_size: required("hidden_size")?,
            intermediate_size: required("intermediate_size")?,
            num_attention_heads: heads,
            num_key_value_heads: int("num_key_value_heads")?.unwrap_or(heads),
            num_hidden_layers: required("num_hidden_layers")?,
            rms_norm_eps: float("rms_norm_eps")?.unwrap_or(1e-6),
            rope_theta: float("rope_theta")?.unwrap_or(10000.0),
            tie_word_embeddings: match obj.get("tie_word_embeddings") {
                None | Some(serde_json::Value::Null) => false,
                Some(x) => x.as_bool().ok_or_else(|| {
                    field_err(
                        "tie_word_embeddings",
                        format!("must be true or false, got {x}"),
                    )
                })?,
            },
            max_position_embeddings: int("max_position_embeddings")?.unwrap_or(2048),
        };
        cfg.validate(source_name)?;
        Ok(cfg)
    }

    pub fn from_hf_file(path: &Path) -> Result<Self, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            source_name: name.clone(),
            message: e.to_string(),
        })?;
        Self::from_hf_json(&text, &name)
    }

    /// Checks that the fields describe a buildable model; errors name the field.
    pub fn validate(&self, source_name: &str) -> Result<(), ConfigError> {
        let err = |field: &str, message: String| {
            Err(ConfigError::Field {
                source_name: source_name.to_string(),
                field: field.to_string(),
                message,
            })
        };
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
                return err(field, format!("must be positive, got {v}"));
            }
        }
        if self.hidden_size % self.num_attention_heads != 0 {
            return err(
                "hidden_size",
                format!(
                    "{} is not divisible by num_attention_heads = {}",
                    self.hidden_size, self.num_attention_heads
                ),
            );
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return err(
                "num_key_value_heads",
                format!(
                    "{} does not divide num_attention_heads = {}",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            );
        }
        if self.head_dim() % 2 != 0 {
            return err(
                "hidden_size",
                format!(
                    "head dimension {} must be even for rotary embeddings",
                    self.head_dim()
                ),
            );
        }
        if self.head_dim() > MAX_HEAD_DIM {
            return err(
                "hidden_size",
                format!(
                    "head dimension {} (hidden_size / num_attention_heads) is above the {MAX_HEAD_DIM} hlatc supports",
                    self.head_dim()
                ),
            );
        }
        if self.checked_parameter_count().is_none() {
            return err(
                "hidden_size",
                "the model would have more than 2^63 parameters; check the sizes".into(),
            );
        }
        if !(self.rms_norm_eps > 0.0 && self.rms_norm_eps.is_finite()) {
            return err(
                "rms_norm_eps",
                format!("must be a positive number, got {}", self.rms_norm_eps),
            );
        }
        if !(self.rope_theta > 1.0 && self.rope_theta.is_finite()) {
            return err(
                "rope_theta",
                format!("must be greater than 1, got {}", self.rope_theta),
            );
        }
        Ok(())
    }

    /// The same architecture at toy scale: the GQA ratio, tying, norm and
    /// rotary settings and the FFN/hidden ratio are kept; widths, depth and
    /// vocabulary shrink so a step runs on XLA CPU in milliseconds.
    pub fn miniature(&self) -> ModelConfig {
        let ratio = self.num_attention_heads / self.num_key_value_heads;
        let kv = self.num_key_value_heads.min(2);
        let heads = kv * ratio;
        let hidden = heads * 8;
        let ffn = ((hidden * self.intermediate_size) as f64 / self.hidden_size as f64 / 8.0)
            .round()
            .max(1.0) as i64
            * 8;
        ModelConfig {
            vocab_size: 256,
            hidden_size: hidden,
            intermediate_size: ffn,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            num_hidden_layers: self.num_hidden_layers.min(2),
            max_position_embeddings: 16,
            ..self.clone()
        }
    }

    /// Number of trainable parameters, saturating at `i64::MAX` (which
    /// [`ModelConfig::validate`] refuses), so it is never negative.
    pub fn parameter_count(&self) -> i64 {
        self.checked_parameter_count().unwrap_or(i64::MAX)
    }

    /// Number of trainable parameters, or `None` when it overflows an i64.
    pub fn checked_parameter_count(&self) -> Option<i64> {
        let (d, f, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let kv = self.num_key_value_heads.checked_mul(self.head_dim())?;
        let dd = d.checked_mul(d)?;
        let per_layer = [
            d.checked_mul(2)?,
            dd,
            kv.checked_mul(d)?.checked_mul(2)?,
            dd,
            d.checked_mul(f)?.checked_mul(3)?,
        ]
        .into_iter()
        .try_fold(0i64, i64::checked_add)?;
        let vd = v.checked_mul(d)?;
        let head = if self.tie_word_embeddings { 0 } else { vd };
        [vd, self.num_hidden_layers.checked_mul(per_layer)?, d, head]
            .into_iter()
            .try_fold(0i64, i64::checked_add)
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
        let err = |field: &str, message: String| {
            Err(ConfigError::Field {
                source_name: "batch".into(),
                field: field.to_string(),
                message,
            })
        };
        if self.batch_size <= 0 {
            return err(
                "batch_size",
                format!("must be positive, got {}", self.batch_size),
            );
        }
        if self.seq_len <= 1 {
            return err(
                "seq_len",
                format!("must be at least 2, got {}", self.seq_len),
            );
        }
        if self.seq_len > cfg.max_position_embeddings {
            return err(
                "seq_len",
                format!(
                    "{} exceeds max_position_embeddings = {}",
                    self.seq_len, cfg.max_position_embeddings
                ),
            );
        }
        Ok(())
    }
}
