//! The whole model's names of what each stage holds: every stage's program
//! names its layers as the stage model's (`model.layers.0.` and on), and
//! a state that names no rank (what `--save-state` writes, what the
//! sharded-equals-unsharded checks compare) names them as the whole
//! model's.

use crate::train_step::{state_name, TensorSpec};
use hlatc_models::parallel::stages::Stages;
use hlatc_models::{param_specs, ModelConfig};
use std::collections::HashMap;

/// For each stage, the whole model's name of each stage-model parameter.
pub struct StageNames {
    per_stage: Vec<HashMap<String, String>>,
}

impl StageNames {
    pub fn new(model: &ModelConfig, stages: &Stages) -> Self {
        let local = param_specs(&stages.stage_model(model));
        let per_stage = (0..stages.count())
            .map(|s| {
                local
                    .iter()
                    .zip(stages.holdings(model, s))
                    .map(|(l, g)| (l.name.clone(), g.name))
                    .collect()
            })
            .collect();
        StageNames { per_stage }
    }

    /// The stages.
    pub fn count(&self) -> usize {
        self.per_stage.len()
    }

    /// The whole state's name of input `spec` on stage `stage`: a layer's
    /// parameter (or its moment, master weight or accumulator) under the
    /// whole model's layer number; anything else as it is.
    pub fn whole_name(&self, spec: &TensorSpec, stage: usize) -> String {
        let global = spec
            .parameter
            .as_ref()
            .and_then(|p| self.per_stage[stage].get(p));
        match global {
            Some(global) => state_name(spec.role, global),
            None => spec.name.clone(),
        }
    }

    /// Whether every stage holds `spec` alike (it belongs to no layer: the
    /// embedding, final norm and LM head and what they carry, the step
    /// counter, the rounding RNG): the whole state takes it from stage 0.
    pub fn held_by_every_stage(&self, spec: &TensorSpec) -> bool {
        spec.layer.is_none()
    }
}
