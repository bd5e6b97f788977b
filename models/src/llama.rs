//! The Llama forward pass as an IR graph: token embedding, pre-norm RMSNorm,
//! rotary embeddings, causal attention with GQA, SwiGLU, final norm, LM head
//! (tied or not) and mean cross-entropy.
//!
//! Parameters carry Hugging Face names and `[out, in]` shapes, so real
//! checkpoints map one to one. The forward pass reads them by role, through
//! the [`Weights`] their declaration ([`weight_specs`]) gives, built once
//! when its parts are.

use crate::config::{BatchShape, ModelConfig};
use crate::experts::{ExpertCounts, LayerRouting, RouterStats};
use crate::imported_kernel::{ImportedKernel, Role};
use crate::kernels::{AttentionKernel, Kernels};
use crate::micro_batch::MicroBatch;
use crate::moe::MoeConfig;
use crate::parallel::context::{rank_positions, CpPositions};
use crate::parallel::layers::RankContext;
use crate::parallel::{CpExchange, Fault, Parallelism};
use crate::params::{param_specs, weight_specs};
pub use crate::token_ops::IGNORE_INDEX;
use crate::token_ops::{counted_total, gather_rows};
use crate::weights::{DenseMlp, GateUp, LayerWeights, Linear, Mlp, Qkv, SparseMlp, Weights};
use hlatc_compiler::analysis::shape_inference::OperandRule;
use hlatc_compiler::graph::autodiff::{BackwardCall, Composite, CompositeRule, GradHints};
use hlatc_compiler::graph::blocked_attention::{
    AttentionOperands, BlockedAttention, BlockedForward,
};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::looped_attention::{LoopOperands, LoopedAttention};
use hlatc_compiler::graph::module_markers::ModuleMarker;
use hlatc_compiler::graph::ring_attention::{Ring, RingAttention};
use hlatc_compiler::graph::scope;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, DotDims, UnaryOp};
use hlatc_compiler::{ComputationId, ElementType, InstrId, Literal, Op, Scalar, ShapeError};
use std::sync::Arc;

/// What the forward pass produced.
#[derive(Clone, Debug)]
pub struct ForwardOutputs {
    /// Mean cross-entropy over all tokens (scalar).
    pub loss: InstrId,
    /// `[batch * seq, vocab]`, rows in (batch, position) order.
    pub logits: InstrId,
    /// A mixture of experts' routing over the global batch, for the
    /// step's outputs.
    pub experts: Option<ExpertCounts>,
    /// Values gradients must not flow through (the max-subtractions that
    /// keep softmax and log-sum-exp finite; they cancel exactly), and the
    /// softmaxes, whose gradient autodiff takes in closed form.
    pub grad_hints: GradHints,
    /// The residual stream as each decoder layer begins, in order: where
    /// FSDP issues the next unit's gather.
    pub layer_inputs: Vec<InstrId>,
}

fn linear_dims() -> DotDims {
    // x [N, in] . W [out, in] -> [N, out]
    DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        ..Default::default()
    }
}

/// What a layer's MLP reads: the normed residual stream with every rank's
/// rows (`h`, gathered under sequence parallelism), and this rank's own
/// rows (`own`; the same value otherwise).
#[derive(Clone, Copy)]
struct MlpInput {
    h: InstrId,
    own: InstrId,
}

struct Llama<'a> {
    b: &'a mut Builder,
    cfg: &'a ModelConfig,
    batch: BatchShape,
    ty: ElementType,
    hints: GradHints,
    /// On a rank of a sharded step: its collectives and vocabulary run.
    rank: Option<RankContext>,
    /// See [`ForwardInputs::micro_batch`].
    micro_batch: Option<MicroBatch>,
    kernels: Kernels,
    /// An imported kernel's forward and backward, once brought into the
    /// builder.
    imported: Option<(ComputationId, ComputationId)>,
    /// The sparse layers' routing so far, for the load-balancing loss.
    router_stats: RouterStats,
    /// [`Llama::router_stats`] pooled over the DP replicas, once pooled
    /// (by the load-balancing loss, or for the step's counts).
    pooled_router: Option<RouterStats>,
}

/// How every layer computes attention's core: the implementation the
/// attention point takes, with what it reads besides q, k and v, built
/// once for all layers. The plain graph's mask (`pred[S, S]`, or
/// `pred[B, S, S]` for packed rows), or what blocked attention builds its
/// tiles' masks from (the segment ids of packed rows; causality and the
/// window it knows).
#[derive(Clone, Debug)]
enum AttentionForm {
    Dense(InstrId),
    Tiled {
        segments: Option<InstrId>,
        blocked: BlockedAttention,
    },
    /// An imported kernel, which applies the causal mask itself.
    Imported(Arc<ImportedKernel>),
    /// What looped attention reads besides q, k and v: the global
    /// positions of the queries and of the keys, this rank's pairs to
    /// visit, and for packed rows the documents of both. Under ring
    /// attention (`ring`), the keys' positions, the pairs and the keys'
    /// documents have one row a step round the ring.
    Looped {
        looped: LoopedAttention,
        positions: [InstrId; 2],
        pairs: InstrId,
        segments: Option<[InstrId; 2]>,
        ring: Option<Ring>,
    },
}

/// At which head count tiled attention's composite reads keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KvHeads {
    /// Repeated for the query heads before it (GQA), as the kernel reads
    /// them.
    Repeated,
    /// Their own: the composite repeats them itself (a ring passes them at
    /// their own count).
    Own,
}

impl Llama<'_> {
    fn n(&self) -> i64 {
        self.batch.batch_size * self.batch.seq_len
    }

    /// The whole sequence's length: the rank's tokens of it, times the CP
    /// ranks it is divided over.
    fn sequence(&self) -> i64 {
        self.batch.seq_len * self.rank.as_ref().map_or(1, |r| r.par.cp)
    }

    fn linear(&mut self, x: InstrId, w: InstrId) -> Result<InstrId, BuildError> {
        self.b.dot(x, w, linear_dims())
    }

    /// `x W^T + b` for the projection `p`, in its scope (`q_proj`): its
    /// bias is added when the model has one.
    fn projection(&mut self, x: InstrId, p: &Linear<InstrId>) -> Result<InstrId, BuildError> {
        self.b.push_scope(p.projection.scope());
        let y = self.linear(x, p.weight)?;
        let y = self.add_bias(y, p.bias)?;
        self.b.pop_scope();
        Ok(y)
    }

    /// `y` plus `bias`, when the projection has one.
    fn add_bias(&mut self, y: InstrId, bias: Option<InstrId>) -> Result<InstrId, BuildError> {
        match bias {
            None => Ok(y),
            Some(bias) => {
                let dims = self.b.dims(y);
                let bb = self.b.broadcast(bias, &dims, &[1])?;
                self.b.add2(y, bb)
            }
        }
    }

    /// A row-parallel projection (`o_proj`, `down_proj`): on a rank of a
    /// tensor-parallel step its partial sums are reduced before the bias,
    /// which every rank holds whole, is added.
    fn row_parallel(&mut self, x: InstrId, p: &Linear<InstrId>) -> Result<InstrId, BuildError> {
        if self.rank.is_none() {
            return self.projection(x, p);
        }
        self.b.push_scope(p.projection.scope());
        let y = self.linear(x, p.weight)?;
        let y = match &self.rank {
            Some(rank) => rank.reduce_partial(self.b, y)?,
            None => y,
        };
        let y = self.add_bias(y, p.bias)?;
        self.b.pop_scope();
        Ok(y)
    }

    /// `x` as a column-parallel projection reads it: with sequence
    /// parallelism, every rank's rows gathered.
    fn full_sequence(&mut self, x: InstrId) -> Result<InstrId, BuildError> {
        let Some(rank) = &self.rank else {
            return Ok(x);
        };
        let full = rank.full_sequence(self.b, x)?;
        // Gathered again in the backward pass, as Megatron's and NxD's
        // sequence parallelism do: the rank keeps its run, not T of them.
        if full != x {
            self.hints.recompute.push(full);
        }
        Ok(full)
    }

    /// Query and key/value heads this rank computes.
    fn heads(&self) -> (i64, i64) {
        match &self.rank {
            Some(rank) => rank.local_heads(self.cfg),
            None => (self.cfg.num_attention_heads, self.cfg.num_key_value_heads),
        }
    }

    /// x [N, D] * rsqrt(mean(x^2) + eps) * w (N is a rank's run of the
    /// rows under sequence parallelism), over the last dimension of `x`
    /// (Qwen3's q/k norms are over each head's).
    fn rms_norm(&mut self, x: InstrId, w: InstrId) -> Result<InstrId, BuildError> {
        let dims = self.b.dims(x);
        let last = dims.len() as i64 - 1;
        let rows: Vec<i64> = (0..last).collect();
        let b = &mut *self.b;
        let sq = b.mul(x, x)?;
        let ss = b.reduce_sum(sq, &[last])?;
        let ms = b.scale(ss, 1.0 / dims[last as usize] as f64)?;
        let eps = b.full_like(ms, self.cfg.rms_norm_eps)?;
        let var = b.add2(ms, eps)?;
        let r = b.unary(UnaryOp::Rsqrt, var)?;
        let rb = b.broadcast(r, &dims, &rows)?;
        let wb = b.broadcast(w, &dims, &[last])?;
        let y = b.mul(x, rb)?;
        let out = b.mul(y, wb)?;
        // The backward keeps x and the [N] scale and recomputes the rest,
        // the output the projections read included.
        self.hints.recompute.extend([rb, wb, y, out]);
        Ok(out)
    }

    /// cos and sin tables, computed in the graph from positions: `[S, hd]`
    /// from 0..S or from `positions` (`s32[S]`, a CP rank's), or `[B, S,
    /// hd]` from `positions` (`s32[B, S]`, packed rows). Always in f32 and then converted, as `transformers` does (its
    /// rotary embedding disables autocast and computes in f32 for every
    /// model dtype), so a checkpoint sees the same angles in any precision.
    fn rope_tables(
        &mut self,
        positions: Option<InstrId>,
    ) -> Result<(InstrId, InstrId), BuildError> {
        let (bs, s, hd) = (
            self.batch.batch_size,
            self.batch.seq_len,
            self.cfg.head_dim(),
        );
        let half = hd / 2;
        let f32 = ElementType::F32;
        let inv: Vec<Scalar> = crate::rope::inverse_frequencies(
            self.cfg.rope_theta_for(self.sequence()),
            hd,
            self.cfg.rope_scaling.as_ref(),
        )
        .into_iter()
        .map(Scalar::Float)
        .collect();
        let inv = self
            .b
            .constant(Literal::from_scalars(f32, vec![half], &inv).expect("finite frequencies"));
        let b = &mut *self.b;
        let (pos, dims) = match positions {
            None => (b.iota(f32, &[s, half], 0)?, vec![s, half]),
            Some(p) if b.dims(p).len() == 1 => {
                let p = b.convert(p, f32)?;
                (b.broadcast(p, &[s, half], &[0])?, vec![s, half])
            }
            Some(p) => {
                let p = b.convert(p, f32)?;
                (b.broadcast(p, &[bs, s, half], &[0, 1])?, vec![bs, s, half])
            }
        };
        let last = dims.len() as i64 - 1;
        let invb = b.broadcast(inv, &dims, &[last])?;
        let ang = b.mul(pos, invb)?;
        let ang = b.concatenate(&[ang, ang], last)?;
        let cos = b.unary(UnaryOp::Cos, ang)?;
        let sin = b.unary(UnaryOp::Sin, ang)?;
        if self.ty == f32 {
            return Ok((cos, sin));
        }
        Ok((b.convert(cos, self.ty)?, b.convert(sin, self.ty)?))
    }

    /// Rotates `x` `[B, S, H, hd]` by position (rotate-half convention).
    fn rope(&mut self, x: InstrId, cos: InstrId, sin: InstrId) -> Result<InstrId, BuildError> {
        let b = &mut *self.b;
        let dims = b.dims(x);
        let hd = dims[3];
        let x1 = b.slice_dim(x, 3, 0, hd / 2)?;
        let x2 = b.slice_dim(x, 3, hd / 2, hd)?;
        let nx2 = b.unary(UnaryOp::Negate, x2)?;
        let rot = b.concatenate(&[nx2, x1], 3)?;
        // Tables are [S, hd], or [B, S, hd] when positions differ per row.
        let mapping: &[i64] = if b.dims(cos).len() == 2 {
            &[1, 3]
        } else {
            &[0, 1, 3]
        };
        let cb = b.broadcast(cos, &dims, mapping)?;
        let sb = b.broadcast(sin, &dims, mapping)?;
        let a = b.mul(x, cb)?;
        let r = b.mul(rot, sb)?;
        b.add2(a, r)
    }

    /// Softmax over the last dimension; the max is a constant shift.
    fn softmax_last(&mut self, x: InstrId) -> Result<InstrId, BuildError> {
        crate::softmax::softmax_last(self.b, &mut self.hints, x)
    }

    /// Self-attention of layer `w` over `h`.
    fn attention(
        &mut self,
        h: InstrId,
        w: &LayerWeights<InstrId>,
        tables: (InstrId, InstrId),
        mask: AttentionForm,
    ) -> Result<InstrId, BuildError> {
        let c = self.cfg;
        let (hq, hkv) = self.heads();
        let (bs, s, hd) = (self.batch.batch_size, self.batch.seq_len, c.head_dim());
        self.b.push_scope(scope::SELF_ATTN);
        let [q, k, v] = match &w.qkv {
            Qkv::Fused(qkv) => {
                let qkv = self.projection(h, qkv)?;
                self.split_columns(qkv, [hq * hd, hkv * hd, hkv * hd])?
            }
            Qkv::Separate { q, k, v } => [
                self.projection(h, q)?,
                self.projection(h, k)?,
                self.projection(h, v)?,
            ],
        };
        let q = self.b.reshape(q, &[bs, s, hq, hd])?;
        let k = self.b.reshape(k, &[bs, s, hkv, hd])?;
        let v = self.b.reshape(v, &[bs, s, hkv, hd])?;
        let (q, k) = match w.qk_norm {
            Some([qn, kn]) => (
                self.scoped("q_norm", |m| m.rms_norm(q, qn))?,
                self.scoped("k_norm", |m| m.rms_norm(k, kn))?,
            ),
            None => (q, k),
        };
        self.b.push_scope(scope::ROPE);
        let q = self.rope(q, tables.0, tables.1)?;
        let k = self.rope(k, tables.0, tables.1)?;
        self.b.pop_scope();
        // Under context parallelism every CP rank's keys and values, at
        // their own head count (GQA repeats them after the exchange):
        // gathered here, or passed round the ring inside attention.
        let ring = match &mask {
            AttentionForm::Looped { ring, .. } => *ring,
            _ => None,
        };
        let (k, v) = match (&self.rank, ring) {
            (Some(rank), None) => (
                rank.gather_context(self.b, k)?,
                rank.gather_context(self.b, v)?,
            ),
            _ => (k, v),
        };
        let att = match mask {
            AttentionForm::Dense(allowed) => self.core_attention([q, k, v], allowed)?,
            AttentionForm::Tiled { segments, blocked } => {
                self.blocked_attention([q, k, v], segments, blocked)?
            }
            AttentionForm::Imported(kernel) => self.imported_attention([q, k, v], &kernel)?,
            AttentionForm::Looped {
                looped,
                positions,
                pairs,
                segments,
                ring,
            } => {
                let rest = (positions, pairs, segments);
                self.looped_attention([q, k, v], looped, ring, rest)?
            }
        };
        let att = self.b.reshape(att, &[bs * s, hq * hd])?;
        let out = self.row_parallel(att, &w.o_proj)?;
        self.b.pop_scope();
        Ok(out)
    }

    /// Key and value heads (`[B, S, hkv, hd]`) repeated for the query
    /// heads that read them (GQA: query head h reads key/value head
    /// h / (hq / hkv)).
    fn repeat_kv(&mut self, k: InstrId, v: InstrId) -> Result<(InstrId, InstrId), BuildError> {
        let (hq, hkv) = self.heads();
        if hq == hkv {
            return Ok((k, v));
        }
        // The keys' sequence: under context parallelism, all of it.
        let [bs, s, _, hd] = self.b.dims(k)[..] else {
            unreachable!("keys are [B, S, H, hd]")
        };
        let rep = hq / hkv;
        let b = &mut *self.b;
        let kb = b.broadcast(k, &[bs, s, hkv, rep, hd], &[0, 1, 2, 4])?;
        let vb = b.broadcast(v, &[bs, s, hkv, rep, hd], &[0, 1, 2, 4])?;
        Ok((
            b.reshape(kb, &[bs, s, hq, hd])?,
            b.reshape(vb, &[bs, s, hq, hd])?,
        ))
    }

    /// The plain graph of attention's core over the rotated `[q, k, v]`
    /// (`[B, S, H, hd]`): `[B, S, H, hd]`.
    fn core_attention(
        &mut self,
        qkv: [InstrId; 3],
        allowed: InstrId,
    ) -> Result<InstrId, BuildError> {
        let (hq, _) = self.heads();
        let (bs, hd) = (self.batch.batch_size, self.cfg.head_dim());
        // Queries are the rank's tokens; keys, under context parallelism,
        // the whole sequence.
        let (sq, sk) = (self.b.dims(qkv[0])[1], self.b.dims(qkv[1])[1]);
        // NxD's CoreAttention: everything from the rotated q, k and v to the
        // per-head context, the part whose [B, H, S, S] activations remat's
        // core-attention policy recomputes instead of saving.
        self.b.push_scope(scope::CORE_ATTENTION);
        let [q, k, v] = qkv;
        let (k, v) = self.repeat_kv(k, v)?;
        let b = &mut *self.b;
        // scores [B, H, Sq, Sk]
        let scores = b.dot(
            q,
            k,
            DotDims {
                lhs_batch: vec![0, 2],
                lhs_contracting: vec![3],
                rhs_batch: vec![0, 2],
                rhs_contracting: vec![3],
            },
        )?;
        let scores = b.scale(scores, 1.0 / (hd as f64).sqrt())?;
        // [Sq, Sk] for every row alike, or [B, Sq, Sk] with packed
        // documents.
        let mapping: &[i64] = if b.dims(allowed).len() == 2 {
            &[2, 3]
        } else {
            &[0, 2, 3]
        };
        let allowed = b.broadcast(allowed, &[bs, hq, sq, sk], mapping)?;
        let masked = b.full_like(scores, -1e9)?;
        let scores = b.select(allowed, scores, masked)?;
        let probs = self.softmax_last(scores)?;
        let b = &mut *self.b;
        // [B, H, Sq, hd]
        let att = b.dot(
            probs,
            v,
            DotDims {
                lhs_batch: vec![0, 1],
                lhs_contracting: vec![3],
                rhs_batch: vec![0, 2],
                rhs_contracting: vec![1],
            },
        )?;
        let att = b.transpose(att, &[0, 2, 1, 3])?;
        b.pop_scope();
        Ok(att)
    }

    /// Attention's core over the rotated `[q, k, v]` (`[B, S, H, hd]`),
    /// tile by tile: `[B, S, H, hd]`. Autodiff takes its backward as a
    /// whole, which reads q, k, v, the output and the rows' log-sum-exp:
    /// no `[S, S]` value is kept, so remat's core-attention policy has
    /// nothing here to recompute (its scope is not core attention's).
    fn blocked_attention(
        &mut self,
        qkv: [InstrId; 3],
        segments: Option<InstrId>,
        blocked: BlockedAttention,
    ) -> Result<InstrId, BuildError> {
        self.tiled_attention(qkv, KvHeads::Repeated, |b, [q, k, v]| {
            let operands = AttentionOperands { q, k, v, segments };
            let fwd = blocked.forward(b, operands)?;
            let mut inputs = vec![q, k, v];
            inputs.extend(segments);
            Ok((fwd, inputs, CompositeRule::BlockedAttention(blocked)))
        })
    }

    /// Attention's core over the rotated `[q, k, v]` (`[B, S, H, hd]`),
    /// tile by tile in a loop over the pairs `rest` names, with the
    /// positions and documents it names: `[B, Sq, H, hd]`. The keys and
    /// values are the whole sequence's under context parallelism's
    /// all-gather; on a `ring`, this rank's at their own head count,
    /// passed round the CP ring (`rest` then has a row a step). Autodiff
    /// takes its backward as a whole, as blocked attention's.
    fn looped_attention(
        &mut self,
        qkv: [InstrId; 3],
        looped: LoopedAttention,
        ring: Option<Ring>,
        (positions, pairs, segments): ([InstrId; 2], InstrId, Option<[InstrId; 2]>),
    ) -> Result<InstrId, BuildError> {
        let heads = match ring {
            None => KvHeads::Repeated,
            Some(_) => KvHeads::Own,
        };
        self.tiled_attention(qkv, heads, |b, [q, k, v]| {
            let operands = LoopOperands {
                q,
                k,
                v,
                positions,
                pairs,
                segments,
            };
            let (fwd, rule) = match ring {
                None => (
                    looped.forward(b, operands)?,
                    CompositeRule::LoopedAttention(looped),
                ),
                Some(ring) => {
                    let ring = RingAttention { looped, ring };
                    (
                        ring.forward(b, operands)?,
                        CompositeRule::RingAttention(ring),
                    )
                }
            };
            Ok((fwd, operands.inputs(), rule))
        })
    }

    /// What every tiled attention shares: key and value heads repeated for
    /// GQA as `heads` says, q, k and v heads first (`[B, H, S, hd]`) for
    /// `build`, which builds the forward and names the composite's inputs
    /// and rule, and the output back as `[B, S, H, hd]`, all in the
    /// [`scope::BLOCKED_ATTENTION`] scope.
    fn tiled_attention(
        &mut self,
        qkv: [InstrId; 3],
        heads: KvHeads,
        build: impl FnOnce(
            &mut Builder,
            [InstrId; 3],
        ) -> Result<(BlockedForward, Vec<InstrId>, CompositeRule), BuildError>,
    ) -> Result<InstrId, BuildError> {
        self.b.push_scope(scope::BLOCKED_ATTENTION);
        let [q, k, v] = qkv;
        let (k, v) = match heads {
            KvHeads::Repeated => self.repeat_kv(k, v)?,
            KvHeads::Own => (k, v),
        };
        let heads_first = [0, 2, 1, 3];
        let q = self.b.transpose(q, &heads_first)?;
        let k = self.b.transpose(k, &heads_first)?;
        let v = self.b.transpose(v, &heads_first)?;
        let (fwd, inputs, rule) = build(self.b, [q, k, v])?;
        self.hints.composites.push(Composite {
            inputs,
            output: fwd.output,
            rule,
            residuals: vec![fwd.lse],
            backward_call: None,
        });
        let att = self.b.transpose(fwd.output, &heads_first)?;
        self.b.pop_scope();
        Ok(att)
    }

    /// Attention's core over the rotated `[q, k, v]` (`[B, S, H, hd]`) by a
    /// kernel brought from another stack: a call of its forward, which
    /// autodiff differentiates by a call of its backward, each over what
    /// its calling convention names. `[B, S, H, hd]`.
    fn imported_attention(
        &mut self,
        qkv: [InstrId; 3],
        kernel: &ImportedKernel,
    ) -> Result<InstrId, BuildError> {
        self.b.push_scope(scope::IMPORTED_ATTENTION);
        let [q, k, v] = qkv;
        let (k, v) = self.repeat_kv(k, v)?;
        let heads_first = [0, 2, 1, 3];
        let x = [
            self.b.transpose(q, &heads_first)?,
            self.b.transpose(k, &heads_first)?,
            self.b.transpose(v, &heads_first)?,
        ];
        let (forward, backward) = match self.imported {
            Some(ids) => ids,
            None => {
                let ids = (
                    import(self.b, &kernel.forward.callable)?,
                    import(self.b, &kernel.backward.callable)?,
                );
                self.imported = Some(ids);
                ids
            }
        };
        let operands: Vec<InstrId> = kernel
            .forward
            .parameters
            .iter()
            .filter_map(|r| r.operand().map(|i| x[i]))
            .collect();
        let call = Op::Call {
            to_apply: forward,
            is_composite: false,
        };
        let result = self.b.add_fresh(call, &operands)?;
        let results = match self.b.shape(result).is_tuple() {
            false => vec![result],
            true => (0..kernel.forward.results.len())
                .map(|i| {
                    self.b
                        .add(Op::GetTupleElement { index: i as i64 }, &[result], None)
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        // The residuals in the forward's order, as `backward_reads`
        // places them.
        let mut output = result;
        let mut residuals = Vec::new();
        for (role, &value) in kernel.forward.results.iter().zip(&results) {
            match role {
                Role::Residual(_) => residuals.push(value),
                _ => output = value,
            }
        }
        self.hints.composites.push(Composite {
            inputs: x.to_vec(),
            output,
            rule: CompositeRule::Imported,
            residuals,
            backward_call: Some(BackwardCall {
                computation: backward,
                operands: kernel.backward_reads.clone(),
                results: kernel.backward_adjoints.clone(),
            }),
        });
        let att = self.b.transpose(output, &heads_first)?;
        self.b.pop_scope();
        Ok(att)
    }

    /// The MLP of layer `w` over `x`: dense, or a mixture of experts.
    fn mlp(&mut self, x: MlpInput, w: &LayerWeights<InstrId>) -> Result<InstrId, BuildError> {
        self.b.push_scope(scope::MLP);
        let out = match &w.mlp {
            Mlp::Dense(dense) => self.dense_mlp(x.h, dense, self.cfg.intermediate_size)?,
            Mlp::Sparse(sparse) => self.sparse_mlp(x, sparse)?,
        };
        self.b.pop_scope();
        Ok(out)
    }

    /// A mixture of experts over `x`: the routed experts' weighted sum,
    /// plus the shared expert scaled by its gate where there is one.
    fn sparse_mlp(&mut self, x: MlpInput, w: &SparseMlp<InstrId>) -> Result<InstrId, BuildError> {
        let h = x.h;
        let moe = self
            .cfg
            .moe
            .as_ref()
            .expect("a sparse layer's config has its experts");
        let logits = self.scoped("gate", |m| m.linear(h, w.router))?;
        let (batch, stats) = (self.batch, &mut self.router_stats);
        let routing = crate::experts::route(self.b, &mut self.hints, moe, logits, batch, stats)?;
        self.b.push_scope(scope::EXPERTS);
        let group = self.rank.as_ref().and_then(|r| r.experts());
        let out = match group {
            None => crate::experts::experts(self.b, &mut self.hints, h, w, routing.weights)?,
            Some(g) => g.run(self.b, &mut self.hints, moe, h, w, &routing)?,
        };
        // Under TP each rank ran its columns of every expert: partial sums,
        // made whole as a dense MLP's down projection's are.
        let out = match &self.rank {
            Some(rank) => rank.reduce_partial(self.b, out)?,
            None => out,
        };
        self.b.pop_scope();
        let Some(shared) = &w.shared else {
            return Ok(out);
        };
        let width = moe.shared_expert_intermediate_size.unwrap_or(0);
        let s = self.scoped("shared_expert", |m| m.dense_mlp(h, &shared.mlp, width))?;
        // The gate of the rows the rank's output holds: its own run of
        // them under sequence parallelism, as the reductions leave them.
        let g = self.scoped("shared_expert_gate", |m| m.linear(x.own, shared.gate))?;
        let b = &mut *self.b;
        let g = b.unary(UnaryOp::Logistic, g)?;
        let dims = b.dims(s);
        let g = b.reshape(g, &dims[..1])?;
        let g = b.broadcast(g, &dims, &[0])?;
        let s = b.mul(g, s)?;
        b.add2(out, s)
    }

    /// A SwiGLU MLP of width `width` over `h`.
    fn dense_mlp(
        &mut self,
        h: InstrId,
        w: &DenseMlp<InstrId>,
        width: i64,
    ) -> Result<InstrId, BuildError> {
        let f = width / self.rank.as_ref().map_or(1, |r| r.par.tp);
        let [g, u] = match &w.gate_up {
            GateUp::Fused(gate_up) => {
                let gate_up = self.projection(h, gate_up)?;
                self.split_columns(gate_up, [f, f])?
            }
            GateUp::Separate { gate, up } => [self.projection(h, gate)?, self.projection(h, up)?],
        };
        self.b.push_scope(scope::ACT_FN);
        let a = crate::swiglu::swiglu(self.b, &mut self.hints, g, u)?;
        self.b.pop_scope();
        self.row_parallel(a, &w.down_proj)
    }

    /// The column blocks of `x` (`[N, sum(widths)]`), in order: the
    /// separate projections a fused one computed.
    fn split_columns<const K: usize>(
        &mut self,
        x: InstrId,
        widths: [i64; K],
    ) -> Result<[InstrId; K], BuildError> {
        let mut start = 0;
        let mut out = [x; K];
        for (o, w) in out.iter_mut().zip(widths) {
            *o = self.b.slice_dim(x, 1, start, start + w)?;
            start += w;
        }
        Ok(out)
    }

    /// `f(self)` with scope `name` entered.
    fn scoped<T>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut Self) -> Result<T, BuildError>,
    ) -> Result<T, BuildError> {
        self.b.push_scope(name);
        let r = f(self)?;
        self.b.pop_scope();
        Ok(r)
    }

    /// `loss` plus the load-balancing loss of the sparse layers so far,
    /// times its coefficient. On a rank of a data-parallel step the
    /// router's counts are pooled over the replicas first: the loss is the
    /// global batch's, as one device computes it. A micro-batch adds its
    /// share of the step's mean ([`MicroBatch`]).
    fn with_router_loss(&mut self, moe: &MoeConfig, loss: InstrId) -> Result<InstrId, BuildError> {
        let ty = self.b.ty(loss);
        let dp = self.rank.as_ref().map_or(1, |r| r.par.replicas());
        let (stats, tokens) = (self.pooled_router()?, self.n() * dp);
        let share = self.micro_batch.map_or(1, |m| m.of) as f64;
        match crate::experts::load_balancing_loss(self.b, moe, &stats, tokens, ty)? {
            Some(aux) => {
                let aux = self.b.scale(aux, moe.router_aux_loss_coef / share)?;
                self.b.add2(loss, aux)
            }
            None => Ok(loss),
        }
    }

    /// The router's counts over the global batch: on a rank of a
    /// data-parallel step, pooled over the replicas (once, whoever asks
    /// first).
    fn pooled_router(&mut self) -> Result<RouterStats, BuildError> {
        if let Some(pooled) = &self.pooled_router {
            return Ok(pooled.clone());
        }
        let pooled = self.pooled(&self.router_stats.clone())?;
        self.pooled_router = Some(pooled.clone());
        Ok(pooled)
    }

    /// `stats` over the global batch: on a rank of a data-parallel step,
    /// summed over the replicas.
    fn pooled(&mut self, stats: &RouterStats) -> Result<RouterStats, BuildError> {
        match &self.rank {
            None => Ok(stats.clone()),
            Some(rank) => {
                let sum = |b: &mut Builder, x| rank.dp_sum(b, x);
                crate::experts::pool_stats(self.b, stats, &sum)
            }
        }
    }

    /// Mean of logsumexp(logits) - logits[target] over the tokens whose
    /// target is not [`IGNORE_INDEX`] (0 when every target is ignored).
    fn cross_entropy(&mut self, logits: InstrId, targets: InstrId) -> Result<InstrId, BuildError> {
        let [n, v] = [self.n(), self.cfg.vocab_size];
        debug_assert_eq!(self.b.dims(logits), vec![n, v]);
        let b = &mut *self.b;
        let m = b.reduce_max(logits, &[1])?;
        self.hints.stop.push(m);
        let mb = b.broadcast(m, &[n, v], &[0])?;
        let z = b.sub(logits, mb)?;
        let e = b.unary(UnaryOp::Exp, z)?;
        let se = b.reduce_sum(e, &[1])?;
        let lse = b.unary(UnaryOp::Log, se)?;
        let t = b.reshape(targets, &[n])?;
        let tb = b.broadcast(t, &[n, v], &[0])?;
        let col = b.iota(ElementType::S32, &[n, v], 1)?;
        let hit = b.compare(col, tb, ComparisonDirection::Eq)?;
        let zeros = b.full_like(z, 0.0)?;
        let picked = b.select(hit, z, zeros)?;
        let tl = b.reduce_sum(picked, &[1])?;
        let nll = b.sub(lse, tl)?;
        let (total, count) = counted_total(b, nll, t, self.ty)?;
        let count = match self.micro_batch.map(|m| m.token_count) {
            Some(c) => b.convert(c, self.ty)?,
            None => count,
        };
        let one = b.full_like(count, 1.0)?;
        let count = b.binary(BinaryOp::Maximum, count, one)?;
        b.div(total, count)
    }
}

/// `module` brought into `b` as callees ([`Builder::import`]): the id of
/// its entry. The kernel's modules were verified when read, so each
/// computation has the root a signature needs.
fn import(b: &mut Builder, module: &hlatc_compiler::Module) -> Result<ComputationId, BuildError> {
    b.import(module.clone()).map_err(|_| BuildError {
        computation: b.computation().name.clone(),
        opcode: "call",
        operands: format!("(the imported module {})", module.name),
        source: ShapeError::UnknownComputation(module.entry),
    })
}

/// Embedding lookup: rows of `embed` (`[V, D]`) gathered by token id.
fn embedding(
    b: &mut Builder,
    embed: InstrId,
    tokens: InstrId,
    n: i64,
    d: i64,
) -> Result<InstrId, BuildError> {
    let idx = b.reshape(tokens, &[n, 1])?;
    gather_rows(b, embed, idx, d)
}

/// Which key positions each query may attend to, `pred[S, S]`, generated in
/// the graph: causal (key <= query), and within `window` positions (query -
/// key < window) for a sliding window.
fn attention_mask(b: &mut Builder, s: i64, window: Option<i64>) -> Result<InstrId, BuildError> {
    let qi = b.iota(ElementType::S32, &[s, s], 0)?;
    let ki = b.iota(ElementType::S32, &[s, s], 1)?;
    causal_within(b, [qi, ki], s, window)
}

/// [`attention_mask`] for queries and keys at global positions `q` (`s32
/// [Sq]`) and `k` (`s32[Sk]`): a CP rank's queries against the gathered
/// keys, `pred[Sq, Sk]`.
fn mask_by_positions(
    b: &mut Builder,
    q: InstrId,
    k: InstrId,
    window: Option<i64>,
) -> Result<InstrId, BuildError> {
    let dims = [b.dims(q)[0], b.dims(k)[0]];
    let qi = b.broadcast(q, &dims, &[0])?;
    let ki = b.broadcast(k, &dims, &[1])?;
    causal_within(b, [qi, ki], dims[1], window)
}

/// Which keys each query sees, from each pair's query and key positions
/// (`[qi, ki]`, `s32[Sq, Sk]`, over a sequence of `s`): causal, and within
/// `window` positions.
fn causal_within(
    b: &mut Builder,
    [qi, ki]: [InstrId; 2],
    s: i64,
    window: Option<i64>,
) -> Result<InstrId, BuildError> {
    let causal = b.compare(qi, ki, ComparisonDirection::Ge)?;
    match window {
        Some(w) if w < s => {
            let dims = b.dims(qi);
            let distance = b.sub(qi, ki)?;
            let limit = b.full(ElementType::S32, &dims, w as f64)?;
            let near = b.compare(distance, limit, ComparisonDirection::Lt)?;
            b.binary(BinaryOp::And, causal, near)
        }
        _ => Ok(causal),
    }
}

/// [`packed_documents`] on a CP rank: its queries (segments `q_seg`, `s32
/// [B, Sq]`, at global positions `cp.local`) against the gathered keys
/// (`k_seg`, `s32[B, Sk]`, at `cp.gathered`). Documents are contiguous in
/// global positions, so a document starts at the least position holding
/// its id, wherever that key was gathered from.
fn packed_documents_across(
    b: &mut Builder,
    [q_seg, k_seg]: [InstrId; 2],
    cp: CpPositions,
    s: i64,
) -> Result<(InstrId, InstrId), BuildError> {
    let [bs, sq] = b.dims(q_seg)[..] else {
        unreachable!("segment ids are [B, S]")
    };
    let sk = b.dims(k_seg)[1];
    let dims = [bs, sq, sk];
    let q = b.broadcast(q_seg, &dims, &[0, 1])?;
    let k = b.broadcast(k_seg, &dims, &[0, 2])?;
    let same = b.compare(q, k, ComparisonDirection::Eq)?;
    let key_position = b.broadcast(cp.gathered, &dims, &[2])?;
    let beyond = b.full(ElementType::S32, &dims, s as f64)?;
    let candidates = b.select(same, key_position, beyond)?;
    let start = b.reduce(BinaryOp::Minimum, candidates, &[2], f64::INFINITY)?;
    let position = b.broadcast(cp.local, &[bs, sq], &[1])?;
    let positions = b.sub(position, start)?;
    Ok((same, positions))
}

/// What looped attention reads on a CP rank besides q, k and v: the
/// positions of its queries and keys, the pairs it visits, the documents
/// of packed rows, and the positions its rotary tables are built at.
struct LoopTables {
    positions: [InstrId; 2],
    pairs: InstrId,
    segments: Option<[InstrId; 2]>,
    rotary: InstrId,
}

/// Row `r` (`s32[]`) of `table`, without its first dimension.
fn row_at(b: &mut Builder, table: InstrId, r: InstrId) -> Result<InstrId, BuildError> {
    let row = b.dynamic_slice_dim(table, 0, r, 1)?;
    b.reshape(row, &b.dims(table)[1..])
}

/// [`LoopTables`] of a CP rank that gathers every rank's keys: its
/// queries against the whole sequence, in rank order. The documents of
/// packed rows are gathered as the keys are.
fn gathered_tables(
    b: &mut Builder,
    looped: LoopedAttention,
    rank: &RankContext,
    cp: CpPositions,
    segments: Option<InstrId>,
) -> Result<LoopTables, BuildError> {
    let s = b.dims(cp.gathered)[0];
    let queries = rank_positions(&rank.par, s);
    let keys = queries.concat();
    let variants: Vec<(&[i64], &[i64])> = queries.iter().map(|q| (&q[..], &keys[..])).collect();
    let table = b.constant(looped.pair_table(&variants));
    let pairs = row_at(b, table, cp.rank)?;
    let (segments, rotary) = match segments {
        None => (None, cp.local),
        Some(seg) => {
            let all = rank.gather_context(b, seg)?;
            let (_, within) = packed_documents_across(b, [seg, all], cp, s)?;
            (Some([seg, all]), within)
        }
    };
    Ok(LoopTables {
        positions: [cp.local, cp.gathered],
        pairs,
        segments,
        rotary,
    })
}

/// [`LoopTables`] of a CP rank on a ring: for each step round it, one row
/// of the positions of the block the rank holds then (CP rank `(c - i)
/// mod cp`'s at step `i`, rank `c`), of the pairs its queries visit in it,
/// and for packed rows of the block's documents. Every rank's rows are a
/// constant `[cp, cp, ...]`, read at the rank's row. The documents are
/// gathered (`s32`, for the positions within them); keys and values are
/// not.
fn ring_tables(
    b: &mut Builder,
    looped: LoopedAttention,
    rank: &RankContext,
    cp: CpPositions,
    segments: Option<InstrId>,
) -> Result<LoopTables, BuildError> {
    let s = b.dims(cp.gathered)[0];
    let c = rank.par.cp;
    let sk = s / c;
    let queries = rank_positions(&rank.par, s);
    let held = |r: i64, i: i64| &queries[(r - i).rem_euclid(c) as usize][..];
    let steps = || (0..c).flat_map(|r| (0..c).map(move |i| (r, i)));
    let variants: Vec<(&[i64], &[i64])> = steps()
        .map(|(r, i)| (&queries[r as usize][..], held(r, i)))
        .collect();
    let table = b.constant(looped.pair_table(&variants));
    let p = b.dims(table)[1];
    let table = b.reshape(table, &[c, c, p, 3])?;
    let pairs = row_at(b, table, cp.rank)?;
    let keys: Vec<i32> = steps()
        .flat_map(|(r, i)| held(r, i).iter())
        .map(|&p| i32::try_from(p).expect("a sequence's positions fit in i32"))
        .collect();
    let keys = Literal::from_s32(vec![c, c, sk], &keys).expect("cp x cp rows of S / cp positions");
    let keys = b.constant(keys);
    let key_positions = row_at(b, keys, cp.rank)?;
    let (segments, rotary) = match segments {
        None => (None, cp.local),
        Some(seg) => {
            let all = rank.gather_context(b, seg)?;
            let (_, within) = packed_documents_across(b, [seg, all], cp, s)?;
            let batch = b.dims(seg)[0];
            let held = (0..c)
                .map(|i| {
                    let shift = b.scalar(ElementType::S32, (c - i) as f64);
                    let ranks = b.scalar(ElementType::S32, c as f64);
                    let width = b.scalar(ElementType::S32, sk as f64);
                    let owner = b.add2(cp.rank, shift)?;
                    let owner = b.binary(BinaryOp::Remainder, owner, ranks)?;
                    let start = b.mul(owner, width)?;
                    let block = b.dynamic_slice_dim(all, 1, start, sk)?;
                    b.reshape(block, &[1, batch, sk])
                })
                .collect::<Result<Vec<_>, _>>()?;
            (Some([seg, b.concatenate(&held, 0)?]), within)
        }
    };
    Ok(LoopTables {
        positions: [cp.local, key_positions],
        pairs,
        segments,
        rotary,
    })
}

/// For packed rows (`segments`: `s32[B, S]`, documents contiguous): which
/// key each query may see by document (`pred[B, S, S]`, same segment), and
/// each token's position within its document (`s32[B, S]`: its index minus
/// the index where its document starts).
fn packed_documents(
    b: &mut Builder,
    segments: InstrId,
    bs: i64,
    s: i64,
) -> Result<(InstrId, InstrId), BuildError> {
    let q = b.broadcast(segments, &[bs, s, s], &[0, 1])?;
    let k = b.broadcast(segments, &[bs, s, s], &[0, 2])?;
    let same = b.compare(q, k, ComparisonDirection::Eq)?;
    let key_index = b.iota(ElementType::S32, &[bs, s, s], 2)?;
    let beyond = b.full(ElementType::S32, &[bs, s, s], s as f64)?;
    let candidates = b.select(same, key_index, beyond)?;
    let start = b.reduce(BinaryOp::Minimum, candidates, &[2], f64::INFINITY)?;
    let index = b.iota(ElementType::S32, &[bs, s], 1)?;
    let positions = b.sub(index, start)?;
    Ok((same, positions))
}

/// Each token's position within its document, as [`packed_documents`]
/// gives it, computed a tile of `tile` queries against a tile of keys at a
/// time (`s32[B, t, t]`), so no `[S, S]` value is built: a document's
/// start is the least index holding its id, and never after the query.
fn positions_in_documents(
    b: &mut Builder,
    segments: InstrId,
    bs: i64,
    s: i64,
    tile: i64,
) -> Result<InstrId, BuildError> {
    let t = tile;
    let mut starts = Vec::new();
    for i in 0..s / t {
        let q = b.slice_dim(segments, 1, i * t, (i + 1) * t)?;
        let q = b.broadcast(q, &[bs, t, t], &[0, 1])?;
        let mut tile_starts = Vec::new();
        for j in 0..=i {
            let k = b.slice_dim(segments, 1, j * t, (j + 1) * t)?;
            let k = b.broadcast(k, &[bs, t, t], &[0, 2])?;
            let same = b.compare(q, k, ComparisonDirection::Eq)?;
            let key_index = b.iota(ElementType::S32, &[bs, t, t], 2)?;
            let offset = b.full(ElementType::S32, &[bs, t, t], (j * t) as f64)?;
            let key_index = b.add2(key_index, offset)?;
            let beyond = b.full(ElementType::S32, &[bs, t, t], s as f64)?;
            let candidates = b.select(same, key_index, beyond)?;
            tile_starts.push(b.reduce(BinaryOp::Minimum, candidates, &[2], f64::INFINITY)?);
        }
        let mut start = tile_starts[0];
        for &other in &tile_starts[1..] {
            start = b.binary(BinaryOp::Minimum, start, other)?;
        }
        starts.push(start);
    }
    let start = b.concatenate(&starts, 1)?;
    let index = b.iota(ElementType::S32, &[bs, s], 1)?;
    b.sub(index, start)
}

/// Builds the forward pass into `b` over already-declared `params` (in
/// [`param_specs`] order) and `tokens` / `targets` (`s32[batch, seq]`).
pub fn forward(
    b: &mut Builder,
    cfg: &ModelConfig,
    batch: BatchShape,
    params: &[InstrId],
    tokens: InstrId,
    targets: InstrId,
    segments: Option<InstrId>,
) -> Result<ForwardOutputs, BuildError> {
    let inputs = ForwardInputs {
        params,
        tokens,
        targets,
        segments,
        module_markers: false,
        kernels: Kernels::default(),
        micro_batch: None,
    };
    forward_on_rank(b, cfg, batch, inputs, Parallelism::SINGLE, None)
}

/// What the forward pass reads: parameters (in [`param_specs`] order, each
/// the rank's share), tokens and targets (`s32[batch, seq]`) and, for
/// packed rows, segment ids.
#[derive(Clone)]
pub struct ForwardInputs<'a> {
    pub params: &'a [InstrId],
    pub tokens: InstrId,
    pub targets: InstrId,
    pub segments: Option<InstrId>,
    /// Mark each decoder layer's start and end with neuronx-cc's module
    /// markers (autodiff marks the backward's boundaries alike).
    pub module_markers: bool,
    /// What computes each kernel point.
    pub kernels: Kernels,
    /// The optimizer step this batch is a micro-batch of, so that its loss
    /// and gradient are its exact share of the step's. `None`: the batch is
    /// the whole step (its count of targets over every DP replica).
    pub micro_batch: Option<MicroBatch>,
}

/// The forward pass one rank of a step divided by `par` runs, over its
/// DP replica's `batch` (the global batch divided by `par.dp`). Its loss
/// is the global batch's, the same on every rank; with `par` single it is
/// [`forward`].
pub fn forward_on_rank(
    b: &mut Builder,
    cfg: &ModelConfig,
    batch: BatchShape,
    inputs: ForwardInputs,
    par: Parallelism,
    fault: Option<Fault>,
) -> Result<ForwardOutputs, BuildError> {
    let ForwardInputs {
        params,
        tokens,
        targets,
        segments,
        module_markers,
        kernels,
        micro_batch,
    } = inputs;
    let context = PartsContext {
        batch,
        par,
        fault,
        module_markers,
        kernels,
        micro_batch,
    };
    let mut parts = ForwardParts::new(b, cfg, params, context, segments)?;
    let x = parts.embed(tokens)?;
    let x = parts.layers(x)?;
    let (loss, logits) = parts.loss(x, targets)?;
    let experts = parts.expert_counts()?;
    let layer_inputs = std::mem::take(&mut parts.layer_inputs);
    Ok(ForwardOutputs {
        loss,
        logits,
        experts,
        grad_hints: parts.into_hints(),
        layer_inputs,
    })
}

/// How the pieces of a forward pass are divided and counted: see
/// [`ForwardInputs`] and [`forward_on_rank`].
#[derive(Clone)]
pub struct PartsContext {
    pub batch: BatchShape,
    pub par: Parallelism,
    pub fault: Option<Fault>,
    pub module_markers: bool,
    pub kernels: Kernels,
    pub micro_batch: Option<MicroBatch>,
}

/// The forward pass in its three pieces, which a pipeline stage calls
/// apart: the embedding of tokens, the decoder layers of the model it is
/// built for, and the final norm, LM head and loss. [`forward_on_rank`]
/// is the three in a row. The attention mask and rotary tables are built
/// once, where the layers first need them (after the embedding, as the
/// single pass has always written them), and serve every call.
pub struct ForwardParts<'a> {
    m: Llama<'a>,
    /// The parameters by role, built once from their declaration
    /// ([`weight_specs`]).
    weights: Weights<InstrId>,
    segments: Option<InstrId>,
    /// The rotary tables and the attention mask, once built.
    masks: Option<((InstrId, InstrId), AttentionForm)>,
    module_markers: bool,
    /// The residual stream as each layer built so far began.
    layer_inputs: Vec<InstrId>,
}

impl<'a> ForwardParts<'a> {
    /// The parts over `params` (declared in [`param_specs`] order, each the
    /// rank's share) for rows of `context.batch`, packed by `segments`
    /// when given.
    pub fn new(
        b: &'a mut Builder,
        cfg: &'a ModelConfig,
        params: &[InstrId],
        context: PartsContext,
        segments: Option<InstrId>,
    ) -> Result<Self, BuildError> {
        let PartsContext {
            batch,
            par,
            fault,
            module_markers,
            kernels,
            micro_batch,
        } = context;
        let weights = match weight_specs(cfg).zip(params.iter().copied()) {
            Some(zipped) => zipped.map(|_, _, (_spec, id)| id),
            None => return Err(parameter_count(b, cfg, params.len())),
        };
        let ty = b.ty(weights.embed);
        let rank = match par.is_single() {
            true => None,
            false => Some(RankContext::new(
                b,
                par,
                cfg,
                batch.seq_len * par.cp,
                fault,
            )?),
        };
        Ok(ForwardParts {
            m: Llama {
                b,
                cfg,
                batch,
                ty,
                hints: GradHints::default(),
                rank,
                micro_batch,
                kernels,
                imported: None,
                router_stats: RouterStats::default(),
                pooled_router: None,
            },
            weights,
            segments,
            masks: None,
            module_markers,
            layer_inputs: Vec::new(),
        })
    }

    /// The rotary tables and the attention mask (by document for packed
    /// rows), built at the first call.
    fn masks(&mut self) -> Result<((InstrId, InstrId), AttentionForm), BuildError> {
        if let Some(masks) = &self.masks {
            return Ok(masks.clone());
        }
        let (head_dim, window) = (self.m.cfg.head_dim(), self.m.cfg.sliding_window);
        match &self.m.kernels.attention {
            AttentionKernel::Hlo => {}
            &AttentionKernel::Blocked { tile } => {
                return self.tiled_masks(BlockedAttention {
                    tile,
                    head_dim,
                    window,
                })
            }
            &AttentionKernel::Looped { tile } => {
                return self.looped_masks(LoopedAttention {
                    tile,
                    head_dim,
                    window,
                })
            }
            AttentionKernel::Imported(kernel) => {
                let mask = AttentionForm::Imported(kernel.clone());
                let m = &mut self.m;
                let tables = m.scoped(scope::ROTARY_EMB, |m| m.rope_tables(None))?;
                self.masks = Some((tables, mask.clone()));
                return Ok((tables, mask));
            }
        }
        // The plain graph: under context parallelism, this rank's queries
        // against every rank's keys.
        if let Some(cp) = self.m.rank.as_ref().and_then(|r| r.cp_positions()) {
            return self.context_masks(cp);
        }
        let m = &mut self.m;
        let (batch, s) = (m.batch, m.batch.seq_len);
        m.b.push_scope("attention_mask");
        let mut allowed = attention_mask(m.b, s, m.cfg.sliding_window)?;
        let positions = match self.segments {
            None => None,
            Some(seg) => {
                let (mask, positions) = packed_documents(m.b, seg, batch.batch_size, s)?;
                let causal = m.b.broadcast(allowed, &[batch.batch_size, s, s], &[1, 2])?;
                allowed = m.b.binary(BinaryOp::And, causal, mask)?;
                Some(positions)
            }
        };
        m.b.pop_scope();
        let tables = m.scoped(scope::ROTARY_EMB, |m| m.rope_tables(positions))?;
        let masks = (tables, AttentionForm::Dense(allowed));
        self.masks = Some(masks.clone());
        Ok(masks)
    }

    /// [`ForwardParts::masks`] on a CP rank: its queries, at their global
    /// positions, against every CP rank's keys (`pred[Sq, S]`, or `pred[B,
    /// Sq, S]` by document for packed rows, whose segment ids are gathered
    /// as the keys are), and rotary tables at the global positions.
    fn context_masks(
        &mut self,
        cp: CpPositions,
    ) -> Result<((InstrId, InstrId), AttentionForm), BuildError> {
        let m = &mut self.m;
        let (bs, sq, s) = (m.batch.batch_size, m.batch.seq_len, m.sequence());
        m.b.push_scope("attention_mask");
        let mut allowed = mask_by_positions(m.b, cp.local, cp.gathered, m.cfg.sliding_window)?;
        let positions = match (self.segments, &m.rank) {
            (Some(seg), Some(rank)) => {
                let all = rank.gather_context(m.b, seg)?;
                let (same, positions) = packed_documents_across(m.b, [seg, all], cp, s)?;
                let causal = m.b.broadcast(allowed, &[bs, sq, s], &[1, 2])?;
                allowed = m.b.binary(BinaryOp::And, causal, same)?;
                positions
            }
            _ => cp.local,
        };
        m.b.pop_scope();
        let tables = m.scoped(scope::ROTARY_EMB, |m| m.rope_tables(Some(positions)))?;
        let masks = (tables, AttentionForm::Dense(allowed));
        self.masks = Some(masks.clone());
        Ok(masks)
    }

    /// [`ForwardParts::masks`] for looped attention, which masks each tile
    /// pair from the positions of its queries and keys: the positions, the
    /// pairs this rank visits, the documents of packed rows, and rotary
    /// tables at the global positions (within each document for packed
    /// rows).
    fn looped_masks(
        &mut self,
        looped: LoopedAttention,
    ) -> Result<((InstrId, InstrId), AttentionForm), BuildError> {
        let m = &mut self.m;
        let (bs, s) = (m.batch.batch_size, m.sequence());
        let cp = m.rank.as_ref().and_then(|r| r.cp_positions());
        m.b.push_scope("attention_mask");
        let (positions, pairs, segments, rotary, ring) = match (cp, &m.rank) {
            (Some(cp), Some(rank)) => match rank.par.cp_exchange {
                CpExchange::AllGather => {
                    let t = gathered_tables(m.b, looped, rank, cp, self.segments)?;
                    (t.positions, t.pairs, t.segments, Some(t.rotary), None)
                }
                CpExchange::Ring => {
                    let t = ring_tables(m.b, looped, rank, cp, self.segments)?;
                    let ring = Some(rank.par.cp_ring());
                    (t.positions, t.pairs, t.segments, Some(t.rotary), ring)
                }
            },
            _ => {
                let all: Vec<i64> = (0..s).collect();
                let table = m.b.constant(looped.pair_table(&[(&all, &all)]));
                let pairs = m.b.reshape(table, &m.b.dims(table)[1..])?;
                let at = m.b.iota(ElementType::S32, &[s], 0)?;
                let (segments, rotary) = match self.segments {
                    None => (None, None),
                    Some(seg) => {
                        let within = positions_in_documents(m.b, seg, bs, s, looped.tile)?;
                        (Some([seg, seg]), Some(within))
                    }
                };
                ([at, at], pairs, segments, rotary, None)
            }
        };
        m.b.pop_scope();
        let tables = m.scoped(scope::ROTARY_EMB, |m| m.rope_tables(rotary))?;
        let mask = AttentionForm::Looped {
            looped,
            positions,
            pairs,
            segments,
            ring,
        };
        self.masks = Some((tables, mask.clone()));
        Ok((tables, mask))
    }

    /// [`ForwardParts::masks`] for blocked attention, which masks each tile
    /// as it goes: only the positions of packed rows are built here, tile
    /// by tile too.
    fn tiled_masks(
        &mut self,
        blocked: BlockedAttention,
    ) -> Result<((InstrId, InstrId), AttentionForm), BuildError> {
        let m = &mut self.m;
        let (bs, s) = (m.batch.batch_size, m.batch.seq_len);
        let positions = match self.segments {
            None => None,
            Some(seg) => {
                m.b.push_scope("attention_mask");
                let positions = positions_in_documents(m.b, seg, bs, s, blocked.tile)?;
                m.b.pop_scope();
                Some(positions)
            }
        };
        let tables = m.scoped(scope::ROTARY_EMB, |m| m.rope_tables(positions))?;
        let mask = AttentionForm::Tiled {
            segments: self.segments,
            blocked,
        };
        self.masks = Some((tables, mask.clone()));
        Ok((tables, mask))
    }

    /// The builder the parts add to.
    pub fn builder(&mut self) -> &mut Builder {
        self.m.b
    }

    /// The embedding rows of `tokens` (`s32[batch, seq]`): `[N, D]`, or on
    /// a rank of a sequence-parallel step its run of the rows.
    pub fn embed(&mut self, tokens: InstrId) -> Result<InstrId, BuildError> {
        let m = &mut self.m;
        let (n, d) = (m.n(), m.cfg.hidden_size);
        let embed = self.weights.embed;
        m.b.push_scope(scope::EMBED_TOKENS);
        let x = match &m.rank {
            Some(rank) => {
                let t = m.b.reshape(tokens, &[n])?;
                rank.embedding(m.b, embed, t)?
            }
            None => embedding(m.b, embed, tokens, n, d)?,
        };
        m.b.pop_scope();
        Ok(x)
    }

    /// Every decoder layer of the model the parts are built for, over the
    /// residual stream `x`.
    pub fn layers(&mut self, x: InstrId) -> Result<InstrId, BuildError> {
        let (tables, mask) = self.masks()?;
        let m = &mut self.m;
        let markers = self.module_markers;
        let mut x = x;
        for w in &self.weights.layers {
            self.layer_inputs.push(x);
            // Outside the layer's scope, so recomputing a layer (remat)
            // never repeats its markers.
            if markers {
                x = m.b.module_marker(ModuleMarker::StartForward, x)?;
            }
            m.b.push_scope(&scope::layer(w.layer));
            let h = m.scoped(scope::INPUT_LAYERNORM, |m| m.rms_norm(x, w.input_norm))?;
            let h = m.scoped(scope::SELF_ATTN, |m| m.full_sequence(h))?;
            let a = m.attention(h, w, tables, mask.clone())?;
            x = m.b.add2(x, a)?;
            let norm = w.post_attention_norm;
            let own = m.scoped(scope::POST_ATTENTION_LAYERNORM, |m| m.rms_norm(x, norm))?;
            let h = m.scoped(scope::MLP, |m| m.full_sequence(own))?;
            let f = m.mlp(MlpInput { h, own }, w)?;
            x = m.b.add2(x, f)?;
            m.b.pop_scope();
            if markers {
                x = m.b.module_marker(ModuleMarker::EndForward, x)?;
            }
        }
        Ok(x)
    }

    /// The final norm, the LM head and the mean cross-entropy against
    /// `targets` (`s32[batch, seq]`) of the residual stream `x`: `(loss,
    /// logits)`.
    pub fn loss(&mut self, x: InstrId, targets: InstrId) -> Result<(InstrId, InstrId), BuildError> {
        let m = &mut self.m;
        let (norm, head) = (self.weights.final_norm, *self.weights.head());
        let x = m.scoped(scope::FINAL_NORM, |m| m.rms_norm(x, norm))?;
        let x = m.scoped("lm_head", |m| m.full_sequence(x))?;
        let logits = m.scoped("lm_head", |m| m.linear(x, head))?;
        let loss = m.scoped(scope::LOSS, |m| match m.rank.take() {
            None => m.cross_entropy(logits, targets),
            Some(rank) => {
                let count = m.micro_batch.map(|mb| mb.token_count);
                let loss = rank.cross_entropy(m.b, &mut m.hints, logits, targets, m.ty, count);
                m.rank = Some(rank);
                loss
            }
        })?;
        let loss = match m.cfg.moe.as_ref().filter(|moe| moe.aux_loss()) {
            Some(moe) => m.scoped("aux_loss", |m| m.with_router_loss(moe, loss))?,
            None => loss,
        };
        Ok((loss, logits))
    }

    /// What the routing of the layers built so far did, over the global
    /// batch (`None` for a dense model).
    pub fn expert_counts(&mut self) -> Result<Option<ExpertCounts>, BuildError> {
        let m = &mut self.m;
        if m.cfg.moe.is_none() {
            return Ok(None);
        }
        m.b.push_scope("expert_counts");
        let stats = m.pooled_router()?;
        let counts = crate::experts::expert_counts(m.b, &stats)?;
        m.b.pop_scope();
        Ok(counts)
    }

    /// The routing of the layers built since the last take, and a fresh
    /// count from here: a pipeline stage builds its layers once per slot
    /// (each build the same values, in the same order), and counts its
    /// forward slot's alone.
    pub fn take_routing(&mut self) -> LayerRouting {
        self.m.pooled_router = None;
        LayerRouting(std::mem::take(&mut self.m.router_stats))
    }

    /// What `routing` did over the global batch, pooled over the DP
    /// replicas (`None` when its layers held no experts).
    pub fn counts_of(
        &mut self,
        routing: &LayerRouting,
    ) -> Result<Option<ExpertCounts>, BuildError> {
        let m = &mut self.m;
        m.b.push_scope("expert_counts");
        let stats = m.pooled(&routing.0)?;
        let counts = crate::experts::expert_counts(m.b, &stats)?;
        m.b.pop_scope();
        Ok(counts)
    }

    /// The values gradients must not flow through and the closed-form
    /// regions, for autodiff of what the parts built.
    pub fn into_hints(self) -> GradHints {
        self.m.hints
    }
}

/// Parameters given to a forward pass that are not one per spec of
/// [`param_specs`]: a caller's mistake, refused as the count of operands
/// the forward pass takes.
fn parameter_count(b: &Builder, cfg: &ModelConfig, got: usize) -> BuildError {
    BuildError {
        computation: b.computation().name.clone(),
        opcode: "forward",
        operands: "(the parameters, in param_specs order)".into(),
        source: ShapeError::OperandCount {
            expected: OperandRule::Exactly(param_specs(cfg).len()),
            got,
        },
    }
}
