//! Runs the compiled training step on XLA CPU, carrying the parameters and
//! optimizer state from one step to the next.

use crate::data::Batch;
use crate::train_step::{
    build_train_step, output_with_role, Role, StateLayout, StepConfig, TensorSpec, TrainStep,
};
use crate::Error;
use hlatc_compiler::{ElementType, Literal};
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
    model: hlatc_models::ModelConfig,
    /// The step's signature, whose roles say where everything goes.
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    layout: StateLayout,
    /// The carried state, one literal per state input, in input order.
    state: Vec<Literal>,
}

impl Trainer {
    /// Compiles the step for `cfg` and starts from `params` (in
    /// `param_specs` order) with zero optimizer state at step 0.
    pub fn new(rt: &Runtime, cfg: &StepConfig, params: Vec<Literal>) -> Result<Trainer, Error> {
        let step = build_train_step(cfg)?;
        Self::with_program(rt.compile(&step.module)?, cfg, &step, params)
    }

    /// Like [`Trainer::new`], with the step first through the `cpu` target's
    /// default pass pipeline and `remat` as its checkpointing policy: the
    /// program `hlatc compile --target cpu` would write.
    pub fn optimized(
        rt: &Runtime,
        cfg: &StepConfig,
        remat: hlatc_passes::RematPolicy,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        Self::optimized_step(rt, cfg, build_train_step(cfg)?, remat, params)
    }

    /// [`Trainer::optimized`] for a step already built for `cfg`, whose
    /// cast and rounding policies the caller may have changed.
    pub fn optimized_step(
        rt: &Runtime,
        cfg: &StepConfig,
        mut step: TrainStep,
        remat: hlatc_passes::RematPolicy,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        let target = hlatc_passes::Target::Cpu;
        let pipeline = hlatc_passes::default_pipeline::<&str>(target, &[])?;
        crate::train_step::optimize(&mut step, &pipeline, target, remat)?;
        Self::with_program(rt.compile(&step.module)?, cfg, &step, params)
    }

    /// Starts from an already compiled `step` for `cfg` (for instance the
    /// bundle's own module, read back from disk). The state is laid out by
    /// the roles of the step's inputs: `params` (in `param_specs` order)
    /// fill the parameters, the Adam moments start at zero and the step
    /// counter at 0.
    pub fn with_program(
        program: Program,
        cfg: &StepConfig,
        step: &TrainStep,
        params: Vec<Literal>,
    ) -> Result<Trainer, Error> {
        let layout = StateLayout::of(&step.inputs, &step.outputs).ok_or_else(|| {
            Error::Usage("the step does not return every piece of its state".into())
        })?;
        let wanted = step
            .inputs
            .iter()
            .filter(|s| s.role == Role::Parameter)
            .count();
        if params.len() != wanted {
            return Err(Error::Usage(format!(
                "the step takes {wanted} parameters, {} were given",
                params.len()
            )));
        }
        let mut params = params.into_iter();
        let state = layout
            .updates
            .iter()
            .map(|&(i, _)| {
                let s = &step.inputs[i];
                let ty = s.dtype;
                match s.role {
                    Role::Parameter => params
                        .next()
                        .expect("counted above")
                        .converted(ty)
                        .map_err(|e| Error::Usage(format!("parameter '{}': {e}", s.name))),
                    Role::RngState => Ok(rng_state(0)),
                    _ => Ok(Literal::zeros(ty, s.shape.clone())),
                }
            })
            .collect::<Result<_, Error>>()?;
        Ok(Trainer {
            program,
            vocab_size: cfg.model.vocab_size,
            model: cfg.model.clone(),
            inputs: step.inputs.clone(),
            outputs: step.outputs.clone(),
            layout,
            state,
        })
    }

    /// Restarts the RNG of stochastic rounding from `seed` (it starts from
    /// seed 0): the same seed gives the same run, bit for bit.
    pub fn seed_rounding(&mut self, seed: u64) {
        for (k, &(i, _)) in self.layout.updates.iter().enumerate() {
            if self.inputs[i].role == Role::RngState {
                self.state[k] = rng_state(seed);
            }
        }
    }

    fn state_with_role(&self, role: Role) -> impl Iterator<Item = (&TensorSpec, &Literal)> {
        self.layout
            .updates
            .iter()
            .map(|&(i, _)| &self.inputs[i])
            .zip(&self.state)
            .filter(move |(s, _)| s.role == role)
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
        let packed = self.inputs.iter().any(|s| s.role == Role::SegmentIds);
        if batch.segment_ids.is_some() != packed {
            return Err(Error::Usage(
                if packed {
                    "the step was compiled for packed rows but the batch has no segment ids"
                } else {
                    "the step was compiled unpacked but the batch has segment ids"
                }
                .into(),
            ));
        }
        let mut state = self.state.iter();
        let inputs: Vec<Literal> = self
            .inputs
            .iter()
            .map(|s| match s.role {
                Role::Tokens => batch.tokens.clone(),
                Role::Targets => batch.targets.clone(),
                Role::SegmentIds => batch.segment_ids.clone().expect("checked above"),
                _ => state.next().expect("one literal per state input").clone(),
            })
            .collect();
        let mut out: Vec<Option<Literal>> =
            self.program.run(&inputs)?.into_iter().map(Some).collect();
        let scalar = |role: Role| -> Result<f64, Error> {
            output_with_role(&self.outputs, role)
                .and_then(|i| out.get(i))
                .and_then(|l| l.as_ref())
                .map(|l| l.to_f64_vec()[0])
                .ok_or_else(|| Error::Usage(format!("the step has no {role:?} output")))
        };
        let stats = StepStats {
            loss: scalar(Role::Loss)?,
            grad_norm: scalar(Role::GradNorm)?,
            learning_rate: scalar(Role::LearningRate)?,
        };
        self.state = self
            .layout
            .updates
            .iter()
            .map(|&(_, o)| out.get_mut(o).and_then(Option::take))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::Usage("the step returned fewer outputs than it declares".into())
            })?;
        Ok(stats)
    }

    /// The current parameters as stored, by name (fused tensors included).
    pub fn params(&self) -> Vec<(String, Literal)> {
        self.state_with_role(Role::Parameter)
            .map(|(s, l)| (s.name.clone(), l.clone()))
            .collect()
    }

    /// The current parameters as Hugging Face tensors, in Hugging Face
    /// order: fused projections are split back into theirs.
    pub fn hugging_face_params(&self) -> Vec<(String, Literal)> {
        let stored: BTreeMap<String, Literal> = self.params().into_iter().collect();
        hlatc_models::layout::split(&self.model, &stored)
            .expect("the trainer holds every parameter of its model")
    }

    /// Completed steps.
    pub fn steps_done(&self) -> i64 {
        self.state_with_role(Role::Step)
            .next()
            .map_or(0, |(_, l)| l.to_i64_vec()[0])
    }
}

/// The RNG state `rng-bit-generator` starts from for `seed`.
fn rng_state(seed: u64) -> Literal {
    let bytes = [seed, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    Literal::from_bytes(ElementType::U64, vec![2], bytes).expect("two u64s")
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

/// Parameters for `cfg` (in `param_specs` order, fused where `cfg` fuses)
/// from tensors by Hugging Face name (a safetensors checkpoint): every one
/// must be present with its exact shape, and is converted to `ty`. Also
/// returns the names of the tensors the model did not use.
pub fn params_from_tensors(
    cfg: &hlatc_models::ModelConfig,
    ty: ElementType,
    tensors: BTreeMap<String, Literal>,
    source: &str,
) -> Result<(Vec<Literal>, Vec<String>), Error> {
    let mut tensors = tensors;
    let hf = hlatc_models::layout::hugging_face_config(cfg);
    for p in hlatc_models::param_specs(&hf) {
        if let Some(t) = tensors.get(&p.name).filter(|t| !t.ty().is_float()) {
            return Err(Error::Usage(format!(
                "{source}: tensor '{}' is {}, not a float",
                p.name,
                t.ty()
            )));
        }
    }
    let stored = hlatc_models::layout::join(cfg, &mut tensors)
        .map_err(|e| Error::Usage(format!("{source}: {e}")))?;
    let out = stored
        .into_iter()
        .map(|(_, t)| t.converted(ty).expect("floats convert to floats"))
        .collect();
    Ok((out, tensors.into_keys().collect()))
}
