//! Op-name scopes: a backward scope is told by its first component, and a
//! prefix ends at a whole component.

use hlatc_compiler::graph::scope::{
    backward, is_backward, prefix_through, CORE_ATTENTION, LAYER_PREFIX,
};

#[test]
fn backward_scopes_are_recognized_by_component() {
    assert!(is_backward("backward"));
    assert!(is_backward(&backward("layers.0/mlp")));
    assert!(!is_backward("backwards/x"));
    assert!(!is_backward("layers.0/backward"));
}

#[test]
fn prefixes_end_at_a_whole_component() {
    let n = "layers.12/self_attn/core_attention";
    assert_eq!(
        prefix_through(n, |p| p == CORE_ATTENTION),
        Some("layers.12/self_attn/core_attention")
    );
    assert_eq!(
        prefix_through(n, |p| p.starts_with(LAYER_PREFIX)),
        Some("layers.12")
    );
    assert_eq!(
        prefix_through("layers.1/core_attentionx", |p| p == CORE_ATTENTION),
        None
    );
}
