//! The members of the Llama family hlatc builds. They share the graph
//! ([`crate::llama`]) and differ in what a `config.json` may ask of it:
//! each [`Family`] states its `model_type`, the causal LM its
//! `architectures` names, what its `attention_bias` key means, which
//! attention-window keys it reads or refuses, the keys it writes that do
//! not change the step, and so its defaults. [`crate::hf_config`] reads a
//! `config.json` by these rules and [`crate::presets`] starts from
//! [`Family::defaults`]; neither names a family itself.
//!
//! Adding a family is a [`ModelType`] variant and its entry here: a
//! `static` [`Family`], its arm in [`ModelType::family`] (the compiler
//! asks for it) and its place in [`FAMILIES`] (the tests check it).

use crate::config::{ModelConfig, ModelType};
use crate::field_problem::FieldProblem;

/// What distinguishes one member of the family.
#[derive(Debug, PartialEq, Eq)]
pub struct Family {
    pub model_type: ModelType,
    /// Its `model_type` in `config.json` (and in the manifest).
    pub name: &'static str,
    /// The causal LM every entry of `architectures` must name.
    pub architecture: &'static str,
    /// What `attention_bias` means, and the biases it forces.
    pub attention_bias: AttentionBias,
    /// Which attention-window keys it reads, and which it refuses.
    pub window: Window,
    /// Keys its configs write that do not change the training step, and
    /// why (beside [`crate::hf_config`]'s list for every family).
    pub irrelevant: &'static [(&'static str, &'static str)],
    /// An RMSNorm on each query and key head (Qwen3).
    pub qk_norm: bool,
    /// Its mixture of experts: the keys that describe it and the names of
    /// its tensors; `None` for a dense family.
    pub experts: Option<ExpertNames>,
}

/// How a mixture-of-experts family writes its experts: in `config.json`
/// and in its checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertNames {
    /// The layer's MLP module (`block_sparse_moe`, `mlp`).
    pub module: &'static str,
    /// Each expert's gate, up and down projections (`w1`, `w3`, `w2`).
    pub projections: [&'static str; 3],
    /// The keys counting the experts, the first the family's own
    /// (`num_local_experts`; `num_experts`, which Qwen3-MoE's config class
    /// writes as `num_local_experts`).
    pub count_keys: &'static [&'static str],
    /// The key of each expert's width (Mixtral's is `intermediate_size`,
    /// which its dense layers would use, were there any).
    pub width_key: &'static str,
    /// Qwen's keys: `norm_topk_prob`, `decoder_sparse_step` and
    /// `mlp_only_layers` (Mixtral renormalizes always, every layer sparse).
    pub qwen_keys: bool,
    /// Qwen2-MoE's shared expert and its gate.
    pub shared_expert: bool,
}

impl ExpertNames {
    /// The Hugging Face tensors a stacked parameter of layer `layer` in
    /// `role` holds, `rows` of them (one per expert; the router is one
    /// tensor, under its module's name).
    pub fn parts(&self, role: crate::ParamRole, layer: i64, rows: i64) -> Vec<crate::HfPart> {
        use crate::{HfPart, ParamRole, Projection};
        let l = format!("model.layers.{layer}.{}", self.module);
        let which = match role {
            ParamRole::Experts(Projection::Gate) => 0,
            ParamRole::Experts(Projection::Up) => 1,
            ParamRole::Experts(Projection::Down) => 2,
            ParamRole::Router if role.hf_name(layer) == format!("{l}.gate.weight") => {
                return Vec::new()
            }
            ParamRole::Router => {
                return vec![HfPart {
                    name: format!("{l}.gate.weight"),
                    rows: [0, rows],
                    stacked: false,
                }]
            }
            _ => return Vec::new(),
        };
        (0..rows)
            .map(|e| HfPart {
                name: format!("{l}.experts.{e}.{}.weight", self.projections[which]),
                rows: [e, e + 1],
                stacked: true,
            })
            .collect()
    }
}

const MIXTRAL_EXPERTS: ExpertNames = ExpertNames {
    module: "block_sparse_moe",
    projections: ["w1", "w3", "w2"],
    count_keys: &["num_local_experts"],
    width_key: "intermediate_size",
    qwen_keys: false,
    shared_expert: false,
};

const QWEN_EXPERTS: ExpertNames = ExpertNames {
    module: "mlp",
    projections: ["gate_proj", "up_proj", "down_proj"],
    count_keys: &["num_experts", "num_local_experts"],
    width_key: "moe_intermediate_size",
    qwen_keys: true,
    shared_expert: false,
};

/// The projection biases a family's config asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionBias {
    /// `attention_bias` (false when absent) puts a bias on q, k, v and o.
    Key,
    /// q, k and v always have one and o never; `attention_bias` is
    /// refused when true (Qwen2).
    FixedQkv,
    /// `qkv_bias` (true when absent) puts a bias on q, k and v, and o
    /// never has one; `attention_bias` is refused when true (Qwen2-MoE).
    QkvKey,
}

impl AttentionBias {
    /// `(qkv_bias, o_proj_bias)` for `attention_bias` = `key` (and, for
    /// [`AttentionBias::QkvKey`], `qkv_bias` = `qkv`).
    pub const fn biases(self, key: bool, qkv: bool) -> (bool, bool) {
        match self {
            AttentionBias::Key => (key, key),
            AttentionBias::FixedQkv => (true, key),
            AttentionBias::QkvKey => (qkv, false),
        }
    }

    /// Why `attention_bias` = `key` is refused, if it is.
    pub fn refusal(self, key: bool) -> Option<FieldProblem> {
        match self {
            AttentionBias::FixedQkv if key => Some(FieldProblem::QwenAttentionBias),
            AttentionBias::QkvKey if key => Some(FieldProblem::QwenMoeAttentionBias),
            _ => None,
        }
    }
}

/// How a family's config states its attention window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Every earlier position: a `sliding_window` is refused (Llama).
    Never,
    /// `sliding_window` is the window (Mistral).
    SlidingWindow,
    /// `sliding_window` is written but used only with
    /// `use_sliding_window`, which must be off, and every `layer_types`
    /// entry must be `full_attention` (Qwen2).
    SwitchedOff,
}

pub static LLAMA: Family = Family {
    model_type: ModelType::Llama,
    name: "llama",
    architecture: "LlamaForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::Never,
    irrelevant: &[],
    qk_norm: false,
    experts: None,
};

pub static MISTRAL: Family = Family {
    model_type: ModelType::Mistral,
    name: "mistral",
    architecture: "MistralForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::SlidingWindow,
    irrelevant: &[],
    qk_norm: false,
    experts: None,
};

pub static QWEN2: Family = Family {
    model_type: ModelType::Qwen2,
    name: "qwen2",
    architecture: "Qwen2ForCausalLM",
    attention_bias: AttentionBias::FixedQkv,
    window: Window::SwitchedOff,
    irrelevant: QWEN_WINDOW_LAYERS,
    qk_norm: false,
    experts: None,
};

const QWEN_WINDOW_LAYERS: &[(&str, &str)] = &[(
    "max_window_layers",
    "Qwen2: which layers slide when use_sliding_window is on (checked off)",
)];

pub static QWEN3: Family = Family {
    model_type: ModelType::Qwen3,
    name: "qwen3",
    architecture: "Qwen3ForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::SwitchedOff,
    irrelevant: QWEN_WINDOW_LAYERS,
    qk_norm: true,
    experts: None,
};

pub static MIXTRAL: Family = Family {
    model_type: ModelType::Mixtral,
    name: "mixtral",
    architecture: "MixtralForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::SlidingWindow,
    irrelevant: &[],
    qk_norm: false,
    experts: Some(MIXTRAL_EXPERTS),
};

pub static QWEN2_MOE: Family = Family {
    model_type: ModelType::Qwen2Moe,
    name: "qwen2_moe",
    architecture: "Qwen2MoeForCausalLM",
    attention_bias: AttentionBias::QkvKey,
    window: Window::SwitchedOff,
    irrelevant: QWEN_WINDOW_LAYERS,
    qk_norm: false,
    experts: Some(ExpertNames {
        shared_expert: true,
        ..QWEN_EXPERTS
    }),
};

pub static QWEN3_MOE: Family = Family {
    model_type: ModelType::Qwen3Moe,
    name: "qwen3_moe",
    architecture: "Qwen3MoeForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::SwitchedOff,
    irrelevant: QWEN_WINDOW_LAYERS,
    qk_norm: true,
    experts: Some(QWEN_EXPERTS),
};

/// Every family, in the order messages list them.
pub static FAMILIES: [&Family; 7] = [
    &LLAMA, &MISTRAL, &QWEN2, &QWEN3, &MIXTRAL, &QWEN2_MOE, &QWEN3_MOE,
];

impl ModelType {
    /// What distinguishes this member of the family.
    pub fn family(self) -> &'static Family {
        match self {
            ModelType::Llama => &LLAMA,
            ModelType::Mistral => &MISTRAL,
            ModelType::Qwen2 => &QWEN2,
            ModelType::Qwen3 => &QWEN3,
            ModelType::Mixtral => &MIXTRAL,
            ModelType::Qwen2Moe => &QWEN2_MOE,
            ModelType::Qwen3Moe => &QWEN3_MOE,
        }
    }
}

impl Family {
    /// The family whose `model_type` is `name`.
    pub fn by_name(name: &str) -> Option<&'static Family> {
        FAMILIES.iter().copied().find(|f| f.name == name)
    }

    /// The fields a config of this family leaves at their defaults (the
    /// forced ones included: Qwen2's q/k/v biases); sizes are
    /// placeholders every preset and config sets.
    pub fn defaults(&self) -> ModelConfig {
        let (qkv_bias, o_proj_bias) = self.attention_bias.biases(false, true);
        ModelConfig {
            model_type: self.model_type,
            qkv_bias,
            o_proj_bias,
            qk_norm: self.qk_norm,
            ..ModelConfig::llama_defaults()
        }
    }
}

/// The families' names as a message lists them: `llama, mistral and
/// qwen2`.
pub fn names() -> String {
    let names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}
