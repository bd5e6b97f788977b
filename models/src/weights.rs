//! The model's parameters by role: [`Weights`] has one field for each
//! (the embedding; each layer's norms and projections; the final norm and
//! the LM head), generic over what a field holds: the [`ParamSpec`] that
//! declares it ([`crate::params::weight_specs`]), or the instruction a
//! forward pass reads it from.
//!
//! The structure is the contract between the declaration and its readers,
//! checked by the compiler: a layer without its `o_proj`, or with both a
//! fused `qkv_proj` and a separate `q_proj`, cannot be written down. Its
//! order (Hugging Face's, [`crate::params::param_specs`]') lives in one
//! function, [`Weights::try_map`]: [`Weights::into_vec`] flattens by it,
//! and the forward pass maps the instructions declared in that order back
//! onto the fields by it. Each [`ParamSpec`] also says where it sits, by
//! its `layer` and its [`ParamRole`]; [`Weights::from_specs`] places a list
//! of specs by those alone, refusing a missing, repeated or misplaced one
//! with a [`WeightsError`].

use std::collections::BTreeMap;
use std::convert::Infallible;

/// A decoder layer's projection, by its Hugging Face module name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    Q,
    K,
    V,
    /// q, k and v fused: their rows stacked in that order.
    Qkv,
    O,
    Gate,
    Up,
    /// gate and up fused: their rows stacked in that order.
    GateUp,
    Down,
    /// Qwen2-MoE's shared expert: a SwiGLU MLP beside the routed ones.
    SharedGate,
    SharedUp,
    SharedDown,
}

impl Projection {
    /// The module's path within its layer (`self_attn.q_proj`).
    pub const fn name(self) -> &'static str {
        match self {
            Projection::Q => "self_attn.q_proj",
            Projection::K => "self_attn.k_proj",
            Projection::V => "self_attn.v_proj",
            Projection::Qkv => "self_attn.qkv_proj",
            Projection::O => "self_attn.o_proj",
            Projection::Gate => "mlp.gate_proj",
            Projection::Up => "mlp.up_proj",
            Projection::GateUp => "mlp.gate_up_proj",
            Projection::Down => "mlp.down_proj",
            Projection::SharedGate => "mlp.shared_expert.gate_proj",
            Projection::SharedUp => "mlp.shared_expert.up_proj",
            Projection::SharedDown => "mlp.shared_expert.down_proj",
        }
    }

    /// The module's own name (`q_proj`): the provenance scope its
    /// instructions are built in.
    pub const fn scope(self) -> &'static str {
        match self {
            Projection::Q => "q_proj",
            Projection::K => "k_proj",
            Projection::V => "v_proj",
            Projection::Qkv => "qkv_proj",
            Projection::O => "o_proj",
            Projection::Gate => "gate_proj",
            Projection::Up => "up_proj",
            Projection::GateUp => "gate_up_proj",
            Projection::Down => "down_proj",
            Projection::SharedGate => "shared_expert.gate_proj",
            Projection::SharedUp => "shared_expert.up_proj",
            Projection::SharedDown => "shared_expert.down_proj",
        }
    }

    /// The Hugging Face projections a fused one stacks, in row order;
    /// empty for one that is not fused.
    pub const fn members(self) -> &'static [Projection] {
        match self {
            Projection::Qkv => &[Projection::Q, Projection::K, Projection::V],
            Projection::GateUp => &[Projection::Gate, Projection::Up],
            _ => &[],
        }
    }
}

/// What a parameter is in the model. A layer's roles come with the
/// spec's `layer`; the embedding, the final norm and the LM head have
/// none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamRole {
    Embedding,
    FinalNorm,
    LmHead,
    InputNorm,
    PostAttentionNorm,
    Weight(Projection),
    Bias(Projection),
    /// Qwen3's RMSNorm over each query head, and each key head.
    QNorm,
    KNorm,
    /// A sparse MLP's router, `[experts, hidden]`.
    Router,
    /// Every expert's gate, up or down projection, stacked along a
    /// leading experts dimension (`[E, out, in]`).
    Experts(Projection),
    /// Qwen2-MoE's `shared_expert_gate`, `[1, hidden]`.
    SharedExpertGate,
}

impl ParamRole {
    /// Whether the role is a decoder layer's.
    pub const fn in_layer(self) -> bool {
        !matches!(
            self,
            ParamRole::Embedding | ParamRole::FinalNorm | ParamRole::LmHead
        )
    }

    /// The parameter's Hugging Face name; a layer's under
    /// `model.layers.{layer}.` (`layer` is not read for the others).
    pub fn hf_name(self, layer: i64) -> String {
        let l = format!("model.layers.{layer}.");
        match self {
            ParamRole::Embedding => "model.embed_tokens.weight".into(),
            ParamRole::FinalNorm => "model.norm.weight".into(),
            ParamRole::LmHead => "lm_head.weight".into(),
            ParamRole::InputNorm => format!("{l}input_layernorm.weight"),
            ParamRole::PostAttentionNorm => format!("{l}post_attention_layernorm.weight"),
            ParamRole::Weight(p) => format!("{l}{}.weight", p.name()),
            ParamRole::Bias(p) => format!("{l}{}.bias", p.name()),
            ParamRole::QNorm => format!("{l}self_attn.q_norm.weight"),
            ParamRole::KNorm => format!("{l}self_attn.k_norm.weight"),
            ParamRole::Router => format!("{l}mlp.gate.weight"),
            ParamRole::Experts(p) => format!("{l}mlp.experts.{}.weight", p.scope()),
            ParamRole::SharedExpertGate => format!("{l}mlp.shared_expert_gate.weight"),
        }
    }
}

/// A projection `x W^T (+ b)`: its weight (`[out, in]`) and, where the
/// model has one, its bias.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear<T> {
    pub projection: Projection,
    pub weight: T,
    pub bias: Option<T>,
}

/// A layer's query, key and value projections.
#[derive(Clone, Debug, PartialEq)]
pub enum Qkv<T> {
    /// One `qkv_proj`, rows q, k, v.
    Fused(Linear<T>),
    Separate {
        q: Linear<T>,
        k: Linear<T>,
        v: Linear<T>,
    },
}

/// A layer's gate and up projections.
#[derive(Clone, Debug, PartialEq)]
pub enum GateUp<T> {
    /// One `gate_up_proj`, rows gate, up.
    Fused(Linear<T>),
    Separate {
        gate: Linear<T>,
        up: Linear<T>,
    },
}

/// A SwiGLU MLP's projections.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMlp<T> {
    pub gate_up: GateUp<T>,
    pub down_proj: Linear<T>,
}

/// A mixture of experts: the router, the experts' projections (each
/// stacked over the experts) and, for Qwen2-MoE, the shared expert and
/// its gate.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseMlp<T> {
    pub router: T,
    /// `[E, I, H]`, `[E, I, H]` and `[E, H, I]`.
    pub gate: T,
    pub up: T,
    pub down: T,
    pub shared: Option<SharedExpert<T>>,
}

/// Qwen2-MoE's shared expert: an MLP every token runs through, scaled by
/// `sigmoid(x gate^T)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedExpert<T> {
    pub mlp: DenseMlp<T>,
    pub gate: T,
}

/// A layer's MLP: dense, or a mixture of experts.
#[derive(Clone, Debug, PartialEq)]
pub enum Mlp<T> {
    Dense(DenseMlp<T>),
    Sparse(SparseMlp<T>),
}

/// One decoder layer's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerWeights<T> {
    /// Which layer of the model (its scope, `layers.{layer}`).
    pub layer: i64,
    pub input_norm: T,
    pub qkv: Qkv<T>,
    pub o_proj: Linear<T>,
    /// Qwen3's per-head RMSNorm weights, for queries and for keys.
    pub qk_norm: Option<[T; 2]>,
    pub post_attention_norm: T,
    pub mlp: Mlp<T>,
}

/// The LM head: its own `[vocab, hidden]` matrix, or the embedding's
/// (`tie_word_embeddings`).
#[derive(Clone, Debug, PartialEq)]
pub enum LmHead<T> {
    Tied,
    Own(T),
}

/// Every parameter of a model (or of a pipeline stage's share of one), by
/// role.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights<T> {
    pub embed: T,
    pub layers: Vec<LayerWeights<T>>,
    pub final_norm: T,
    pub lm_head: LmHead<T>,
}

impl<T> Linear<T> {
    fn try_map<U, E>(
        self,
        f: &mut impl FnMut(ParamRole, Option<i64>, T) -> Result<U, E>,
        layer: i64,
    ) -> Result<Linear<U>, E> {
        let p = self.projection;
        let weight = f(ParamRole::Weight(p), Some(layer), self.weight)?;
        let bias = match self.bias {
            Some(b) => Some(f(ParamRole::Bias(p), Some(layer), b)?),
            None => None,
        };
        Ok(Linear {
            projection: p,
            weight,
            bias,
        })
    }
}

impl<T> DenseMlp<T> {
    fn try_map<U, E>(
        self,
        f: &mut impl FnMut(ParamRole, Option<i64>, T) -> Result<U, E>,
        layer: i64,
    ) -> Result<DenseMlp<U>, E> {
        let gate_up = match self.gate_up {
            GateUp::Fused(gate_up) => GateUp::Fused(gate_up.try_map(f, layer)?),
            GateUp::Separate { gate, up } => {
                let gate = gate.try_map(f, layer)?;
                let up = up.try_map(f, layer)?;
                GateUp::Separate { gate, up }
            }
        };
        let down_proj = self.down_proj.try_map(f, layer)?;
        Ok(DenseMlp { gate_up, down_proj })
    }
}

impl<T> SparseMlp<T> {
    /// Router, experts' gate, up and down, then the shared expert's MLP
    /// and its gate.
    fn try_map<U, E>(
        self,
        f: &mut impl FnMut(ParamRole, Option<i64>, T) -> Result<U, E>,
        layer: i64,
    ) -> Result<SparseMlp<U>, E> {
        let l = Some(layer);
        let router = f(ParamRole::Router, l, self.router)?;
        let gate = f(ParamRole::Experts(Projection::Gate), l, self.gate)?;
        let up = f(ParamRole::Experts(Projection::Up), l, self.up)?;
        let down = f(ParamRole::Experts(Projection::Down), l, self.down)?;
        let shared = match self.shared {
            Some(s) => Some(SharedExpert {
                mlp: s.mlp.try_map(f, layer)?,
                gate: f(ParamRole::SharedExpertGate, l, s.gate)?,
            }),
            None => None,
        };
        Ok(SparseMlp {
            router,
            gate,
            up,
            down,
            shared,
        })
    }
}

impl<T> LayerWeights<T> {
    /// Each parameter through `f` (with its role and layer), in hlatc's
    /// order: input norm, q, k, v (or qkv), o, q and k norms, the
    /// post-attention norm, then the MLP's: gate, up (or gate_up), down,
    /// or the router, the experts and the shared expert; each bias right
    /// after its weight.
    pub fn try_map<U, E>(
        self,
        f: &mut impl FnMut(ParamRole, Option<i64>, T) -> Result<U, E>,
    ) -> Result<LayerWeights<U>, E> {
        let layer = self.layer;
        let input_norm = f(ParamRole::InputNorm, Some(layer), self.input_norm)?;
        let qkv = match self.qkv {
            Qkv::Fused(qkv) => Qkv::Fused(qkv.try_map(f, layer)?),
            Qkv::Separate { q, k, v } => {
                let q = q.try_map(f, layer)?;
                let k = k.try_map(f, layer)?;
                let v = v.try_map(f, layer)?;
                Qkv::Separate { q, k, v }
            }
        };
        let o_proj = self.o_proj.try_map(f, layer)?;
        let qk_norm = match self.qk_norm {
            Some([q, k]) => Some([
                f(ParamRole::QNorm, Some(layer), q)?,
                f(ParamRole::KNorm, Some(layer), k)?,
            ]),
            None => None,
        };
        let post_attention_norm = f(
            ParamRole::PostAttentionNorm,
            Some(layer),
            self.post_attention_norm,
        )?;
        let mlp = match self.mlp {
            Mlp::Dense(dense) => Mlp::Dense(dense.try_map(f, layer)?),
            Mlp::Sparse(sparse) => Mlp::Sparse(sparse.try_map(f, layer)?),
        };
        Ok(LayerWeights {
            layer,
            input_norm,
            qkv,
            o_proj,
            qk_norm,
            post_attention_norm,
            mlp,
        })
    }

    /// The parameters in Hugging Face order.
    pub fn into_vec(self) -> Vec<T> {
        let mut out = Vec::new();
        let _ = self.try_map(&mut |_, _, t| {
            out.push(t);
            Ok::<(), Infallible>(())
        });
        out
    }
}

impl<T> Weights<T> {
    /// The matrix the LM head multiplies by: its own, or the embedding's.
    pub fn head(&self) -> &T {
        match &self.lm_head {
            LmHead::Tied => &self.embed,
            LmHead::Own(head) => head,
        }
    }

    /// Each parameter through `f` (with its role, and its layer where it
    /// has one), in Hugging Face order: the embedding, the layers in
    /// order, the final norm, the LM head when it is not tied. The one
    /// place that order is written.
    pub fn try_map<U, E>(
        self,
        mut f: impl FnMut(ParamRole, Option<i64>, T) -> Result<U, E>,
    ) -> Result<Weights<U>, E> {
        let embed = f(ParamRole::Embedding, None, self.embed)?;
        let layers = self
            .layers
            .into_iter()
            .map(|l| l.try_map(&mut f))
            .collect::<Result<_, _>>()?;
        let final_norm = f(ParamRole::FinalNorm, None, self.final_norm)?;
        let lm_head = match self.lm_head {
            LmHead::Tied => LmHead::Tied,
            LmHead::Own(head) => LmHead::Own(f(ParamRole::LmHead, None, head)?),
        };
        Ok(Weights {
            embed,
            layers,
            final_norm,
            lm_head,
        })
    }

    /// [`Weights::try_map`] with a function that cannot fail.
    pub fn map<U>(self, mut f: impl FnMut(ParamRole, Option<i64>, T) -> U) -> Weights<U> {
        match self.try_map(|role, layer, t| Ok::<_, Infallible>(f(role, layer, t))) {
            Ok(w) => w,
            Err(never) => match never {},
        }
    }

    /// The parameters in Hugging Face order ([`crate::params::param_specs`]').
    pub fn into_vec(self) -> Vec<T> {
        let mut out = Vec::new();
        self.map(|_, _, t| out.push(t));
        out
    }

    /// `values` (one per parameter, in the order of
    /// [`Weights::into_vec`]) in the fields whose parameters they stand
    /// for, or `None` when there are more or fewer of them.
    pub fn zip<U>(self, values: impl IntoIterator<Item = U>) -> Option<Weights<(T, U)>> {
        let mut values = values.into_iter();
        let zipped = self
            .try_map(|_, _, t| values.next().map(|u| (t, u)).ok_or(()))
            .ok()?;
        values.next().is_none().then_some(zipped)
    }

    /// The weights that `items` (each a spec and what stands for it) make,
    /// each placed by its spec's `layer` and `role`, never by its
    /// position: layers in the order of their numbers; a layer's q/k/v
    /// and gate/up fused or separate as its specs are.
    pub fn from_specs<S: Placement>(
        items: impl IntoIterator<Item = (S, T)>,
    ) -> Result<Weights<T>, WeightsError> {
        let mut outer: BTreeMap<ParamRole, T> = BTreeMap::new();
        let mut layers: BTreeMap<i64, BTreeMap<ParamRole, T>> = BTreeMap::new();
        for (spec, t) in items {
            let (role, layer) = (spec.role(), spec.layer());
            let slots = match (role.in_layer(), layer) {
                (true, Some(layer)) => layers.entry(layer).or_default(),
                (false, None) => &mut outer,
                (_, layer) => {
                    return Err(WeightsError::Misplaced {
                        name: spec.name().to_string(),
                        role,
                        layer,
                    })
                }
            };
            if slots.insert(role, t).is_some() {
                return Err(WeightsError::Repeated {
                    name: spec.name().to_string(),
                });
            }
        }
        let embed = take(&mut outer, ParamRole::Embedding, None)?;
        let final_norm = take(&mut outer, ParamRole::FinalNorm, None)?;
        let lm_head = match outer.remove(&ParamRole::LmHead) {
            Some(head) => LmHead::Own(head),
            None => LmHead::Tied,
        };
        left_over(&outer, None)?;
        let layers = layers
            .into_iter()
            .map(|(layer, mut slots)| {
                let l = Some(layer);
                let weights = LayerWeights {
                    layer,
                    input_norm: take(&mut slots, ParamRole::InputNorm, l)?,
                    qkv: match slots.contains_key(&ParamRole::Weight(Projection::Qkv)) {
                        true => Qkv::Fused(linear(&mut slots, Projection::Qkv, layer)?),
                        false => Qkv::Separate {
                            q: linear(&mut slots, Projection::Q, layer)?,
                            k: linear(&mut slots, Projection::K, layer)?,
                            v: linear(&mut slots, Projection::V, layer)?,
                        },
                    },
                    o_proj: linear(&mut slots, Projection::O, layer)?,
                    qk_norm: match slots.contains_key(&ParamRole::QNorm) {
                        true => Some([
                            take(&mut slots, ParamRole::QNorm, l)?,
                            take(&mut slots, ParamRole::KNorm, l)?,
                        ]),
                        false => None,
                    },
                    post_attention_norm: take(&mut slots, ParamRole::PostAttentionNorm, l)?,
                    mlp: match slots.contains_key(&ParamRole::Router) {
                        true => Mlp::Sparse(sparse_mlp(&mut slots, layer)?),
                        false => Mlp::Dense(dense_mlp(&mut slots, layer)?),
                    },
                };
                left_over(&slots, l)?;
                Ok(weights)
            })
            .collect::<Result<_, WeightsError>>()?;
        Ok(Weights {
            embed,
            layers,
            final_norm,
            lm_head,
        })
    }
}

/// Where a parameter sits, which is all [`Weights::from_specs`] places it
/// by: its name (for errors), its role, and its layer (`None` for the
/// embedding, the final norm and the LM head). A
/// [`ParamSpec`](crate::params::ParamSpec) is one.
pub trait Placement {
    fn name(&self) -> &str;
    fn role(&self) -> ParamRole;
    fn layer(&self) -> Option<i64>;
}

impl<P: Placement + ?Sized> Placement for &P {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn role(&self) -> ParamRole {
        (**self).role()
    }
    fn layer(&self) -> Option<i64> {
        (**self).layer()
    }
}

/// The parameter in `role` out of `slots`.
fn take<T>(
    slots: &mut BTreeMap<ParamRole, T>,
    role: ParamRole,
    layer: Option<i64>,
) -> Result<T, WeightsError> {
    slots.remove(&role).ok_or_else(|| WeightsError::Missing {
        name: role.hf_name(layer.unwrap_or(0)),
    })
}

/// The projection `p` out of `slots`: its weight, and its bias if given.
fn linear<T>(
    slots: &mut BTreeMap<ParamRole, T>,
    p: Projection,
    layer: i64,
) -> Result<Linear<T>, WeightsError> {
    Ok(Linear {
        projection: p,
        weight: take(slots, ParamRole::Weight(p), Some(layer))?,
        bias: slots.remove(&ParamRole::Bias(p)),
    })
}

/// A dense MLP out of `slots`: gate and up fused or separate as they are.
fn dense_mlp<T>(
    slots: &mut BTreeMap<ParamRole, T>,
    layer: i64,
) -> Result<DenseMlp<T>, WeightsError> {
    Ok(DenseMlp {
        gate_up: match slots.contains_key(&ParamRole::Weight(Projection::GateUp)) {
            true => GateUp::Fused(linear(slots, Projection::GateUp, layer)?),
            false => GateUp::Separate {
                gate: linear(slots, Projection::Gate, layer)?,
                up: linear(slots, Projection::Up, layer)?,
            },
        },
        down_proj: linear(slots, Projection::Down, layer)?,
    })
}

/// A mixture of experts out of `slots`, with its shared expert where one
/// is given.
fn sparse_mlp<T>(
    slots: &mut BTreeMap<ParamRole, T>,
    layer: i64,
) -> Result<SparseMlp<T>, WeightsError> {
    let l = Some(layer);
    let shared = match slots.contains_key(&ParamRole::SharedExpertGate) {
        true => Some(SharedExpert {
            mlp: DenseMlp {
                gate_up: GateUp::Separate {
                    gate: linear(slots, Projection::SharedGate, layer)?,
                    up: linear(slots, Projection::SharedUp, layer)?,
                },
                down_proj: linear(slots, Projection::SharedDown, layer)?,
            },
            gate: take(slots, ParamRole::SharedExpertGate, l)?,
        }),
        false => None,
    };
    Ok(SparseMlp {
        router: take(slots, ParamRole::Router, l)?,
        gate: take(slots, ParamRole::Experts(Projection::Gate), l)?,
        up: take(slots, ParamRole::Experts(Projection::Up), l)?,
        down: take(slots, ParamRole::Experts(Projection::Down), l)?,
        shared,
    })
}

/// A parameter no field took: a second form of a projection (fused and
/// separate), a bias without its weight, or a head beside another.
fn left_over<T>(slots: &BTreeMap<ParamRole, T>, layer: Option<i64>) -> Result<(), WeightsError> {
    match slots.keys().next() {
        None => Ok(()),
        Some(role) => Err(WeightsError::Unplaced {
            name: role.hf_name(layer.unwrap_or(0)),
        }),
    }
}

/// Specs that do not make a model's weights.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
    #[error("no parameter '{name}'")]
    Missing { name: String },
    #[error("parameter '{name}' is declared twice")]
    Repeated { name: String },
    #[error("parameter '{name}' has no place beside the others (a projection both fused and separate, or a bias without its weight)")]
    Unplaced { name: String },
    #[error("parameter '{name}' is a {role:?} in layer {layer:?}: a layer's roles have a layer, the embedding, final norm and LM head none")]
    Misplaced {
        name: String,
        role: ParamRole,
        layer: Option<i64>,
    },
}
