//! Reading a Hugging Face `config.json` without ever building a model other
//! than the one it describes. Every key is either read (it changes the
//! model), checked to hold the one value hlatc implements, or listed as
//! known not to matter, with the reason. Any other key is refused, naming
//! the file and the key. Both layouts are read: `transformers` 4 (top-level
//! `rope_theta` and `rope_scaling`) and 5 (`rope_parameters`).

use crate::config::{ConfigError, ModelConfig, RopeScaling};
use crate::family::{AttentionBias, ExpertNames, Family, Window, FAMILIES};
use crate::field_problem::FieldProblem;
use crate::moe::MoeConfig;
use hlatc_compiler::util::input_file;
use serde_json::{Map, Value};
use std::path::Path;

/// Keys that do not change the training step, and why (a family's own
/// are its [`Family::irrelevant`]).
const IRRELEVANT: &[(&str, &str)] = &[
    (
        "architectures",
        "checked against model_type; the head is always a causal LM",
    ),
    ("bos_token_id", "a tokenizer id; the step takes token ids"),
    ("eos_token_id", "a tokenizer id; the step takes token ids"),
    (
        "pad_token_id",
        "a tokenizer id; padding is masked through the ignore index",
    ),
    (
        "torch_dtype",
        "the checkpoint's storage type; hlatc's precision policy decides compute",
    ),
    (
        "dtype",
        "the checkpoint's storage type (transformers 5 name)",
    ),
    ("transformers_version", "provenance only"),
    ("_name_or_path", "provenance only"),
    (
        "use_cache",
        "the inference KV cache; a training step has none",
    ),
    (
        "output_attentions",
        "what inference returns, not what it computes",
    ),
    (
        "output_hidden_states",
        "what inference returns, not what it computes",
    ),
    (
        "return_dict",
        "what inference returns, not what it computes",
    ),
    ("tokenizer_class", "the tokenizer, not the model"),
];

/// Typed access to the object's keys; each key read is marked used.
struct Keys<'a> {
    obj: &'a Map<String, Value>,
    source: &'a str,
    used: Vec<&'static str>,
}

impl<'a> Keys<'a> {
    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn int(&mut self, key: &'static str) -> Result<Option<i64>, ConfigError> {
        let source = self.source;
        self.get(key)
            .map(|x| {
                x.as_i64().ok_or_else(|| {
                    ConfigError::field(source, key, FieldProblem::NotInteger(x.clone()))
                })
            })
            .transpose()
    }

    fn required(&mut self, key: &'static str) -> Result<i64, ConfigError> {
        let source = self.source;
        self.int(key)?
            .ok_or_else(|| ConfigError::field(source, key, FieldProblem::Missing))
    }

    fn float(&mut self, key: &'static str) -> Result<Option<f64>, ConfigError> {
        let source = self.source;
        self.get(key)
            .map(|x| {
                x.as_f64().ok_or_else(|| {
                    ConfigError::field(source, key, FieldProblem::NotNumber(x.clone()))
                })
            })
            .transpose()
    }

    fn bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        let source = self.source;
        self.get(key)
            .map(|x| {
                x.as_bool().ok_or_else(|| {
                    ConfigError::field(source, key, FieldProblem::NotBool(x.clone()))
                })
            })
            .transpose()
    }

    fn str(&mut self, key: &'static str) -> Result<Option<&'a str>, ConfigError> {
        let source = self.source;
        self.get(key)
            .map(|x| {
                x.as_str().ok_or_else(|| {
                    ConfigError::field(source, key, FieldProblem::NotString(x.clone()))
                })
            })
            .transpose()
    }

    /// A key whose only supported value is `expected`.
    fn only(
        &mut self,
        key: &'static str,
        expected: &Value,
        why: &'static str,
    ) -> Result<(), ConfigError> {
        match self.get(key) {
            Some(v) if v != expected => Err(ConfigError::field(
                self.source,
                key,
                FieldProblem::OnlyValue {
                    value: v.clone(),
                    why,
                    expected: expected.clone(),
                },
            )),
            _ => Ok(()),
        }
    }
}

/// Reads the RoPE settings from either layout: returns theta and scaling.
fn rope(k: &mut Keys, default_theta: f64) -> Result<(f64, Option<RopeScaling>), ConfigError> {
    let top_theta = k.float("rope_theta")?;
    let (params, where_) = match (k.get("rope_parameters"), k.get("rope_scaling")) {
        (Some(p), None) => (Some(p), "rope_parameters"),
        (None, Some(s)) => (Some(s), "rope_scaling"),
        (None, None) => (None, "rope_scaling"),
        (Some(_), Some(_)) => {
            return Err(ConfigError::field(
                k.source,
                "rope_scaling",
                FieldProblem::BesideRopeParameters,
            ))
        }
    };
    let Some(params) = params else {
        return Ok((top_theta.unwrap_or(default_theta), None));
    };
    let source = k.source;
    let err = |p: FieldProblem| ConfigError::field(source, where_, p);
    let obj = params
        .as_object()
        .ok_or_else(|| err(FieldProblem::NotObject(params.clone())))?;
    let num = |key: &str| -> Result<Option<f64>, ConfigError> {
        obj.get(key)
            .filter(|v| !v.is_null())
            .map(|v| {
                v.as_f64().ok_or_else(|| {
                    err(FieldProblem::RopeKeyNotNumber {
                        key: key.to_string(),
                        value: v.clone(),
                    })
                })
            })
            .transpose()
    };
    let theta = match (num("rope_theta")?, top_theta) {
        (Some(a), Some(b)) if a != b => {
            return Err(err(FieldProblem::RopeThetaDisagrees { inner: a, top: b }))
        }
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => default_theta,
    };
    let kind = obj
        .get("rope_type")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let factor =
        || num("factor")?.ok_or_else(|| err(FieldProblem::RopeNeedsFactor(kind.to_string())));
    let known: &[&str] = match kind {
        "default" => &["rope_type", "type", "rope_theta"],
        "linear" | "dynamic" => &["rope_type", "type", "rope_theta", "factor"],
        "llama3" => &[
            "rope_type",
            "type",
            "rope_theta",
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        ],
        other => return Err(err(FieldProblem::RopeType(other.to_string()))),
    };
    if let Some(extra) = obj.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(err(FieldProblem::RopeKey {
            key: extra.clone(),
            kind: kind.to_string(),
        }));
    }
    let scaling = match kind {
        "default" => None,
        "linear" => Some(RopeScaling::Linear { factor: factor()? }),
        "dynamic" => Some(RopeScaling::Dynamic { factor: factor()? }),
        _ => {
            let need = |key: &str| {
                num(key)?.ok_or_else(|| err(FieldProblem::Llama3Needs(key.to_string())))
            };
            let integer = |key: &str| -> Result<i64, ConfigError> {
                let v = obj
                    .get(key)
                    .filter(|v| !v.is_null())
                    .ok_or_else(|| err(FieldProblem::Llama3Needs(key.to_string())))?;
                v.as_i64().ok_or_else(|| {
                    err(FieldProblem::RopeKeyNotInteger {
                        key: key.to_string(),
                        value: v.clone(),
                    })
                })
            };
            Some(RopeScaling::Llama3 {
                factor: factor()?,
                low_freq_factor: need("low_freq_factor")?,
                high_freq_factor: need("high_freq_factor")?,
                original_max_position_embeddings: integer("original_max_position_embeddings")?,
            })
        }
    };
    // Checked here, where the error can name the key the file used
    // (`rope_parameters` in transformers 5, `rope_scaling` before).
    if let Some(s) = &scaling {
        s.validate().map_err(|e| ConfigError::RopeScaling {
            source_name: source.to_string(),
            field: where_.to_string(),
            source: e,
        })?;
    }
    Ok((theta, scaling))
}

impl ModelConfig {
    /// Reads a Hugging Face `config.json` (`transformers` 4 or 5 layout);
    /// see this module for which keys change the model and which
    /// are known not to.
    pub fn from_hf_json(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        read(text, source_name)
    }

    pub fn from_hf_file(path: &Path) -> Result<Self, ConfigError> {
        let name = path.display().to_string();
        let text = input_file::read_to_string(path, |e| ConfigError::Unreadable {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::from_hf_json(&text, &name)
    }
}

/// Parses and validates a `config.json`.
pub fn read(text: &str, source: &str) -> Result<ModelConfig, ConfigError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ConfigError::File {
        source_name: source.to_string(),
        message: format!("not valid JSON: {e}"),
    })?;
    let obj = v.as_object().ok_or_else(|| ConfigError::File {
        source_name: source.to_string(),
        message: "expected a JSON object".into(),
    })?;
    let mut k = Keys {
        obj,
        source,
        used: Vec::new(),
    };
    let family = architecture(&mut k)?;
    k.only("hidden_act", &Value::from("silu"), "the MLP's activation")?;
    k.only(
        "attention_dropout",
        &Value::from(0.0),
        "dropout is not modelled",
    )?;
    k.only(
        "pretraining_tp",
        &Value::from(1),
        "tensor-parallel slicing of the projections",
    )?;
    let heads = k.required("num_attention_heads")?;
    let hidden = k.required("hidden_size")?;
    let head_dim = head_dim(&mut k, heads, hidden)?;
    let defaults = family.defaults();
    let (rope_theta, rope_scaling) = rope(&mut k, defaults.rope_theta)?;
    let attention_bias = k.bool("attention_bias")?.unwrap_or(false);
    let sliding_window = sliding_window(&mut k, family.window)?;
    let qkv_key = match family.attention_bias {
        AttentionBias::QkvKey => k.bool("qkv_bias")?.unwrap_or(true),
        _ => true,
    };
    let (qkv_bias, o_proj_bias) = family.attention_bias.biases(attention_bias, qkv_key);
    let cfg = ModelConfig {
        model_type: family.model_type,
        vocab_size: k.required("vocab_size")?,
        hidden_size: hidden,
        intermediate_size: k.required("intermediate_size")?,
        num_attention_heads: heads,
        num_key_value_heads: k.int("num_key_value_heads")?.unwrap_or(heads),
        head_dim,
        num_hidden_layers: k.required("num_hidden_layers")?,
        rms_norm_eps: k.float("rms_norm_eps")?.unwrap_or(defaults.rms_norm_eps),
        rope_theta,
        rope_scaling,
        tie_word_embeddings: k.bool("tie_word_embeddings")?.unwrap_or(false),
        max_position_embeddings: k
            .int("max_position_embeddings")?
            .unwrap_or(defaults.max_position_embeddings),
        qkv_bias,
        o_proj_bias,
        mlp_bias: k.bool("mlp_bias")?.unwrap_or(false),
        sliding_window,
        fused_projections: false,
        initializer_range: k
            .float("initializer_range")?
            .unwrap_or(defaults.initializer_range),
        qk_norm: family.qk_norm,
        moe: match family.experts {
            Some(names) => Some(experts(&mut k, names)?),
            None => None,
        },
    };
    if let Some(problem) = family.attention_bias.refusal(attention_bias) {
        return Err(ConfigError::field(source, "attention_bias", problem));
    }
    refuse_unread_keys(&k)?;
    cfg.validate(source)?;
    Ok(cfg)
}

/// The family `model_type` names, and `architectures` naming its causal
/// LM and nothing else.
fn architecture(k: &mut Keys) -> Result<&'static Family, ConfigError> {
    let source = k.source;
    let family = match k.str("model_type")? {
        Some(name) => Family::by_name(name).ok_or_else(|| {
            ConfigError::field(
                source,
                "model_type",
                FieldProblem::ModelType {
                    found: name.to_string(),
                    families: crate::family::names(),
                },
            )
        })?,
        None => {
            return Err(ConfigError::field(
                source,
                "model_type",
                FieldProblem::NoModelType,
            ))
        }
    };
    let expected = family.architecture;
    if let Some(arch) = k.obj.get("architectures").and_then(Value::as_array) {
        if let Some(other) = arch.iter().find(|a| a.as_str() != Some(expected)) {
            return Err(ConfigError::field(
                source,
                "architectures",
                FieldProblem::Architecture {
                    found: other.clone(),
                    expected,
                    model_type: family.name,
                },
            ));
        }
    }
    Ok(family)
}

/// The mixture of experts a family with `names` describes: every key it
/// writes read, or checked to hold the one value hlatc implements.
fn experts(k: &mut Keys, names: ExpertNames) -> Result<MoeConfig, ConfigError> {
    k.only(
        "router_jitter_noise",
        &Value::from(0.0),
        "multiplicative router noise is not modelled",
    )?;
    let (norm_topk_prob, decoder_sparse_step, mlp_only_layers) = match names.qwen_keys {
        true => (
            k.bool("norm_topk_prob")?.unwrap_or(false),
            k.int("decoder_sparse_step")?.unwrap_or(1),
            layer_list(k, "mlp_only_layers")?,
        ),
        false => (true, 1, Vec::new()),
    };
    let shared_expert_intermediate_size = match names.shared_expert {
        true => Some(k.required("shared_expert_intermediate_size")?),
        false => None,
    };
    Ok(MoeConfig {
        num_experts: expert_count(k, names.count_keys)?,
        num_experts_per_tok: k.required("num_experts_per_tok")?,
        expert_intermediate_size: k.required(names.width_key)?,
        norm_topk_prob,
        shared_expert_intermediate_size,
        decoder_sparse_step,
        mlp_only_layers,
        output_router_logits: k.bool("output_router_logits")?.unwrap_or(false),
        router_aux_loss_coef: k.float("router_aux_loss_coef")?.unwrap_or(0.001),
        capacity_factor: None,
    })
}

/// The number of experts under the first of `keys` given; every other
/// given must agree with it.
fn expert_count(k: &mut Keys, keys: &'static [&'static str]) -> Result<i64, ConfigError> {
    let source = k.source;
    let mut found: Option<(&'static str, i64)> = None;
    for &key in keys {
        match (k.int(key)?, found) {
            (Some(v), None) => found = Some((key, v)),
            (Some(v), Some((other, other_value))) if v != other_value => {
                return Err(ConfigError::field(
                    source,
                    key,
                    FieldProblem::Disagrees {
                        value: v,
                        other,
                        other_value,
                    },
                ))
            }
            _ => {}
        }
    }
    match found {
        // Refused here, where the key the file spells is known (Mixtral's
        // `num_local_experts`), not by the config's own field name.
        Some((key, v)) if v <= 0 => Err(ConfigError::field(
            source,
            key,
            FieldProblem::NotPositive(v),
        )),
        Some((_, v)) => Ok(v),
        None => Err(ConfigError::field(source, keys[0], FieldProblem::Missing)),
    }
}

/// A list of layer numbers under `key` (empty when absent).
fn layer_list(k: &mut Keys, key: &'static str) -> Result<Vec<i64>, ConfigError> {
    let source = k.source;
    match k.get(key) {
        None => Ok(Vec::new()),
        Some(v) => v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>())
            .ok_or_else(|| ConfigError::field(source, key, FieldProblem::NotLayerList(v.clone()))),
    }
}

/// `head_dim`, or `hidden_size / num_attention_heads` where it is not written.
fn head_dim(k: &mut Keys, heads: i64, hidden: i64) -> Result<i64, ConfigError> {
    if let Some(hd) = k.int("head_dim")? {
        return Ok(hd);
    }
    if heads > 0 && hidden % heads != 0 {
        return Err(ConfigError::field(
            k.source,
            "hidden_size",
            FieldProblem::HeadsDoNotDivide { hidden, heads },
        ));
    }
    Ok(if heads > 0 { hidden / heads } else { 0 })
}

/// The attention window, where the family has one hlatc builds: read as
/// its [`Window`] rule says.
fn sliding_window(k: &mut Keys, window: Window) -> Result<Option<i64>, ConfigError> {
    let source = k.source;
    match window {
        Window::SlidingWindow => k.int("sliding_window"),
        Window::SwitchedOff => {
            // A window written but used only with use_sliding_window.
            k.int("sliding_window")?;
            if k.bool("use_sliding_window")?.unwrap_or(false) {
                return Err(ConfigError::field(
                    source,
                    "use_sliding_window",
                    FieldProblem::QwenSlidingWindow,
                ));
            }
            if let Some(layers) = k.get("layer_types").and_then(Value::as_array) {
                if let Some(t) = layers.iter().find(|t| t.as_str() != Some("full_attention")) {
                    return Err(ConfigError::field(
                        source,
                        "layer_types",
                        FieldProblem::LayerType(t.clone()),
                    ));
                }
            }
            Ok(None)
        }
        Window::Never => {
            if k.int("sliding_window")?.is_some() {
                return Err(ConfigError::field(
                    source,
                    "sliding_window",
                    FieldProblem::LlamaWindow,
                ));
            }
            Ok(None)
        }
    }
}

/// A key neither read nor known to be irrelevant may change the model:
/// the config is refused rather than half-read. A key one family lists as
/// irrelevant is accepted from every family's config, as it always was.
fn refuse_unread_keys(k: &Keys) -> Result<(), ConfigError> {
    let irrelevant = || {
        IRRELEVANT
            .iter()
            .chain(FAMILIES.iter().flat_map(|f| f.irrelevant))
    };
    for key in k.obj.keys() {
        if !k.used.contains(&key.as_str()) && !irrelevant().any(|(i, _)| i == key) {
            return Err(ConfigError::field(k.source, key, FieldProblem::UnknownKey));
        }
    }
    Ok(())
}
