//! Model families: each listed once under its own name, its forced
//! choices its defaults.

use hlatc_models::family::{names, AttentionBias, FAMILIES};
use hlatc_models::{Family, FieldProblem, ModelConfig, ModelType};

#[test]
fn every_family_is_listed_once_under_its_own_name() {
    for family in FAMILIES {
        assert!(std::ptr::eq(family.model_type.family(), family));
        assert!(std::ptr::eq(Family::by_name(family.name).unwrap(), family));
        assert_eq!(family.model_type.name(), family.name);
        // The manifest's spelling (serde) is config.json's.
        assert_eq!(
            serde_json::to_value(family.model_type).unwrap(),
            serde_json::Value::from(family.name)
        );
        assert_eq!(family.defaults().model_type, family.model_type);
    }
    assert_eq!(
        names(),
        "llama, mistral, qwen2, qwen3, mixtral, qwen2_moe and qwen3_moe"
    );
}

#[test]
fn a_familys_forced_choices_are_its_defaults() {
    let q = ModelType::Qwen2.family().defaults();
    assert!(q.qkv_bias && !q.o_proj_bias);
    assert_eq!(
        ModelType::Llama.family().defaults(),
        ModelConfig::llama_defaults()
    );
    assert_eq!(
        AttentionBias::FixedQkv.refusal(true),
        Some(FieldProblem::QwenAttentionBias)
    );
    assert_eq!(AttentionBias::FixedQkv.refusal(false), None);
    assert_eq!(AttentionBias::Key.refusal(true), None);
}
