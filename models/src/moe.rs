//! A mixture-of-experts MLP's configuration: how many experts, how many
//! each token is routed to, which layers are sparse, whether a shared
//! expert runs beside them and how the router's load-balancing loss joins
//! the step's loss. Field names are Hugging Face's (Mixtral, Qwen2-MoE,
//! Qwen3-MoE), so a `config.json` maps one to one.

use crate::field_problem::FieldProblem;
use serde::{Deserialize, Serialize};

/// The sparse MLP of a mixture-of-experts model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeConfig {
    /// Experts in each sparse layer (Mixtral's `num_local_experts`,
    /// Qwen's `num_experts`).
    pub num_experts: i64,
    /// Experts each token is routed to (top-k of the router's softmax).
    pub num_experts_per_tok: i64,
    /// Each expert's SwiGLU width (Mixtral's `intermediate_size`, Qwen's
    /// `moe_intermediate_size`).
    pub expert_intermediate_size: i64,
    /// Whether the top-k probabilities are renormalized to sum to one
    /// (always for Mixtral).
    pub norm_topk_prob: bool,
    /// Qwen2-MoE's shared expert: a SwiGLU MLP of this width every token
    /// runs through, scaled by `sigmoid(shared_expert_gate(x))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_expert_intermediate_size: Option<i64>,
    /// Layer `i` is sparse when `(i + 1) % decoder_sparse_step == 0` and
    /// it is not in `mlp_only_layers` (Qwen's rule; Mixtral's every layer).
    pub decoder_sparse_step: i64,
    pub mlp_only_layers: Vec<i64>,
    /// The load-balancing loss (`load_balancing_loss_func`) is added to
    /// the step's loss, times `router_aux_loss_coef`, when
    /// `output_router_logits` is set, as Hugging Face trains.
    pub output_router_logits: bool,
    pub router_aux_loss_coef: f64,
    /// Not a Hugging Face key (`--capacity-factor`): each expert takes at
    /// most `C = min(S, ceil(S * k * F / E))` tokens of each sequence of
    /// `S`, the earliest first, and a token routed past a full expert is
    /// dropped from it (its weight 0). `None` is dropless. Counted per
    /// sequence, not per rank, so dividing the batch over ranks never
    /// changes which tokens are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_factor: Option<f64>,
}

impl MoeConfig {
    /// Whether layer `layer` has the sparse MLP (else the dense one).
    pub fn is_sparse(&self, layer: i64) -> bool {
        !self.mlp_only_layers.contains(&layer) && (layer + 1) % self.decoder_sparse_step.max(1) == 0
    }

    /// How many of `layers` layers are sparse, counted without listing
    /// them (a config may ask for absurd depths).
    pub fn sparse_layer_count(&self, layers: i64) -> i64 {
        let step = self.decoder_sparse_step.max(1);
        let mut dense_listed: Vec<i64> = self
            .mlp_only_layers
            .iter()
            .copied()
            .filter(|&l| (0..layers).contains(&l) && (l + 1) % step == 0)
            .collect();
        dense_listed.sort_unstable();
        dense_listed.dedup();
        layers / step - dense_listed.len() as i64
    }

    /// Slots each expert has for the tokens of one sequence of `seq_len`:
    /// `min(S, ceil(S * k * F / E))` under a capacity factor `F`, `S`
    /// (every token fits) without one.
    pub fn capacity(&self, seq_len: i64) -> i64 {
        match self.capacity_factor {
            None => seq_len,
            Some(f) => {
                let wanted =
                    seq_len as f64 * self.num_experts_per_tok as f64 * f / self.num_experts as f64;
                (wanted.ceil() as i64).clamp(1, seq_len)
            }
        }
    }

    /// Whether the load-balancing loss is part of the step's loss.
    pub fn aux_loss(&self) -> bool {
        self.output_router_logits && self.router_aux_loss_coef != 0.0
    }

    /// The first rule the fields break, as `(field, problem)`, for a
    /// model of `layers` decoder layers.
    pub fn problem(&self, layers: i64) -> Option<(&'static str, FieldProblem)> {
        let positive = [
            ("num_experts", self.num_experts),
            ("num_experts_per_tok", self.num_experts_per_tok),
            ("moe_intermediate_size", self.expert_intermediate_size),
            ("decoder_sparse_step", self.decoder_sparse_step),
        ];
        if let Some((field, v)) = positive.into_iter().find(|(_, v)| *v <= 0) {
            return Some((field, FieldProblem::NotPositive(v)));
        }
        if let Some(s) = self.shared_expert_intermediate_size.filter(|&s| s <= 0) {
            return Some((
                "shared_expert_intermediate_size",
                FieldProblem::NotPositive(s),
            ));
        }
        if self.num_experts_per_tok > self.num_experts {
            return Some((
                "num_experts_per_tok",
                FieldProblem::MoreExpertsPerTokenThanExperts {
                    per_token: self.num_experts_per_tok,
                    experts: self.num_experts,
                },
            ));
        }
        if let Some(&l) = self.mlp_only_layers.iter().find(|&&l| l < 0 || l >= layers) {
            return Some((
                "mlp_only_layers",
                FieldProblem::NoSuchLayer { layer: l, layers },
            ));
        }
        if let Some(f) = self
            .capacity_factor
            .filter(|f| !(*f > 0.0 && f.is_finite()))
        {
            return Some(("capacity_factor", FieldProblem::NotPositiveNumber(f)));
        }
        if !(self.router_aux_loss_coef >= 0.0 && self.router_aux_loss_coef.is_finite()) {
            return Some((
                "router_aux_loss_coef",
                FieldProblem::Negative(self.router_aux_loss_coef),
            ));
        }
        None
    }
}

/// A `--capacity-factor` (Python's `capacity_factor=`) the model cannot
/// take.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CapacityError {
    #[error("{}: {model_type} is a dense model, with no experts to fill", crate::option_name::OptionName::CapacityFactor.set(.factor))]
    Dense {
        factor: f64,
        model_type: &'static str,
    },
    #[error("{} must be a positive number, got {got}", crate::option_name::OptionName::CapacityFactor.named(), got = .0)]
    NotPositive(f64),
}

impl crate::ModelConfig {
    /// `self` with each expert's capacity set by `factor` (`None`:
    /// dropless, as the model was read).
    pub fn set_capacity_factor(&mut self, factor: Option<f64>) -> Result<(), CapacityError> {
        let Some(factor) = factor else {
            return Ok(());
        };
        if !(factor > 0.0 && factor.is_finite()) {
            return Err(CapacityError::NotPositive(factor));
        }
        match &mut self.moe {
            Some(moe) => {
                moe.capacity_factor = Some(factor);
                Ok(())
            }
            None => Err(CapacityError::Dense {
                factor,
                model_type: self.model_type.name(),
            }),
        }
    }
}
