//! Each expert's buffer of `C` slots per sequence, as NxD lays tokens out
//! for neuronx-cc (`expert_mlps_v2.py`, `tensor_utils.py`): a token's slot
//! in an expert is the number of tokens of its sequence routed there
//! before it, counted by a lower-triangular matmul (a cumulative sum with
//! no sort and no data-dependent shape), and a token whose slot is past
//! the capacity is dropped from that expert.
//!
//! Dispatch and combine are one-hot matmuls over the slots, so their
//! gradients are the plain dot rules and every shape is static: the
//! tokens of a sequence gathered into `[E, C, H]` buffers, and the
//! experts' outputs read back to their tokens, each times its weight.

use crate::config::BatchShape;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, DotDims};
use hlatc_compiler::{ElementType, InstrId};

/// Which slot of which expert's buffer each token takes.
#[derive(Clone, Debug)]
pub(crate) struct Slots {
    /// `pred[T, E]`: the token is routed to the expert and has a slot.
    pub kept: InstrId,
    /// `f32[T, E]`: the token's slot in the expert's
    /// buffer of its sequence (meaningful where `kept`).
    pub position: InstrId,
    /// Slots per expert per sequence.
    pub capacity: i64,
}

/// The slots of `routed` (`pred[T, E]`: a token is routed to an expert;
/// `T` the tokens of `batch`), `capacity` per expert per sequence,
/// counted in f32.
pub(crate) fn slots(
    b: &mut Builder,
    routed: InstrId,
    batch: BatchShape,
    capacity: i64,
) -> Result<Slots, BuildError> {
    // Exact to 2^24 tokens per sequence.
    let ty = ElementType::F32;
    let dims = b.dims(routed);
    let (rows, s, e) = (batch.batch_size, batch.seq_len, dims[1]);
    b.push_scope("expert_slots");
    let chosen = b.convert(routed, ty)?;
    let by_sequence = b.reshape(chosen, &[rows, s, e])?;
    // lower[i, j] = 1 for j <= i: row i of the product counts the routed
    // tokens up to and including token i.
    let i = b.iota(ElementType::S32, &[s, s], 0)?;
    let j = b.iota(ElementType::S32, &[s, s], 1)?;
    let at_or_before = b.compare(i, j, ComparisonDirection::Ge)?;
    let lower = b.convert(at_or_before, ty)?;
    // lower [S, S'] . chosen [B, S', E] -> [S, B, E]
    let counted = b.dot(
        lower,
        by_sequence,
        DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![1],
            ..Default::default()
        },
    )?;
    let counted = b.transpose(counted, &[1, 0, 2])?;
    let counted = b.reshape(counted, &dims)?;
    let one = b.full(ty, &dims, 1.0)?;
    let position = b.sub(counted, one)?;
    let limit = b.full(ty, &dims, capacity as f64)?;
    let fits = b.compare(counted, limit, ComparisonDirection::Le)?;
    let kept = b.binary(BinaryOp::And, routed, fits)?;
    b.pop_scope();
    Ok(Slots {
        kept,
        position,
        capacity,
    })
}

impl Slots {
    /// `[B, S, E, C]`, in `ty`: 1 where token `(b, s)` takes slot `c` of
    /// expert `e`.
    fn one_hot(
        &self,
        b: &mut Builder,
        batch: BatchShape,
        ty: ElementType,
    ) -> Result<InstrId, BuildError> {
        let [t, e] = [b.dims(self.kept)[0], b.dims(self.kept)[1]];
        let c = self.capacity;
        let slot = b.iota(b.ty(self.position), &[t, e, c], 2)?;
        let position = b.broadcast(self.position, &[t, e, c], &[0, 1])?;
        let here = b.compare(slot, position, ComparisonDirection::Eq)?;
        let kept = b.broadcast(self.kept, &[t, e, c], &[0, 1])?;
        let taken = b.binary(BinaryOp::And, here, kept)?;
        let mask = b.convert(taken, ty)?;
        b.reshape(mask, &[batch.batch_size, batch.seq_len, e, c])
    }

    /// The tokens of `x` (`[T, H]`) in their experts' buffers: `[E, B *
    /// C, H]`, sequence by sequence, an empty slot 0.
    pub fn dispatch(
        &self,
        b: &mut Builder,
        x: InstrId,
        batch: BatchShape,
    ) -> Result<InstrId, BuildError> {
        let h = b.dims(x)[1];
        let e = b.dims(self.kept)[1];
        let one_hot = self.one_hot(b, batch, b.ty(x))?;
        let x = b.reshape(x, &[batch.batch_size, batch.seq_len, h])?;
        // one_hot [B, S, E, C] . x [B, S, H] -> [B, E, C, H]
        let buffers = b.dot(
            one_hot,
            x,
            DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contracting: vec![1],
                rhs_contracting: vec![1],
            },
        )?;
        let buffers = b.transpose(buffers, &[1, 0, 2, 3])?;
        b.reshape(buffers, &[e, batch.batch_size * self.capacity, h])
    }

    /// Each token's experts' outputs from their buffers `y` (`[E, B * C,
    /// H]`, as [`Slots::dispatch`] laid them), each times the token's
    /// weight for the expert (`weights`, `[T, E]`), summed: `[T, H]`.
    pub fn combine(
        &self,
        b: &mut Builder,
        y: InstrId,
        weights: InstrId,
        batch: BatchShape,
    ) -> Result<InstrId, BuildError> {
        let [e, _, h] = [b.dims(y)[0], b.dims(y)[1], b.dims(y)[2]];
        let (rows, s, c) = (batch.batch_size, batch.seq_len, self.capacity);
        let one_hot = self.one_hot(b, batch, b.ty(y))?;
        let weights = b.reshape(weights, &[rows, s, e])?;
        let weights = b.broadcast(weights, &[rows, s, e, c], &[0, 1, 2])?;
        let combine = b.mul(one_hot, weights)?;
        let y = b.reshape(y, &[e, rows, c, h])?;
        // combine [B, S, E, C] . y [E, B, C, H] -> [B, S, H]
        let out = b.dot(
            combine,
            y,
            DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![1],
                lhs_contracting: vec![2, 3],
                rhs_contracting: vec![0, 2],
            },
        )?;
        b.reshape(out, &[rows * s, h])
    }
}
