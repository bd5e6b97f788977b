//! Which provenance scopes the cast policy keeps in their precision.

use hlatc_passes::CastPolicy;

#[test]
fn a_scope_is_kept_when_one_whole_component_is_listed() {
    let policy = CastPolicy::bf16();
    for kept in [
        "layers.0/input_layernorm",
        "backward/layers.31/post_attention_layernorm/mean",
        "loss",
        "optimizer/lm_head.weight",
    ] {
        assert!(policy.keeps_scope(kept), "{kept}");
    }
    for moved in [
        "",
        "layers.0/mlp/gate_up_proj",
        // Components match whole: a prefix or a longer name is not the scope.
        "layers.0/input_layernorm_extra",
        "layers.0/norms",
        "los",
        "/",
    ] {
        assert!(!policy.keeps_scope(moved), "{moved}");
    }
}

#[test]
fn long_and_user_given_scopes_are_matched_too() {
    let long = "a_scope_name_that_is_longer_than_sixty_four_bytes_by_a_fair_margin_x";
    assert!(long.len() > 64);
    let mut policy = CastPolicy::bf16();
    policy.keep_scopes = vec![long.to_string(), "attn".to_string()];
    let matcher = policy.scope_matcher();
    assert!(matcher.keeps(&format!("layers.1/{long}/dot")));
    assert!(matcher.keeps("layers.1/attn"));
    assert!(!matcher.keeps("layers.1/input_layernorm"));
    assert!(!matcher.keeps(&format!("layers.1/{long}y")));
}
