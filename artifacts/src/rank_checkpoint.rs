//! A rank's starting state from a Hugging Face safetensors checkpoint,
//! reading only the slices of it the rank holds: what a process of a
//! multi-host run starts from, each process for its own ranks, none of
//! them reading the whole file (a 70B checkpoint is 140 GB in bf16).
//!
//! Which slices a rank holds is [`RankInputs::holding`]'s: ranges of
//! Hugging Face tensors, each placed at its offset in the rank's share (a
//! fused tensor's share gathers ranges of each of its members), the rows
//! past the vocabulary zero. The rest of the state starts as
//! [`crate::state_shards::start_state`] starts it.

use crate::initial_inputs::fresh_state;
use crate::state_error::StateError;
use crate::state_shards::state_inputs;
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_models::layout::{hugging_face_config, LayoutError};
use hlatc_models::{param_specs, ModelConfig};
use hlatc_runtime::SafetensorsIndex;
use hlatc_step::rank_inputs::{flat_range, RankHolding, RankInputs};
use hlatc_step::train_step::{Role, StepConfig, TensorSpec};
use std::collections::BTreeMap;
use std::path::Path;

/// Every tensor `model` needs, checked in `index`'s header (present, a
/// float, of the model's shape), before anything is read; returns the
/// names of the tensors the model does not use.
pub fn check_checkpoint(
    model: &ModelConfig,
    index: &SafetensorsIndex,
) -> Result<Vec<String>, Error> {
    let source = index.path();
    let mut unused: BTreeMap<&String, ()> = index.tensors().keys().map(|k| (k, ())).collect();
    // A parameter stored as several tensors (a mixture's experts, one
    // each; Mixtral's router under its own name) is checked tensor by
    // tensor.
    let tensors = param_specs(&hugging_face_config(model))
        .into_iter()
        .flat_map(|p| match p.parts.is_empty() {
            true => vec![(p.name.clone(), p.dims.clone())],
            false => p
                .parts
                .iter()
                .map(|part| (part.name.clone(), part.dims(&p.dims)))
                .collect(),
        });
    for (name, dims) in tensors {
        let Some(t) = index.tensors().get(&name) else {
            let e = LayoutError::Missing {
                name: name.clone(),
                dims: dims.clone(),
            };
            return Err(StateError::Layout {
                origin: source.to_string(),
                error: e,
            }
            .into());
        };
        if !t.ty.is_float() {
            return Err(StateError::NotFloat {
                origin: source.to_string(),
                tensor: name.clone(),
                ty: t.ty,
            }
            .into());
        }
        if t.dims != dims {
            let e = LayoutError::Shape {
                name: name.clone(),
                got: t.dims.clone(),
                want: dims.clone(),
            };
            return Err(StateError::Layout {
                origin: source.to_string(),
                error: e,
            }
            .into());
        }
        unused.remove(&name);
    }
    Ok(unused.into_keys().cloned().collect())
}

/// Rank `rank`'s state at the start, by input name in input order: its
/// parameters (and master weights) read from `index` (checked first with
/// [`check_checkpoint`]), its share or ZeRO-1 shard only; everything else
/// fresh, from `seed`.
pub fn rank_state_from_checkpoint(
    ranks: &RankInputs,
    inputs: &[TensorSpec],
    index: &SafetensorsIndex,
    rank: i64,
    seed: u64,
) -> Result<Vec<(String, Literal)>, Error> {
    let mut shares: BTreeMap<&str, Literal> = BTreeMap::new();
    let mut out = Vec::new();
    for spec in state_inputs(inputs) {
        let value = match spec.role {
            Role::Parameter => {
                let share = read_share(ranks, spec, index, rank)?;
                if let Some(p) = spec.parameter.as_deref() {
                    shares.insert(p, share.clone());
                }
                share
            }
            Role::MasterWeight => {
                let share = spec
                    .parameter
                    .as_deref()
                    .and_then(|p| shares.get(p))
                    .ok_or_else(|| StateError::MasterBeforeParameter {
                        input: spec.name.clone(),
                    })?
                    .clone()
                    .converted(spec.dtype)
                    .map_err(|error| StateError::Convert {
                        what: spec.name.clone(),
                        error,
                    })?;
                match ranks.holding(spec, rank) {
                    RankHolding::Zero1Shard { elements: [a, b] } => flat_range(&share, a, b),
                    _ => share,
                }
            }
            _ => {
                let whole = TensorSpec {
                    shape: ranks.whole_dims(spec),
                    ..spec.clone()
                };
                let fresh = fresh_state(&whole, seed).ok_or_else(|| StateError::NotState {
                    input: spec.name.clone(),
                    role: spec.role,
                })?;
                ranks.take(spec, &fresh, rank)
            }
        };
        out.push((spec.name.clone(), value));
    }
    Ok(out)
}

/// A rank's starting state read from a checkpoint file.
pub struct RankStart {
    /// By input name, in input order.
    pub state: Vec<(String, Literal)>,
    /// The checkpoint's tensors the model does not use.
    pub unused: Vec<String>,
}

/// [`rank_state_from_checkpoint`] for the step `cfg` builds, whose inputs
/// are `inputs`, from the checkpoint at `path`: its header read and
/// checked, then only rank `rank`'s slices.
pub fn rank_state_from_file(
    cfg: &StepConfig,
    inputs: &[TensorSpec],
    path: &Path,
    rank: i64,
    seed: u64,
) -> Result<RankStart, Error> {
    let index = SafetensorsIndex::open(path)?;
    let unused = check_checkpoint(&cfg.model, &index)?;
    let state = rank_state_from_checkpoint(&RankInputs::new(cfg), inputs, &index, rank, seed)?;
    Ok(RankStart { state, unused })
}

/// Rank `rank`'s share of parameter input `spec`, in its type, from the
/// ranges of Hugging Face tensors it holds.
fn read_share(
    ranks: &RankInputs,
    spec: &TensorSpec,
    index: &SafetensorsIndex,
    rank: i64,
) -> Result<Literal, Error> {
    let read = |name: &str, dim: usize, range: [i64; 2]| -> Result<Literal, Error> {
        index
            .read_range(name, dim, range)?
            .ok_or_else(|| StateError::CheckpointTensor {
                origin: index.path().to_string(),
                tensor: name.to_string(),
            })?
            .converted(spec.dtype)
            .map_err(|error| {
                StateError::Convert {
                    what: format!("{}: tensor '{name}'", index.path()),
                    error,
                }
                .into()
            })
    };
    let holding = match ranks.parts_read(spec, rank) {
        Some(experts) => RankHolding::HuggingFace(experts),
        None => ranks.holding(spec, rank),
    };
    match holding {
        RankHolding::Replicated => {
            let dims = ranks.whole_dims(spec);
            read(&spec.name, 0, [0, dims.first().copied().unwrap_or(1)])
        }
        RankHolding::HuggingFace(slices) => {
            let size = spec.dtype.byte_size();
            let mut bytes = vec![0u8; spec.shape.iter().product::<i64>() as usize * size];
            for s in &slices {
                let part = read(&s.tensor, s.dim, s.range)?;
                // An expert of a stack is its row `local`; any other range
                // lies at `local` along the dimension it was read from.
                match s.stacked {
                    true => place(&mut bytes, &spec.shape, size, &one_row(part), 0, s.local),
                    false => place(&mut bytes, &spec.shape, size, &part, s.dim, s.local),
                }
            }
            Literal::from_bytes(spec.dtype, spec.shape.clone(), bytes).map_err(|error| {
                StateError::Convert {
                    what: spec.name.clone(),
                    error,
                }
                .into()
            })
        }
        other => Err(StateError::NotHuggingFaceRanges {
            parameter: spec.name.clone(),
            holding: format!("{other:?}"),
        }
        .into()),
    }
}

/// `x` as the one row of a leading dimension: an expert's tensor as a
/// stack of one.
fn one_row(x: Literal) -> Literal {
    let dims: Vec<i64> = std::iter::once(1).chain(x.dims().iter().copied()).collect();
    let ty = x.ty();
    Literal::from_bytes(ty, dims, x.bytes().to_vec()).expect("the same elements")
}

/// Copies `part` into the row-major array `bytes` of `dims` (elements of
/// `size` bytes), at index `at` along dimension `dim`.
fn place(bytes: &mut [u8], dims: &[i64], size: usize, part: &Literal, dim: usize, at: i64) {
    let inner = dims[dim + 1..].iter().product::<i64>() as usize * size;
    let block = dims[dim] as usize * inner;
    let run = part.dims()[dim] as usize * inner;
    for (o, chunk) in part.bytes().chunks(run.max(1)).enumerate() {
        let start = o * block + at as usize * inner;
        bytes[start..start + chunk.len()].copy_from_slice(chunk);
    }
}

/// Parameters for `cfg` (in `param_specs` order, fused where `cfg` fuses)
/// from tensors by Hugging Face name (a safetensors checkpoint): every one
/// must be present with its exact shape, and is converted to `ty`. Also
/// returns the names of the tensors the model did not use.
pub fn params_from_tensors(
    cfg: &ModelConfig,
    ty: hlatc_compiler::ElementType,
    tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<(Vec<Literal>, Vec<String>), Error> {
    let mut tensors = tensors;
    let hf = hugging_face_config(cfg);
    for p in param_specs(&hf) {
        if let Some(t) = tensors.get(&p.name).filter(|t| !t.ty().is_float()) {
            return Err(StateError::NotFloat {
                origin: source.to_string(),
                tensor: p.name.clone(),
                ty: t.ty(),
            }
            .into());
        }
    }
    let stored =
        hlatc_models::layout::join(cfg, &mut tensors).map_err(|error| StateError::Layout {
            origin: source.to_string(),
            error,
        })?;
    let out = stored
        .into_iter()
        .map(|(_, t)| t.converted(ty).expect("floats convert to floats"))
        .collect();
    Ok((out, tensors.into_keys().collect()))
}
