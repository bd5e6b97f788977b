//! What a step's inputs hold before its first step, each from its role:
//! the model's initialization for the parameters, zeros for the Adam
//! moments and the step counter, a seeded state for the rounding RNG, and
//! a batch of the synthetic language whose ids lie in the vocabulary (its
//! segment ids a valid packing). Fed to a step, they give a loss near
//! ln(vocab) and finite updates: the start a training run has.
//!
//! The trainer starts from these, `hlatc run BUNDLE` feeds them for the
//! inputs it is not given, and a training stack embedding a bundle gets
//! the state its manifest's roles call for.

use crate::state_error::StateError;
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::init::init_params;
use hlatc_step::data::{Batch, SyntheticData};
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{Role, StepConfig, TensorSpec};
use std::collections::BTreeMap;

/// The value of a carried state input that is not a parameter, at the
/// start: zeros for the Adam moments, the gradient accumulators and the
/// step counter, the RNG state of `seed`. `None` for a parameter or a
/// batch input.
pub fn fresh_state(spec: &TensorSpec, seed: u64) -> Option<Literal> {
    match spec.role {
        Role::AdamM | Role::AdamV | Role::Step | Role::GradAccumulator => {
            Some(Literal::zeros(spec.dtype, spec.shape.clone()))
        }
        Role::RngState => Some(rng_state(seed)),
        _ => None,
    }
}

/// The RNG state `rng-bit-generator` starts from for `seed`.
pub fn rng_state(seed: u64) -> Literal {
    let bytes = [seed, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    Literal::from_bytes(ElementType::U64, vec![2], bytes).expect("two u64s")
}

/// Every input of the step `cfg` builds (`inputs`, its signature), for
/// each rank: parameters initialized from `seed` (each rank its share),
/// fresh optimizer state and batch 0 of the synthetic language drawn from
/// `seed` (each DP replica its rows).
pub fn initial_inputs(
    cfg: &StepConfig,
    inputs: &[TensorSpec],
    seed: u64,
) -> Result<Vec<Vec<Literal>>, Error> {
    let start = StartValues::new(cfg, inputs, seed);
    (0..cfg.parallel.world())
        .map(|rank| start.of_rank(inputs, rank))
        .collect()
}

/// What the start values of some of a step's inputs are drawn from: the
/// model's parameters (initialized only when a parameter is among them), a
/// synthetic batch, and how the ranks divide both.
pub struct StartValues {
    params: BTreeMap<String, Literal>,
    batch: Batch,
    ranks: RankInputs,
    seed: u64,
}

impl StartValues {
    /// For the inputs `wanted` (a step's signature, or part of it) of the
    /// step `cfg` builds.
    pub fn new(cfg: &StepConfig, wanted: &[TensorSpec], seed: u64) -> Self {
        let params = match wanted
            .iter()
            .any(|s| matches!(s.role, Role::Parameter | Role::MasterWeight))
        {
            true => init_params(&cfg.model, cfg.precision.storage(), seed)
                .into_iter()
                .collect(),
            false => BTreeMap::new(),
        };
        let batch = SyntheticData::permutation(cfg.model.vocab_size, seed).step_batch(
            cfg.packed,
            0,
            cfg.batch.batch_size,
            cfg.batch.seq_len,
        );
        StartValues {
            params,
            batch,
            ranks: RankInputs::new(cfg),
            seed,
        }
    }

    /// Rank `rank`'s start value of each of `wanted` (those `new` was
    /// given, or some of them).
    pub fn of_rank(&self, wanted: &[TensorSpec], rank: i64) -> Result<Vec<Literal>, Error> {
        wanted
            .iter()
            .map(|spec| {
                initial_input(
                    spec,
                    &self.params,
                    &self.batch,
                    &self.ranks,
                    rank,
                    self.seed,
                )
            })
            .collect()
    }
}

/// The whole start value of a parameter's input `spec` (the parameter, or
/// its master weight) from `params` by stored name: the parameter in the
/// input's type (a master weight starts as its parameter, widened).
pub(crate) fn parameter_start(
    spec: &TensorSpec,
    params: &BTreeMap<String, Literal>,
) -> Result<Literal, Error> {
    spec.parameter
        .as_deref()
        .and_then(|p| params.get(p))
        .ok_or_else(|| StateError::UnknownParameter {
            input: spec.name.clone(),
        })?
        .clone()
        .converted(spec.dtype)
        .map_err(|error| {
            StateError::Convert {
                what: format!("parameter '{}'", spec.name),
                error,
            }
            .into()
        })
}

/// Rank `rank`'s start value of input `spec`.
fn initial_input(
    spec: &TensorSpec,
    params: &BTreeMap<String, Literal>,
    batch: &Batch,
    ranks: &RankInputs,
    rank: i64,
    seed: u64,
) -> Result<Literal, Error> {
    if let Some(state) = fresh_state(spec, seed) {
        return Ok(state);
    }
    let whole = match spec.role {
        Role::Rank => return Ok(RankInputs::rank_value(rank)),
        Role::Parameter | Role::MasterWeight => parameter_start(spec, params)?,
        Role::TokenCount => batch.token_count(),
        role => batch
            .for_role(role)
            .ok_or_else(|| StateError::NotStepInput {
                input: spec.name.clone(),
                role,
            })?
            .clone(),
    };
    let local = ranks.take(spec, &whole, rank);
    if local.dims() != spec.shape.as_slice() {
        return Err(StateError::ManifestShape {
            input: spec.name.clone(),
            manifest: spec.shape.clone(),
            from_role: local.dims().to_vec(),
        }
        .into());
    }
    Ok(local)
}
