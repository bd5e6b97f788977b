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
}

/// The projection biases a family's config asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionBias {
    /// `attention_bias` (false when absent) puts a bias on q, k, v and o.
    Key,
    /// q, k and v always have one and o never; `attention_bias` is
    /// refused when true (Qwen2).
    FixedQkv,
}

impl AttentionBias {
    /// `(qkv_bias, o_proj_bias)` for `attention_bias` = `key`.
    pub const fn biases(self, key: bool) -> (bool, bool) {
        match self {
            AttentionBias::Key => (key, key),
            AttentionBias::FixedQkv => (true, key),
        }
    }

    /// Why `attention_bias` = `key` is refused, if it is.
    pub fn refusal(self, key: bool) -> Option<FieldProblem> {
        match self {
            AttentionBias::FixedQkv if key => Some(FieldProblem::QwenAttentionBias),
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
};

pub static MISTRAL: Family = Family {
    model_type: ModelType::Mistral,
    name: "mistral",
    architecture: "MistralForCausalLM",
    attention_bias: AttentionBias::Key,
    window: Window::SlidingWindow,
    irrelevant: &[],
};

pub static QWEN2: Family = Family {
    model_type: ModelType::Qwen2,
    name: "qwen2",
    architecture: "Qwen2ForCausalLM",
    attention_bias: AttentionBias::FixedQkv,
    window: Window::SwitchedOff,
    irrelevant: &[(
        "max_window_layers",
        "Qwen2: which layers slide when use_sliding_window is on (checked off)",
    )],
};

/// Every family, in the order messages list them.
pub static FAMILIES: [&Family; 3] = [&LLAMA, &MISTRAL, &QWEN2];

impl ModelType {
    /// What distinguishes this member of the family.
    pub fn family(self) -> &'static Family {
        match self {
            ModelType::Llama => &LLAMA,
            ModelType::Mistral => &MISTRAL,
            ModelType::Qwen2 => &QWEN2,
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
        let (qkv_bias, o_proj_bias) = self.attention_bias.biases(false);
        ModelConfig {
            model_type: self.model_type,
            qkv_bias,
            o_proj_bias,
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
