//! Presets, Hugging Face configs and their validation.

use hlatc_models::{param_specs, ConfigError, FieldProblem, ModelConfig};

#[test]
fn presets_have_the_llama_2_shapes() {
    let b7 = ModelConfig::preset("hlat-7b").unwrap();
    assert_eq!(
        (
            b7.hidden_size,
            b7.num_hidden_layers,
            b7.num_attention_heads,
            b7.intermediate_size
        ),
        (4096, 32, 32, 11008)
    );
    assert_eq!(b7.parameter_count(), 6_738_415_616);
    let b70 = ModelConfig::preset("hlat-70b").unwrap();
    assert_eq!(
        (
            b70.num_attention_heads,
            b70.num_key_value_heads,
            b70.head_dim()
        ),
        (64, 8, 128)
    );
    assert_eq!(b70.parameter_count(), 68_976_648_192);
    let specs = param_specs(&b70);
    assert_eq!(specs.len(), 1 + 80 * 9 + 2);
    assert_eq!(specs[3].name, "model.layers.0.self_attn.k_proj.weight");
    assert_eq!(specs[3].dims, vec![1024, 8192]);
    // The count agrees with the specs.
    let from_specs: i64 = specs.iter().map(|p| p.dims.iter().product::<i64>()).sum();
    assert_eq!(from_specs, b70.parameter_count());
    match ModelConfig::preset("gpt-5") {
        Err(e @ ConfigError::UnknownPreset { .. }) => assert_eq!(
            e.to_string(),
            "unknown model 'gpt-5' (presets: tiny, hlat-7b, hlat-70b, llama3-8b, llama3.1-8b, llama3.2-1b, mistral-7b, qwen2-0.5b, tinyllama, smollm-135m, tiny-moe, mixtral-8x7b, qwen3-30b-a3b)"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hugging_face_configs_read_with_their_defaults() {
    let json = r#"{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_attention_heads": 32, "num_hidden_layers": 32, "rms_norm_eps": 1e-05,
        "max_position_embeddings": 4096, "tie_word_embeddings": false, "rope_scaling": null
    }"#;
    let c = ModelConfig::from_hf_json(json, "config.json").unwrap();
    assert_eq!(c.num_key_value_heads, 32, "defaults to the attention heads");
    assert_eq!(c.rope_theta, 10000.0);
    assert_eq!(c, ModelConfig::hlat_7b());
    let tied = ModelConfig::from_hf_json(
        r#"{"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1, "tie_word_embeddings": true}"#,
        "t.json",
    )
    .unwrap();
    assert!(tied.tie_word_embeddings);
    assert!(!param_specs(&tied)
        .iter()
        .any(|p| p.name == "lm_head.weight"));
}

#[test]
fn invalid_configs_name_the_field() {
    let base = |extra: &str| {
        format!(
            r#"{{"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1{extra}}}"#
        )
    };
    let cases = [
        (
            base(r#", "num_hidden_layers": 0"#),
            "c.json: num_hidden_layers: must be positive, got 0",
        ),
        (
            base(r#", "rms_norm_eps": -1"#),
            "c.json: rms_norm_eps: must be a positive number, got -1",
        ),
        (
            base(r#", "tie_word_embeddings": "yes""#),
            "c.json: tie_word_embeddings: must be true or false, got \"yes\"",
        ),
        (
            base(r#", "hidden_size": 6"#),
            "c.json: head_dim: head dimension 3 must be even for rotary embeddings",
        ),
        ("[1, 2]".to_string(), "c.json: expected a JSON object"),
    ];
    for (json, want) in cases {
        let e = ModelConfig::from_hf_json(&json, "c.json").unwrap_err();
        assert_eq!(e.to_string(), want, "{json}");
    }
}

/// What is wrong is a value a caller can match, beside the source and the
/// field, and the message is made from it.
#[test]
fn field_problems_are_typed() {
    let field = |json: &str| match ModelConfig::from_hf_json(json, "c.json").unwrap_err() {
        ConfigError::Field {
            source_name,
            field,
            problem,
        } => (source_name, field, *problem),
        other => panic!("not a field's problem: {other}"),
    };
    assert_eq!(
        field(&with(r#", "rms_norm_eps": -1"#)),
        (
            "c.json".into(),
            "rms_norm_eps".into(),
            FieldProblem::NotPositiveNumber(-1.0)
        )
    );
    assert_eq!(
        field(&with(r#", "tie_word_embeddings": "yes""#)).2,
        FieldProblem::NotBool("yes".into())
    );
    assert_eq!(
        field(&with(r#", "frobnicate": 1"#)),
        (
            "c.json".into(),
            "frobnicate".into(),
            FieldProblem::UnknownKey
        )
    );
}

#[test]
fn miniatures_keep_the_structure() {
    let m = ModelConfig::hlat_70b().miniature();
    m.validate("mini").unwrap();
    assert_eq!(
        m.num_attention_heads / m.num_key_value_heads,
        8,
        "GQA ratio kept"
    );
    assert_eq!(m.head_dim(), 8);
    let ratio = |c: &ModelConfig| c.intermediate_size as f64 / c.hidden_size as f64;
    assert!((ratio(&m) - ratio(&ModelConfig::hlat_70b())).abs() < 0.1);
    assert!(m.parameter_count() < 1_000_000);
    let tied = ModelConfig {
        tie_word_embeddings: true,
        ..ModelConfig::tiny()
    }
    .miniature();
    assert!(tied.tie_word_embeddings);
}

#[test]
fn family_presets_match_their_published_parameter_counts() {
    for (name, params) in [
        ("llama3-8b", 8_030_261_248),
        ("llama3.1-8b", 8_030_261_248),
        ("llama3.2-1b", 1_235_814_400),
        ("mistral-7b", 7_241_732_096),
        ("qwen2-0.5b", 494_032_768),
        ("tinyllama", 1_100_048_384),
        ("smollm-135m", 134_515_008),
    ] {
        let c = ModelConfig::preset(name).unwrap();
        c.validate(name).unwrap();
        assert_eq!(c.parameter_count(), params, "{name}");
    }
    let m = ModelConfig::preset("mistral-7b").unwrap();
    assert_eq!(m.sliding_window, Some(4096));
    assert!(ModelConfig::preset("qwen2-0.5b").unwrap().qkv_bias);
}

/// A minimal valid config with `extra` keys added.
fn with(extra: &str) -> String {
    format!(
        r#"{{"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1{extra}}}"#
    )
}

#[test]
fn no_key_is_silently_ignored() {
    // Each model-changing key with a value hlatc does not implement is
    // refused, naming it.
    for (extra, field, words) in [
        (
            r#", "hidden_act": "gelu""#,
            "hidden_act",
            "\"gelu\" is not supported",
        ),
        (
            r#", "attention_dropout": 0.1"#,
            "attention_dropout",
            "0.1 is not supported",
        ),
        (
            r#", "pretraining_tp": 2"#,
            "pretraining_tp",
            "2 is not supported",
        ),
        (
            r#", "sliding_window": 4"#,
            "sliding_window",
            "model_type \"mistral\"",
        ),
        (
            r#", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}"#,
            "rope_scaling",
            "rope_type 'yarn' is not supported",
        ),
        (
            r#", "rope_scaling": {"rope_type": "linear"}"#,
            "rope_scaling",
            "needs a factor",
        ),
        (
            r#", "rope_scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 32}"#,
            "rope_scaling",
            "key 'beta_fast' is not understood",
        ),
        (
            r#", "rope_parameters": {"rope_type": "default", "rope_theta": 5.0}, "rope_theta": 7.0"#,
            "rope_parameters",
            "disagrees with the top-level rope_theta",
        ),
        // An error speaks the file's dialect: transformers 5's key where
        // the file used it.
        (
            r#", "rope_parameters": {"rope_type": "linear", "factor": -2.0, "rope_theta": 10000.0}"#,
            "rope_parameters",
            "factor must be a positive number, got -2",
        ),
        (
            r#", "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 64}"#,
            "rope_parameters",
            "high_freq_factor (1) must exceed low_freq_factor (4)",
        ),
        (
            r#", "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 0}"#,
            "rope_scaling",
            "original_max_position_embeddings must be positive, got 0",
        ),
        // A count is an integer: 64.5 is refused, not truncated to 64.
        (
            r#", "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64.5}"#,
            "rope_parameters",
            "original_max_position_embeddings must be an integer, got 64.5",
        ),
        (
            r#", "architectures": ["MistralForCausalLM"]"#,
            "architectures",
            "is not LlamaForCausalLM",
        ),
        (
            r#", "quantization_config": {"bits": 4}"#,
            "quantization_config",
            "is not a key hlatc knows",
        ),
        (
            r#", "num_experts": 8"#,
            "num_experts",
            "is not a key hlatc knows",
        ),
    ] {
        let e = ModelConfig::from_hf_json(&with(extra), "c.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("c.json: {field}: ")) && e.contains(words),
            "{extra}: {e}"
        );
    }
    let e = ModelConfig::from_hf_json(
        &with("").replace(r#""model_type": "llama", "#, ""),
        "c.json",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "c.json: model_type: is missing; it says which architecture the config describes"
    );
    let e = ModelConfig::from_hf_json(
        &with("")
            .replace("llama", "qwen2")
            .replace("}", r#", "use_sliding_window": true}"#),
        "c.json",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("use_sliding_window: true is not supported"),
        "{e}"
    );
    // Qwen2's window switches mean nothing to a Llama: refused, not skipped.
    for extra in [
        r#", "use_sliding_window": true"#,
        r#", "layer_types": ["sliding_attention"]"#,
    ] {
        let e = ModelConfig::from_hf_json(&with(extra), "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a key hlatc knows"), "{extra}: {e}");
    }
    // Keys known not to matter are read without complaint.
    let quiet = r#", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16", "use_cache": true, "initializer_range": 0.02, "transformers_version": "4.44.0""#;
    ModelConfig::from_hf_json(&with(quiet), "c.json").unwrap();
}

#[test]
fn both_transformers_layouts_read_the_same() {
    // transformers 4: top-level rope_theta and rope_scaling (with "type" or
    // "rope_type"); transformers 5: rope_parameters holding both.
    let v4 = with(
        r#", "rope_theta": 500000.0, "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}"#,
    );
    let v5 = with(
        r#", "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}"#,
    );
    let a = ModelConfig::from_hf_json(&v4, "v4.json").unwrap();
    let b = ModelConfig::from_hf_json(&v5, "v5.json").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.rope_theta, 500000.0);
    assert!(
        matches!(a.rope_scaling, Some(hlatc_models::RopeScaling::Llama3 { factor, .. }) if factor == 8.0)
    );
    // Without any RoPE key, theta is Hugging Face's default.
    assert_eq!(
        ModelConfig::from_hf_json(&with(""), "c.json")
            .unwrap()
            .rope_theta,
        10000.0
    );
}

/// What a family's config may ask is its family's rule, and the messages
/// that refuse the rest are the ones they always were.
#[test]
fn each_family_reads_its_own_keys() {
    let refused = |json: String| {
        ModelConfig::from_hf_json(&json, "c.json")
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(with("").replace("\"llama\"", "\"gpt2\"")),
        "c.json: model_type: 'gpt2' is not supported (hlatc builds llama, mistral, qwen2, qwen3, mixtral, qwen2_moe and qwen3_moe)"
    );
    let qwen2 = |extra: &str| with(extra).replace("\"llama\"", "\"qwen2\"");
    assert_eq!(
        refused(qwen2(r#", "attention_bias": true"#)),
        "c.json: attention_bias: Qwen2 has fixed q/k/v biases and no attention_bias key"
    );
    assert_eq!(
        refused(qwen2(r#", "architectures": ["LlamaForCausalLM"]"#)),
        "c.json: architectures: \"LlamaForCausalLM\" is not Qwen2ForCausalLM, the causal LM of model_type 'qwen2'"
    );
    assert_eq!(
        refused(qwen2(r#", "layer_types": ["full_attention", "sliding_attention"]"#)),
        "c.json: layer_types: \"sliding_attention\" is not supported; hlatc builds full_attention layers"
    );
    // Qwen2's q/k/v biases are forced; its window is written and unused.
    let q = ModelConfig::from_hf_json(
        &qwen2(r#", "attention_bias": false, "sliding_window": 4, "use_sliding_window": false, "max_window_layers": 1"#),
        "c.json",
    )
    .unwrap();
    assert!(q.qkv_bias && !q.o_proj_bias && q.sliding_window.is_none());
    // Mistral reads its window; Llama reads attention_bias for all four.
    let m = ModelConfig::from_hf_json(
        &with(r#", "sliding_window": 4"#).replace("\"llama\"", "\"mistral\""),
        "c.json",
    )
    .unwrap();
    assert_eq!(m.sliding_window, Some(4));
    let l = ModelConfig::from_hf_json(&with(r#", "attention_bias": true"#), "c.json").unwrap();
    assert!(l.qkv_bias && l.o_proj_bias);
    // The presets start from their family's defaults.
    for name in hlatc_models::PRESETS {
        let p = ModelConfig::preset(name).unwrap();
        let family = p.model_type.family().defaults();
        assert!(p.qkv_bias || !family.qkv_bias, "{name}");
    }
}
