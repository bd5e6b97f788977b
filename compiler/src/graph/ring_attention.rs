//! Ring attention: context parallelism's second exchange form. No rank
//! gathers the sequence's keys and values; each holds its own block and
//! passes it round its CP group's ring, one `collective-permute` a step,
//! while its queries attend to the block it holds. After `C` steps (the
//! CP degree) every query has seen every block, merged by the online
//! softmax of [`LoopedAttention::accumulate`] in the running rows' type
//! (f32 in every preset). This is the ring form of PyTorch's context
//! parallelism and MaxText's `ring`, written as plain HLO.
//!
//! The backward passes the blocks round again (recomputed, not saved), and
//! with them their adjoints: each rank adds what its queries give the
//! block it holds to the block's running dK and dV, and passes those on.
//! After `C` passes a block's sums are back with its owner, whole.
//!
//! The steps are unrolled: XLA CPU refuses a collective inside a `while`
//! loop of a program of several replicas (their timeouts differ), so each
//! step is one `collective-permute` and one loop over that step's tile
//! pairs ([`LoopedAttention`]). The program grows with the CP degree, not
//! with the sequence. Keys and values move at their own head count (GQA
//! repeats them after each pass, and sums the repeats of their adjoints
//! before it).

use crate::graph::blocked_attention::BlockedForward;
use crate::graph::builder::{BuildError, Builder};
use crate::graph::looped_attention::{BackwardRows, LoopOperands, LoopedAttention};
use crate::graph::scope;
use crate::ir::computation::InstrId;

/// A ring over groups of replicas whose members are `stride` ids apart:
/// each member passes to the next of its group, the last to the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ring {
    /// Members of a group: the steps round it.
    pub size: i64,
    /// Replica ids from one member to the next.
    pub stride: i64,
    /// Replica ids in the program, every group's members.
    pub replicas: i64,
}

impl Ring {
    /// The groups, each in ring order.
    pub fn groups(self) -> Vec<Vec<i64>> {
        let block = self.size * self.stride;
        (0..self.replicas / block.max(1))
            .flat_map(|k| (0..self.stride).map(move |o| k * block + o))
            .map(|base| (0..self.size).map(|j| base + j * self.stride).collect())
            .collect()
    }

    /// `collective-permute`'s source-target pairs: every member to the
    /// next of its group.
    pub fn pairs(self) -> Vec<(i64, i64)> {
        self.groups()
            .iter()
            .flat_map(|g| (0..g.len()).map(|j| (g[j], g[(j + 1) % g.len()])))
            .collect()
    }
}

/// Looped attention whose keys and values go round a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingAttention {
    pub looped: LoopedAttention,
    pub ring: Ring,
}

impl RingAttention {
    /// `x` passed one step round the ring.
    fn pass(self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        b.push_scope(scope::CONTEXT_RING);
        let passed = b.collective_permute(x, &self.ring.pairs());
        b.pop_scope();
        passed
    }

    /// Step `i`'s operands for the loop over its pairs: the queries, the
    /// block `kv` holds (`[B, Hkv, Sk, hd]`) with its heads repeated for
    /// the queries', and row `i` of the step tables.
    fn step(
        self,
        b: &mut Builder,
        x: &LoopOperands,
        i: i64,
        [k, v]: [InstrId; 2],
    ) -> Result<LoopOperands, BuildError> {
        let row = |b: &mut Builder, table: InstrId| -> Result<InstrId, BuildError> {
            let dims = b.dims(table);
            let r = b.slice_dim(table, 0, i, i + 1)?;
            b.reshape(r, &dims[1..])
        };
        Ok(LoopOperands {
            q: x.q,
            k: repeat_heads(b, k, x.q)?,
            v: repeat_heads(b, v, x.q)?,
            positions: [x.positions[0], row(b, x.positions[1])?],
            pairs: row(b, x.pairs)?,
            segments: match x.segments {
                Some([sq, sk]) => Some([sq, row(b, sk)?]),
                None => None,
            },
        })
    }

    /// Builds the forward pass over `x`: queries `[B, H, Sq, hd]`, this
    /// rank's keys and values `[B, Hkv, Sk, hd]`, the queries' positions
    /// `s32[Sq]`, and one row a step of the keys' positions (`s32[C,
    /// Sk]`), pairs (`s32[C, P, 3]`) and, for packed rows, the keys'
    /// documents (`s32[C, B, Sk]`): the output and the rows'
    /// log-sum-exp, as looped attention's.
    pub fn forward(self, b: &mut Builder, x: LoopOperands) -> Result<BlockedForward, BuildError> {
        let mut rows = LoopedAttention::start(b, x.q)?;
        let [mut k, mut v] = [x.k, x.v];
        for i in 0..self.ring.size {
            if i > 0 {
                k = self.pass(b, k)?;
                v = self.pass(b, v)?;
            }
            let step = self.step(b, &x, i, [k, v])?;
            rows = self.looped.accumulate(b, step, rows)?;
        }
        LoopedAttention::finish(b, rows)
    }

    /// Builds the backward pass given the adjoint `d_output` of
    /// `fwd.output`: the adjoints of q, k and v (this rank's block).
    /// Reads what looped attention's backward reads, and passes the
    /// blocks round again.
    pub fn backward(
        self,
        b: &mut Builder,
        x: LoopOperands,
        fwd: BlockedForward,
        d_output: InstrId,
    ) -> Result<[InstrId; 3], BuildError> {
        let rows = BackwardRows::new(b, fwd, d_output)?;
        let mut dq = b.full_like(x.q, 0.0)?;
        let [mut k, mut v] = [x.k, x.v];
        let mut dk = b.full_like(x.k, 0.0)?;
        let mut dv = b.full_like(x.v, 0.0)?;
        for i in 0..self.ring.size {
            if i > 0 {
                k = self.pass(b, k)?;
                v = self.pass(b, v)?;
            }
            let step = self.step(b, &x, i, [k, v])?;
            let zero_k = b.full_like(step.k, 0.0)?;
            let zero_v = b.full_like(step.v, 0.0)?;
            let [q_sum, k_part, v_part] =
                self.looped
                    .accumulate_adjoints(b, step, rows, [dq, zero_k, zero_v])?;
            dq = q_sum;
            let k_part = sum_repeats(b, k_part, x.k)?;
            let v_part = sum_repeats(b, v_part, x.v)?;
            let k_sum = b.add2(dk, k_part)?;
            let v_sum = b.add2(dv, v_part)?;
            dk = self.pass(b, k_sum)?;
            dv = self.pass(b, v_sum)?;
        }
        Ok([self.looped.scaled(b, dq)?, self.looped.scaled(b, dk)?, dv])
    }
}

/// `kv` (`[B, Hkv, S, hd]`) with each head repeated for the query heads
/// of `q` (`[B, H, Sq, hd]`) that read it: query head `h` reads head `h /
/// (H / Hkv)`.
fn repeat_heads(b: &mut Builder, kv: InstrId, q: InstrId) -> Result<InstrId, BuildError> {
    let [bs, hkv, s, hd] = b.dims(kv)[..] else {
        unreachable!("keys and values are [B, Hkv, S, hd]")
    };
    let h = b.dims(q)[1];
    if h == hkv {
        return Ok(kv);
    }
    let wide = b.broadcast(kv, &[bs, hkv, h / hkv, s, hd], &[0, 1, 3, 4])?;
    b.reshape(wide, &[bs, h, s, hd])
}

/// The adjoint `d` of [`repeat_heads`]'s output, summed over the repeats
/// back to the shape of `kv`.
fn sum_repeats(b: &mut Builder, d: InstrId, kv: InstrId) -> Result<InstrId, BuildError> {
    let [bs, hkv, s, hd] = b.dims(kv)[..] else {
        unreachable!("keys and values are [B, Hkv, S, hd]")
    };
    let h = b.dims(d)[1];
    if h == hkv {
        return Ok(d);
    }
    let split = b.reshape(d, &[bs, hkv, h / hkv, s, hd])?;
    b.reduce_sum(split, &[2])
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn a_ring_passes_to_the_next_member_a_stride_on() {
        // CP 2 inside TP 2, twice (DP 2).
        let ring = Ring {
            size: 2,
            stride: 2,
            replicas: 8,
        };
        assert_eq!(
            ring.groups(),
            vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]
        );
        let pairs = [
            (0, 2),
            (2, 0),
            (1, 3),
            (3, 1),
            (4, 6),
            (6, 4),
            (5, 7),
            (7, 5),
        ];
        assert_eq!(ring.pairs(), pairs);
        let four = Ring {
            size: 4,
            stride: 1,
            replicas: 4,
        };
        assert_eq!(four.pairs(), [(0, 1), (1, 2), (2, 3), (3, 0)]);
    }
}
