//! The model's parameters: each with its Hugging Face name, `[out, in]`
//! shape, initialization, the Hugging Face tensors a fused one stacks, and
//! how tensor parallelism divides it (from its role). Everything that
//! reads or lays out the weights (the forward graph, checkpoints,
//! initialization, sharding) starts from [`param_specs`].

use crate::config::ModelConfig;
use crate::parallel::{TpSplit, Units};
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::{ElementType, InstrId, Shape};

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
}

/// Rows `rows[0]..rows[1]` of a fused tensor are the Hugging Face tensor
/// `name`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HfPart {
    pub name: String,
    pub rows: [i64; 2],
}

/// The parameters of layer `i`, in Hugging Face order and naming; biases
/// follow their weights where the config asks for them.
pub(crate) fn layer_specs(cfg: &ModelConfig, i: i64) -> Vec<ParamSpec> {
    let (d, f, hd) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim());
    let (q, kv) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
    let (std, out_std) = (cfg.initializer_range, cfg.output_projection_std());
    let l = format!("model.layers.{i}.");
    // A column-parallel projection splits its output rows (and its bias)
    // by `units`; a row-parallel one splits its input columns, and its
    // bias is added after the reduction, on every rank alike.
    let linear = |name: &str, out: i64, inp: i64, init: Init, bias: bool, split: Split| {
        let (weight_split, bias_split) = match split {
            Split::Out(u) => (TpSplit::Rows(vec![u]), TpSplit::Rows(vec![u])),
            Split::In(u) => (TpSplit::Columns(u), TpSplit::Replicated),
        };
        let weight = ParamSpec {
            name: format!("{l}{name}.weight"),
            dims: vec![out, inp],
            init,
            parts: Vec::new(),
            tp: weight_split,
            layer: Some(i),
        };
        let bias = bias.then(|| ParamSpec {
            name: format!("{l}{name}.bias"),
            dims: vec![out],
            init: Init::Zeros,
            parts: Vec::new(),
            tp: bias_split,
            layer: Some(i),
        });
        std::iter::once(weight).chain(bias)
    };
    let norm = |name: &str| ParamSpec {
        name: format!("{l}{name}.weight"),
        dims: vec![d],
        init: Init::Ones,
        parts: Vec::new(),
        tp: TpSplit::Replicated,
        layer: Some(i),
    };
    let heads = |count| Units { count, size: hd };
    let columns = Units { count: f, size: 1 };
    let (hq, hkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
    let mut specs = vec![norm("input_layernorm")];
    specs.extend(linear(
        "self_attn.q_proj",
        q,
        d,
        Init::Normal(std),
        cfg.qkv_bias,
        Split::Out(heads(hq)),
    ));
    specs.extend(linear(
        "self_attn.k_proj",
        kv,
        d,
        Init::Normal(std),
        cfg.qkv_bias,
        Split::Out(heads(hkv)),
    ));
    specs.extend(linear(
        "self_attn.v_proj",
        kv,
        d,
        Init::Normal(std),
        cfg.qkv_bias,
        Split::Out(heads(hkv)),
    ));
    specs.extend(linear(
        "self_attn.o_proj",
        d,
        q,
        Init::Normal(out_std),
        cfg.o_proj_bias,
        Split::In(heads(hq)),
    ));
    specs.push(norm("post_attention_layernorm"));
    specs.extend(linear(
        "mlp.gate_proj",
        f,
        d,
        Init::Normal(std),
        cfg.mlp_bias,
        Split::Out(columns),
    ));
    specs.extend(linear(
        "mlp.up_proj",
        f,
        d,
        Init::Normal(std),
        cfg.mlp_bias,
        Split::Out(columns),
    ));
    specs.extend(linear(
        "mlp.down_proj",
        d,
        f,
        Init::Normal(out_std),
        cfg.mlp_bias,
        Split::In(columns),
    ));
    if cfg.fused_projections {
        fuse_projections(&l, specs)
    } else {
        specs
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
pub const FUSED_PROJECTIONS: [(&str, &[&str]); 2] = [
    (
        "self_attn.qkv_proj",
        &["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
    ),
    ("mlp.gate_up_proj", &["mlp.gate_proj", "mlp.up_proj"]),
];

/// `specs` (one layer's, Hugging Face layout, names under `prefix`) with
/// each group of [`FUSED_PROJECTIONS`] replaced by one tensor where its
/// first member stood, recording which rows hold which member.
fn fuse_projections(prefix: &str, mut specs: Vec<ParamSpec>) -> Vec<ParamSpec> {
    for (fused, members) in FUSED_PROJECTIONS {
        for suffix in ["weight", "bias"] {
            let names: Vec<String> = members
                .iter()
                .map(|m| format!("{prefix}{m}.{suffix}"))
                .collect();
            let Some(at) = specs.iter().position(|p| p.name == names[0]) else {
                continue;
            };
            // Members stand in order; removing from the back keeps the
            // earlier positions valid.
            let positions: Vec<usize> = names
                .iter()
                .filter_map(|n| specs.iter().position(|p| &p.name == n))
                .collect();
            let mut taken: Vec<ParamSpec> =
                positions.iter().rev().map(|&i| specs.remove(i)).collect();
            taken.reverse();
            let mut row = 0;
            let parts = taken
                .iter()
                .map(|p| {
                    let part = HfPart {
                        name: p.name.clone(),
                        rows: [row, row + p.dims[0]],
                    };
                    row += p.dims[0];
                    part
                })
                .collect();
            debug_assert!(taken.iter().all(|p| p.init == taken[0].init));
            let mut dims = taken[0].dims.clone();
            dims[0] = row;
            // Each member keeps its own units: a rank holds its heads of q,
            // of k and of v (or its columns of gate and of up).
            let blocks = taken
                .iter()
                .flat_map(|p| match &p.tp {
                    TpSplit::Rows(blocks) => blocks.clone(),
                    _ => Vec::new(),
                })
                .collect();
            specs.insert(
                at,
                ParamSpec {
                    name: format!("{prefix}{fused}.{suffix}"),
                    dims,
                    init: taken[0].init,
                    parts,
                    tp: TpSplit::Rows(blocks),
                    layer: taken[0].layer,
                },
            );
        }
    }
    specs
}

/// Parameters outside the layers: the embedding first, then the final norm
/// and the LM head (absent when tied).
pub(crate) fn outer_specs(cfg: &ModelConfig) -> (ParamSpec, Vec<ParamSpec>) {
    let (d, v) = (cfg.hidden_size, cfg.vocab_size);
    let embed = ParamSpec {
        name: "model.embed_tokens.weight".into(),
        dims: vec![v, d],
        init: Init::Normal(cfg.initializer_range),
        parts: Vec::new(),
        tp: TpSplit::Vocab,
        layer: None,
    };
    let mut tail = vec![ParamSpec {
        name: "model.norm.weight".into(),
        dims: vec![d],
        init: Init::Ones,
        parts: Vec::new(),
        tp: TpSplit::Replicated,
        layer: None,
    }];
    if !cfg.tie_word_embeddings {
        tail.push(ParamSpec {
            name: "lm_head.weight".into(),
            dims: vec![v, d],
            init: Init::Normal(cfg.initializer_range),
            parts: Vec::new(),
            tp: TpSplit::Vocab,
            layer: None,
        });
    }
    (embed, tail)
}

/// Every trainable parameter in Hugging Face order and naming.
pub fn param_specs(cfg: &ModelConfig) -> Vec<ParamSpec> {
    let (embed, tail) = outer_specs(cfg);
    let mut specs = vec![embed];
    for i in 0..cfg.num_hidden_layers {
        specs.extend(layer_specs(cfg, i));
    }
    specs.extend(tail);
    specs
}

/// The number of parameters without listing every layer's (a config may ask
/// for absurd depths), or `None` when it overflows an i64.
pub(crate) fn checked_parameter_count(cfg: &ModelConfig) -> Option<i64> {
    let size = |p: &ParamSpec| p.dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
    let sum = |ps: &[ParamSpec]| ps.iter().try_fold(0i64, |acc, p| acc.checked_add(size(p)?));
    let (embed, tail) = outer_specs(cfg);
    let layers = cfg
        .num_hidden_layers
        .checked_mul(sum(&layer_specs(cfg, 0))?)?;
    size(&embed)?.checked_add(layers)?.checked_add(sum(&tail)?)
}

/// Declares the model's parameters (in [`param_specs`] order) in `b`.
pub fn declare_params(b: &mut Builder, cfg: &ModelConfig, ty: ElementType) -> Vec<InstrId> {
    param_specs(cfg)
        .into_iter()
        .map(|p| b.parameter(&p.name, Shape::array(ty, p.dims)))
        .collect()
}
