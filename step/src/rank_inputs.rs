//! Between a sharded step's ranks and the single-device step with the
//! same global batch: which part of each single-device input a rank takes
//! (its share of a parameter and its moments, its DP replica's rows of the
//! batch, or all of it), and the single-device outputs gathered back from
//! the ranks. Inputs and outputs are matched by name and role, never by
//! position.

use crate::train_step::{Role, StepConfig, TensorSpec};
use crate::zero1::shard_len;
use hlatc_compiler::Literal;
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, Parallelism, ParamSpec, Piece, TpSplit};
use std::collections::HashMap;

/// A range of a Hugging Face tensor a rank holds: `range` along `dim` of
/// `tensor`, at `local` along the same dimension of the rank's input.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HfSlice {
    pub tensor: String,
    pub dim: usize,
    pub range: [i64; 2],
    pub local: i64,
    /// How many ranks of the TP group hold the same range.
    pub copies: i64,
    /// The tensor is one row of the input's leading dimension, without
    /// that dimension: one expert of a stack. `local` is its row, and
    /// `dim` and `range` what the rank reads of the tensor (all of it, or
    /// its TP columns of the expert).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stacked: bool,
}

/// What a rank holds of one input, in checkpoint terms.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankHolding {
    /// All of it, as every rank does.
    Replicated,
    /// Ranges of Hugging Face tensors (the rows past the vocabulary in an
    /// embedding or LM head are padding, in none).
    HuggingFace(Vec<HfSlice>),
    /// Rows of the global batch.
    BatchRows([i64; 2]),
    /// Under context parallelism, rows of the global batch and of each of
    /// them the token ranges of the rank's chunks, laid one after another
    /// in this order.
    BatchChunks {
        rows: [i64; 2],
        tokens: Vec<[i64; 2]>,
    },
    /// Under ZeRO-1, elements `elements[0]..elements[1]` of the rank's
    /// share of the parameter, flattened row-major (past its end, zero
    /// padding).
    Zero1Shard { elements: [i64; 2] },
    /// Its own rank's number (`s32[1]`), under `--rank-source input`.
    Rank,
}

/// How a step divides its inputs over its ranks.
pub struct RankInputs {
    par: Parallelism,
    specs: HashMap<String, ParamSpec>,
    batch_rows: i64,
    seq_len: i64,
    fault: Option<Fault>,
}

impl RankInputs {
    pub fn new(cfg: &StepConfig) -> Self {
        RankInputs {
            par: cfg.parallel,
            specs: param_specs(&cfg.model)
                .into_iter()
                .map(|p| (p.name.clone(), p))
                .collect(),
            batch_rows: cfg.parallel.local_batch(cfg.batch).batch_size,
            seq_len: cfg.batch.seq_len,
            fault: cfg.fault,
        }
    }

    /// The parameter whose share input `spec` is (the parameter itself
    /// or one of its Adam moments); `None` for any other input.
    fn sharded(&self, spec: &TensorSpec) -> Option<&ParamSpec> {
        spec.parameter.as_deref().and_then(|p| self.specs.get(p))
    }

    /// The parameter whose share input `spec` is, as
    /// [`RankInputs::holding`] divides it; `None` for any other input.
    pub fn parameter(&self, spec: &TensorSpec) -> Option<&ParamSpec> {
        self.sharded(spec)
    }

    /// The ZeRO-1 shard of its parameter's share that input `spec` is on
    /// rank `rank`: elements `[start, end)` of the share flattened (past
    /// the share's end, padding); `None` unless ZeRO-1 divides `spec`.
    fn zero1_shard(&self, spec: &TensorSpec, rank: i64) -> Option<[i64; 2]> {
        if !spec.role.is_divided_by(&self.par) {
            return None;
        }
        let p = self.sharded(spec)?;
        let k = shard_len(&self.par.local_dims(p), self.par.zero1_degree(p));
        let d = self.par.zero1_index(p, rank);
        Some([d * k, (d + 1) * k])
    }

    /// The rows of the global batch rank `rank` takes, for a batch input.
    fn batch_rows(&self, spec: &TensorSpec, rank: i64) -> Option<[i64; 2]> {
        match spec.role {
            Role::Tokens | Role::Targets | Role::SegmentIds | Role::BackwardTokens => {
                let first = self.par.dp_rank(rank) * self.batch_rows;
                Some([first, first + self.batch_rows])
            }
            _ => None,
        }
    }

    /// Under context parallelism, the token ranges of each sequence rank
    /// `rank` takes, in the order it holds them.
    fn token_ranges(&self, rank: i64) -> Option<Vec<[i64; 2]>> {
        (self.par.cp > 1).then(|| {
            self.par
                .sequence_ranges(self.seq_len, self.par.cp_rank(rank))
        })
    }

    /// Whether `spec` is the targets [`Fault::LabelsNotBalanced`] cuts
    /// without the balancing order.
    fn unbalanced_labels(&self, spec: &TensorSpec) -> bool {
        self.fault == Some(Fault::LabelsNotBalanced) && spec.role == Role::Targets
    }

    /// What rank `rank` holds of input `spec`, named by the Hugging Face
    /// tensors a checkpoint stores (a fused tensor's block is the member
    /// it stacks; the Adam moments of a parameter are laid out as it is).
    pub fn holding(&self, spec: &TensorSpec, rank: i64) -> RankHolding {
        if spec.role == Role::Rank {
            return RankHolding::Rank;
        }
        if let Some(rows) = self.batch_rows(spec, rank) {
            return match self.token_ranges(rank) {
                None => RankHolding::BatchRows(rows),
                Some(tokens) => RankHolding::BatchChunks { rows, tokens },
            };
        }
        if let Some(elements) = self.zero1_shard(spec, rank) {
            return RankHolding::Zero1Shard { elements };
        }
        match self.sharded(spec) {
            Some(p) if stacks_experts(p) => RankHolding::HuggingFace(self.experts_held(p, rank)),
            Some(p) if p.tp != TpSplit::Replicated => {
                let pieces = p.tp.pieces(&p.dims, self.par.tp_rank(rank), &self.par);
                RankHolding::HuggingFace(pieces.iter().map(|piece| hf_slice(p, piece)).collect())
            }
            _ => RankHolding::Replicated,
        }
    }

    /// What rank `rank` reads of the checkpoint for parameter input
    /// `spec` when the checkpoint stores it as other tensors than
    /// [`RankInputs::holding`] names: a stack of experts (one Hugging Face
    /// tensor each, whether the rank holds all of them or its EP rank's
    /// run), or a parameter every rank holds whole that the checkpoint
    /// names otherwise (Mixtral's router).
    pub fn parts_read(&self, spec: &TensorSpec, rank: i64) -> Option<Vec<HfSlice>> {
        let p = self.sharded(spec)?;
        if stacks_experts(p) {
            return Some(self.experts_held(p, rank));
        }
        let whole = matches!(self.holding(spec, rank), RankHolding::Replicated);
        (whole && !p.parts.is_empty()).then(|| {
            p.parts
                .iter()
                .map(|part| HfSlice {
                    tensor: part.name.clone(),
                    dim: 0,
                    range: [0, part.rows[1] - part.rows[0]],
                    local: part.rows[0],
                    copies: self.par.tp,
                    stacked: false,
                })
                .collect()
        })
    }

    /// The Hugging Face tensors (one per expert) of the stacked experts
    /// `p` that rank `rank` holds, at their places in the rank's stack:
    /// every expert, or its EP rank's run of them; of each, its TP rank's
    /// columns, or all of it.
    fn experts_held(&self, p: &ParamSpec, rank: i64) -> Vec<HfSlice> {
        let [first, end] = self.experts_range(p, rank).unwrap_or([0, p.dims[0]]);
        // The rank's range of each expert: its TP columns, one dimension
        // down in the expert's own tensor.
        let pieces = p.tp.pieces(&p.dims, self.par.tp_rank(rank), &self.par);
        p.parts
            .iter()
            .filter(|part| part.rows[0] >= first && part.rows[1] <= end)
            .flat_map(|part| {
                pieces
                    .iter()
                    .map(move |piece| expert_slice(&part.name, part.rows[0] - first, piece))
            })
            .collect()
    }

    /// The experts rank `rank` holds of `p`, when expert parallelism
    /// divides them.
    fn experts_range(&self, p: &ParamSpec, rank: i64) -> Option<[i64; 2]> {
        self.par.experts_of(p, self.par.ep_rank(rank))
    }

    /// How the step is divided.
    pub fn parallelism(&self) -> Parallelism {
        self.par
    }

    /// The dimensions of the single-device input that `spec` holds a part
    /// of: its parameter's for a share or shard, its own otherwise.
    pub fn whole_dims(&self, spec: &TensorSpec) -> Vec<i64> {
        match self.sharded(spec) {
            Some(p) => p.dims.clone(),
            None => spec.shape.clone(),
        }
    }

    /// The value of the [`Role::Rank`] input on rank `rank`: `s32[1]`
    /// holding `rank`, as NxD's `SPMDRank` feeds it.
    pub fn rank_value(rank: i64) -> Literal {
        let rank = i32::try_from(rank).expect("a world size fits in i32");
        Literal::from_s32(vec![1], &[rank]).expect("one s32")
    }

    /// Rank `rank`'s value of the single-device input `spec` = `value`.
    pub fn take(&self, spec: &TensorSpec, value: &Literal, rank: i64) -> Literal {
        if spec.role == Role::Rank {
            return Self::rank_value(rank);
        }
        if let Some([a, b]) = self.batch_rows(spec, rank) {
            let rows = rows(value, a, b);
            return match self.token_ranges(rank) {
                None => rows,
                Some(_) if self.unbalanced_labels(spec) => {
                    let contiguous = Parallelism {
                        cp_balance: hlatc_models::CpBalance::Contiguous,
                        ..self.par
                    };
                    let c = self.par.cp_rank(rank);
                    columns(&rows, &contiguous.sequence_ranges(self.seq_len, c))
                }
                Some(ranges) => columns(&rows, &ranges),
            };
        }
        let share = match self.sharded(spec) {
            Some(p) => {
                let share = p.tp.shard(value, self.par.tp_rank(rank), &self.par);
                match self.experts_range(p, rank) {
                    Some([a, b]) => rows(&share, a, b),
                    None => share,
                }
            }
            None => value.clone(),
        };
        match self.zero1_shard(spec, rank) {
            Some([a, b]) => flat_range(&share, a, b),
            None => share,
        }
    }

    /// The whole value of input `spec` from every rank's value of it (in
    /// rank order): a parameter or moment gathered from the TP ranks of DP
    /// replica 0, anything else rank 0's.
    pub fn gather(&self, spec: &TensorSpec, locals: &[&Literal]) -> Literal {
        let p = match self.sharded(spec).filter(|_| locals.len() > 1) {
            Some(p) => p,
            None => return locals[0].clone(),
        };
        let tp = self.par.tp as usize;
        // Runs of the leading dimension held apart: EP ranks' experts.
        let ep = match self.par.divides_experts(p) {
            true => self.par.ep as usize,
            false => 1,
        };
        let zero1 = self.zero1_shard(spec, 0).is_some();
        let local = self.par.local_dims(p);
        // TP rank t's share of run j: DP replica j's, or joined from its
        // ZeRO-1 shards on the replicas that hold the run (replica `g * ep
        // + j` holds shard g).
        let share = |j: usize, t: usize| match zero1 {
            false => locals[j * tp + t].clone(),
            true => {
                let shards: Vec<&Literal> = (0..self.par.zero1_degree(p) as usize)
                    .map(|g| locals[(g * ep + j) * tp + t])
                    .collect();
                joined(&shards, &local)
            }
        };
        let mut run_dims = p.dims.clone();
        run_dims[0] /= ep as i64;
        let runs: Vec<Literal> = (0..ep)
            .map(|j| {
                let shares: Vec<Literal> = (0..tp).map(|t| share(j, t)).collect();
                p.tp.gather(&shares.iter().collect::<Vec<_>>(), &run_dims, &self.par)
            })
            .collect();
        match runs.as_slice() {
            [one] => one.clone(),
            _ => {
                let bytes: Vec<u8> = runs
                    .iter()
                    .flat_map(|r| r.bytes().iter().copied())
                    .collect();
                Literal::from_bytes(runs[0].ty(), p.dims.clone(), bytes)
                    .expect("the runs fill the stack")
            }
        }
    }
}

/// Whether `p` is a stack of experts stored one Hugging Face tensor each.
fn stacks_experts(p: &ParamSpec) -> bool {
    p.parts.iter().any(|part| part.stacked)
}

/// What `piece` of a stack of experts (a range along a dimension past the
/// first) is of expert `tensor`, row `row` of the rank's stack: the same
/// range, one dimension down.
pub fn expert_slice(tensor: &str, row: i64, piece: &Piece) -> HfSlice {
    HfSlice {
        tensor: tensor.to_string(),
        dim: piece.dim.saturating_sub(1),
        range: piece.global,
        local: row,
        copies: piece.copies,
        stacked: true,
    }
}

/// `piece` of stored parameter `p` as a range of the Hugging Face tensor
/// it lies in.
fn hf_slice(p: &ParamSpec, piece: &Piece) -> HfSlice {
    let part = p
        .parts
        .get(piece.block)
        .map(|part| (part.name.as_str(), part.rows[0]));
    hf_slice_named(&p.name, part, piece)
}

/// The range of a Hugging Face tensor that `piece` of parameter `name` is:
/// of the fused tensor's member `part` (its name and first row) when the
/// piece is rows of one, of the parameter itself otherwise.
pub fn hf_slice_named(name: &str, part: Option<(&str, i64)>, piece: &Piece) -> HfSlice {
    let (tensor, offset) = match part {
        Some((part, first)) if piece.dim == 0 => (part.to_string(), first),
        _ => (name.to_string(), 0),
    };
    HfSlice {
        tensor,
        dim: piece.dim,
        range: [piece.global[0] - offset, piece.global[1] - offset],
        local: piece.local,
        copies: piece.copies,
        stacked: false,
    }
}

/// Elements `a..b` of `value` flattened, zero past its end.
pub fn flat_range(value: &Literal, a: i64, b: i64) -> Literal {
    let size = value.ty().byte_size();
    let mut bytes = vec![0u8; (b - a) as usize * size];
    let have = value.bytes();
    let from = (a as usize * size).min(have.len());
    let to = (b as usize * size).min(have.len());
    bytes[..to - from].copy_from_slice(&have[from..to]);
    Literal::from_bytes(value.ty(), vec![b - a], bytes).expect("a run of whole elements")
}

/// A tensor of `dims` from its ZeRO-1 shards in replica order, the padding
/// past its end dropped.
fn joined(shards: &[&Literal], dims: &[i64]) -> Literal {
    let ty = shards[0].ty();
    let n: i64 = dims.iter().product();
    let mut bytes: Vec<u8> = shards
        .iter()
        .flat_map(|s| s.bytes().iter().copied())
        .collect();
    bytes.truncate(n as usize * ty.byte_size());
    Literal::from_bytes(ty, dims.to_vec(), bytes).expect("the shards cover the tensor")
}

/// `ranges` of `value`'s second dimension (`[B, S]`), laid one after
/// another: a CP rank's chunks of each sequence.
fn columns(value: &Literal, ranges: &[[i64; 2]]) -> Literal {
    let dims = value.dims();
    let size = value.ty().byte_size();
    let row_bytes = dims[1] as usize * size;
    let bytes: Vec<u8> = value
        .bytes()
        .chunks(row_bytes)
        .flat_map(|row| {
            ranges
                .iter()
                .flat_map(move |&[a, b]| &row[a as usize * size..b as usize * size])
        })
        .copied()
        .collect();
    let width = ranges.iter().map(|[a, b]| b - a).sum();
    Literal::from_bytes(value.ty(), vec![dims[0], width], bytes).expect("whole chunks of each row")
}

/// Rows `a..b` of `value` along its first dimension.
fn rows(value: &Literal, a: i64, b: i64) -> Literal {
    let dims = value.dims();
    let row_bytes = value.bytes().len() / dims[0].max(1) as usize;
    let mut out = dims.to_vec();
    out[0] = b - a;
    let bytes = value.bytes()[a as usize * row_bytes..b as usize * row_bytes].to_vec();
    Literal::from_bytes(value.ty(), out, bytes).expect("a run of whole rows")
}
