//! Causal attention computed tile by tile, the flash algorithm, in plain
//! HLO: no value of `[S, S]` is built, forward or backward.
//!
//! The sequence is cut into tiles of [`BlockedAttention::tile`] rows. For
//! each tile of queries the forward pass visits the tiles of keys it can
//! see (never those after it; under a window, none wholly out of reach),
//! keeping a running row max, a running row sum and a running output, each
//! rescaled when the max grows. It keeps the output and the log-sum-exp of
//! each row's scores for the backward, which visits the same tile pairs
//! again and recomputes each pair's probabilities from them
//! (FlashAttention-2's backward). The tiles are unrolled: every slice is
//! static, so every pass and XLA CPU read the program as they read any
//! other, and a tile pair the mask hides entirely costs nothing.
//!
//! Masked scores are the same `-1e9` the plain graph writes, so the two
//! agree to rounding.

use crate::graph::builder::{BuildError, Builder};
use crate::ir::computation::InstrId;
use crate::ir::op::{BinaryOp, ComparisonDirection, DotDims, UnaryOp};
use crate::ElementType;

/// The score a masked key gets, as the plain graph writes it.
pub(crate) const MASKED: f64 = -1e9;

/// How attention is tiled and masked. Causal always; the sequence must be
/// a multiple of `tile` ([`BlockedAttention::fits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockedAttention {
    /// Rows of queries, and of keys, in a tile.
    pub tile: i64,
    /// The width of a head: scores are scaled by `1 / sqrt(head_dim)`.
    pub head_dim: i64,
    /// A query sees only the keys fewer than this many positions back
    /// (Mistral's sliding window).
    pub window: Option<i64>,
}

/// What attention reads: queries, keys and values as `[B, H, S, hd]` (key
/// and value heads already repeated for GQA), and for packed rows the
/// document of each position (`s32[B, S]`).
#[derive(Clone, Copy, Debug)]
pub struct AttentionOperands {
    pub q: InstrId,
    pub k: InstrId,
    pub v: InstrId,
    pub segments: Option<InstrId>,
}

/// The forward pass's results: the output (`[B, H, S, hd]`) and each row's
/// log-sum-exp of its scaled, masked scores (`[B, H, S]`), which the
/// backward reads.
#[derive(Clone, Copy, Debug)]
pub struct BlockedForward {
    pub output: InstrId,
    pub lse: InstrId,
}

/// How much of a tile pair the mask lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Nothing,
    Whole,
    /// Some of it: the pair's scores are masked.
    Part,
}

/// One tile pair: query tile `i` and key tile `j`, and their rows.
struct Pair {
    i: i64,
    j: i64,
    q: InstrId,
    k: InstrId,
}

impl BlockedAttention {
    /// Whether a sequence of `seq_len` is cut into whole tiles.
    pub fn fits(self, seq_len: i64) -> bool {
        self.tile > 0 && seq_len % self.tile == 0
    }

    /// How much of key tile `j` query tile `i` sees, by position alone.
    fn seen(self, i: i64, j: i64) -> Seen {
        if j > i {
            return Seen::Nothing;
        }
        let t = self.tile;
        // Query i*t + a minus key j*t + b, over a, b in 0..t.
        let (nearest, farthest) = ((i - j) * t - (t - 1), (i - j) * t + (t - 1));
        match self.window {
            Some(w) if nearest.max(0) >= w => Seen::Nothing,
            Some(w) if farthest >= w => Seen::Part,
            _ if i == j => Seen::Part,
            _ => Seen::Whole,
        }
    }

    /// The tile pairs query tile `i` computes, in order of keys, and
    /// whether each is masked: by position, or always for packed rows.
    fn pairs(self, i: i64, packed: bool) -> impl Iterator<Item = (i64, bool)> {
        (0..=i).filter_map(move |j| match self.seen(i, j) {
            Seen::Nothing => None,
            Seen::Whole => Some((j, packed)),
            Seen::Part => Some((j, true)),
        })
    }

    fn tiles(self, b: &Builder, x: InstrId) -> i64 {
        b.dims(x)[2] / self.tile
    }

    fn rows(self, b: &mut Builder, x: InstrId, i: i64) -> Result<InstrId, BuildError> {
        b.slice_dim(x, 2, i * self.tile, (i + 1) * self.tile)
    }

    /// Builds the forward pass: see [`BlockedForward`].
    pub fn forward(
        self,
        b: &mut Builder,
        x: AttentionOperands,
    ) -> Result<BlockedForward, BuildError> {
        let mut outputs = Vec::new();
        let mut lses = Vec::new();
        for i in 0..self.tiles(b, x.q) {
            let q = self.rows(b, x.q, i)?;
            // (row max, row sum, unnormalized output) over the keys so far.
            let mut running: Option<(InstrId, InstrId, InstrId)> = None;
            for (j, masked) in self.pairs(i, x.segments.is_some()) {
                let (k, v) = (self.rows(b, x.k, j)?, self.rows(b, x.v, j)?);
                let pair = Pair { i, j, q, k };
                let s = self.scores(b, &pair, masked.then_some(x.segments))?;
                let tile_max = b.reduce_max(s, &[3])?;
                let max = match running {
                    None => tile_max,
                    Some((m, _, _)) => b.binary(BinaryOp::Maximum, m, tile_max)?,
                };
                let p = exp_minus_rows(b, s, max)?;
                let sum = b.reduce_sum(p, &[3])?;
                let pv = b.dot(p, v, tiles_by_keys())?;
                running = Some(match running {
                    None => (max, sum, pv),
                    Some((m, l, o)) => {
                        let shift = b.sub(m, max)?;
                        let alpha = b.unary(UnaryOp::Exp, shift)?;
                        let l = b.mul(alpha, l)?;
                        let l = b.add2(l, sum)?;
                        let ab = broadcast_rows(b, alpha, o)?;
                        let o = b.mul(ab, o)?;
                        (max, l, b.add2(o, pv)?)
                    }
                });
            }
            let (m, l, o) = running.expect("a query tile always sees its own keys");
            let lb = broadcast_rows(b, l, o)?;
            outputs.push(b.div(o, lb)?);
            let log_l = b.unary(UnaryOp::Log, l)?;
            lses.push(b.add2(m, log_l)?);
        }
        Ok(BlockedForward {
            output: b.concatenate(&outputs, 2)?,
            lse: b.concatenate(&lses, 2)?,
        })
    }

    /// Builds the backward pass given the adjoint `d_output` of
    /// `fwd.output`: the adjoints of q, k and v, in that order. Reads q, k,
    /// v, the output and the log-sum-exp, and recomputes each tile pair's
    /// probabilities from them.
    pub fn backward(
        self,
        b: &mut Builder,
        x: AttentionOperands,
        fwd: BlockedForward,
        d_output: InstrId,
    ) -> Result<[InstrId; 3], BuildError> {
        let n = self.tiles(b, x.q);
        // What the pairs are recomputed from, read through a barrier that
        // waits for the output's adjoint: otherwise the backward's scores
        // would be the forward's (value numbering, cse), alive from one
        // pass to the other, or run beside the forward, where a scheduler
        // that frees memory greedily puts work that is ready.
        let [q, k, v, lse] = b.held_until([x.q, x.k, x.v, fwd.lse], d_output)?;
        let x = AttentionOperands { q, k, v, ..x };
        let fwd = BlockedForward { lse, ..fwd };
        // D = rowsum(dO * O): the softmax's correction, one per row.
        let d_o = b.mul(d_output, fwd.output)?;
        let d_rows = b.reduce_sum(d_o, &[3])?;
        let mut dq = Vec::new();
        let mut dk: Vec<Vec<InstrId>> = vec![Vec::new(); n as usize];
        let mut dv: Vec<Vec<InstrId>> = vec![Vec::new(); n as usize];
        for i in 0..n {
            let q = self.rows(b, x.q, i)?;
            let g = self.rows(b, d_output, i)?;
            let lse = self.rows(b, fwd.lse, i)?;
            let d = self.rows(b, d_rows, i)?;
            let mut dq_i = Vec::new();
            for (j, masked) in self.pairs(i, x.segments.is_some()) {
                let (k, v) = (self.rows(b, x.k, j)?, self.rows(b, x.v, j)?);
                let pair = Pair { i, j, q, k };
                let s = self.scores(b, &pair, masked.then_some(x.segments))?;
                let p = exp_minus_rows(b, s, lse)?;
                let dp = b.dot(g, v, tiles_by_width())?;
                let db = broadcast_rows(b, d, dp)?;
                let centred = b.sub(dp, db)?;
                let ds = b.mul(p, centred)?;
                // dV's and dK's shares in one dot over [p; dS] and [dO; q]:
                // p then has no reader of its own, so no schedule computes
                // every pair's probabilities before their dS.
                let [dv_part, dk_part] = stacked_dot(b, [p, ds], [g, q])?;
                dv[j as usize].push(dv_part);
                dq_i.push(b.dot(ds, k, tiles_by_keys())?);
                dk[j as usize].push(dk_part);
            }
            let ty = b.ty(q);
            dq.push(b.sum_of(dq_i, ty)?);
        }
        let ty = b.ty(x.q);
        let mut summed = |tiles: Vec<Vec<InstrId>>| {
            tiles
                .into_iter()
                .map(|parts| b.sum_of(parts, ty))
                .collect::<Result<Vec<_>, _>>()
        };
        let (dk, dv) = (summed(dk)?, summed(dv)?);
        let scale = self.scale();
        let dq = b.concatenate(&dq, 2)?;
        let dk = b.concatenate(&dk, 2)?;
        Ok([
            b.scale(dq, scale)?,
            b.scale(dk, scale)?,
            b.concatenate(&dv, 2)?,
        ])
    }

    fn scale(self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }

    /// A tile pair's scaled scores `[B, H, t, t]`, masked when `mask` is
    /// given (by position, and by document when it holds segments).
    fn scores(
        self,
        b: &mut Builder,
        pair: &Pair,
        mask: Option<Option<InstrId>>,
    ) -> Result<InstrId, BuildError> {
        let s = b.dot(pair.q, pair.k, tiles_by_width())?;
        let s = b.scale(s, self.scale())?;
        let Some(segments) = mask else {
            return Ok(s);
        };
        let dims = b.dims(s);
        let mut allowed = self.by_position(b, pair.i - pair.j)?;
        if let Some(allowed_here) = allowed {
            allowed = Some(b.broadcast(allowed_here, &dims, &[2, 3])?);
        }
        if let Some(segments) = segments {
            let same = self.same_document(b, segments, pair)?;
            let same = b.broadcast(same, &dims, &[0, 2, 3])?;
            allowed = Some(match allowed {
                None => same,
                Some(a) => b.binary(BinaryOp::And, a, same)?,
            });
        }
        let Some(allowed) = allowed else {
            return Ok(s);
        };
        let masked = b.full_like(s, MASKED)?;
        b.select(allowed, s, masked)
    }

    /// Which keys of a tile `distance` tiles back each query sees by
    /// position (`pred[t, t]`), or `None` when it sees them all.
    fn by_position(self, b: &mut Builder, distance: i64) -> Result<Option<InstrId>, BuildError> {
        let t = self.tile;
        let mut allowed = None;
        // Query a and key b of the pair are a - b + distance * t apart.
        let offset = distance * t;
        let a = b.iota(ElementType::S32, &[t, t], 0)?;
        let k = b.iota(ElementType::S32, &[t, t], 1)?;
        let apart = b.sub(a, k)?;
        if distance == 0 {
            let zero = b.full(ElementType::S32, &[t, t], 0.0)?;
            allowed = Some(b.compare(apart, zero, ComparisonDirection::Ge)?);
        }
        if let Some(w) = self.window.filter(|&w| offset + t > w) {
            let limit = b.full(ElementType::S32, &[t, t], (w - offset) as f64)?;
            let near = b.compare(apart, limit, ComparisonDirection::Lt)?;
            allowed = Some(match allowed {
                None => near,
                Some(c) => b.binary(BinaryOp::And, c, near)?,
            });
        }
        Ok(allowed)
    }

    /// Whether each query of the pair and each key are in one document
    /// (`pred[B, t, t]`).
    fn same_document(
        self,
        b: &mut Builder,
        segments: InstrId,
        pair: &Pair,
    ) -> Result<InstrId, BuildError> {
        let t = self.tile;
        let batch = b.dims(segments)[0];
        let q = b.slice_dim(segments, 1, pair.i * t, (pair.i + 1) * t)?;
        let k = b.slice_dim(segments, 1, pair.j * t, (pair.j + 1) * t)?;
        let q = b.broadcast(q, &[batch, t, t], &[0, 1])?;
        let k = b.broadcast(k, &[batch, t, t], &[0, 2])?;
        b.compare(q, k, ComparisonDirection::Eq)
    }
}

/// `[a0; a1] . [b0; b1]` over the queries, one dot batched over the pair:
/// `[a0 . b0, a1 . b1]`, each `[B, H, t', x]`.
pub(crate) fn stacked_dot(
    b: &mut Builder,
    lhs: [InstrId; 2],
    rhs: [InstrId; 2],
) -> Result<[InstrId; 2], BuildError> {
    let stack = |b: &mut Builder, xs: [InstrId; 2]| -> Result<InstrId, BuildError> {
        let mut dims = vec![1];
        dims.extend(b.dims(xs[0]));
        let a = b.reshape(xs[0], &dims)?;
        let c = b.reshape(xs[1], &dims)?;
        b.concatenate(&[a, c], 0)
    };
    let (l, r) = (stack(b, lhs)?, stack(b, rhs)?);
    let both = b.dot(
        l,
        r,
        DotDims {
            lhs_batch: vec![0, 1, 2],
            lhs_contracting: vec![3],
            rhs_batch: vec![0, 1, 2],
            rhs_contracting: vec![3],
        },
    )?;
    let mut dims = b.dims(both);
    dims.remove(0);
    let first = b.slice_dim(both, 0, 0, 1)?;
    let second = b.slice_dim(both, 0, 1, 2)?;
    Ok([b.reshape(first, &dims)?, b.reshape(second, &dims)?])
}

/// `exp(s - rows)`, `rows` (`[B, H, t]`) broadcast along the keys.
pub(crate) fn exp_minus_rows(
    b: &mut Builder,
    s: InstrId,
    rows: InstrId,
) -> Result<InstrId, BuildError> {
    let rb = broadcast_rows(b, rows, s)?;
    let z = b.sub(s, rb)?;
    b.unary(UnaryOp::Exp, z)
}

/// `rows` (`[B, H, t]`) broadcast to the shape of `like` (`[B, H, t, *]`).
pub(crate) fn broadcast_rows(
    b: &mut Builder,
    rows: InstrId,
    like: InstrId,
) -> Result<InstrId, BuildError> {
    let dims = b.dims(like);
    b.broadcast(rows, &dims, &[0, 1, 2])
}

/// `[B, H, t, x] . [B, H, t', x] -> [B, H, t, t']`: over the head width.
pub(crate) fn tiles_by_width() -> DotDims {
    DotDims {
        lhs_batch: vec![0, 1],
        lhs_contracting: vec![3],
        rhs_batch: vec![0, 1],
        rhs_contracting: vec![3],
    }
}

/// `[B, H, t, t'] . [B, H, t', x] -> [B, H, t, x]`: over the keys.
pub(crate) fn tiles_by_keys() -> DotDims {
    DotDims {
        lhs_batch: vec![0, 1],
        lhs_contracting: vec![3],
        rhs_batch: vec![0, 1],
        rhs_contracting: vec![2],
    }
}
