//! A mixture of experts' routing and experts as graph pieces, following
//! Hugging Face's Mixtral and Qwen-MoE blocks: the router's softmax in
//! f32, the top-k experts of each token, their probabilities renormalized
//! where the config says so, each token's output the weighted sum of its
//! experts' SwiGLU outputs. And the load-balancing loss
//! (`load_balancing_loss_func`) over every sparse layer's router.
//!
//! On one rank every expert runs over every token as one batched dot over
//! the experts, and a token's weight for an expert it was not routed to
//! (or that was full, under a capacity factor: [`crate::expert_slots`]) is
//! 0. That is the same function as gathering each expert's tokens, and a
//! static shape. How tokens reach experts on other ranks is
//! [`crate::parallel::expert_exchange`]'s.

use crate::config::BatchShape;
use crate::expert_slots::{self, Slots};
use crate::moe::MoeConfig;
use crate::softmax::softmax_last;
use crate::weights::SparseMlp;
use hlatc_compiler::graph::autodiff::GradHints;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, DotDims};
use hlatc_compiler::{ElementType, InstrId};

/// What the load-balancing loss needs of the sparse layers seen so far:
/// per expert, how many token slots chose it and the sum of its router
/// probabilities, over every layer's tokens.
#[derive(Clone, Debug, Default)]
pub(crate) struct RouterStats {
    /// `[E]`, in the router's type.
    chosen: Option<InstrId>,
    probabilities: Option<InstrId>,
    /// `[E]`: of the chosen, the slots a capacity kept (`None` when
    /// dropless: every one).
    kept: Option<InstrId>,
    layers: i64,
}

/// The routing of one build of a run of layers
/// ([`crate::ForwardParts::take_routing`]), to count apart.
#[derive(Clone, Debug)]
pub struct LayerRouting(pub(crate) RouterStats);

/// What the routing did over a step's sparse layers, for its outputs
/// (neither is differentiated).
#[derive(Clone, Copy, Debug)]
pub struct ExpertCounts {
    /// `f32[E]`: token slots routed to each expert (a token counts once
    /// per expert it chose), summed over the sparse layers and the global
    /// batch.
    pub routed: InstrId,
    /// `f32[]`: of those, the slots a capacity factor dropped (0 when
    /// dropless).
    pub dropped: InstrId,
}

/// The router's type: f32, as Hugging Face's softmax, or f64 for a step in
/// f64.
fn router_type(ty: ElementType) -> ElementType {
    match ty {
        ElementType::F64 => ElementType::F64,
        _ => ElementType::F32,
    }
}

/// Where a sparse layer sends each of its tokens.
pub(crate) struct Routing {
    /// `[T, E]`, in the step's type: each token's weight for each expert,
    /// 0 where it is not routed there or the expert was full.
    pub weights: InstrId,
    /// `pred[T, E]`: the token is routed to the expert (among its top k).
    pub routed: InstrId,
    /// Each token's slot in its expert's buffer, when a capacity factor
    /// made them (they decide which tokens are dropped).
    pub slots: Option<Slots>,
    /// The rows the tokens are (`T` = rows x sequence).
    pub batch: BatchShape,
}

impl Routing {
    /// The slots, made now if no capacity factor made them (every token
    /// then has one).
    pub fn slots(&self, b: &mut Builder, moe: &MoeConfig) -> Result<Slots, BuildError> {
        let batch = self.batch;
        match &self.slots {
            Some(slots) => Ok(slots.clone()),
            None => expert_slots::slots(b, self.routed, batch, moe.capacity(batch.seq_len)),
        }
    }
}

/// Each token's weight for each expert: its router probability where the
/// expert is among its top k (renormalized over them when
/// `norm_topk_prob`), 0 elsewhere and where a capacity factor drops the
/// token. `logits` are the router's (`[T, E]`, `T` the tokens of
/// `batch`); the layer's counts join `stats`.
pub(crate) fn route(
    b: &mut Builder,
    hints: &mut GradHints,
    moe: &MoeConfig,
    logits: InstrId,
    batch: BatchShape,
    stats: &mut RouterStats,
) -> Result<Routing, BuildError> {
    let ty = b.ty(logits);
    let dims = b.dims(logits);
    let logits = b.convert_unless_same(logits, router_type(ty))?;
    let p = softmax_last(b, hints, logits)?;
    let routed = top_k(b, p, moe.num_experts_per_tok)?;
    let zeros = b.full_like(p, 0.0)?;
    let mut weights = b.select(routed, p, zeros)?;
    if moe.norm_topk_prob {
        let total = b.reduce_sum(weights, &[1])?;
        let total = b.broadcast(total, &dims, &[0])?;
        weights = b.div(weights, total)?;
    }
    let ones = b.full_like(p, 1.0)?;
    let chosen = b.select(routed, ones, zeros)?;
    let counts = b.reduce_sum(chosen, &[0])?;
    let probabilities = b.reduce_sum(p, &[0])?;
    accumulate(b, &mut stats.chosen, counts)?;
    accumulate(b, &mut stats.probabilities, probabilities)?;
    stats.layers += 1;
    let slots = match moe.capacity_factor {
        None => None,
        Some(_) => {
            let slots = expert_slots::slots(b, routed, batch, moe.capacity(batch.seq_len))?;
            weights = b.select(slots.kept, weights, zeros)?;
            let kept = b.select(slots.kept, ones, zeros)?;
            let kept = b.reduce_sum(kept, &[0])?;
            accumulate(b, &mut stats.kept, kept)?;
            Some(slots)
        }
    };
    Ok(Routing {
        weights: b.convert_unless_same(weights, ty)?,
        routed,
        slots,
        batch,
    })
}

/// `sum` plus `x`, or `x` where nothing was summed yet.
fn accumulate(b: &mut Builder, sum: &mut Option<InstrId>, x: InstrId) -> Result<(), BuildError> {
    *sum = Some(match *sum {
        Some(s) => b.add2(s, x)?,
        None => x,
    });
    Ok(())
}

/// `pred[T, E]`: the `k` largest of each row of `p` (`[T, E]`, values in
/// [0, 1]), the lower expert first among equals (`torch.topk` leaves
/// ties unspecified; on CPU it does not pick the lowest).
/// Chosen by `k` rounds of a row max; no sort, no data-dependent shape.
fn top_k(b: &mut Builder, p: InstrId, k: i64) -> Result<InstrId, BuildError> {
    let dims = b.dims(p);
    let experts = b.iota(ElementType::S32, &dims, 1)?;
    let past_last = b.full(ElementType::S32, &dims, dims[1] as f64)?;
    let taken = b.full_like(p, -1.0)?;
    let mut left = p;
    let mut chosen: Option<InstrId> = None;
    for _ in 0..k {
        let max = b.reduce_max(left, &[1])?;
        let max = b.broadcast(max, &dims, &[0])?;
        let at_max = b.compare(left, max, ComparisonDirection::Eq)?;
        let index = b.select(at_max, experts, past_last)?;
        let first = b.reduce(BinaryOp::Minimum, index, &[1], dims[1] as f64)?;
        let first = b.broadcast(first, &dims, &[0])?;
        let pick = b.compare(experts, first, ComparisonDirection::Eq)?;
        left = b.select(pick, taken, left)?;
        chosen = Some(match chosen {
            Some(c) => b.binary(BinaryOp::Or, c, pick)?,
            None => pick,
        });
    }
    Ok(chosen.expect("k is positive (MoeConfig::problem)"))
}

/// Every expert's SwiGLU over every token of `x` (`[T, H]`), weighted by
/// `weights` (`[T, E]`) and summed over the experts: `[T, H]`. `w` holds
/// the experts the weights' columns name, in order.
pub(crate) fn experts(
    b: &mut Builder,
    hints: &mut GradHints,
    x: InstrId,
    w: &SparseMlp<InstrId>,
    weights: InstrId,
) -> Result<InstrId, BuildError> {
    // x [T, H] . W [E, I, H] -> [T, E, I]
    let up_dims = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![2],
        ..Default::default()
    };
    let a = activation(b, hints, x, w, up_dims)?;
    // a [T, E, I] . down [E, H, I] -> [E, T, H]
    let y = b.dot(
        a,
        w.down,
        DotDims {
            lhs_batch: vec![1],
            rhs_batch: vec![0],
            lhs_contracting: vec![2],
            rhs_contracting: vec![2],
        },
    )?;
    // weights [T, E] . y [E, T, H] -> [T, H]
    b.dot(
        weights,
        y,
        DotDims {
            lhs_batch: vec![0],
            rhs_batch: vec![1],
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
        },
    )
}

/// Each expert's SwiGLU over its own tokens: `x` is `[E, M, H]`, `M`
/// tokens (or empty slots, which stay 0) for each of the `E` experts `w`
/// holds; `[E, M, H]`.
pub(crate) fn experts_by_slot(
    b: &mut Builder,
    hints: &mut GradHints,
    x: InstrId,
    w: &SparseMlp<InstrId>,
) -> Result<InstrId, BuildError> {
    // x [E, M, H] . W [E, I, H] -> [E, M, I]; a [E, M, I] . down [E, H, I] -> [E, M, H]
    let by_expert = DotDims {
        lhs_batch: vec![0],
        rhs_batch: vec![0],
        lhs_contracting: vec![2],
        rhs_contracting: vec![2],
    };
    let a = activation(b, hints, x, w, by_expert.clone())?;
    b.dot(a, w.down, by_expert)
}

/// The experts' gate and up projections of `x` (by `dims`) through
/// SwiGLU: what their down projection reads.
fn activation(
    b: &mut Builder,
    hints: &mut GradHints,
    x: InstrId,
    w: &SparseMlp<InstrId>,
    dims: DotDims,
) -> Result<InstrId, BuildError> {
    let g = b.dot(x, w.gate, dims.clone())?;
    let u = b.dot(x, w.up, dims)?;
    crate::swiglu::swiglu(b, hints, g, u)
}

/// The router's counts of every rank of `sum`'s groups pooled: what the
/// load-balancing loss of a data-parallel step is taken over, as one
/// device would over the global batch. `sum` all-reduces a value.
pub(crate) fn pool_stats(
    b: &mut Builder,
    stats: &RouterStats,
    sum: &dyn Fn(&mut Builder, InstrId) -> Result<InstrId, BuildError>,
) -> Result<RouterStats, BuildError> {
    let pooled = |b: &mut Builder, x: Option<InstrId>| x.map(|x| sum(b, x)).transpose();
    Ok(RouterStats {
        chosen: pooled(b, stats.chosen)?,
        probabilities: pooled(b, stats.probabilities)?,
        kept: pooled(b, stats.kept)?,
        layers: stats.layers,
    })
}

/// The counts of `stats` (pooled over the replicas already, where there
/// are several) as the step's outputs, in f32; `None` when no layer was
/// sparse.
pub(crate) fn expert_counts(
    b: &mut Builder,
    stats: &RouterStats,
) -> Result<Option<ExpertCounts>, BuildError> {
    let Some(chosen) = stats.chosen else {
        return Ok(None);
    };
    let routed = b.convert_unless_same(chosen, ElementType::F32)?;
    let dropped = match stats.kept {
        Some(kept) => {
            let kept = b.convert_unless_same(kept, ElementType::F32)?;
            let lost = b.sub(routed, kept)?;
            b.reduce_sum(lost, &[0])?
        }
        None => b.scalar(ElementType::F32, 0.0),
    };
    Ok(Some(ExpertCounts { routed, dropped }))
}

/// Hugging Face's load-balancing loss over the sparse layers `stats`
/// saw, `tokens` each: `E * sum_e f_e * P_e`, with `f_e` the share of
/// token slots that chose expert `e` and `P_e` its mean router
/// probability, both over every layer's tokens together. Scalar, in `ty`;
/// `None` when no layer was sparse.
pub(crate) fn load_balancing_loss(
    b: &mut Builder,
    moe: &MoeConfig,
    stats: &RouterStats,
    tokens: i64,
    ty: ElementType,
) -> Result<Option<InstrId>, BuildError> {
    let (Some(chosen), Some(probabilities)) = (stats.chosen, stats.probabilities) else {
        return Ok(None);
    };
    let slots = (stats.layers * tokens) as f64;
    let product = b.mul(chosen, probabilities)?;
    let total = b.reduce_sum(product, &[0])?;
    let loss = b.scale(total, moe.num_experts as f64 / (slots * slots))?;
    Ok(Some(b.convert_unless_same(loss, ty)?))
}
