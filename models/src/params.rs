//! The model's parameters: each with its Hugging Face name, `[out, in]`
//! shape, initialization, the Hugging Face tensors a fused one stacks, and
//! how tensor parallelism divides it (from its role). They are declared
//! once, by role, in [`weight_specs`] (a [`Weights`] of specs); everything
//! that reads or lays out the weights (the forward graph, checkpoints,
//! initialization, sharding) starts from it or from [`param_specs`], the
//! same declaration flattened in Hugging Face order.

use crate::config::ModelConfig;
use crate::parallel::{TpSplit, Units};
use crate::weights::{
    DenseMlp, GateUp, LayerWeights, Linear, LmHead, Mlp, Qkv, SharedExpert, SparseMlp, Weights,
};
pub use crate::weights::{ParamRole, Projection};
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::{ElementType, InstrId, Shape};
use std::ops::Range;

/// How a parameter is initialized (the scaled scheme that kept HLAT stable).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal with this standard deviation.
    Normal(f64),
    Ones,
    Zeros,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub dims: Vec<i64>,
    pub init: Init,
    /// For a fused tensor, the Hugging Face tensors it stacks, in row
    /// order; empty for a tensor stored under its Hugging Face name.
    pub parts: Vec<HfPart>,
    /// How tensor parallelism divides it, from its role.
    pub tp: TpSplit,
    /// The decoder layer it belongs to; `None` for the embedding, the
    /// final norm and the LM head. Pipeline stages hold layers, and share
    /// the rest (see [`crate::parallel::stages`]).
    pub layer: Option<i64>,
    /// What it is in the model (in its layer, where it has one): where
    /// [`crate::weights::Weights`] holds it.
    pub role: ParamRole,
}

impl ParamSpec {
    /// Whether its leading dimension is the experts of a mixture of
    /// experts, which expert parallelism divides over the EP ranks.
    pub fn holds_experts(&self) -> bool {
        matches!(self.role, ParamRole::Experts(_))
    }
}

impl crate::weights::Placement for ParamSpec {
    fn name(&self) -> &str {
        &self.name
    }
    fn role(&self) -> ParamRole {
        self.role
    }
    fn layer(&self) -> Option<i64> {
        self.layer
    }
}

/// Rows `rows[0]..rows[1]` of a fused tensor are the Hugging Face tensor
/// `name`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HfPart {
    pub name: String,
    pub rows: [i64; 2],
    /// The Hugging Face tensor is one row of the leading dimension
    /// without that dimension: one expert of a stack of experts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stacked: bool,
}

impl HfPart {
    /// The Hugging Face tensor's shape, as part of a tensor of `dims`.
    pub fn dims(&self, dims: &[i64]) -> Vec<i64> {
        match self.stacked {
            true => dims[1..].to_vec(),
            false => {
                let mut d = dims.to_vec();
                d[0] = self.rows[1] - self.rows[0];
                d
            }
        }
    }
}

/// Every parameter of `cfg` by role, each declared where its field is:
/// the one declaration of the model's parameters, which
/// [`param_specs`] flattens and the forward pass reads.
pub fn weight_specs(cfg: &ModelConfig) -> Weights<ParamSpec> {
    weight_specs_of_layers(cfg, 0..cfg.num_hidden_layers)
}

/// The embedding, the decoder layers `layers` (each under its own
/// number) and the final norm and LM head of `cfg`: the whole model's, or
/// what one pipeline stage holds of it.
pub(crate) fn weight_specs_of_layers(cfg: &ModelConfig, layers: Range<i64>) -> Weights<ParamSpec> {
    let (d, v) = (cfg.hidden_size, cfg.vocab_size);
    let outer = |role: ParamRole, dims: Vec<i64>, init: Init, tp: TpSplit| ParamSpec {
        name: role.hf_name(0),
        dims,
        init,
        parts: Vec::new(),
        tp,
        layer: None,
        role,
    };
    let std = cfg.initializer_range;
    Weights {
        embed: outer(
            ParamRole::Embedding,
            vec![v, d],
            Init::Normal(std),
            TpSplit::Vocab,
        ),
        layers: layers.map(|i| layer_weights(cfg, i)).collect(),
        final_norm: outer(
            ParamRole::FinalNorm,
            vec![d],
            Init::Ones,
            TpSplit::Replicated,
        ),
        lm_head: match cfg.tie_word_embeddings {
            true => LmHead::Tied,
            false => LmHead::Own(outer(
                ParamRole::LmHead,
                vec![v, d],
                Init::Normal(std),
                TpSplit::Vocab,
            )),
        },
    }
}

/// The parameters of layer `i`; biases where the config asks for them,
/// q/k/v and gate/up fused where it stores them so.
pub(crate) fn layer_weights(cfg: &ModelConfig, i: i64) -> LayerWeights<ParamSpec> {
    let sparse = cfg.moe.as_ref().is_some_and(|m| m.is_sparse(i));
    layer_weights_of_kind(cfg, i, sparse)
}

/// [`layer_weights`] of layer `i` with a sparse MLP or a dense one.
fn layer_weights_of_kind(cfg: &ModelConfig, i: i64, sparse: bool) -> LayerWeights<ParamSpec> {
    let (d, f, hd) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim());
    let (q_rows, kv_rows) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
    let (std, out_std) = (cfg.initializer_range, cfg.output_projection_std());
    let spec = |role: ParamRole, dims: Vec<i64>, init: Init, tp: TpSplit| ParamSpec {
        name: role.hf_name(i),
        dims,
        init,
        parts: Vec::new(),
        tp,
        layer: Some(i),
        role,
    };
    // A column-parallel projection splits its output rows (and its bias)
    // by `units`; a row-parallel one splits its input columns, and its
    // bias is added after the reduction, on every rank alike.
    let linear = |p: Projection, out: i64, inp: i64, init: Init, bias: bool, split: Split| {
        let (weight_split, bias_split) = match split {
            Split::Out(u) => (TpSplit::Rows(vec![u]), TpSplit::Rows(vec![u])),
            Split::In(u) => (TpSplit::Columns(u), TpSplit::Replicated),
        };
        Linear {
            projection: p,
            weight: spec(ParamRole::Weight(p), vec![out, inp], init, weight_split),
            bias: bias.then(|| spec(ParamRole::Bias(p), vec![out], Init::Zeros, bias_split)),
        }
    };
    let norm = |role| spec(role, vec![d], Init::Ones, TpSplit::Replicated);
    let heads = |count| Units { count, size: hd };
    let (hq, hkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
    let column =
        |p, out, bias, units| linear(p, out, d, Init::Normal(std), bias, Split::Out(units));
    let [q, k, v] = [
        (Projection::Q, q_rows, hq),
        (Projection::K, kv_rows, hkv),
        (Projection::V, kv_rows, hkv),
    ]
    .map(|(p, out, h)| column(p, out, cfg.qkv_bias, heads(h)));
    let fused = cfg.fused_projections;
    let dense = |[gate, up, down]: [Projection; 3], f: i64, fused: bool| {
        let columns = Units { count: f, size: 1 };
        let [gate, up] = [gate, up].map(|p| column(p, f, cfg.mlp_bias, columns));
        DenseMlp {
            gate_up: match fused {
                true => GateUp::Fused(fuse(Projection::GateUp, i, [gate, up])),
                false => GateUp::Separate { gate, up },
            },
            down_proj: linear(
                down,
                d,
                f,
                Init::Normal(out_std),
                cfg.mlp_bias,
                Split::In(columns),
            ),
        }
    };
    let mlp = match &cfg.moe {
        Some(moe) if sparse => {
            let names = cfg.model_type.family().experts;
            let stacked = |role: ParamRole, dims: Vec<i64>, init: Init, tp| ParamSpec {
                parts: names.map_or_else(Vec::new, |n| n.parts(role, i, dims[0])),
                ..spec(role, dims, init, tp)
            };
            let (e, fe) = (moe.num_experts, moe.expert_intermediate_size);
            // Each expert is split over TP as the dense MLP is: its gate
            // and up rows, its down columns.
            let columns = Units { count: fe, size: 1 };
            Mlp::Sparse(SparseMlp {
                router: stacked(
                    ParamRole::Router,
                    vec![e, d],
                    Init::Normal(std),
                    TpSplit::Replicated,
                ),
                gate: stacked(
                    ParamRole::Experts(Projection::Gate),
                    vec![e, fe, d],
                    Init::Normal(std),
                    TpSplit::ExpertRows(columns),
                ),
                up: stacked(
                    ParamRole::Experts(Projection::Up),
                    vec![e, fe, d],
                    Init::Normal(std),
                    TpSplit::ExpertRows(columns),
                ),
                down: stacked(
                    ParamRole::Experts(Projection::Down),
                    vec![e, d, fe],
                    Init::Normal(out_std),
                    TpSplit::ExpertColumns(columns),
                ),
                shared: moe.shared_expert_intermediate_size.map(|fs| SharedExpert {
                    mlp: dense(
                        [
                            Projection::SharedGate,
                            Projection::SharedUp,
                            Projection::SharedDown,
                        ],
                        fs,
                        false,
                    ),
                    gate: spec(
                        ParamRole::SharedExpertGate,
                        vec![1, d],
                        Init::Normal(std),
                        TpSplit::Replicated,
                    ),
                }),
            })
        }
        _ => Mlp::Dense(dense(
            [Projection::Gate, Projection::Up, Projection::Down],
            f,
            fused,
        )),
    };
    LayerWeights {
        layer: i,
        input_norm: norm(ParamRole::InputNorm),
        qkv: match fused {
            true => Qkv::Fused(fuse(Projection::Qkv, i, [q, k, v])),
            false => Qkv::Separate { q, k, v },
        },
        o_proj: linear(
            Projection::O,
            d,
            q_rows,
            Init::Normal(out_std),
            cfg.o_proj_bias,
            Split::In(heads(hq)),
        ),
        qk_norm: cfg.qk_norm.then(|| {
            [ParamRole::QNorm, ParamRole::KNorm]
                .map(|role| spec(role, vec![hd], Init::Ones, TpSplit::Replicated))
        }),
        post_attention_norm: norm(ParamRole::PostAttentionNorm),
        mlp,
    }
}

/// Which dimension of a projection tensor parallelism splits.
#[derive(Clone, Copy)]
enum Split {
    /// Output rows, by these units (column-parallel).
    Out(Units),
    /// Input columns, by these units (row-parallel).
    In(Units),
}

/// The fused tensors, each stacking the rows of these Hugging Face
/// projections (weights, and biases where the model has them), in order.
/// [`Projection::members`] is the same table, by role.
pub const FUSED_PROJECTIONS: [(&str, &[&str]); 2] = [
    (
        "self_attn.qkv_proj",
        &["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
    ),
    ("mlp.gate_up_proj", &["mlp.gate_proj", "mlp.up_proj"]),
];

/// `members` (of layer `layer`, Hugging Face layout) as the one projection
/// `fused` that stacks their rows, recording which rows hold which member;
/// its bias stacks theirs where they have them.
fn fuse<const K: usize>(
    fused: Projection,
    layer: i64,
    members: [Linear<ParamSpec>; K],
) -> Linear<ParamSpec> {
    debug_assert_eq!(
        members.iter().map(|m| m.projection).collect::<Vec<_>>(),
        fused.members()
    );
    let biases: Option<Vec<ParamSpec>> = members.iter().map(|m| m.bias.clone()).collect();
    let weights: Vec<ParamSpec> = members.into_iter().map(|m| m.weight).collect();
    Linear {
        projection: fused,
        weight: stack(ParamRole::Weight(fused), layer, &weights),
        bias: biases.map(|b| stack(ParamRole::Bias(fused), layer, &b)),
    }
}

/// One tensor in `role` stacking the rows of `taken`, in order.
fn stack(role: ParamRole, layer: i64, taken: &[ParamSpec]) -> ParamSpec {
    let mut row = 0;
    let parts = taken
        .iter()
        .map(|p| {
            let part = HfPart {
                name: p.name.clone(),
                rows: [row, row + p.dims[0]],
                stacked: false,
            };
            row += p.dims[0];
            part
        })
        .collect();
    debug_assert!(taken.iter().all(|p| p.init == taken[0].init));
    let mut dims = taken[0].dims.clone();
    dims[0] = row;
    // Each member keeps its own units: a rank holds its heads of q, of k
    // and of v (or its columns of gate and of up).
    let blocks = taken
        .iter()
        .flat_map(|p| match &p.tp {
            TpSplit::Rows(blocks) => blocks.clone(),
            _ => Vec::new(),
        })
        .collect();
    ParamSpec {
        name: role.hf_name(layer),
        dims,
        init: taken[0].init,
        parts,
        tp: TpSplit::Rows(blocks),
        layer: Some(layer),
        role,
    }
}

/// Every trainable parameter in Hugging Face order and naming.
pub fn param_specs(cfg: &ModelConfig) -> Vec<ParamSpec> {
    weight_specs(cfg).into_vec()
}

impl ModelConfig {
    /// Number of trainable parameters, saturating at `i64::MAX` (which
    /// [`ModelConfig::validate`] refuses), so it is never negative.
    pub fn parameter_count(&self) -> i64 {
        self.checked_parameter_count().unwrap_or(i64::MAX)
    }

    /// Number of trainable parameters, or `None` when it overflows an i64.
    /// Counted from the parameter specs themselves, so the two agree.
    pub fn checked_parameter_count(&self) -> Option<i64> {
        checked_parameter_count(self)
    }
}

impl ModelConfig {
    /// The routed experts' parameters (the stacked tensors of every sparse
    /// layer; 0 for a dense model), saturating: what expert parallelism
    /// divides.
    pub fn expert_parameter_count(&self) -> i64 {
        let Some(moe) = &self.moe else { return 0 };
        let sparse = moe.sparse_layer_count(self.num_hidden_layers);
        let per_layer: i64 = layer_weights_of_kind(self, 0, true)
            .into_vec()
            .iter()
            .filter(|p| p.holds_experts())
            .map(|p| p.dims.iter().product::<i64>())
            .sum();
        sparse.saturating_mul(per_layer)
    }

    /// The parameters one token's pass reads: every parameter but the
    /// routed experts it did not choose (`k` of `E` each sparse layer). A
    /// dense model's is [`ModelConfig::parameter_count`].
    pub fn active_parameter_count(&self) -> i64 {
        let Some(moe) = &self.moe else {
            return self.parameter_count();
        };
        let experts = self.expert_parameter_count() as f64;
        let unread = experts * (1.0 - moe.num_experts_per_tok as f64 / moe.num_experts as f64);
        (self.parameter_count() as f64 - unread) as i64
    }
}

/// The number of parameters without listing every layer's (a config may ask
/// for absurd depths), or `None` when it overflows an i64.
pub(crate) fn checked_parameter_count(cfg: &ModelConfig) -> Option<i64> {
    let size = |p: &ParamSpec| p.dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
    let sum = |ps: &[ParamSpec]| ps.iter().try_fold(0i64, |acc, p| acc.checked_add(size(p)?));
    let outer = weight_specs_of_layers(cfg, 0..0).into_vec();
    let sparse = cfg
        .moe
        .as_ref()
        .map_or(0, |m| m.sparse_layer_count(cfg.num_hidden_layers));
    let of_kind = |sparse: bool| sum(&layer_weights_of_kind(cfg, 0, sparse).into_vec());
    let layers = (cfg.num_hidden_layers - sparse).checked_mul(of_kind(false)?)?;
    let layers = match sparse {
        0 => layers,
        n => layers.checked_add(n.checked_mul(of_kind(true)?)?)?,
    };
    sum(&outer)?.checked_add(layers)
}

/// Declares the model's parameters (in [`param_specs`] order) in `b`.
pub fn declare_params(b: &mut Builder, cfg: &ModelConfig, ty: ElementType) -> Vec<InstrId> {
    param_specs(cfg)
        .into_iter()
        .map(|p| b.parameter(&p.name, Shape::array(ty, p.dims)))
        .collect()
}
