//! Blocked attention with its tile pairs in a `while` loop: the flash
//! algorithm of [`crate::graph::blocked_attention`], forward and backward,
//! written once as a loop body that visits one tile pair a trip, so the
//! program grows with the layers and not with the square of the sequence.
//!
//! Which pairs the loop visits is a table, `s32[P, 3]` (query tile, key
//! tile, live), built when the step is built from the positions the
//! tiles hold ([`LoopedAttention::pair_table`]): a pair the causal mask or
//! the window hides entirely is never in it, so it is never computed. On a
//! context-parallel rank the table is its own (each CP rank's tiles sit at
//! other positions), padded to one length with pairs marked dead, which
//! the body masks whole. The trip count is that length: static.
//!
//! Masks come from the *positions* of the tile's queries and keys (`s32`,
//! read by dynamic slices of the operands' positions), so one body serves
//! every pair and every rank; packed rows add their documents. The running
//! row max, row sum and output are whole-sequence accumulators updated in
//! place by `dynamic-update-slice`, as the backward's dQ, dK and dV are.
//!
//! Numerically it is the unrolled form's algorithm: the same scores, the
//! same masked value, the same rescaling.

use crate::graph::blocked_attention::{
    broadcast_rows, exp_minus_rows, stacked_dot, tiles_by_keys, tiles_by_width, BlockedForward,
    MASKED,
};
use crate::graph::builder::{BuildError, Builder};
use crate::ir::computation::InstrId;
use crate::ir::literal::Literal;
use crate::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use crate::ElementType;

/// How the looped attention is tiled and masked: causal always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoopedAttention {
    /// Rows of queries, and of keys, in a tile.
    pub tile: i64,
    /// The width of a head: scores are scaled by `1 / sqrt(head_dim)`.
    pub head_dim: i64,
    /// A query sees only the keys fewer than this many positions back.
    pub window: Option<i64>,
}

/// What the loop reads: queries `[B, H, Sq, hd]`, keys and values `[B, H,
/// Sk, hd]` (heads already repeated for GQA), the global positions of the
/// queries (`s32[Sq]`) and of the keys (`s32[Sk]`), the pairs to visit
/// (`s32[P, 3]`) and, for packed rows, the documents of the queries and of
/// the keys (`s32[B, Sq]`, `s32[B, Sk]`).
#[derive(Clone, Copy, Debug)]
pub struct LoopOperands {
    pub q: InstrId,
    pub k: InstrId,
    pub v: InstrId,
    pub positions: [InstrId; 2],
    pub pairs: InstrId,
    pub segments: Option<[InstrId; 2]>,
}

impl LoopOperands {
    /// The operands in the order a composite lists its inputs: q, k, v,
    /// the two positions, the pairs, then the two segment ids if any.
    pub fn inputs(&self) -> Vec<InstrId> {
        let mut inputs = vec![
            self.q,
            self.k,
            self.v,
            self.positions[0],
            self.positions[1],
            self.pairs,
        ];
        inputs.extend(self.segments.into_iter().flatten());
        inputs
    }

    /// The operands [`LoopOperands::inputs`] listed, if that is what
    /// `inputs` is.
    pub fn from_inputs(inputs: &[InstrId]) -> Option<Self> {
        let (segments, rest) = match inputs {
            [rest @ .., sq, sk] if inputs.len() == 8 => (Some([*sq, *sk]), rest),
            rest => (None, rest),
        };
        match *rest {
            [q, k, v, pq, pk, pairs] => Some(LoopOperands {
                q,
                k,
                v,
                positions: [pq, pk],
                pairs,
                segments,
            }),
            _ => None,
        }
    }

    /// The values the loop carries unchanged: everything it reads.
    fn reads(&self) -> Vec<InstrId> {
        self.inputs()
    }
}

/// One trip's tile pair: where its queries and keys start (`s32[]`), and
/// whether it is live (`pred[]`).
struct Pair {
    q: InstrId,
    k: InstrId,
    live: InstrId,
}

/// The online softmax's running rows over the keys seen so far: each
/// query row's max and sum of exponentials (`[B, H, Sq]`) and its
/// unnormalized output (`[B, H, Sq, hd]`).
#[derive(Clone, Copy, Debug)]
pub struct RunningRows {
    pub max: InstrId,
    pub sum: InstrId,
    pub output: InstrId,
}

/// What every pair of the backward reads beside its tiles: the adjoint of
/// the output, the rows' log-sum-exp and their softmax correction
/// `D = rowsum(dO * O)`.
#[derive(Clone, Copy, Debug)]
pub struct BackwardRows {
    pub d_output: InstrId,
    pub lse: InstrId,
    pub d_rows: InstrId,
}

impl BackwardRows {
    /// The rows for the adjoint `d_output` of `fwd.output`.
    pub fn new(
        b: &mut Builder,
        fwd: BlockedForward,
        d_output: InstrId,
    ) -> Result<Self, BuildError> {
        let d_o = b.mul(d_output, fwd.output)?;
        Ok(BackwardRows {
            d_output,
            lse: fwd.lse,
            d_rows: b.reduce_sum(d_o, &[3])?,
        })
    }
}

impl LoopedAttention {
    /// Whether a sequence of `len` tokens is cut into whole tiles.
    pub fn fits(self, len: i64) -> bool {
        self.tile > 0 && len % self.tile == 0
    }

    /// The pairs each variant visits, `s32[R, P, 3]`: variant `r`'s queries
    /// sit at `variants[r].0` (one position a token) and its keys at
    /// `variants[r].1`. Pair `(i, j)` is listed when some query of tile `i`
    /// may see some key of tile `j` by position, in order of `i` then `j`;
    /// every variant's list is padded to the longest with dead pairs.
    pub fn pair_table(self, variants: &[(&[i64], &[i64])]) -> Literal {
        let t = self.tile as usize;
        let span = |p: &[i64]| (*p.iter().min().unwrap_or(&0), *p.iter().max().unwrap_or(&0));
        let lists: Vec<Vec<[i32; 3]>> = variants
            .iter()
            .map(|&(queries, keys)| {
                let key_tiles: Vec<(i64, i64)> = keys.chunks(t).map(span).collect();
                queries
                    .chunks(t)
                    .map(span)
                    .enumerate()
                    .flat_map(|(i, (q_min, q_max))| {
                        key_tiles
                            .iter()
                            .enumerate()
                            .filter(move |(_, &(k_min, k_max))| {
                                let causal = k_min <= q_max;
                                let near = self.window.is_none_or(|w| q_min - k_max < w);
                                causal && near
                            })
                            .map(move |(j, _)| [i as i32, j as i32, 1])
                    })
                    .collect()
            })
            .collect();
        let p = lists.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let flat: Vec<i32> = lists
            .iter()
            .flat_map(|l| {
                l.iter()
                    .copied()
                    .chain(std::iter::repeat([0, 0, 0]))
                    .take(p)
            })
            .flatten()
            .collect();
        Literal::from_s32(vec![variants.len() as i64, p as i64, 3], &flat)
            .expect("R lists of P pairs of three")
    }

    fn scale(self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }

    /// Trip `n`'s pair, read from the table.
    fn pair(self, b: &mut Builder, pairs: InstrId, n: InstrId) -> Result<Pair, BuildError> {
        let row = b.dynamic_slice_dim(pairs, 0, n, 1)?;
        let column = |b: &mut Builder, c: i64| -> Result<InstrId, BuildError> {
            let x = b.slice_dim(row, 1, c, c + 1)?;
            b.reshape(x, &[])
        };
        let (i, j, live) = (column(b, 0)?, column(b, 1)?, column(b, 2)?);
        let t = b.scalar(ElementType::S32, self.tile as f64);
        let zero = b.scalar(ElementType::S32, 0.0);
        Ok(Pair {
            q: b.mul(i, t)?,
            k: b.mul(j, t)?,
            live: b.compare(live, zero, ComparisonDirection::Ne)?,
        })
    }

    /// `x`'s tile from `start` along dimension `dim`.
    fn tile_of(
        self,
        b: &mut Builder,
        x: InstrId,
        dim: usize,
        start: InstrId,
    ) -> Result<InstrId, BuildError> {
        b.dynamic_slice_dim(x, dim, start, self.tile)
    }

    /// The pair's scaled, masked scores `[B, H, t, t]` from its query and
    /// key tiles.
    fn scores(
        self,
        b: &mut Builder,
        x: &LoopOperands,
        pair: &Pair,
        [q, k]: [InstrId; 2],
    ) -> Result<InstrId, BuildError> {
        let t = self.tile;
        let s = b.dot(q, k, tiles_by_width())?;
        let s = b.scale(s, self.scale())?;
        let dims = b.dims(s);
        let qp = self.tile_of(b, x.positions[0], 0, pair.q)?;
        let kp = self.tile_of(b, x.positions[1], 0, pair.k)?;
        let qi = b.broadcast(qp, &[t, t], &[0])?;
        let ki = b.broadcast(kp, &[t, t], &[1])?;
        let mut allowed = b.compare(qi, ki, ComparisonDirection::Ge)?;
        if let Some(w) = self.window {
            let distance = b.sub(qi, ki)?;
            let limit = b.full(ElementType::S32, &[t, t], w as f64)?;
            let near = b.compare(distance, limit, ComparisonDirection::Lt)?;
            allowed = b.binary(BinaryOp::And, allowed, near)?;
        }
        let live = b.broadcast(pair.live, &[t, t], &[])?;
        allowed = b.binary(BinaryOp::And, allowed, live)?;
        let mut allowed = b.broadcast(allowed, &dims, &[2, 3])?;
        if let Some([sq, sk]) = x.segments {
            let batch = dims[0];
            let sq = self.tile_of(b, sq, 1, pair.q)?;
            let sk = self.tile_of(b, sk, 1, pair.k)?;
            let sq = b.broadcast(sq, &[batch, t, t], &[0, 1])?;
            let sk = b.broadcast(sk, &[batch, t, t], &[0, 2])?;
            let same = b.compare(sq, sk, ComparisonDirection::Eq)?;
            let same = b.broadcast(same, &dims, &[0, 2, 3])?;
            allowed = b.binary(BinaryOp::And, allowed, same)?;
        }
        let masked = b.full_like(s, MASKED)?;
        b.select(allowed, s, masked)
    }

    /// Builds the forward pass: the output (`[B, H, Sq, hd]`) and each
    /// row's log-sum-exp (`[B, H, Sq]`), which the backward reads.
    pub fn forward(self, b: &mut Builder, x: LoopOperands) -> Result<BlockedForward, BuildError> {
        let start = Self::start(b, x.q)?;
        let rows = self.accumulate(b, x, start)?;
        Self::finish(b, rows)
    }

    /// The running rows before any key is seen: max `MASKED`, sum 0 and
    /// output 0, for queries `q` (`[B, H, Sq, hd]`).
    pub fn start(b: &mut Builder, q: InstrId) -> Result<RunningRows, BuildError> {
        let ty = b.ty(q);
        let dims = b.dims(q);
        let rows = &dims[..3];
        Ok(RunningRows {
            max: b.full(ty, rows, MASKED)?,
            sum: b.full(ty, rows, 0.0)?,
            output: b.full(ty, &dims, 0.0)?,
        })
    }

    /// `rows` updated by every pair the loop over `x` visits: the online
    /// softmax's merge, so keys seen in several calls (a ring's blocks)
    /// merge as keys seen in one.
    pub fn accumulate(
        self,
        b: &mut Builder,
        x: LoopOperands,
        rows: RunningRows,
    ) -> Result<RunningRows, BuildError> {
        let reads = x.reads();
        let mut state = reads.clone();
        state.extend([rows.max, rows.sum, rows.output]);
        let trips = b.dims(x.pairs)[0];
        let done = b.static_loop("attention_forward", trips, &state, |b, n, s| {
            let x = LoopOperands::from_inputs(&s[..reads.len()]).expect("the reads, as listed");
            let [m, l, o] = [s[reads.len()], s[reads.len() + 1], s[reads.len() + 2]];
            let pair = self.pair(b, x.pairs, n)?;
            let q = self.tile_of(b, x.q, 2, pair.q)?;
            let k = self.tile_of(b, x.k, 2, pair.k)?;
            let v = self.tile_of(b, x.v, 2, pair.k)?;
            let s_ = self.scores(b, &x, &pair, [q, k])?;
            let m_old = self.tile_of(b, m, 2, pair.q)?;
            let l_old = self.tile_of(b, l, 2, pair.q)?;
            let o_old = self.tile_of(b, o, 2, pair.q)?;
            let tile_max = b.reduce_max(s_, &[3])?;
            let max = b.binary(BinaryOp::Maximum, m_old, tile_max)?;
            let p = exp_minus_rows(b, s_, max)?;
            let shift = b.sub(m_old, max)?;
            let alpha = b.unary(UnaryOp::Exp, shift)?;
            let sum = b.reduce_sum(p, &[3])?;
            let l_kept = b.mul(alpha, l_old)?;
            let l_new = b.add2(l_kept, sum)?;
            let pv = b.dot(p, v, tiles_by_keys())?;
            let ab = broadcast_rows(b, alpha, o_old)?;
            let o_kept = b.mul(ab, o_old)?;
            let o_new = b.add2(o_kept, pv)?;
            let mut next = s[..reads.len()].to_vec();
            next.push(b.dynamic_update_slice_dim(m, max, 2, pair.q)?);
            next.push(b.dynamic_update_slice_dim(l, l_new, 2, pair.q)?);
            next.push(b.dynamic_update_slice_dim(o, o_new, 2, pair.q)?);
            Ok(next)
        })?;
        let at = reads.len();
        Ok(RunningRows {
            max: done[at],
            sum: done[at + 1],
            output: done[at + 2],
        })
    }

    /// The output and log-sum-exp of rows that have seen every key.
    pub fn finish(b: &mut Builder, rows: RunningRows) -> Result<BlockedForward, BuildError> {
        let lb = broadcast_rows(b, rows.sum, rows.output)?;
        let output = b.div(rows.output, lb)?;
        let log_l = b.unary(UnaryOp::Log, rows.sum)?;
        Ok(BlockedForward {
            output,
            lse: b.add2(rows.max, log_l)?,
        })
    }

    /// Builds the backward pass given the adjoint `d_output` of
    /// `fwd.output`: the adjoints of q, k and v, in that order. Reads q, k,
    /// v, the output and the log-sum-exp, and recomputes each visited
    /// pair's probabilities from them (FlashAttention-2's backward).
    pub fn backward(
        self,
        b: &mut Builder,
        x: LoopOperands,
        fwd: BlockedForward,
        d_output: InstrId,
    ) -> Result<[InstrId; 3], BuildError> {
        let rows = BackwardRows::new(b, fwd, d_output)?;
        let sums = [
            b.full_like(x.q, 0.0)?,
            b.full_like(x.k, 0.0)?,
            b.full_like(x.v, 0.0)?,
        ];
        let [dq, dk, dv] = self.accumulate_adjoints(b, x, rows, sums)?;
        Ok([self.scaled(b, dq)?, self.scaled(b, dk)?, dv])
    }

    /// `dq` and `dk` as the backward returns them: the scores' scale
    /// applied once, after every pair has added to them.
    pub fn scaled(self, b: &mut Builder, x: InstrId) -> Result<InstrId, BuildError> {
        b.scale(x, self.scale())
    }

    /// `sums` (unscaled dQ, dK, dV, shaped as q, k and v) with every pair
    /// the loop over `x` visits added to them.
    pub fn accumulate_adjoints(
        self,
        b: &mut Builder,
        x: LoopOperands,
        rows: BackwardRows,
        sums: [InstrId; 3],
    ) -> Result<[InstrId; 3], BuildError> {
        let reads = x.reads();
        let mut state = reads.clone();
        state.extend([rows.d_output, rows.lse, rows.d_rows]);
        state.extend(sums);
        let trips = b.dims(x.pairs)[0];
        let at = reads.len();
        let done = b.static_loop("attention_backward", trips, &state, |b, n, s| {
            let x = LoopOperands::from_inputs(&s[..at]).expect("the reads, as listed");
            let [g, lse, d_rows, dq, dk, dv] =
                [s[at], s[at + 1], s[at + 2], s[at + 3], s[at + 4], s[at + 5]];
            let pair = self.pair(b, x.pairs, n)?;
            let q = self.tile_of(b, x.q, 2, pair.q)?;
            let k = self.tile_of(b, x.k, 2, pair.k)?;
            let v = self.tile_of(b, x.v, 2, pair.k)?;
            let g_t = self.tile_of(b, g, 2, pair.q)?;
            let lse = self.tile_of(b, lse, 2, pair.q)?;
            let d = self.tile_of(b, d_rows, 2, pair.q)?;
            let s_ = self.scores(b, &x, &pair, [q, k])?;
            let p = exp_minus_rows(b, s_, lse)?;
            let dp = b.dot(g_t, v, tiles_by_width())?;
            let db = broadcast_rows(b, d, dp)?;
            let centred = b.sub(dp, db)?;
            let ds = b.mul(p, centred)?;
            let [dv_part, dk_part] = stacked_dot(b, [p, ds], [g_t, q])?;
            let dq_part = b.dot(ds, k, tiles_by_keys())?;
            let add_at = |b: &mut Builder, acc: InstrId, part: InstrId, start: InstrId| {
                let old = self.tile_of(b, acc, 2, start)?;
                let new = b.add2(old, part)?;
                b.dynamic_update_slice_dim(acc, new, 2, start)
            };
            let mut next = s[..at + 3].to_vec();
            next.push(add_at(b, dq, dq_part, pair.q)?);
            next.push(add_at(b, dk, dk_part, pair.k)?);
            next.push(add_at(b, dv, dv_part, pair.k)?);
            Ok(next)
        })?;
        Ok([done[at + 3], done[at + 4], done[at + 5]])
    }
}
