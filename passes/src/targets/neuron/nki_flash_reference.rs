//! What NKI's flash attention kernels compute, as plain HLO that XLA CPU
//! runs in their place (`lower-neuron-calls`), in the kernels' own layouts
//! (nki-samples' `flash_fwd` and `flash_attn_bwd`, whose numpy references
//! these follow):
//!
//! - `flash_fwd(q, k, v, seed)`: q and k `[b, h, d, s]`, v `[b, h, s, d]`
//!   (or `[b, h, d, s]`, the kernel's `should_transpose_v`); gives the
//!   output `[b, h, s, d]` and, in training, the log-sum-exp of the scaled
//!   scores `[b, h, 128, s / 128]`, where `lse[.., i, j]` is query
//!   position `j * 128 + i`.
//! - `flash_attn_bwd(q, k, v, o, dy, lse, seed)`: every tensor but the
//!   log-sum-exp `[b, h, d, s]`; gives dq, dk and dv, `[b, h, d, s]`.
//!
//! Both as NxD and axlearn call them to train: causal, a softmax scale of
//! `1/sqrt(d)` (the kernels' default), no dropout (so the seed is not
//! read). Fewer key/value heads than query heads is grouped-query
//! attention: query head `i` reads key/value head `i / (h / h_kv)`.

use crate::infra::pass::FlashShapesError;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{ComparisonDirection, DotDims, UnaryOp};
use hlatc_compiler::{ArrayShape, ElementType, InstrId, Module, Shape};

/// The query positions one log-sum-exp row holds (a partition tile).
const LSE_ROWS: i64 = 128;

/// The kernels hlatc has a reference for, as their `func_name`.
pub const REFERENCED: &[&str] = &["flash_fwd", "flash_attn_bwd"];

/// The reference of `func_name` over operands and results of these
/// shapes, or why the shapes are not the kernel's.
pub fn reference(
    func_name: &str,
    operands: &[ArrayShape],
    result: &Shape,
) -> Option<Result<Module, FlashShapesError>> {
    let results: Vec<ArrayShape> = match result {
        Shape::Tuple(items) => items.iter().filter_map(|s| s.as_array().cloned()).collect(),
        other => other.as_array().cloned().into_iter().collect(),
    };
    let tupled = result.is_tuple();
    let built = |e: BuildError| FlashShapesError::Build(e.to_string());
    Some(match func_name {
        "flash_fwd" => FlashShapes::forward(operands, &results)
            .and_then(|s| forward(&s, tupled).map_err(built)),
        "flash_attn_bwd" => {
            FlashShapes::backward(operands, &results).and_then(|s| backward(&s).map_err(built))
        }
        _ => return None,
    })
}

/// The sizes a call works on, read from its operands and checked.
struct FlashShapes {
    operands: Vec<ArrayShape>,
    results: Vec<ArrayShape>,
    batch: i64,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
    seq: i64,
    /// v is `[b, h, d, s]` (the forward's `should_transpose_v`).
    v_transposed: bool,
}

impl FlashShapes {
    fn forward(
        operands: &[ArrayShape],
        results: &[ArrayShape],
    ) -> Result<FlashShapes, FlashShapesError> {
        let [q, k, v, ..] = operands else {
            return Err(FlashShapesError::Operands {
                kernel: "flash_fwd",
                takes: "q, k, v and a seed",
                count: operands.len(),
            });
        };
        let mut s = FlashShapes::of_query(q, operands, results)?;
        s.kv_heads = s.key_heads(k, "k")?;
        let standard = [s.batch, s.kv_heads, s.seq, s.head_dim];
        let transposed = [s.batch, s.kv_heads, s.head_dim, s.seq];
        s.v_transposed = match v.dims.as_slice() {
            d if d == standard => false,
            d if d == transposed => true,
            _ => {
                return Err(FlashShapesError::Tensor {
                    name: "v",
                    got: v.to_string(),
                    kernel: "flash_fwd",
                    layout: "[b, h_kv, s, d]",
                    want: standard.to_vec(),
                    alternative: format!(" (or {transposed:?})"),
                })
            }
        };
        let o = [s.batch, s.heads, s.seq, s.head_dim];
        let lse = s.lse_dims();
        let dims: Vec<&[i64]> = results.iter().map(|r| r.dims.as_slice()).collect();
        if !(dims == [&o[..]] || dims == [&o[..], &lse[..]]) {
            return Err(FlashShapesError::Results {
                kernel: "flash_fwd",
                gives: format!("o {o:?} and, in training, lse {lse:?}"),
                got: dims.iter().map(|d| d.to_vec()).collect(),
            });
        }
        Ok(s)
    }

    fn backward(
        operands: &[ArrayShape],
        results: &[ArrayShape],
    ) -> Result<FlashShapes, FlashShapesError> {
        let [q, k, v, o, dy, lse, ..] = operands else {
            return Err(FlashShapesError::Operands {
                kernel: "flash_attn_bwd",
                takes: "q, k, v, o, dy, lse and a seed",
                count: operands.len(),
            });
        };
        let mut s = FlashShapes::of_query(q, operands, results)?;
        s.kv_heads = s.key_heads(k, "k")?;
        s.v_transposed = true;
        let query = [s.batch, s.heads, s.head_dim, s.seq];
        let key = [s.batch, s.kv_heads, s.head_dim, s.seq];
        for (name, t, want) in [("v", v, key), ("o", o, query), ("dy", dy, query)] {
            if t.dims != want {
                return Err(FlashShapesError::Tensor {
                    name,
                    got: t.to_string(),
                    kernel: "flash_attn_bwd",
                    layout: "[b, h, d, s]",
                    want: want.to_vec(),
                    alternative: String::new(),
                });
            }
        }
        if lse.dims != s.lse_dims() {
            return Err(FlashShapesError::Tensor {
                name: "lse",
                got: lse.to_string(),
                kernel: "flash_attn_bwd",
                layout: "[b, h, 128, s / 128]",
                want: s.lse_dims().to_vec(),
                alternative: String::new(),
            });
        }
        let dims: Vec<&[i64]> = results.iter().map(|r| r.dims.as_slice()).collect();
        if dims != [&query[..], &key[..], &key[..]] {
            return Err(FlashShapesError::Results {
                kernel: "flash_attn_bwd",
                gives: format!("dq {query:?}, dk and dv {key:?}"),
                got: dims.iter().map(|d| d.to_vec()).collect(),
            });
        }
        Ok(s)
    }

    /// Batch, heads, head_dim and sequence from q, `[b, h, d, s]`.
    fn of_query(
        q: &ArrayShape,
        operands: &[ArrayShape],
        results: &[ArrayShape],
    ) -> Result<FlashShapes, FlashShapesError> {
        let &[batch, heads, head_dim, seq] = q.dims.as_slice() else {
            return Err(FlashShapesError::QueryRank { got: q.to_string() });
        };
        if seq % LSE_ROWS != 0 {
            return Err(FlashShapesError::QuerySequence {
                got: q.to_string(),
                rows: LSE_ROWS,
            });
        }
        Ok(FlashShapes {
            operands: operands.to_vec(),
            results: results.to_vec(),
            batch,
            heads,
            kv_heads: heads,
            head_dim,
            seq,
            v_transposed: false,
        })
    }

    /// The key/value heads of `t`, `[b, h_kv, d, s]`, which must divide
    /// the query heads.
    fn key_heads(&self, t: &ArrayShape, name: &'static str) -> Result<i64, FlashShapesError> {
        match t.dims.as_slice() {
            &[b, h, d, s]
                if b == self.batch
                    && d == self.head_dim
                    && s == self.seq
                    && h > 0
                    && self.heads % h == 0 =>
            {
                Ok(h)
            }
            _ => Err(FlashShapesError::KeyHeads {
                name,
                got: t.to_string(),
                heads: self.heads,
            }),
        }
    }

    fn lse_dims(&self) -> [i64; 4] {
        [self.batch, self.heads, LSE_ROWS, self.seq / LSE_ROWS]
    }

    fn scale(&self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }
}

/// Batched over `[b, h]`, contracting dimension `lhs` of the left with
/// `rhs` of the right.
fn batched(lhs: i64, rhs: i64) -> DotDims {
    DotDims {
        lhs_batch: vec![0, 1],
        lhs_contracting: vec![lhs],
        rhs_batch: vec![0, 1],
        rhs_contracting: vec![rhs],
    }
}

const SWAP_LAST: [i64; 4] = [0, 1, 3, 2];

/// The parameters, each converted to f32.
fn parameters(
    b: &mut Builder,
    s: &FlashShapes,
    names: &[&str],
) -> Result<Vec<InstrId>, BuildError> {
    let mut out = Vec::new();
    for (k, shape) in s.operands.iter().enumerate() {
        let name = names.get(k).copied().unwrap_or("unread");
        let p = b.parameter(name, Shape::Array(shape.clone()));
        out.push(match shape.ty {
            ElementType::F32 => p,
            _ if k < names.len() => b.convert(p, ElementType::F32)?,
            _ => p,
        });
    }
    Ok(out)
}

/// `[b, h_kv, s, d]` with each key/value head repeated for its query
/// heads: `[b, h, s, d]`.
fn repeat_heads(b: &mut Builder, s: &FlashShapes, x: InstrId) -> Result<InstrId, BuildError> {
    let group = s.heads / s.kv_heads;
    if group == 1 {
        return Ok(x);
    }
    let wide = [s.batch, s.kv_heads, group, s.seq, s.head_dim];
    let x = b.broadcast(x, &wide, &[0, 1, 3, 4])?;
    b.reshape(x, &[s.batch, s.heads, s.seq, s.head_dim])
}

/// `[b, h, s, d]` summed over each key/value head's query heads:
/// `[b, h_kv, s, d]`.
fn sum_groups(b: &mut Builder, s: &FlashShapes, x: InstrId) -> Result<InstrId, BuildError> {
    let group = s.heads / s.kv_heads;
    if group == 1 {
        return Ok(x);
    }
    let x = b.reshape(x, &[s.batch, s.kv_heads, group, s.seq, s.head_dim])?;
    b.reduce_sum(x, &[2])
}

/// The scaled scores `[b, h, s, s]` of q and k (`[b, h, s, d]` each) and
/// the causal mask over them.
fn masked_scores(
    b: &mut Builder,
    s: &FlashShapes,
    q: InstrId,
    k: InstrId,
) -> Result<(InstrId, InstrId), BuildError> {
    let q = b.scale(q, s.scale())?;
    let scores = b.dot(q, k, batched(3, 3))?;
    let dims = [s.batch, s.heads, s.seq, s.seq];
    let qi = b.iota(ElementType::S32, &dims, 2)?;
    let ki = b.iota(ElementType::S32, &dims, 3)?;
    let causal = b.compare(qi, ki, ComparisonDirection::Ge)?;
    let lowest = b.full(ElementType::F32, &dims, f64::from(f32::MIN))?;
    Ok((b.select(causal, scores, lowest)?, causal))
}

/// `x` in the type of result `k`.
fn as_result(
    b: &mut Builder,
    s: &FlashShapes,
    x: InstrId,
    k: usize,
) -> Result<InstrId, BuildError> {
    match s.results[k].ty {
        ElementType::F32 => Ok(x),
        ty => b.convert(x, ty),
    }
}

fn forward(s: &FlashShapes, tupled: bool) -> Result<Module, BuildError> {
    let mut b = Builder::new("flash_fwd_reference");
    let p = parameters(&mut b, s, &["q", "k", "v"])?;
    let q = b.transpose(p[0], &SWAP_LAST)?;
    let k = b.transpose(p[1], &SWAP_LAST)?;
    let k = repeat_heads(&mut b, s, k)?;
    let v = match s.v_transposed {
        true => b.transpose(p[2], &SWAP_LAST)?,
        false => p[2],
    };
    let v = repeat_heads(&mut b, s, v)?;
    let (scores, _) = masked_scores(&mut b, s, q, k)?;
    let rows = [s.batch, s.heads, s.seq, s.seq];
    let max = b.reduce_max(scores, &[3])?;
    let max_b = b.broadcast(max, &rows, &[0, 1, 2])?;
    let shifted = b.sub(scores, max_b)?;
    let e = b.unary(UnaryOp::Exp, shifted)?;
    let sum = b.reduce_sum(e, &[3])?;
    let sum_b = b.broadcast(sum, &rows, &[0, 1, 2])?;
    let probabilities = b.div(e, sum_b)?;
    let o = b.dot(probabilities, v, batched(3, 2))?;
    let o = as_result(&mut b, s, o, 0)?;
    let log_sum = b.unary(UnaryOp::Log, sum)?;
    let lse = b.add2(max, log_sum)?;
    let root = match s.results.len() {
        1 if !tupled => o,
        1 => b.add(hlatc_compiler::Op::Tuple, &[o], None)?,
        _ => {
            // Position j * 128 + i at [i, j].
            let tiles = [s.batch, s.heads, s.seq / LSE_ROWS, LSE_ROWS];
            let lse = b.reshape(lse, &tiles)?;
            let lse = b.transpose(lse, &SWAP_LAST)?;
            let lse = as_result(&mut b, s, lse, 1)?;
            b.add(hlatc_compiler::Op::Tuple, &[o, lse], None)?
        }
    };
    Ok(b.into_module("flash_fwd_reference", root))
}

fn backward(s: &FlashShapes) -> Result<Module, BuildError> {
    let mut b = Builder::new("flash_attn_bwd_reference");
    let p = parameters(&mut b, s, &["q", "k", "v", "o", "dy", "lse"])?;
    let [q, k, v, o, dy] = [p[0], p[1], p[2], p[3], p[4]].map(|x| b.transpose(x, &SWAP_LAST));
    let (q, o, dy) = (q?, o?, dy?);
    let k = repeat_heads(&mut b, s, k?)?;
    let v = repeat_heads(&mut b, s, v?)?;
    let lse = b.transpose(p[5], &SWAP_LAST)?;
    let lse = b.reshape(lse, &[s.batch, s.heads, s.seq])?;
    let (scores, causal) = masked_scores(&mut b, s, q, k)?;
    let rows = [s.batch, s.heads, s.seq, s.seq];
    let lse_b = b.broadcast(lse, &rows, &[0, 1, 2])?;
    let shifted = b.sub(scores, lse_b)?;
    let e = b.unary(UnaryOp::Exp, shifted)?;
    let zeros = b.full(ElementType::F32, &rows, 0.0)?;
    let probabilities = b.select(causal, e, zeros)?;
    // dV = P^T dY, dP = dY V^T, dS = P (dP - rowsum(dY O)).
    let dv = b.dot(probabilities, dy, batched(2, 2))?;
    let dp = b.dot(dy, v, batched(3, 3))?;
    let dy_o = b.mul(dy, o)?;
    let d = b.reduce_sum(dy_o, &[3])?;
    let d_b = b.broadcast(d, &rows, &[0, 1, 2])?;
    let centered = b.sub(dp, d_b)?;
    let ds = b.mul(probabilities, centered)?;
    let dq = b.dot(ds, k, batched(3, 2))?;
    let dq = b.scale(dq, s.scale())?;
    let dk = b.dot(ds, q, batched(2, 2))?;
    let dk = b.scale(dk, s.scale())?;
    let dk = sum_groups(&mut b, s, dk)?;
    let dv = sum_groups(&mut b, s, dv)?;
    let mut out = Vec::new();
    for (k, x) in [dq, dk, dv].into_iter().enumerate() {
        let x = b.transpose(x, &SWAP_LAST)?;
        out.push(as_result(&mut b, s, x, k)?);
    }
    let root = b.add(hlatc_compiler::Op::Tuple, &out, None)?;
    Ok(b.into_module("flash_attn_bwd_reference", root))
}
