//! Runs the compiled training step on XLA CPU, carrying the parameters and
//! optimizer state from one step to the next.

use crate::data::Batch;
use crate::train_step::{build_train_step, StepConfig};
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::param_specs;
use hlatc_runtime::{Program, Runtime};
use std::collections::BTreeMap;

/// What one step reported.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
}

pub struct Trainer {
    program: Program,
    vocab_size: i64,
    packed: bool,
    names: Vec<String>,
    /// Parameters, Adam m, Adam v, step: the aliased state, in input order.
    state: Vec<Literal>,
}

impl Trainer {
    /// Compiles the step for `cfg` and starts from `params` (in
    /// `param_specs` order) with zero optimizer state at step 0.
    pub fn new(rt: &Runtime, cfg: &StepConfig, params: Vec<Literal>) -> Result<Trainer, Error> {
        let step = build_train_step(cfg)?;
        Ok(Self::with_program(rt.compile(&step.module)?, cfg, params))
    }

    /// Starts from an already compiled step for `cfg` (for instance the
    /// bundle's own module, read back from disk).
    pub fn with_program(program: Program, cfg: &StepConfig, params: Vec<Literal>) -> Trainer {
        let names: Vec<String> = param_specs(&cfg.model)
            .into_iter()
            .map(|p| p.name)
            .collect();
        let zeros: Vec<Literal> = params
            .iter()
            .map(|p| Literal::zeros(p.ty(), p.dims().to_vec()))
            .collect();
        let mut state = params;
        state.extend(zeros.iter().cloned());
        state.extend(zeros);
        state.push(Literal::from_s32(vec![], &[0]).expect("a scalar"));
        Trainer {
            program,
            vocab_size: cfg.model.vocab_size,
            packed: cfg.packed,
            names,
            state,
        }
    }

    /// One optimizer step on `batch`. Token ids must lie in the vocabulary,
    /// and targets too unless they are the ignore index; the first that
    /// does not is named (XLA would clamp it silently).
    pub fn step(&mut self, batch: &Batch) -> Result<StepStats, Error> {
        check_ids("tokens", &batch.tokens, self.vocab_size, None)?;
        check_ids(
            "targets",
            &batch.targets,
            self.vocab_size,
            Some(hlatc_models::IGNORE_INDEX),
        )?;
        if batch.segment_ids.is_some() != self.packed {
            return Err(Error::Usage(
                if self.packed {
                    "the step was compiled for packed rows but the batch has no segment ids"
                } else {
                    "the step was compiled unpacked but the batch has segment ids"
                }
                .into(),
            ));
        }
        let mut inputs = self.state.clone();
        inputs.extend(batch.inputs());
        let mut out = self.program.run(&inputs)?;
        let scalar = |l: &Literal| l.to_f64_vec()[0];
        let stats = StepStats {
            loss: scalar(&out[0]),
            grad_norm: scalar(&out[1]),
            learning_rate: scalar(&out[2]),
        };
        self.state = out.split_off(3);
        Ok(stats)
    }

    /// The current parameters by Hugging Face name.
    pub fn params(&self) -> Vec<(String, Literal)> {
        self.names
            .iter()
            .cloned()
            .zip(self.state.iter().cloned())
            .collect()
    }

    /// Completed steps.
    pub fn steps_done(&self) -> i64 {
        self.state.last().map_or(0, |s| s.to_i64_vec()[0])
    }
}

/// Fails on the first id of `ids` (`[batch, seq]`) outside `0..vocab`,
/// other than `allowed`.
fn check_ids(what: &str, ids: &Literal, vocab: i64, allowed: Option<i64>) -> Result<(), Error> {
    let seq = ids.dims().get(1).copied().unwrap_or(1).max(1) as usize;
    let values = ids.to_i64_vec();
    match values
        .iter()
        .position(|&t| !(0..vocab).contains(&t) && Some(t) != allowed)
    {
        None => Ok(()),
        Some(i) => Err(Error::Usage(format!(
            "{what}[{}, {}] is {}, outside the vocabulary 0..{vocab}{}",
            i / seq,
            i % seq,
            values[i],
            allowed.map_or(String::new(), |a| format!(
                " (and not the ignore index {a})"
            ))
        ))),
    }
}

/// Parameters for `cfg` from named tensors (a safetensors checkpoint): every
/// parameter must be present with its exact shape; it is converted to `ty`.
pub fn params_from_tensors(
    cfg: &hlatc_models::ModelConfig,
    ty: ElementType,
    mut tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<(Vec<Literal>, Vec<String>), Error> {
    let mut out = Vec::new();
    for p in param_specs(cfg) {
        let t = tensors.remove(&p.name).ok_or_else(|| {
            Error::Usage(format!(
                "{source}: no tensor '{}' (shape {:?})",
                p.name, p.dims
            ))
        })?;
        if t.dims() != p.dims.as_slice() {
            return Err(Error::Usage(format!(
                "{source}: tensor '{}' has shape {:?}, the model needs {:?}",
                p.name,
                t.dims(),
                p.dims
            )));
        }
        if !t.ty().is_float() {
            return Err(Error::Usage(format!(
                "{source}: tensor '{}' is {}, not a float",
                p.name,
                t.ty()
            )));
        }
        let converted = if t.ty() == ty {
            t
        } else {
            let values: Vec<hlatc_compiler::Scalar> = t
                .to_f64_vec()
                .into_iter()
                .map(hlatc_compiler::Scalar::Float)
                .collect();
            Literal::from_scalars(ty, p.dims.clone(), &values).expect("floats convert")
        };
        out.push(converted);
    }
    Ok((out, tensors.into_keys().collect()))
}
