//! Which part of each parameter a tensor-parallel rank holds, from the
//! parameter's role (never from its position): a column-parallel
//! projection (q, k, v, gate, up, stored `[out, in]`) keeps whole heads or
//! MLP columns of its output rows; a row-parallel one (o, down) keeps the
//! matching columns of its input; the embedding and LM head keep a run of
//! vocabulary rows; a mixture of experts' stacked experts split each
//! expert as the dense MLP's projections are split; everything else
//! (norms, the router, the biases added after a row-parallel reduction)
//! is replicated.
//!
//! A rank's tensor is a list of [`Piece`]s: ranges of the full tensor laid
//! side by side. Sharding and gathering copy bytes and change no value.

use super::Parallelism;
use hlatc_compiler::Literal;

/// `count` units of `size` rows (or columns) each: 32 heads of 128, or
/// 11008 MLP columns of 1. A rank keeps whole units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Units {
    pub count: i64,
    pub size: i64,
}

impl Units {
    /// The units TP rank `t` of `tp` holds, and on how many ranks each of
    /// them lives: a share of `count / tp`, or, with fewer units than
    /// ranks (KV heads under GQA), one unit replicated on `tp / count`.
    fn share(&self, t: i64, tp: i64) -> ([i64; 2], i64) {
        if self.count >= tp {
            let per = self.count / tp;
            ([t * per, (t + 1) * per], 1)
        } else {
            let copies = tp / self.count;
            let u = t / copies;
            ([u, u + 1], copies)
        }
    }

    /// Rows (or columns) one rank holds.
    pub fn local(&self, tp: i64) -> i64 {
        (self.count / tp).max(1) * self.size
    }
}

/// How a parameter is divided over a TP group.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TpSplit {
    /// Every rank holds all of it.
    Replicated,
    /// Output rows (Megatron's column-parallel linear): the tensor's rows
    /// are blocks (a fused tensor's members, in order), each split by its
    /// own units.
    Rows(Vec<Units>),
    /// Input columns (Megatron's row-parallel linear).
    Columns(Units),
    /// Vocabulary rows, padded to a multiple of the degree.
    Vocab,
    /// Each stacked expert's output rows (`[E, I, H]`: the gate and up
    /// projections, column-parallel as a dense MLP's).
    ExpertRows(Units),
    /// Each stacked expert's input columns (`[E, H, I]`: the down
    /// projection, row-parallel as a dense MLP's).
    ExpertColumns(Units),
}

/// A range of the full tensor a rank holds: `global[0]..global[1]` along
/// `dim`, at `local` along the same dimension of the rank's tensor. The
/// rank's copy is one of `copies` identical ones in its TP group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Piece {
    pub dim: usize,
    pub global: [i64; 2],
    pub local: i64,
    pub copies: i64,
    /// Which block of a [`TpSplit::Rows`] tensor (a fused tensor's
    /// member); 0 otherwise.
    pub block: usize,
}

impl TpSplit {
    /// The shape TP rank holds of a parameter whose full shape is `dims`.
    pub fn local_dims(&self, dims: &[i64], par: &Parallelism) -> Vec<i64> {
        let tp = par.tp;
        let mut local = dims.to_vec();
        match self {
            TpSplit::Replicated => {}
            TpSplit::Rows(blocks) => local[0] = blocks.iter().map(|u| u.local(tp)).sum(),
            TpSplit::Columns(u) => local[1] = u.local(tp),
            TpSplit::Vocab => local[0] = super::ceil_div(dims[0], tp),
            TpSplit::ExpertRows(u) => local[1] = u.local(tp),
            TpSplit::ExpertColumns(u) => local[2] = u.local(tp),
        }
        local
    }

    /// The ranges of the full tensor (shape `dims`) TP rank `t` holds, in
    /// the order they lie in its tensor. Vocabulary padding is in none.
    pub fn pieces(&self, dims: &[i64], t: i64, par: &Parallelism) -> Vec<Piece> {
        let tp = par.tp;
        let piece = |dim, global, local, copies, block| Piece {
            dim,
            global,
            local,
            copies,
            block,
        };
        match self {
            TpSplit::Replicated => {
                vec![piece(0, [0, dims.first().copied().unwrap_or(1)], 0, tp, 0)]
            }
            TpSplit::Rows(blocks) => {
                let (mut start, mut local) = (0, 0);
                let mut out = Vec::with_capacity(blocks.len());
                for (k, u) in blocks.iter().enumerate() {
                    let ([a, b], copies) = u.share(t, tp);
                    out.push(piece(
                        0,
                        [start + a * u.size, start + b * u.size],
                        local,
                        copies,
                        k,
                    ));
                    start += u.count * u.size;
                    local += (b - a) * u.size;
                }
                out
            }
            TpSplit::Columns(u) | TpSplit::ExpertRows(u) => {
                let ([a, b], copies) = u.share(t, tp);
                vec![piece(1, [a * u.size, b * u.size], 0, copies, 0)]
            }
            TpSplit::ExpertColumns(u) => {
                let ([a, b], copies) = u.share(t, tp);
                vec![piece(2, [a * u.size, b * u.size], 0, copies, 0)]
            }
            TpSplit::Vocab => {
                let rows = super::ceil_div(dims[0], tp);
                let (a, b) = (t * rows, ((t + 1) * rows).min(dims[0]));
                if a >= b {
                    return Vec::new();
                }
                vec![piece(0, [a, b], 0, 1, 0)]
            }
        }
    }

    /// TP rank `t`'s tensor of the full tensor `full`.
    pub fn shard(&self, full: &Literal, t: i64, par: &Parallelism) -> Literal {
        let local_dims = self.local_dims(full.dims(), par);
        let mut local = vec![0u8; byte_len(full, &local_dims)];
        for p in self.pieces(full.dims(), t, par) {
            for (f, l, n) in runs(full, full.dims(), &local_dims, p) {
                local[l..l + n].copy_from_slice(&full.bytes()[f..f + n]);
            }
        }
        Literal::from_bytes(full.ty(), local_dims, local).expect("a shard's bytes fill its shape")
    }

    /// The full tensor (shape `dims`) from every TP rank's tensor, in rank
    /// order (what [`TpSplit::shard`] gave each); a range several ranks
    /// hold is read from the first of them, vocabulary padding from none.
    pub fn gather(&self, locals: &[&Literal], dims: &[i64], par: &Parallelism) -> Literal {
        let ty = locals[0].ty();
        let mut full = vec![0u8; byte_len(locals[0], dims)];
        for (t, local) in locals.iter().enumerate().rev() {
            for p in self.pieces(dims, t as i64, par) {
                for (f, l, n) in runs(local, dims, local.dims(), p) {
                    full[f..f + n].copy_from_slice(&local.bytes()[l..l + n]);
                }
            }
        }
        Literal::from_bytes(ty, dims.to_vec(), full).expect("the gathered bytes fill the shape")
    }
}

fn byte_len(like: &Literal, dims: &[i64]) -> usize {
    dims.iter().product::<i64>() as usize * like.ty().byte_size()
}

/// The contiguous byte runs piece `p` copies, as (offset in the full
/// tensor, offset in the rank's tensor, length): one run per index of the
/// dimensions before `p.dim`.
fn runs(
    like: &Literal,
    full: &[i64],
    local: &[i64],
    p: Piece,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let es = like.ty().byte_size();
    let outer: i64 = full[..p.dim].iter().product();
    let inner = full[p.dim + 1..].iter().product::<i64>() as usize * es;
    let (full_dim, local_dim) = (full[p.dim] as usize, local[p.dim] as usize);
    let len = (p.global[1] - p.global[0]) as usize * inner;
    let (g, l) = (p.global[0] as usize, p.local as usize);
    (0..outer as usize).map(move |o| ((o * full_dim + g) * inner, (o * local_dim + l) * inner, len))
}

/// The replica groups over which a range held on `copies` ranks of each TP
/// group is the same value: its holders in every DP replica of a stage
/// (for the experts under expert parallelism, in the replicas that hold
/// the same experts). With one copy these are the DP groups; with `tp`
/// copies, every rank of the stage.
pub fn holder_groups(copies: i64, experts: bool, par: &Parallelism) -> Vec<Vec<i64>> {
    let replicas = match experts {
        true => par.expert_replicas(),
        false => vec![(0..par.replicas()).collect()],
    };
    groups_of_replicas(copies, &replicas, par)
}

/// [`holder_groups`] of the experts within each FSDP shard group: the
/// ranks that divide one copy of an EP rank's experts under HSDP.
pub fn expert_shard_groups(par: &Parallelism) -> Vec<Vec<i64>> {
    groups_of_replicas(1, &par.expert_shard_replicas(), par)
}

/// The ranks of `replicas` (sets of a stage's replicas) holding a range
/// on `copies` ranks of each TP group, one group per set and TP run, on
/// every stage.
fn groups_of_replicas(copies: i64, replicas: &[Vec<i64>], par: &Parallelism) -> Vec<Vec<i64>> {
    par.on_every_stage(
        replicas
            .iter()
            .flat_map(|set| {
                (0..par.tp / copies).map(move |g| {
                    set.iter()
                        .flat_map(|d| (0..copies).map(move |j| d * par.tp + g * copies + j))
                        .collect()
                })
            })
            .collect(),
    )
}

/// The replica groups over which a range held on `copies` ranks of each TP
/// group is the same value within one DP replica: its copies on the TP
/// ranks, each DP replica's apart (what ZeRO-1 sums before it scatters
/// over the replicas). With one copy every rank is its own group.
pub fn copy_groups(copies: i64, par: &Parallelism) -> Vec<Vec<i64>> {
    par.on_every_stage(
        (0..par.replicas())
            .flat_map(|d| {
                (0..par.tp / copies)
                    .map(move |g| (0..copies).map(|j| d * par.tp + g * copies + j).collect())
            })
            .collect(),
    )
}

/// `groups` (numbered as [`holder_groups`] and [`copy_groups`] number
/// them, on every stage) joined across the pipeline stages: for a
/// parameter every stage holds (the embedding, the final norm, the LM
/// head), each group with its twins on the other stages.
pub fn across_stages(groups: Vec<Vec<i64>>, par: &Parallelism) -> Vec<Vec<i64>> {
    let per_stage = groups.len() / par.pp.max(1) as usize;
    (0..per_stage)
        .map(|g| {
            (0..par.pp as usize)
                .flat_map(|s| groups[s * per_stage + g].iter().copied())
                .collect()
        })
        .collect()
}
