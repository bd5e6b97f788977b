//! Gradient accumulation: K micro-batches per optimizer step, as two
//! programs.
//!
//! neuronx-cc unrolls loops, so one program looping over K micro-batches
//! would be compiled as K copies of the forward and backward pass: K times
//! the instructions (7B at TP 8 already needs 1.5 M of its 5 M TensorE
//! instructions for one) and K times the compile. Two programs keep each at
//! one micro-batch's size, as NxD runs it: the micro step (forward and
//! backward over one micro-batch, its gradient added into the f32
//! accumulators) runs K times, then the apply step (the accumulated
//! gradients summed over the ranks that hold them, or under ZeRO-1
//! reduce-scattered; clipped; AdamW; the accumulators zeroed) once. The
//! collectives of the gradient sum run once per optimizer step, not per
//! micro-batch.
//!
//! Each micro-batch's loss is its tokens' losses over the count of counted
//! targets in the whole optimizer step (the `token_count` input the
//! runtime computes from the step's targets), so its gradient is exactly
//! its share of the step's, and accumulating is a plain sum: nothing is
//! averaged over the micro-batches, which would weigh a micro-batch with
//! fewer counted targets as much as a full one (the accumulation bug
//! Hugging Face fixed in 2024) or, on top of the per-token mean, divide
//! twice.

use crate::sharding;
use crate::train_step::{
    check, expert_outputs, expert_results, model_graph, parameter_spec, rank_gradients_unsummed,
    spec, state_dims, state_specs, update, widen, GraphShape, ModelGraph, OptimizerState, Role,
    StateLayout, StepConfig, StepError, TensorSpec, TrainStep,
};
use crate::zero1::Zero1;
use hlatc_compiler::graph::autodiff;
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::{ElementType, InstrId, Op, Shape};
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, BatchShape, ParamSpec};
use std::time::Instant;

/// The two programs of a step that accumulates its gradient over
/// micro-batches.
pub struct AccumulationSteps {
    /// Forward and backward over one micro-batch (the global batch over K),
    /// its gradient added into the accumulators. Inputs: parameters,
    /// `grad.NAME`, `token_count`, tokens, targets; outputs: the
    /// micro-batch's share of the loss, then the accumulators (aliased).
    pub micro: TrainStep,
    /// The update from the accumulated gradients. Inputs: parameters,
    /// master weights, Adam moments, step, `grad.NAME`; outputs: grad norm,
    /// learning rate, then each of those updated (the accumulators zeroed),
    /// aliased.
    pub apply: TrainStep,
    /// K.
    pub micro_batches: i64,
}

/// The config of the micro step: `cfg` over a K-th of its batch.
pub fn micro_config(cfg: &StepConfig, micro_batches: i64) -> Result<StepConfig, StepError> {
    let per_replica = cfg.parallel.local_batch(cfg.batch).batch_size;
    if micro_batches < 2 || per_replica % micro_batches != 0 {
        return Err(StepError::Accumulation {
            micro_batches,
            per_replica,
            batch_size: cfg.batch.batch_size,
            dp: cfg.parallel.dp,
        });
    }
    Ok(StepConfig {
        batch: BatchShape {
            batch_size: cfg.batch.batch_size / micro_batches,
            ..cfg.batch
        },
        ..cfg.clone()
    })
}

/// Builds both programs for `cfg` (its batch the whole optimizer step's)
/// with `micro_batches` micro-batches.
pub fn build_accumulation_steps(
    cfg: &StepConfig,
    micro_batches: i64,
) -> Result<AccumulationSteps, StepError> {
    check(cfg)?;
    let micro_cfg = micro_config(cfg, micro_batches)?;
    Ok(AccumulationSteps {
        micro: build_micro_step(&micro_cfg, micro_batches)?,
        apply: build_apply_step(cfg)?,
        micro_batches,
    })
}

/// The accumulators' inputs: one per parameter, its share, in the type
/// gradients are summed in.
pub(crate) fn accumulator_specs(cfg: &StepConfig, specs: &[ParamSpec]) -> Vec<TensorSpec> {
    let ty = cfg.precision.gradient_sum_type();
    specs
        .iter()
        .map(|p| {
            let dims = state_dims(p, Role::GradAccumulator, &cfg.parallel);
            parameter_spec(p, Role::GradAccumulator, ty, &dims)
        })
        .collect()
}

pub(crate) fn declare(b: &mut Builder, specs: &[TensorSpec]) -> Vec<InstrId> {
    specs
        .iter()
        .map(|s| b.parameter(&s.name, Shape::array(s.dtype, s.shape.clone())))
        .collect()
}

fn build_micro_step(cfg: &StepConfig, micro_batches: i64) -> Result<TrainStep, StepError> {
    let compute = cfg.precision.compute();
    let par = cfg.parallel;
    let specs = param_specs(&cfg.model);
    let accumulators = accumulator_specs(cfg, &specs);
    let t0 = Instant::now();
    let shape = GraphShape::of("micro_step", cfg, Some(micro_batches));
    // Under FSDP each micro step gathers the weights from the shards it
    // takes, and its accumulators are the rank's whole share: the apply
    // step reduce-scatters their sums once.
    let ModelGraph {
        mut b,
        params,
        extra: accs,
        fwd,
        ..
    } = model_graph(&cfg.model, cfg.batch, shape, |b| declare(b, &accumulators))?;
    let t1 = Instant::now();
    let grads = match par.is_single() {
        true => autodiff::grad(&mut b, fwd.loss, &params, &fwd.grad_hints)?,
        false => rank_gradients_unsummed(&mut b, cfg, fwd.loss, &params, &fwd.grad_hints)?,
    };
    let t2 = Instant::now();
    b.push_scope("grad_accumulate");
    let sum_ty = cfg.precision.gradient_sum_type();
    let grads = widen(&mut b, &grads, sum_ty)?;
    let mut results = vec![fwd.loss];
    for (&acc, &g) in accs.iter().zip(&grads) {
        // The fault of the test that proves the check catches it: each
        // micro-batch's share averaged again over the micro-batches.
        let g = match cfg.fault {
            Some(Fault::AccumulationAveragedTwice) => b.scale(g, 1.0 / micro_batches as f64)?,
            _ => g,
        };
        results.push(b.add2(acc, g)?);
    }
    b.pop_scope();
    results.extend(expert_results(&fwd));
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module("hlatc_micro_step", root);

    let batch = par.local_batch(cfg.batch);
    let bd = [batch.batch_size, batch.seq_len];
    let mut inputs = parameter_specs(cfg, &specs);
    inputs.extend(accumulators.iter().cloned());
    inputs.push(spec("token_count", ElementType::S32, &[], Role::TokenCount));
    inputs.push(spec("tokens", ElementType::S32, &bd, Role::Tokens));
    inputs.push(spec("targets", ElementType::S32, &bd, Role::Targets));
    if cfg.packed {
        inputs.push(spec("segment_ids", ElementType::S32, &bd, Role::SegmentIds));
    }
    let mut outputs = vec![spec("loss", compute, &[], Role::Loss)];
    outputs.extend(accumulators);
    outputs.extend(expert_outputs(cfg));
    module.input_output_alias = StateLayout::updated(&inputs, &outputs).aliases();
    step_of(
        module,
        cfg,
        inputs,
        outputs,
        [t1 - t0, t2 - t1, t2.elapsed()],
    )
}

pub(crate) fn build_apply_step(cfg: &StepConfig) -> Result<TrainStep, StepError> {
    let compute = cfg.precision.compute();
    let par = cfg.parallel;
    let specs = param_specs(&cfg.model);
    let accumulators = accumulator_specs(cfg, &specs);
    let t0 = Instant::now();
    let mut b = Builder::new("apply_step");
    let stored = declare(&mut b, &parameter_specs(cfg, &specs));
    let params = widen(&mut b, &stored, compute)?;
    let state = OptimizerState::declare(&mut b, cfg, &specs);
    let accs = declare(&mut b, &accumulators);
    let zero1 = match par.shards_optimizer_state() {
        true => Some(Zero1::new(&mut b, par, cfg.fault)?),
        false => None,
    };
    let sums = widen(&mut b, &accs, compute)?;
    let grads = match (&zero1, par.is_single()) {
        (_, true) => sums,
        (None, false) => sharding::sum_over_holders(&mut b, &sums, &specs, &par, cfg.fault)?,
        (Some(z), false) => z.scatter_gradients(&mut b, &sums, &specs)?,
    };
    let t1 = Instant::now();
    // Under FSDP the parameters declared are the rank's shards.
    let shards = par.shards_weights().then_some(params.as_slice());
    let division = crate::train_step::Division::of(zero1.as_ref(), shards);
    let mut results = update(&mut b, cfg, &specs, &params, &grads, state, division)?;
    b.push_scope("grad_accumulate");
    for &acc in &accs {
        results.push(b.full_like(acc, 0.0)?);
    }
    b.pop_scope();
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module("hlatc_apply_step", root);

    let mut inputs = state_specs(cfg, &specs);
    inputs.extend(accumulators);
    let mut outputs = vec![
        spec("grad_norm", compute, &[], Role::GradNorm),
        spec("learning_rate", compute, &[], Role::LearningRate),
    ];
    outputs.extend(inputs.iter().filter(|s| s.role.is_state()).cloned());
    let layout = StateLayout::of(&inputs, &outputs).expect("every state input has its output");
    module.input_output_alias = layout.aliases();
    let t = t1.elapsed();
    step_of(
        module,
        cfg,
        inputs,
        outputs,
        [t1 - t0, Default::default(), t],
    )
}

/// The parameters' inputs: each rank's share, in the storage type.
fn parameter_specs(cfg: &StepConfig, specs: &[ParamSpec]) -> Vec<TensorSpec> {
    let mut all = state_specs(cfg, specs);
    all.retain(|s| s.role == Role::Parameter);
    all
}

fn step_of(
    module: hlatc_compiler::Module,
    cfg: &StepConfig,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    [forward, autodiff, optimizer]: [std::time::Duration; 3],
) -> Result<TrainStep, StepError> {
    let times = crate::train_step::StageTimes {
        forward,
        autodiff,
        optimizer,
        passes: Default::default(),
    };
    TrainStep::built(module, cfg, (inputs, outputs), times)
}
