//! Between a sharded step's ranks and the single-device step with the
//! same global batch: which part of each single-device input a rank takes
//! (its share of a parameter and its moments, its DP replica's rows of the
//! batch, or all of it), and the single-device outputs gathered back from
//! the ranks. Inputs and outputs are matched by name and role, never by
//! position.

use crate::train_step::{Role, StepConfig, TensorSpec, ADAM_M_PREFIX, ADAM_V_PREFIX};
use hlatc_compiler::Literal;
use hlatc_models::{param_specs, Parallelism, ParamSpec, Piece, TpSplit};
use std::collections::HashMap;

/// A range of a Hugging Face tensor a rank holds: `range` along `dim` of
/// `tensor`, at `local` along the same dimension of the rank's input.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HfSlice {
    pub tensor: String,
    pub dim: usize,
    pub range: [i64; 2],
    pub local: i64,
    /// How many ranks of the TP group hold the same range.
    pub copies: i64,
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
}

/// The parameter an input or output named `name` belongs to (itself or
/// one of its Adam moments).
fn parameter_of<'a>(specs: &'a HashMap<String, ParamSpec>, name: &str) -> Option<&'a ParamSpec> {
    let base = name
        .strip_prefix(ADAM_M_PREFIX)
        .or_else(|| name.strip_prefix(ADAM_V_PREFIX))
        .unwrap_or(name);
    specs.get(base)
}

/// How a step divides its inputs over its ranks.
pub struct RankInputs {
    par: Parallelism,
    specs: HashMap<String, ParamSpec>,
    batch_rows: i64,
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
        }
    }

    /// The parameter whose share input `spec` is (the parameter itself
    /// or one of its Adam moments); `None` for any other input.
    fn sharded(&self, spec: &TensorSpec) -> Option<&ParamSpec> {
        match spec.role {
            Role::Parameter | Role::AdamM | Role::AdamV => parameter_of(&self.specs, &spec.name),
            _ => None,
        }
    }

    /// The rows of the global batch rank `rank` takes, for a batch input.
    fn batch_rows(&self, spec: &TensorSpec, rank: i64) -> Option<[i64; 2]> {
        match spec.role {
            Role::Tokens | Role::Targets | Role::SegmentIds => {
                let first = self.par.dp_rank(rank) * self.batch_rows;
                Some([first, first + self.batch_rows])
            }
            _ => None,
        }
    }

    /// What rank `rank` holds of input `spec`, named by the Hugging Face
    /// tensors a checkpoint stores (a fused tensor's block is the member
    /// it stacks; the Adam moments of a parameter are laid out as it is).
    pub fn holding(&self, spec: &TensorSpec, rank: i64) -> RankHolding {
        if let Some(rows) = self.batch_rows(spec, rank) {
            return RankHolding::BatchRows(rows);
        }
        match self.sharded(spec) {
            Some(p) if p.tp != TpSplit::Replicated => {
                let pieces = p.tp.pieces(&p.dims, self.par.tp_rank(rank), &self.par);
                RankHolding::HuggingFace(pieces.iter().map(|piece| hf_slice(p, piece)).collect())
            }
            _ => RankHolding::Replicated,
        }
    }

    /// Rank `rank`'s value of the single-device input `spec` = `value`.
    pub fn take(&self, spec: &TensorSpec, value: &Literal, rank: i64) -> Literal {
        if let Some([a, b]) = self.batch_rows(spec, rank) {
            return rows(value, a, b);
        }
        match self.sharded(spec) {
            Some(p) => p.tp.shard(value, self.par.tp_rank(rank), &self.par),
            None => value.clone(),
        }
    }

    /// The whole value of input `spec` from every rank's value of it (in
    /// rank order): a parameter or moment gathered from the TP ranks of DP
    /// replica 0, anything else rank 0's.
    pub fn gather(&self, spec: &TensorSpec, locals: &[&Literal]) -> Literal {
        match self.sharded(spec).filter(|_| locals.len() > 1) {
            Some(p) => {
                p.tp.gather(&locals[..self.par.tp as usize], &p.dims, &self.par)
            }
            None => locals[0].clone(),
        }
    }
}

/// `piece` of stored parameter `p` as a range of the Hugging Face tensor
/// it lies in.
fn hf_slice(p: &ParamSpec, piece: &Piece) -> HfSlice {
    let (tensor, offset) = match p.parts.get(piece.block) {
        Some(part) if piece.dim == 0 => (part.name.clone(), part.rows[0]),
        _ => (p.name.clone(), 0),
    };
    HfSlice {
        tensor,
        dim: piece.dim,
        range: [piece.global[0] - offset, piece.global[1] - offset],
        local: piece.local,
        copies: piece.copies,
    }
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
