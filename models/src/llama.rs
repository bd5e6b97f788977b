//! The Llama forward pass as an IR graph: token embedding, pre-norm RMSNorm,
//! rotary embeddings, causal attention with GQA, SwiGLU, final norm, LM head
//! (tied or not) and mean cross-entropy.
//!
//! Parameters carry Hugging Face names and `[out, in]` shapes, so real
//! checkpoints map one to one.

use crate::config::{BatchShape, ModelConfig};
use hlatc_compiler::builder::{BuildError, Builder};
use hlatc_compiler::op::{ComparisonDirection, DotDims, GatherDims, Op, UnaryOp};
use hlatc_compiler::{ElementType, InstrId, Literal, Scalar, Shape};

/// How a parameter is initialized (the scaled scheme that kept HLAT stable).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal with this standard deviation.
    Normal(f64),
    Ones,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub dims: Vec<i64>,
    pub init: Init,
}

/// Every trainable parameter in Hugging Face order and naming.
pub fn param_specs(cfg: &ModelConfig) -> Vec<ParamSpec> {
    let (d, f, v, hd) = (
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.vocab_size,
        cfg.head_dim(),
    );
    let (q, kv) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
    let std = 0.02;
    // Output projections write into the residual stream once per layer, so
    // they start smaller: std / sqrt(2 * layers).
    let out_std = std / (2.0 * cfg.num_hidden_layers as f64).sqrt();
    let p = |name: String, dims: Vec<i64>, init: Init| ParamSpec { name, dims, init };
    let mut specs = vec![p(
        "model.embed_tokens.weight".into(),
        vec![v, d],
        Init::Normal(std),
    )];
    for i in 0..cfg.num_hidden_layers {
        let l = format!("model.layers.{i}.");
        specs.push(p(format!("{l}input_layernorm.weight"), vec![d], Init::Ones));
        specs.push(p(
            format!("{l}self_attn.q_proj.weight"),
            vec![q, d],
            Init::Normal(std),
        ));
        specs.push(p(
            format!("{l}self_attn.k_proj.weight"),
            vec![kv, d],
            Init::Normal(std),
        ));
        specs.push(p(
            format!("{l}self_attn.v_proj.weight"),
            vec![kv, d],
            Init::Normal(std),
        ));
        specs.push(p(
            format!("{l}self_attn.o_proj.weight"),
            vec![d, q],
            Init::Normal(out_std),
        ));
        specs.push(p(
            format!("{l}post_attention_layernorm.weight"),
            vec![d],
            Init::Ones,
        ));
        specs.push(p(
            format!("{l}mlp.gate_proj.weight"),
            vec![f, d],
            Init::Normal(std),
        ));
        specs.push(p(
            format!("{l}mlp.up_proj.weight"),
            vec![f, d],
            Init::Normal(std),
        ));
        specs.push(p(
            format!("{l}mlp.down_proj.weight"),
            vec![d, f],
            Init::Normal(out_std),
        ));
    }
    specs.push(p("model.norm.weight".into(), vec![d], Init::Ones));
    if !cfg.tie_word_embeddings {
        specs.push(p("lm_head.weight".into(), vec![v, d], Init::Normal(std)));
    }
    specs
}

/// What the forward pass produced.
#[derive(Clone, Debug)]
pub struct ForwardOutputs {
    /// Mean cross-entropy over all tokens (scalar).
    pub loss: InstrId,
    /// `[batch * seq, vocab]`, rows in (batch, position) order.
    pub logits: InstrId,
    /// Values gradients must not flow through (the max-subtractions that
    /// keep softmax and log-sum-exp finite; they cancel exactly).
    pub stop_gradient: Vec<InstrId>,
}

/// Declares the model's parameters (in [`param_specs`] order) in `b`.
pub fn declare_params(b: &mut Builder, cfg: &ModelConfig, ty: ElementType) -> Vec<InstrId> {
    param_specs(cfg)
        .into_iter()
        .map(|p| b.parameter(&p.name, Shape::array(ty, p.dims)))
        .collect()
}

fn linear_dims() -> DotDims {
    // x [N, in] . W [out, in] -> [N, out]
    DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        ..Default::default()
    }
}

struct Llama<'a> {
    b: &'a mut Builder,
    cfg: &'a ModelConfig,
    batch: BatchShape,
    ty: ElementType,
    stop: Vec<InstrId>,
}

impl Llama<'_> {
    fn n(&self) -> i64 {
        self.batch.batch_size * self.batch.seq_len
    }

    fn linear(&mut self, x: InstrId, w: InstrId) -> Result<InstrId, BuildError> {
        self.b.dot(x, w, linear_dims())
    }

    /// x [N, D] * rsqrt(mean(x^2) + eps) * w
    fn rms_norm(&mut self, x: InstrId, w: InstrId) -> Result<InstrId, BuildError> {
        let [n, d] = [self.n(), self.cfg.hidden_size];
        let b = &mut *self.b;
        let sq = b.mul(x, x)?;
        let ss = b.reduce_sum(sq, &[1])?;
        let ms = b.scale(ss, 1.0 / d as f64)?;
        let eps = b.full_like(ms, self.cfg.rms_norm_eps)?;
        let var = b.add2(ms, eps)?;
        let r = b.unary(UnaryOp::Rsqrt, var)?;
        let rb = b.broadcast(r, &[n, d], &[0])?;
        let wb = b.broadcast(w, &[n, d], &[1])?;
        let y = b.mul(x, rb)?;
        b.mul(y, wb)
    }

    /// cos and sin tables `[S, hd]`, computed in the graph from positions.
    fn rope_tables(&mut self) -> Result<(InstrId, InstrId), BuildError> {
        let (s, hd) = (self.batch.seq_len, self.cfg.head_dim());
        let half = hd / 2;
        let inv: Vec<Scalar> = (0..half)
            .map(|i| Scalar::Float(1.0 / self.cfg.rope_theta.powf(2.0 * i as f64 / hd as f64)))
            .collect();
        let inv = self.b.constant(
            Literal::from_scalars(self.ty, vec![half], &inv).expect("finite frequencies"),
        );
        let b = &mut *self.b;
        let pos = b.iota(self.ty, &[s, half], 0)?;
        let invb = b.broadcast(inv, &[s, half], &[1])?;
        let ang = b.mul(pos, invb)?;
        let ang = b.concatenate(&[ang, ang], 1)?;
        let cos = b.unary(UnaryOp::Cos, ang)?;
        let sin = b.unary(UnaryOp::Sin, ang)?;
        Ok((cos, sin))
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
        let cb = b.broadcast(cos, &dims, &[1, 3])?;
        let sb = b.broadcast(sin, &dims, &[1, 3])?;
        let a = b.mul(x, cb)?;
        let r = b.mul(rot, sb)?;
        b.add2(a, r)
    }

    /// Softmax over the last dimension; the max is a constant shift.
    fn softmax_last(&mut self, x: InstrId) -> Result<InstrId, BuildError> {
        let b = &mut *self.b;
        let dims = b.dims(x);
        let last = dims.len() as i64 - 1;
        let keep: Vec<i64> = (0..last).collect();
        let m = b.reduce_max(x, &[last])?;
        self.stop.push(m);
        let mb = b.broadcast(m, &dims, &keep)?;
        let z = b.sub(x, mb)?;
        let e = b.unary(UnaryOp::Exp, z)?;
        let s = b.reduce_sum(e, &[last])?;
        let sb = b.broadcast(s, &dims, &keep)?;
        b.div(e, sb)
    }

    fn attention(
        &mut self,
        h: InstrId,
        w: &[InstrId; 4],
        tables: (InstrId, InstrId),
    ) -> Result<InstrId, BuildError> {
        let c = self.cfg;
        let (bs, s, hq, hkv, hd) = (
            self.batch.batch_size,
            self.batch.seq_len,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim(),
        );
        let q = self.linear(h, w[0])?;
        let k = self.linear(h, w[1])?;
        let v = self.linear(h, w[2])?;
        let q = self.b.reshape(q, &[bs, s, hq, hd])?;
        let k = self.b.reshape(k, &[bs, s, hkv, hd])?;
        let v = self.b.reshape(v, &[bs, s, hkv, hd])?;
        let q = self.rope(q, tables.0, tables.1)?;
        let k = self.rope(k, tables.0, tables.1)?;
        let b = &mut *self.b;
        // GQA: query head h reads key/value head h / (hq / hkv).
        let (k, v) = if hq == hkv {
            (k, v)
        } else {
            let rep = hq / hkv;
            let kb = b.broadcast(k, &[bs, s, hkv, rep, hd], &[0, 1, 2, 4])?;
            let vb = b.broadcast(v, &[bs, s, hkv, rep, hd], &[0, 1, 2, 4])?;
            (
                b.reshape(kb, &[bs, s, hq, hd])?,
                b.reshape(vb, &[bs, s, hq, hd])?,
            )
        };
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
        // Causal mask generated in the graph: key position <= query position.
        let qi = b.iota(ElementType::S32, &[s, s], 0)?;
        let ki = b.iota(ElementType::S32, &[s, s], 1)?;
        let allowed = b.compare(qi, ki, ComparisonDirection::Ge)?;
        let allowed = b.broadcast(allowed, &[bs, hq, s, s], &[2, 3])?;
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
        let att = b.reshape(att, &[bs * s, hq * hd])?;
        self.linear(att, w[3])
    }

    fn mlp(&mut self, h: InstrId, w: &[InstrId; 3]) -> Result<InstrId, BuildError> {
        let g = self.linear(h, w[0])?;
        let u = self.linear(h, w[1])?;
        let b = &mut *self.b;
        let sg = b.unary(UnaryOp::Logistic, g)?;
        let silu = b.mul(g, sg)?;
        let a = b.mul(silu, u)?;
        self.linear(a, w[2])
    }

    /// Mean over tokens of logsumexp(logits) - logits[target].
    fn cross_entropy(&mut self, logits: InstrId, targets: InstrId) -> Result<InstrId, BuildError> {
        let [n, v] = [self.n(), self.cfg.vocab_size];
        let b = &mut *self.b;
        let m = b.reduce_max(logits, &[1])?;
        self.stop.push(m);
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
        let total = b.reduce_sum(nll, &[0])?;
        b.scale(total, 1.0 / n as f64)
    }
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
) -> Result<ForwardOutputs, BuildError> {
    let ty = b.ty(params[0]);
    let mut m = Llama {
        b,
        cfg,
        batch,
        ty,
        stop: Vec::new(),
    };
    let (n, d, v) = (m.n(), cfg.hidden_size, cfg.vocab_size);
    let embed = params[0];
    // Embedding lookup: gather rows of [V, D] by token id.
    let idx = m.b.reshape(tokens, &[n, 1])?;
    let mut x = m.b.add(
        Op::Gather {
            dims: GatherDims {
                offset_dims: vec![1],
                collapsed_slice_dims: vec![0],
                start_index_map: vec![0],
                index_vector_dim: 1,
                ..Default::default()
            },
            slice_sizes: vec![1, d],
            indices_are_sorted: false,
        },
        &[embed, idx],
        None,
    )?;
    let tables = m.rope_tables()?;
    for layer in 0..cfg.num_hidden_layers as usize {
        let p = &params[1 + 9 * layer..1 + 9 * (layer + 1)];
        let h = m.rms_norm(x, p[0])?;
        let a = m.attention(h, &[p[1], p[2], p[3], p[4]], tables)?;
        x = m.b.add2(x, a)?;
        let h = m.rms_norm(x, p[5])?;
        let f = m.mlp(h, &[p[6], p[7], p[8]])?;
        x = m.b.add2(x, f)?;
    }
    let base = 1 + 9 * cfg.num_hidden_layers as usize;
    let x = m.rms_norm(x, params[base])?;
    let head = if cfg.tie_word_embeddings {
        embed
    } else {
        params[base + 1]
    };
    let logits = m.linear(x, head)?;
    debug_assert_eq!(m.b.dims(logits), vec![n, v]);
    let loss = m.cross_entropy(logits, targets)?;
    Ok(ForwardOutputs {
        loss,
        logits,
        stop_gradient: m.stop,
    })
}
