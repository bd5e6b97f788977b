//! Presets, Hugging Face configs and their validation.

use hlatc_models::{param_specs, ConfigError, ModelConfig};

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
            "unknown model 'gpt-5' (presets: tiny, hlat-7b, hlat-70b)"
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
