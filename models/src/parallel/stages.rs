//! Pipeline stages: the decoder layers divided into `pp` runs of equal
//! length, stage `s` holding layers `s * k .. (s + 1) * k` for `k =
//! layers / pp`.
//!
//! Every stage runs the same program, written for a model of `k` layers
//! (the [`Stages::stage_model`]): its parameters are named as that model's,
//! and on stage `s` its layer `j` is the whole model's layer `s * k + j`
//! ([`Stages::holdings`]). The embedding, the final norm and the LM head
//! are parameters of every stage's program: stage 0 alone uses the
//! embedding's rows for its input, the last stage alone the norm and head
//! for the loss, and their gradients are summed over the stages, so tied
//! embeddings need nothing more (both uses land in the one sum).

use super::ParallelError;
use crate::config::ModelConfig;
use crate::params::{weight_specs_of_layers, ParamSpec};
use std::ops::Range;

/// How the decoder layers are divided over the pipeline stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stages {
    count: i64,
    per_stage: i64,
}

impl Stages {
    /// `cfg`'s layers over `pp` stages; `pp` must divide them, since every
    /// stage runs the same program.
    pub fn new(cfg: &ModelConfig, pp: i64) -> Result<Stages, ParallelError> {
        let layers = cfg.num_hidden_layers;
        if pp < 1 || layers < pp || layers % pp != 0 {
            let divisors: Vec<String> = (1..=layers.clamp(0, 1 << 12))
                .filter(|d| layers % d == 0)
                .map(|d| d.to_string())
                .collect();
            return Err(ParallelError::UnevenStages {
                pp,
                layers,
                divisors: divisors.join(", "),
            });
        }
        Ok(Stages {
            count: pp,
            per_stage: layers / pp,
        })
    }

    /// How many stages.
    pub fn count(&self) -> i64 {
        self.count
    }

    /// Decoder layers on each stage.
    pub fn layers_per_stage(&self) -> i64 {
        self.per_stage
    }

    /// The whole model's layers stage `stage` holds.
    pub fn layers(&self, stage: i64) -> Range<i64> {
        stage * self.per_stage..(stage + 1) * self.per_stage
    }

    /// The model each stage's program is written for: `cfg` with one
    /// stage's layers. Its shapes are the whole model's; only its depth
    /// differs (initialize from [`Stages::holdings`], not from it).
    pub fn stage_model(&self, cfg: &ModelConfig) -> ModelConfig {
        ModelConfig {
            num_hidden_layers: self.per_stage,
            ..cfg.clone()
        }
    }

    /// The whole model's parameters that stage `stage`'s program parameters
    /// stand for, in the order of the stage model's `param_specs`: the
    /// embedding, the stage's layers (its layer `j` the model's layer
    /// `stage * k + j`), the final norm and the LM head. Each keeps its
    /// whole-model name and initialization.
    pub fn holdings(&self, cfg: &ModelConfig, stage: i64) -> Vec<ParamSpec> {
        weight_specs_of_layers(cfg, self.layers(stage)).into_vec()
    }
}
