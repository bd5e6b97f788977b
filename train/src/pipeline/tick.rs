//! One tick of the pipeline schedule as a program: the slots of its phase
//! (see [`super::schedule`]) on every stage at once.
//!
//! Every rank runs the program; its stage (`replica-id / (tp * dp)`) and
//! the `tick` input say which micro-batch each slot takes, and a slot with
//! none computes on what its buffers hold and is weighed by zero.
//!
//! - **Forward slot:** the stage input is stage 0's embedding of `tokens`
//!   or the activation received from the stage before; the stage's layers
//!   run over it, the output is sent to the next stage (a
//!   `collective-permute` between each rank and its twin on the next
//!   stage), and the input is kept in the ring for the backward slot.
//! - **Backward slot:** the kept input (stage 0: its embedding again, of
//!   `backward_tokens`) runs through the layers once more, and autodiff
//!   takes the gradient of `J = w_loss * loss + w_mid * sum(y * dy)`:
//!   on the last stage `loss` is the micro-batch's share of the step's
//!   mean loss over the final norm and LM head, elsewhere `dy` is the
//!   gradient received from the next stage, so `J`'s gradient is the
//!   vector-Jacobian product of the stage. The parameters' gradients are
//!   added into the accumulators and the input's gradient sent to the
//!   stage before.
//!
//! Saved for the backward slot: the stage input alone, `[tokens, hidden]`
//! per micro-batch in flight; the stage's activations are recomputed.

use super::schedule::{Phase, Schedule};
use crate::grad_accum::{accumulator_specs, declare};
use crate::train_step::{
    spec, widen, Role, StageTimes, StateLayout, StepConfig, StepError, TensorSpec, TrainStep,
};
use hlatc_compiler::graph::autodiff;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use hlatc_compiler::{ElementType, InstrId, Op};
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, ForwardParts, PartsContext};
use std::time::Instant;

/// Names of the buffers the tick programs carry.
pub const STASH: &str = "pipeline.kept_inputs";
pub const ACTIVATION: &str = "pipeline.activation_in";
pub const GRADIENT: &str = "pipeline.gradient_in";

/// The program of `phase` for `cfg`: a stage's model over one micro-batch
/// (`cfg.batch`, the global micro-batch), `cfg.parallel` with its stages.
pub(crate) fn build_tick(
    cfg: &StepConfig,
    schedule: Schedule,
    phase: Phase,
) -> Result<TrainStep, StepError> {
    let t0 = Instant::now();
    let par = cfg.parallel;
    let compute = cfg.precision.compute();
    let specs = param_specs(&cfg.model);
    let accumulators = accumulator_specs(cfg, &specs);
    let batch = par.local_batch(cfg.batch);
    let bd = [batch.batch_size, batch.seq_len];
    let sp = if par.sequence_parallel { par.tp } else { 1 };
    let rows = batch.batch_size * batch.seq_len / sp;
    let act = [rows, cfg.model.hidden_size];
    let depth = schedule.stash_depth();

    let mut inputs: Vec<TensorSpec> = crate::train_step::state_specs(cfg, &specs)
        .into_iter()
        .filter(|s| s.role == Role::Parameter)
        .collect();
    inputs.extend(accumulators.iter().cloned());
    inputs.push(spec("token_count", ElementType::S32, &[], Role::TokenCount));
    inputs.push(spec("tick", ElementType::S32, &[], Role::Tick));
    inputs.push(spec("tokens", ElementType::S32, &bd, Role::Tokens));
    let backward_tokens = "backward_tokens";
    inputs.push(spec(
        backward_tokens,
        ElementType::S32,
        &bd,
        Role::BackwardTokens,
    ));
    inputs.push(spec("targets", ElementType::S32, &bd, Role::Targets));
    let buffers = [
        spec(STASH, compute, &[depth, act[0], act[1]], Role::StageBuffer),
        spec(ACTIVATION, compute, &act, Role::StageBuffer),
        spec(GRADIENT, compute, &act, Role::StageBuffer),
    ];
    inputs.extend(buffers.iter().cloned());

    let mut b = Builder::new(format!("pipeline_{}", phase.name()));
    let stored = declare(&mut b, &inputs);
    let n_params = specs.len();
    let params = widen(&mut b, &stored[..n_params], compute)?;
    let at = |name: &str| {
        inputs
            .iter()
            .position(|s| s.name == name)
            .map(|i| stored[i])
            .expect("declared above")
    };
    let accs: Vec<InstrId> = accumulators.iter().map(|s| at(&s.name)).collect();
    let (token_count, tick) = (at("token_count"), at("tick"));
    let (tokens, tokens_back, targets) = (at("tokens"), at(backward_tokens), at("targets"));
    let (stash, activation_in, gradient_in) = (at(STASH), at(ACTIVATION), at(GRADIENT));

    let context = PartsContext {
        batch,
        par,
        fault: cfg.fault,
        module_markers: cfg.module_markers,
        token_count: Some(token_count),
    };
    let mut parts = ForwardParts::new(&mut b, &cfg.model, &params, context, None)?;
    let pos = Position::new(parts.builder(), cfg, schedule)?;
    let mut results = Vec::new();
    let mut outputs = Vec::new();

    let mut forward = None;
    if phase.forward() {
        let b = parts.builder();
        b.push_scope("forward_slot");
        let first = b.broadcast(pos.first, &act, &[])?;
        b.pop_scope();
        let embedded = parts.embed(tokens)?;
        let b = parts.builder();
        let x = b.select(first, embedded, activation_in)?;
        let y = parts.layers(x)?;
        let b = parts.builder();
        b.push_scope("forward_slot");
        let m = b.sub(tick, pos.stage)?;
        let kept = keep(b, stash, x, m, depth, schedule.micro_batches)?;
        let sent = permute(b, y, &pos.forward_pairs)?;
        b.pop_scope();
        forward = Some((kept, sent));
    }

    let mut backward = None;
    if phase.backward() {
        let b = parts.builder();
        b.push_scope("backward_slot");
        let delay = b.sub(pos.last_index, pos.stage)?;
        let delay = b.add2(delay, pos.stages)?;
        let m = b.sub(tick, delay)?;
        let kept = read_slot(b, stash, m, depth, &act)?;
        let first = b.broadcast(pos.first, &act, &[])?;
        b.pop_scope();
        let embedded = parts.embed(tokens_back)?;
        let x = parts.builder().select(first, embedded, kept)?;
        let y = parts.layers(x)?;
        let (loss, _) = parts.loss(y, targets)?;
        backward = Some((m, kept, y, loss));
    }
    let hints = parts.into_hints();
    let t1 = Instant::now();

    let loss_out = match backward {
        None => b.scalar(compute, 0.0),
        Some((m, kept, y, loss)) => {
            b.push_scope("backward_slot");
            let valid = in_range(&mut b, m, schedule.micro_batches)?;
            let on_last = b.binary(BinaryOp::And, valid, pos.last)?;
            let not_last = b.unary(UnaryOp::Not, pos.last)?;
            let on_mid = b.binary(BinaryOp::And, valid, not_last)?;
            let w_loss = b.convert(on_last, compute)?;
            let w_mid = b.convert(on_mid, compute)?;
            // Every rank of the last stage holds the loss: each takes its
            // share of the gradient, as a step of one stage does.
            let copies = match cfg.fault {
                Some(Fault::GradientSummedNotAveraged) => par.tp,
                _ => par.stage_world(),
            };
            let scaled = b.scale(loss, 1.0 / copies as f64)?;
            let from_loss = b.mul(w_loss, scaled)?;
            let dy = b.mul(y, gradient_in)?;
            let dy = b.reduce_sum(dy, &[0, 1])?;
            let from_next = b.mul(w_mid, dy)?;
            let objective = b.add2(from_loss, from_next)?;
            b.pop_scope();
            let mut wrt = params.clone();
            wrt.push(kept);
            let grads = autodiff::grad(&mut b, objective, &wrt, &hints)?;
            b.push_scope("grad_accumulate");
            let sum_ty = cfg.precision.gradient_sum_type();
            let widened = widen(&mut b, &grads[..n_params], sum_ty)?;
            let mut new_accs = Vec::with_capacity(accs.len());
            for (&acc, &g) in accs.iter().zip(&widened) {
                new_accs.push(b.add2(acc, g)?);
            }
            b.pop_scope();
            b.push_scope("backward_slot");
            let dx = grads[n_params];
            let sent = match cfg.fault {
                Some(Fault::StageGradientDropped) => b.full_like(dx, 0.0)?,
                _ => permute(&mut b, dx, &pos.backward_pairs)?,
            };
            let mine = b.mul(w_loss, loss)?;
            let total = b.all_reduce(mine, BinaryOp::Add, &replica_groups(&par.pp_groups()))?;
            b.pop_scope();
            results.extend(new_accs);
            outputs.extend(accumulators.iter().cloned());
            results.push(sent);
            outputs.push(buffers[2].clone());
            total
        }
    };
    if let Some((kept, sent)) = forward {
        results.push(kept);
        outputs.push(buffers[0].clone());
        results.push(sent);
        outputs.push(buffers[1].clone());
    }
    results.insert(0, loss_out);
    outputs.insert(0, spec("loss", compute, &[], Role::Loss));
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module(&format!("hlatc_pipeline_{}", phase.name()), root);
    module.input_output_alias = StateLayout::updated(&inputs, &outputs).aliases();
    let times = StageTimes {
        forward: t1 - t0,
        autodiff: t1.elapsed(),
        optimizer: Default::default(),
    };
    TrainStep::built(module, cfg, (inputs, outputs), times)
}

/// What a rank knows of its place in the pipeline, computed from its
/// `replica-id` so that one program serves every stage.
struct Position {
    /// `s32[]`: this rank's stage.
    stage: InstrId,
    /// `s32[]`: the number of stages, and the last one's index.
    stages: InstrId,
    last_index: InstrId,
    /// `pred[]`: whether this is the first stage, the last.
    first: InstrId,
    last: InstrId,
    /// Each rank to its twin on the next stage, and back.
    forward_pairs: Vec<(i64, i64)>,
    backward_pairs: Vec<(i64, i64)>,
}

impl Position {
    fn new(b: &mut Builder, cfg: &StepConfig, schedule: Schedule) -> Result<Self, BuildError> {
        let par = cfg.parallel;
        b.push_scope("pipeline_stage");
        let id = b.add(Op::ReplicaId, &[], None)?;
        let id = b.convert(id, ElementType::S32)?;
        let per_stage = b.scalar(ElementType::S32, par.stage_world() as f64);
        let stage = b.binary(BinaryOp::Divide, id, per_stage)?;
        let zero = b.scalar(ElementType::S32, 0.0);
        let stages = b.scalar(ElementType::S32, schedule.stages as f64);
        let last_index = b.scalar(ElementType::S32, (schedule.stages - 1) as f64);
        let first = b.compare(stage, zero, ComparisonDirection::Eq)?;
        let last = b.compare(stage, last_index, ComparisonDirection::Eq)?;
        b.pop_scope();
        let mut forward_pairs = Vec::new();
        for twins in par.pp_groups() {
            for pair in twins.windows(2) {
                forward_pairs.push((pair[0], pair[1]));
            }
        }
        let backward_pairs = forward_pairs.iter().map(|&(a, z)| (z, a)).collect();
        Ok(Position {
            stage,
            stages,
            last_index,
            first,
            last,
            forward_pairs,
            backward_pairs,
        })
    }
}

/// `x` sent from each rank to its partner in `pairs` (a rank nobody sends
/// to receives zeros).
fn permute(b: &mut Builder, x: InstrId, pairs: &[(i64, i64)]) -> Result<InstrId, BuildError> {
    b.add(
        Op::CollectivePermute {
            channel_id: None,
            pairs: pairs.to_vec(),
            slice_sizes: Vec::new(),
        },
        &[x],
        None,
    )
}

/// `pred[]`: whether micro-batch `m` (`s32[]`) is one of the step's.
fn in_range(b: &mut Builder, m: InstrId, micro_batches: i64) -> Result<InstrId, BuildError> {
    let zero = b.scalar(ElementType::S32, 0.0);
    let count = b.scalar(ElementType::S32, micro_batches as f64);
    let from = b.compare(m, zero, ComparisonDirection::Ge)?;
    let below = b.compare(m, count, ComparisonDirection::Lt)?;
    b.binary(BinaryOp::And, from, below)
}

/// The ring slot of micro-batch `m`: `m mod depth`, never negative.
fn slot(b: &mut Builder, m: InstrId, depth: i64) -> Result<InstrId, BuildError> {
    let d = b.scalar(ElementType::S32, depth as f64);
    let r = b.binary(BinaryOp::Remainder, m, d)?;
    let r = b.add2(r, d)?;
    b.binary(BinaryOp::Remainder, r, d)
}

/// The stage input kept for micro-batch `m` (`[rows, hidden]`).
fn read_slot(
    b: &mut Builder,
    stash: InstrId,
    m: InstrId,
    depth: i64,
    act: &[i64; 2],
) -> Result<InstrId, BuildError> {
    let s = slot(b, m, depth)?;
    let zero = b.scalar(ElementType::S32, 0.0);
    let one = b.add(
        Op::DynamicSlice {
            sizes: vec![1, act[0], act[1]],
        },
        &[stash, s, zero, zero],
        None,
    )?;
    b.reshape(one, act)
}

/// The ring with `x` kept in micro-batch `m`'s slot, when `m` is one of
/// the step's (otherwise the slot keeps what it held: a live micro-batch
/// may share it when the ring is shorter than the pipeline).
fn keep(
    b: &mut Builder,
    stash: InstrId,
    x: InstrId,
    m: InstrId,
    depth: i64,
    micro_batches: i64,
) -> Result<InstrId, BuildError> {
    let act = b.dims(x);
    let held = read_slot(b, stash, m, depth, &[act[0], act[1]])?;
    let valid = in_range(b, m, micro_batches)?;
    let valid = b.broadcast(valid, &act, &[])?;
    let value = b.select(valid, x, held)?;
    let value = b.reshape(value, &[1, act[0], act[1]])?;
    let s = slot(b, m, depth)?;
    let zero = b.scalar(ElementType::S32, 0.0);
    b.add(Op::DynamicUpdateSlice, &[stash, value, s, zero, zero], None)
}
