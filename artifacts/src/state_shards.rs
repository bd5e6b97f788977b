//! A training state as whole tensors, one set of tensors per rank, and
//! back: what `train --save-state` writes and `--resume` reads, and what
//! `hlatc shard` and `hlatc unshard` convert between.
//!
//! The whole state names no rank: each state input of the step (weights as
//! stored, master weights, Adam moments, the step counter and, on `cpu`,
//! the rounding RNG state) under its input name, at the single-device
//! step's shape. A rank's set holds the same names at that rank's shape
//! (its share, or under ZeRO-1 its shard), as its program takes them.

use crate::initial_inputs::{fresh_state, parameter_start};
use crate::state_error::StateError;
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{Role, TensorSpec};
use std::collections::BTreeMap;

/// The name of rank `rank`'s file in a folder of per-rank state files:
/// what `hlatc shard` writes and `hlatc unshard` reads, and the Python
/// engine's checkpoints hold.
pub fn rank_file_name(rank: usize) -> String {
    format!("rank-{rank:05}.safetensors")
}

/// The state inputs of a step's signature, in input order.
pub fn state_inputs(inputs: &[TensorSpec]) -> Vec<&TensorSpec> {
    inputs.iter().filter(|s| s.role.is_state()).collect()
}

/// The whole value of each of `specs` taken from `tensors` (read from
/// `source`): each must be there with `expected(spec)` dimensions and the
/// spec's type, and no tensor may be left over.
fn take_each(
    specs: &[&TensorSpec],
    expected: impl Fn(&TensorSpec) -> Vec<i64>,
    mut tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<Vec<Literal>, Error> {
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        // Between optimizer steps the gradient accumulators are zero, so a
        // state need not hold them (a run without accumulation resumes
        // into one with it).
        if spec.role == Role::GradAccumulator && !tensors.contains_key(&spec.name) {
            out.push(Literal::zeros(spec.dtype, expected(spec)));
            continue;
        }
        let t = tensors
            .remove(&spec.name)
            .ok_or_else(|| StateError::MissingTensor {
                origin: source.to_string(),
                tensor: spec.name.clone(),
                role: spec.role,
            })?;
        let dims = expected(spec);
        if t.ty() != spec.dtype || t.dims() != dims.as_slice() {
            return Err(StateError::TensorShape {
                origin: source.to_string(),
                tensor: spec.name.clone(),
                got_ty: t.ty(),
                got_dims: t.dims().to_vec(),
                want_ty: spec.dtype,
                want_dims: dims,
            }
            .into());
        }
        out.push(t);
    }
    if let Some(extra) = tensors.keys().next() {
        return Err(StateError::UnknownTensor {
            origin: source.to_string(),
            tensor: extra.clone(),
        }
        .into());
    }
    Ok(out)
}

/// The whole state in `tensors` (from `source`), checked against the step
/// with signature `inputs` whose ranks divide it as `ranks` says, in the
/// order of
/// [`state_inputs`].
pub fn whole_state(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<Vec<Literal>, Error> {
    take_each(
        &state_inputs(inputs),
        |s| ranks.whole_dims(s),
        tensors,
        source,
    )
}

/// `params`, one per parameter input of `inputs` in signature order, by
/// stored name: what [`start_state`] takes. A count that differs is
/// refused with both numbers.
pub fn params_by_name(
    inputs: &[TensorSpec],
    params: Vec<Literal>,
) -> Result<BTreeMap<String, Literal>, Error> {
    let names: Vec<&str> = inputs
        .iter()
        .filter(|s| s.role == Role::Parameter)
        .map(|s| s.name.as_str())
        .collect();
    if params.len() != names.len() {
        return Err(StateError::ParameterCount {
            expected: names.len(),
            got: params.len(),
        }
        .into());
    }
    Ok(names.into_iter().map(str::to_string).zip(params).collect())
}

/// The state a run starts from, whole: `params` (by stored name, as the
/// step stores them), each master weight its parameter widened, and fresh
/// moments, accumulators, step counter and RNG state (of `seed`), as
/// [`initial_inputs`](crate::initial_inputs) starts each input.
pub fn start_state(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    params: &BTreeMap<String, Literal>,
    seed: u64,
) -> Result<Vec<Literal>, Error> {
    state_inputs(inputs)
        .into_iter()
        .map(|s| match s.role {
            Role::Parameter | Role::MasterWeight => parameter_start(s, params),
            _ => {
                let whole = TensorSpec {
                    shape: ranks.whole_dims(s),
                    ..s.clone()
                };
                fresh_state(&whole, seed).ok_or_else(|| {
                    StateError::NotState {
                        input: s.name.clone(),
                        role: s.role,
                    }
                    .into()
                })
            }
        })
        .collect()
}

/// Each rank's state, by input name, from the whole state `whole` (in the
/// order of [`state_inputs`]).
pub fn shard_state(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    whole: &[Literal],
) -> Vec<Vec<(String, Literal)>> {
    (0..ranks.parallelism().world())
        .map(|r| rank_share(ranks, inputs, whole, r))
        .collect()
}

/// Rank `rank`'s state, by input name, from the whole state `whole` (in
/// the order of [`state_inputs`]): one rank's of [`shard_state`].
pub fn rank_share(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    whole: &[Literal],
    rank: i64,
) -> Vec<(String, Literal)> {
    state_inputs(inputs)
        .into_iter()
        .zip(whole)
        .map(|(s, w)| (s.name.clone(), ranks.take(s, w, rank)))
        .collect()
}

/// The whole state, by input name, from every rank's (in rank order, each
/// read from the source `source(r)` names), each rank's checked against
/// the step's signature.
pub fn unshard_state(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    per_rank: Vec<BTreeMap<String, Literal>>,
    source: impl Fn(usize) -> String,
) -> Result<Vec<(String, Literal)>, Error> {
    let world = ranks.parallelism().world() as usize;
    if per_rank.len() != world {
        return Err(StateError::RankCount {
            got: per_rank.len(),
            world,
            layout: ranks.parallelism().to_string(),
        }
        .into());
    }
    let specs = state_inputs(inputs);
    let locals: Vec<Vec<Literal>> = per_rank
        .into_iter()
        .enumerate()
        .map(|(r, t)| take_each(&specs, |s| s.shape.clone(), t, &source(r)))
        .collect::<Result<_, _>>()?;
    Ok(specs
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let of_ranks: Vec<&Literal> = locals.iter().map(|l| &l[k]).collect();
            (s.name.clone(), ranks.gather(s, &of_ranks))
        })
        .collect())
}
