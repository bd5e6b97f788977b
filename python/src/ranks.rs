//! What a runtime outside hlatc (JAX across processes) needs to run a
//! sharded step: each rank's share of a global batch, and the training
//! state divided into the ranks' shares and joined back. The division
//! itself is the train crate's (`rank_inputs`, `state_shards`), the same
//! code `hlatc train`, `hlatc shard` and `hlatc unshard` run.

use crate::arrays::{from_raw, RawIn};
use crate::errors::{to_py, UsageError};
use hlatc::compile_step::CompiledStep;
use hlatc::data::Batch;
use hlatc::rank_inputs::RankInputs;
use hlatc::state_shards::{state_inputs, unshard_state, whole_state};
use hlatc::train_step::Role;
use hlatc::Literal;
use pyo3::prelude::*;
use std::collections::{BTreeMap, HashMap};

/// Tensors by name from Python's `(dtype, shape, bytes)` triples.
pub fn literals(tensors: HashMap<String, RawIn<'_>>) -> PyResult<BTreeMap<String, Literal>> {
    tensors
        .into_iter()
        .map(|(name, raw)| Ok((name.clone(), from_raw(&name, raw)?)))
        .collect()
}

/// Rank `rank`'s batch inputs, by name, from the global `batch`: each
/// batch input's rows as the trainer gives them to the rank, after the
/// checks the trainer makes (the global batch's shape, ids in the
/// vocabulary, segment ids a packing).
pub fn rank_batch(c: &CompiledStep, batch: &Batch, rank: i64) -> PyResult<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    let global = c.cfg.batch;
    let mut out = Vec::new();
    for spec in &c.step.inputs {
        let Some(value) = batch.for_role(spec.role) else {
            if spec.role == Role::SegmentIds {
                return Err(UsageError::new_err(
                    "the step was compiled for packed rows (packed=True): give segment_ids",
                ));
            }
            continue;
        };
        let want = [global.batch_size, global.seq_len];
        if value.dims() != want {
            return Err(UsageError::new_err(format!(
                "'{}' is {:?}; the step's global batch is {:?} ([batch_size, seq_len], every rank's rows)",
                spec.name,
                value.dims(),
                want
            )));
        }
        hlatc::batch_check::check_batch_input(spec, value, c.cfg.model.vocab_size)
            .map_err(|e| to_py(e.into()))?;
        out.push((spec.name.clone(), ranks.take(spec, value, rank)));
    }
    if batch.segment_ids.is_some() && !c.step.inputs.iter().any(|s| s.role == Role::SegmentIds) {
        return Err(UsageError::new_err(
            "the step was compiled unpacked but the batch has segment ids",
        ));
    }
    Ok(out)
}

/// Rank `rank`'s share of every state input, by name, from the whole state
/// `tensors` (`Trainer.state()`'s), each checked against the step.
pub fn shard_state(
    c: &CompiledStep,
    tensors: BTreeMap<String, Literal>,
    rank: i64,
) -> PyResult<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    let whole =
        whole_state(&ranks, &c.step.inputs, tensors, "state").map_err(|e| to_py(e.into()))?;
    Ok(state_inputs(&c.step.inputs)
        .into_iter()
        .zip(&whole)
        .map(|(s, w)| (s.name.clone(), ranks.take(s, w, rank)))
        .collect())
}

/// The whole state from every rank's share (in rank order), as `hlatc
/// unshard` joins rank files.
pub fn gather_state(
    c: &CompiledStep,
    per_rank: Vec<BTreeMap<String, Literal>>,
) -> PyResult<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    unshard_state(&ranks, &c.step.inputs, per_rank, |r| format!("rank {r}"))
        .map_err(|e| to_py(e.into()))
}

/// The parameters of the whole state `tensors` as Hugging Face tensors
/// (fused ones split back), as the trainer gives them.
pub fn hugging_face_params(
    c: &CompiledStep,
    tensors: BTreeMap<String, Literal>,
) -> PyResult<Vec<(String, Literal)>> {
    let ranks = RankInputs::new(&c.cfg);
    let whole =
        whole_state(&ranks, &c.step.inputs, tensors, "state").map_err(|e| to_py(e.into()))?;
    let stored: BTreeMap<String, Literal> = state_inputs(&c.step.inputs)
        .into_iter()
        .zip(whole)
        .filter(|(s, _)| s.role == Role::Parameter)
        .map(|(s, w)| (s.name.clone(), w))
        .collect();
    hlatc::models::layout::split(&c.cfg.model, &stored)
        .map_err(|e| UsageError::new_err(format!("state: {e}")))
}
