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
use hlatc_compiler::graph::autodiff::{self, GradHints};
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
    let sig = TickSignature::of(cfg, schedule);
    let mut b = Builder::new(format!("pipeline_{}", phase.name()));
    let input = TickInputs::declare(&mut b, cfg, &sig)?;
    let context = PartsContext {
        batch: cfg.parallel.local_batch(cfg.batch),
        par: cfg.parallel,
        fault: cfg.fault,
        module_markers: cfg.module_markers,
        token_count: Some(input.token_count),
    };
    let mut parts = ForwardParts::new(&mut b, &cfg.model, &input.params, context, None)?;
    let pos = Position::new(parts.builder(), cfg, schedule)?;
    let forward = match phase.forward() {
        true => Some(forward_slot(&mut parts, &pos, &input, &sig, schedule)?),
        false => None,
    };
    let backward = match phase.backward() {
        true => Some(recompute_for_backward(&mut parts, &pos, &input, &sig)?),
        false => None,
    };
    let hints = parts.into_hints();
    let t1 = Instant::now();

    let compute = cfg.precision.compute();
    let mut results = Vec::new();
    let mut outputs = vec![spec("loss", compute, &[], Role::Loss)];
    let loss = match backward {
        None => b.scalar(compute, 0.0),
        Some(slot) => {
            let done = backward_slot(&mut b, cfg, &pos, &input, slot, &hints, schedule)?;
            results.extend(done.accumulators);
            outputs.extend(sig.accumulators.iter().cloned());
            results.push(done.sent);
            outputs.push(sig.buffers[2].clone());
            done.loss
        }
    };
    results.insert(0, loss);
    if let Some((kept, sent)) = forward {
        results.extend([kept, sent]);
        outputs.extend([sig.buffers[0].clone(), sig.buffers[1].clone()]);
    }
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module(&format!("hlatc_pipeline_{}", phase.name()), root);
    module.input_output_alias = StateLayout::updated(&sig.inputs, &outputs).aliases();
    let times = StageTimes {
        forward: t1 - t0,
        autodiff: t1.elapsed(),
        optimizer: Default::default(),
    };
    TrainStep::built(module, cfg, (sig.inputs, outputs), times)
}

/// A tick program's inputs, the same for every phase (a runner feeds each
/// tick alike), and the shapes they follow from.
struct TickSignature {
    inputs: Vec<TensorSpec>,
    accumulators: Vec<TensorSpec>,
    /// The ring of kept inputs, the activation and the gradient received.
    buffers: [TensorSpec; 3],
    /// `[rows, hidden]` of a stage's input on a rank (its run of the rows
    /// under sequence parallelism).
    act: [i64; 2],
    depth: i64,
}

impl TickSignature {
    fn of(cfg: &StepConfig, schedule: Schedule) -> Self {
        let par = cfg.parallel;
        let compute = cfg.precision.compute();
        let specs = param_specs(&cfg.model);
        let accumulators = accumulator_specs(cfg, &specs);
        let batch = par.local_batch(cfg.batch);
        let bd = [batch.batch_size, batch.seq_len];
        let sp = if par.sequence_parallel { par.tp } else { 1 };
        let act = [batch.batch_size * batch.seq_len / sp, cfg.model.hidden_size];
        let depth = schedule.stash_depth();
        let mut inputs: Vec<TensorSpec> = crate::train_step::state_specs(cfg, &specs)
            .into_iter()
            .filter(|s| s.role == Role::Parameter)
            .collect();
        inputs.extend(accumulators.iter().cloned());
        let s32 = ElementType::S32;
        inputs.push(spec("token_count", s32, &[], Role::TokenCount));
        inputs.push(spec("tick", s32, &[], Role::Tick));
        inputs.push(spec("tokens", s32, &bd, Role::Tokens));
        inputs.push(spec(BACKWARD_TOKENS, s32, &bd, Role::BackwardTokens));
        inputs.push(spec("targets", s32, &bd, Role::Targets));
        let buffers = [
            spec(STASH, compute, &[depth, act[0], act[1]], Role::StageBuffer),
            spec(ACTIVATION, compute, &act, Role::StageBuffer),
            spec(GRADIENT, compute, &act, Role::StageBuffer),
        ];
        inputs.extend(buffers.iter().cloned());
        TickSignature {
            inputs,
            accumulators,
            buffers,
            act,
            depth,
        }
    }
}

/// The name of the tokens stage 0's backward slot embeds again.
const BACKWARD_TOKENS: &str = "backward_tokens";

/// A tick program's inputs as declared, the parameters widened for
/// computing.
struct TickInputs {
    params: Vec<InstrId>,
    accumulators: Vec<InstrId>,
    token_count: InstrId,
    tick: InstrId,
    tokens: InstrId,
    backward_tokens: InstrId,
    targets: InstrId,
    stash: InstrId,
    activation_in: InstrId,
    gradient_in: InstrId,
}

impl TickInputs {
    fn declare(b: &mut Builder, cfg: &StepConfig, sig: &TickSignature) -> Result<Self, BuildError> {
        let stored = declare(b, &sig.inputs);
        let at = |name: &str| {
            sig.inputs
                .iter()
                .position(|s| s.name == name)
                .map(|i| stored[i])
                .expect("declared above")
        };
        let parameters: Vec<InstrId> = sig
            .inputs
            .iter()
            .zip(&stored)
            .filter(|(s, _)| s.role == Role::Parameter)
            .map(|(_, &id)| id)
            .collect();
        Ok(TickInputs {
            params: widen(b, &parameters, cfg.precision.compute())?,
            accumulators: sig.accumulators.iter().map(|s| at(&s.name)).collect(),
            token_count: at("token_count"),
            tick: at("tick"),
            tokens: at("tokens"),
            backward_tokens: at(BACKWARD_TOKENS),
            targets: at("targets"),
            stash: at(STASH),
            activation_in: at(ACTIVATION),
            gradient_in: at(GRADIENT),
        })
    }
}

/// The forward slot: stage 0's embedding of `tokens` or the activation
/// received, through the stage's layers; returns the ring with the input
/// kept, and the output as the next stage receives it.
fn forward_slot(
    parts: &mut ForwardParts,
    pos: &Position,
    input: &TickInputs,
    sig: &TickSignature,
    schedule: Schedule,
) -> Result<(InstrId, InstrId), BuildError> {
    let b = parts.builder();
    b.push_scope("forward_slot");
    let first = b.broadcast(pos.first, &sig.act, &[])?;
    b.pop_scope();
    let embedded = parts.embed(input.tokens)?;
    let x = parts
        .builder()
        .select(first, embedded, input.activation_in)?;
    let y = parts.layers(x)?;
    let b = parts.builder();
    b.push_scope("forward_slot");
    let m = b.sub(input.tick, pos.stage)?;
    let kept = keep(b, input.stash, x, m, sig.depth, schedule.micro_batches)?;
    let sent = permute(b, y, &pos.forward_pairs)?;
    b.pop_scope();
    Ok((kept, sent))
}

/// The backward slot's forward half: the micro-batch due, its kept input
/// (stage 0: its embedding again) through the stage's layers, and the
/// last stage's loss over it.
struct Recomputed {
    micro_batch: InstrId,
    kept: InstrId,
    output: InstrId,
    loss: InstrId,
}

fn recompute_for_backward(
    parts: &mut ForwardParts,
    pos: &Position,
    input: &TickInputs,
    sig: &TickSignature,
) -> Result<Recomputed, BuildError> {
    let b = parts.builder();
    b.push_scope("backward_slot");
    let delay = b.sub(pos.last_index, pos.stage)?;
    let delay = b.add2(delay, pos.stages)?;
    let m = b.sub(input.tick, delay)?;
    let kept = read_slot(b, input.stash, m, sig.depth, &sig.act)?;
    let first = b.broadcast(pos.first, &sig.act, &[])?;
    b.pop_scope();
    let embedded = parts.embed(input.backward_tokens)?;
    let x = parts.builder().select(first, embedded, kept)?;
    let output = parts.layers(x)?;
    let (loss, _) = parts.loss(output, input.targets)?;
    Ok(Recomputed {
        micro_batch: m,
        kept,
        output,
        loss,
    })
}

/// What the backward slot returns: the accumulators with the stage's
/// gradients added, the input's gradient as the stage before receives it,
/// and the micro-batch's share of the loss on every rank.
struct BackwardDone {
    accumulators: Vec<InstrId>,
    sent: InstrId,
    loss: InstrId,
}

/// The backward slot's backward half: autodiff of `J = w_loss * loss +
/// w_mid * sum(y * dy)` (the module doc says why), weighed by zero when no
/// micro-batch is due.
fn backward_slot(
    b: &mut Builder,
    cfg: &StepConfig,
    pos: &Position,
    input: &TickInputs,
    slot: Recomputed,
    hints: &GradHints,
    schedule: Schedule,
) -> Result<BackwardDone, StepError> {
    let (par, compute) = (cfg.parallel, cfg.precision.compute());
    b.push_scope("backward_slot");
    let valid = in_range(b, slot.micro_batch, schedule.micro_batches)?;
    let on_last = b.binary(BinaryOp::And, valid, pos.last)?;
    let not_last = b.unary(UnaryOp::Not, pos.last)?;
    let on_mid = b.binary(BinaryOp::And, valid, not_last)?;
    let w_loss = b.convert(on_last, compute)?;
    let w_mid = b.convert(on_mid, compute)?;
    // Every rank of the last stage holds the loss: each takes its share of
    // the gradient, as a step of one stage does.
    let copies = match cfg.fault {
        Some(Fault::GradientSummedNotAveraged) => par.tp,
        _ => par.stage_world(),
    };
    let scaled = b.scale(slot.loss, 1.0 / copies as f64)?;
    let from_loss = b.mul(w_loss, scaled)?;
    let dy = b.mul(slot.output, input.gradient_in)?;
    let dy = b.reduce_sum(dy, &[0, 1])?;
    let from_next = b.mul(w_mid, dy)?;
    let objective = b.add2(from_loss, from_next)?;
    b.pop_scope();
    let mut wrt = input.params.clone();
    wrt.push(slot.kept);
    let grads = autodiff::grad(b, objective, &wrt, hints)?;
    let (param_grads, dx) = grads.split_at(input.params.len());
    b.push_scope("grad_accumulate");
    let widened = widen(b, param_grads, cfg.precision.gradient_sum_type())?;
    let accumulators = input
        .accumulators
        .iter()
        .zip(&widened)
        .map(|(&acc, &g)| b.add2(acc, g))
        .collect::<Result<Vec<_>, _>>()?;
    b.pop_scope();
    b.push_scope("backward_slot");
    let sent = match cfg.fault {
        Some(Fault::StageGradientDropped) => b.full_like(dx[0], 0.0)?,
        _ => permute(b, dx[0], &pos.backward_pairs)?,
    };
    let mine = b.mul(w_loss, slot.loss)?;
    let loss = b.all_reduce(mine, BinaryOp::Add, &replica_groups(&par.pp_groups()))?;
    b.pop_scope();
    Ok(BackwardDone {
        accumulators,
        sent,
        loss,
    })
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
