//! Provenance scopes: the `/`-separated paths the builder writes into each
//! instruction's `metadata.op_name` (`layers.3/self_attn/core_attention`).
//! The names here are the contract between the graphs hlatc builds and the
//! passes that read them back (remat's policies, pass reports, dumps).

/// The first component of every backward instruction: a rule's
/// instructions carry `backward/` followed by the scope of the forward op
/// they differentiate, so a policy can tell the two passes apart and still
/// see which layer each belongs to.
pub const BACKWARD: &str = "backward";

/// The component under `layers.N/self_attn` that holds a layer's core
/// attention (scores, mask, softmax, the probabilities times v): NxD's
/// `CoreAttention`, what the `core-attention` remat policy recomputes.
pub const CORE_ATTENTION: &str = "core_attention";

/// The component under `layers.N/self_attn` that holds blocked attention
/// (the `blocked` kernel of the attention point): it keeps only q, k, v,
/// the output and the rows' log-sum-exp for its backward, so it is not
/// core attention's scope, which the `core-attention` policy recomputes.
pub const BLOCKED_ATTENTION: &str = "blocked_attention";

/// The component under `layers.N/self_attn` that holds a call of an
/// imported attention kernel (the `imported` kernel of the attention
/// point), which keeps what its backward reads.
pub const IMPORTED_ATTENTION: &str = "imported_attention";

/// The component of a sequence-parallel all-gather, under the scope of the
/// projections that read its output (`layers.3/mlp/sequence_gather`): the
/// full sequence the `remat` pass gathers again in the backward pass
/// rather than keep.
pub const SEQUENCE_GATHER: &str = "sequence_gather";

/// The component of a context-parallel all-gather of keys and values,
/// under `layers.N/self_attn` (`layers.3/self_attn/context_gather`): the
/// whole sequence's keys and values on every CP rank, which the memory
/// plan and the planner count as the exchange's and not as activations.
pub const CONTEXT_GATHER: &str = "context_gather";

/// The component of ring attention's exchange (`layers.3/self_attn/
/// blocked_attention/context_ring`): the collective-permutes that pass
/// keys and values, and in the backward their adjoints, round the CP
/// ring, which the planner prices as the exchange's.
pub const CONTEXT_RING: &str = "context_ring";

/// The component of FSDP's all-gathers of the weights before the forward
/// reads them (`parameter_all_gather/unit.3/all-gather`): the memory plan
/// counts their values as gathered weights, not as activations.
pub const PARAMETER_ALL_GATHER: &str = "parameter_all_gather";

/// The prefix of the component under [`PARAMETER_ALL_GATHER`] that names
/// the FSDP unit a gather is of, by its place in the forward (`unit.0`
/// the embedding, then each decoder layer, last the final norm with the
/// LM head). Not `layers.N`, whose scope full-layer remat recomputes.
pub const GATHER_UNIT_PREFIX: &str = "unit.";

/// The component of the FSDP unit at place `n` of the forward.
pub fn gather_unit(n: usize) -> String {
    format!("{GATHER_UNIT_PREFIX}{n}")
}

/// Whether `op_name` is of FSDP's gathers of the weights, forward or
/// backward.
pub fn is_parameter_gather(op_name: &str) -> bool {
    op_name.split('/').any(|p| p == PARAMETER_ALL_GATHER)
}

/// The FSDP unit `op_name` gathers, forward or backward: the place of the
/// component after [`PARAMETER_ALL_GATHER`], when it names one.
pub fn gather_unit_of(op_name: &str) -> Option<usize> {
    let mut parts = op_name.split('/');
    parts.find(|&p| p == PARAMETER_ALL_GATHER)?;
    parts.next()?.strip_prefix(GATHER_UNIT_PREFIX)?.parse().ok()
}

/// The model's parts, as Hugging Face's Llama names its modules: the
/// builders open these scopes and the cast policy keeps the f32 ones in
/// f32 by the same constants, so a rename reaches both.
pub const EMBED_TOKENS: &str = "embed_tokens";
pub const ROTARY_EMB: &str = "rotary_emb";
pub const INPUT_LAYERNORM: &str = "input_layernorm";
pub const SELF_ATTN: &str = "self_attn";
pub const ROPE: &str = "rope";
pub const POST_ATTENTION_LAYERNORM: &str = "post_attention_layernorm";
pub const MLP: &str = "mlp";
pub const ACT_FN: &str = "act_fn";
/// The routed experts of a sparse MLP (`layers.3/mlp/experts`), with
/// their exchange over the EP group: the planner prices the collectives
/// under it as the step's own, not as a data-parallel sum.
pub const EXPERTS: &str = "experts";
/// The final RMSNorm, Hugging Face's `model.norm`.
pub const FINAL_NORM: &str = "norm";
pub const LOSS: &str = "loss";
/// The AdamW update, clipping and schedule.
pub const OPTIMIZER: &str = "optimizer";

/// The prefix of a decoder layer's component, `layers.N`.
pub const LAYER_PREFIX: &str = "layers.";

/// The component of decoder layer `i`.
pub fn layer(i: i64) -> String {
    format!("{LAYER_PREFIX}{i}")
}

/// The backward scope for a forward op whose `op_name` is `forward`.
pub fn backward(forward: &str) -> String {
    if forward.is_empty() {
        BACKWARD.to_string()
    } else {
        format!("{BACKWARD}/{forward}")
    }
}

/// Whether an instruction's `op_name` puts it in a backward pass.
pub fn is_backward(op_name: &str) -> bool {
    op_name
        .strip_prefix(BACKWARD)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The prefix of `op_name` up to and including the first component that
/// `matches`, or `None` when no component does.
pub fn prefix_through(op_name: &str, matches: impl Fn(&str) -> bool) -> Option<&str> {
    let mut end = 0;
    for part in op_name.split('/') {
        end += part.len();
        if matches(part) {
            return Some(&op_name[..end]);
        }
        end += 1;
    }
    None
}
