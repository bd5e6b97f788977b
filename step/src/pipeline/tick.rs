//! One tick of the pipeline schedule as a program: the slots of its phase
//! (see [`super::schedule`]) on every stage at once.
//!
//! Every rank runs the program; its stage (`replica-id / (tp * dp)`) and
//! the `tick` input say which micro-batch each slot takes, and a slot with
//! none computes on what its buffers hold and is weighed by zero.
//!
//! - **Forward slot:** the stage input is stage 0's embedding of `tokens`
//!   or the activation received from the stage before; the stage's layers
//!   run over it, the output is sent to the next stage ([`super::send`]),
//!   and the input and the activations the remat policy keeps
//!   ([`super::kept`]) go in rings for the backward slot.
//! - **Backward slot:** the kept input (stage 0: its embedding again, of
//!   `backward_tokens`) and the kept activations feed the gradient of
//!   `J = w_loss * loss + w_mid * sum(y * dy)`: on the last stage `loss`
//!   is the micro-batch's share of the step's mean loss over the final
//!   norm and LM head, elsewhere `dy` is the gradient received from the
//!   next stage, so `J`'s gradient is the vector-Jacobian product of the
//!   stage. What the policy recomputes (each layer's core attention under
//!   `core-attention`; the whole stage under `stage`) runs again from kept
//!   values. The parameters' gradients are added into the accumulators
//!   and the input's gradient sent to the stage before.
//!
//! Saved for the backward slot, per micro-batch in flight: the stage input
//! (`[tokens, hidden]`) and every activation the backward reads that the
//! policy does not recompute, each in its ring of
//! [`Schedule::stash_depth`] slots.

use super::kept::{forward_values, BackwardReads, KeptValue, LayerCall};
use super::ring;
use super::schedule::{Phase, Schedule};
use super::send::{Place, Sends};
use crate::grad_accum::{accumulator_specs, declare};
use crate::pipeline_form::PipelineForm;
use crate::train_step::{
    expert_outputs, spec, widen, Role, StageTimes, StateLayout, StepConfig, StepError, TensorSpec,
    TrainStep,
};
use crate::zero1::Zero1;
use hlatc_compiler::graph::autodiff::{self, GradHints};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use hlatc_compiler::{ElementType, InstrId, Op};
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, ExpertCounts, ForwardParts, MicroBatch, PartsContext};
use std::time::Instant;

/// Names of the buffers the tick programs carry.
pub const STASH: &str = "pipeline.kept_inputs";
pub const ACTIVATION: &str = "pipeline.activation_in";
pub const GRADIENT: &str = "pipeline.gradient_in";
/// The stem of each kept activation's ring (`pipeline.kept.7`).
pub const KEPT: &str = "pipeline.kept";

/// The program of `phase` for `cfg` in `form`: a stage's model over one
/// micro-batch (`cfg.batch`, the global micro-batch), `cfg.parallel` with
/// its stages. A program with a backward slot finds the activations its
/// forward slot keeps; one without (the warm-up) is `given` them, and one
/// with both checks what it finds against `given`. Returns the program and
/// what it keeps.
pub(crate) fn build_tick(
    cfg: &StepConfig,
    schedule: Schedule,
    phase: Phase,
    form: PipelineForm,
    given: Option<&[KeptValue]>,
) -> Result<(TrainStep, Vec<KeptValue>), StepError> {
    let t0 = Instant::now();
    let mut sig = TickSignature::of(cfg, schedule);
    let sends = Sends::new(cfg.parallel, form.send)?;
    let mut b = Builder::new(format!("pipeline_{}", phase.name()));
    let input = TickInputs::declare(&mut b, cfg, &sig)?;
    let context = PartsContext {
        batch: cfg.parallel.local_batch(cfg.batch),
        par: cfg.parallel,
        fault: cfg.fault,
        module_markers: cfg.module_markers,
        kernels: cfg.kernels.clone(),
        micro_batch: Some(MicroBatch {
            token_count: input.token_count,
            of: schedule.micro_batches,
        }),
    };
    let mut parts = ForwardParts::new(&mut b, &cfg.model, &input.params, context, None)?;
    let pos = Position::new(parts.builder(), cfg, schedule)?;
    let forward = match phase.forward() {
        true => Some(forward_slot(
            &mut parts, &pos, &input, &sig, schedule, &sends,
        )?),
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
    let (loss, kept, rings) = match &backward {
        None => {
            let kept = given.ok_or(StepError::KeptValuesUnknown)?.to_vec();
            let rings = declare_rings(&mut b, &mut sig, &kept, schedule);
            (b.scalar(compute, 0.0), kept, rings)
        }
        Some(slot) => {
            let done = backward_slot(&mut b, cfg, &pos, &input, slot, &hints, schedule, &sends)?;
            let reads = BackwardReads::of(&b, &slot.layers, form.remat);
            if let Some(place) = given.and_then(|g| first_difference(g, &reads.kept)) {
                return Err(StepError::StageLayersDiffer {
                    place,
                    value: String::new(),
                });
            }
            let rings = declare_rings(&mut b, &mut sig, &reads.kept, schedule);
            reads.redirect(&mut b, |b, k| {
                b.push_scope("backward_slot");
                let read = ring::read(
                    b,
                    rings[k],
                    slot.micro_batch,
                    sig.depth,
                    &reads.kept[k].dims,
                );
                b.pop_scope();
                read
            })?;
            results.extend(done.accumulators);
            outputs.extend(sig.accumulators.iter().cloned());
            results.push(done.sent);
            outputs.push(sig.buffers[2].clone());
            (done.loss, reads.kept, rings)
        }
    };
    results.insert(0, loss);
    if let Some(slot) = forward {
        let reference = backward.as_ref().map(|s| &s.layers);
        let values = forward_values(&b, &slot.layers, &kept, reference)?;
        results.extend([slot.kept_input, slot.sent]);
        outputs.extend([sig.buffers[0].clone(), sig.buffers[1].clone()]);
        b.push_scope("forward_slot");
        for ((&ring_in, &value), ring_spec) in rings.iter().zip(&values).zip(&sig.rings) {
            results.push(ring::keep(
                &mut b,
                ring_in,
                value,
                slot.micro_batch,
                sig.depth,
                schedule.micro_batches,
            )?);
            outputs.push(ring_spec.clone());
        }
        b.pop_scope();
        if let Some(counts) = slot.experts {
            results.extend([counts.routed, counts.dropped]);
            outputs.extend(expert_outputs(cfg));
        }
    }
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module(&format!("hlatc_pipeline_{}", phase.name()), root);
    module.input_output_alias = StateLayout::updated(&sig.inputs, &outputs).aliases();
    let times = StageTimes {
        forward: t1 - t0,
        autodiff: t1.elapsed(),
        optimizer: Default::default(),
        passes: Default::default(),
    };
    let step = TrainStep::built(module, cfg, (sig.inputs, outputs), times)?;
    Ok((step, kept))
}

/// The first place where two lists of kept values differ.
fn first_difference(a: &[KeptValue], b: &[KeptValue]) -> Option<usize> {
    if a == b {
        return None;
    }
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    Some(a.get(same).or(b.get(same)).map_or(same, |k| k.place))
}

/// Each kept value's ring, declared as an input after the others (every
/// tick program has the same inputs, so a runner feeds each tick alike).
fn declare_rings(
    b: &mut Builder,
    sig: &mut TickSignature,
    kept: &[KeptValue],
    schedule: Schedule,
) -> Vec<InstrId> {
    let depth = schedule.stash_depth();
    sig.rings = kept
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let mut dims = vec![depth];
            dims.extend_from_slice(&v.dims);
            spec(&format!("{KEPT}.{k}"), v.ty, &dims, Role::StageBuffer)
        })
        .collect();
    sig.inputs.extend(sig.rings.iter().cloned());
    declare(b, &sig.rings)
}

/// A tick program's inputs, the same for every phase (a runner feeds each
/// tick alike), and the shapes they follow from.
struct TickSignature {
    inputs: Vec<TensorSpec>,
    accumulators: Vec<TensorSpec>,
    /// The ring of kept inputs, the activation and the gradient received.
    buffers: [TensorSpec; 3],
    /// The rings of kept activations, once known.
    rings: Vec<TensorSpec>,
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
            rings: Vec::new(),
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
        // Under FSDP a stage's weights are stored in shards over its DP
        // replicas and gathered, in their stored type, before the slots
        // read them; the accumulators are the whole share, as under
        // gradient accumulation, and the apply step reduce-scatters them.
        let parameters = match cfg.parallel.shards_weights() {
            true => Zero1::new(b, cfg.parallel, cfg.fault)?.gather(
                b,
                &parameters,
                &param_specs(&cfg.model),
            )?,
            false => parameters,
        };
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

/// The forward slot: the micro-batch due, its stage input (stage 0's
/// embedding of `tokens` or the activation received) through the stage's
/// layers, the ring of inputs with it kept, and the output as the next
/// stage receives it.
struct Forward {
    micro_batch: InstrId,
    layers: LayerCall,
    kept_input: InstrId,
    sent: InstrId,
    /// A mixture of experts' routing of the micro-batch by every stage
    /// (each stage's layers counted on its ranks, pooled over its DP
    /// replicas, summed over the stages; zero when no micro-batch is due),
    /// as the step's outputs.
    experts: Option<ExpertCounts>,
}

fn forward_slot(
    parts: &mut ForwardParts,
    pos: &Position,
    input: &TickInputs,
    sig: &TickSignature,
    schedule: Schedule,
    sends: &Sends,
) -> Result<Forward, BuildError> {
    let b = parts.builder();
    b.push_scope("forward_slot");
    let first = b.broadcast(pos.first, &sig.act, &[])?;
    b.pop_scope();
    let embedded = parts.embed(input.tokens)?;
    let x = parts
        .builder()
        .select(first, embedded, input.activation_in)?;
    let layers = LayerCall::build(parts, x)?;
    let b = parts.builder();
    b.push_scope("forward_slot");
    let m = b.sub(input.tick, pos.stage)?;
    let kept_input = ring::keep(b, input.stash, x, m, sig.depth, schedule.micro_batches)?;
    let sent = sends.forward(b, &pos.place(), layers.output)?;
    b.pop_scope();
    let experts = match parts.counts_of(&layers.routing)? {
        Some(counts) => Some(over_stages(parts.builder(), counts, m, schedule, pos)?),
        None => None,
    };
    Ok(Forward {
        micro_batch: m,
        layers,
        kept_input,
        sent,
        experts,
    })
}

/// A stage's `counts` of micro-batch `m` summed over the stages, each
/// weighed by whether `m` is due (every rank of a stage holds the same
/// counts, so the sum over each group of twins is the model's).
fn over_stages(
    b: &mut Builder,
    counts: ExpertCounts,
    m: InstrId,
    schedule: Schedule,
    pos: &Position,
) -> Result<ExpertCounts, BuildError> {
    b.push_scope("expert_counts");
    let due = ring::in_range(b, m, schedule.micro_batches)?;
    let due = b.convert(due, ElementType::F32)?;
    let sum = |b: &mut Builder, x: InstrId| {
        let dims = b.dims(x);
        let w = b.broadcast(due, &dims, &[])?;
        let x = b.mul(x, w)?;
        b.all_reduce(x, BinaryOp::Add, &pos.twins)
    };
    let counts = ExpertCounts {
        routed: sum(b, counts.routed)?,
        dropped: sum(b, counts.dropped)?,
    };
    b.pop_scope();
    Ok(counts)
}

/// The backward slot's forward half: the micro-batch due, its kept input
/// (stage 0: its embedding again) through the stage's layers, and the
/// last stage's loss over it. What the backward reads of these layers is
/// then read from the rings instead, where the policy keeps it.
struct Recomputed {
    micro_batch: InstrId,
    kept: InstrId,
    layers: LayerCall,
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
    let kept = ring::read(b, input.stash, m, sig.depth, &sig.act)?;
    let first = b.broadcast(pos.first, &sig.act, &[])?;
    b.pop_scope();
    let embedded = parts.embed(input.backward_tokens)?;
    let x = parts.builder().select(first, embedded, kept)?;
    let layers = LayerCall::build(parts, x)?;
    let (loss, _) = parts.loss(layers.output, input.targets)?;
    Ok(Recomputed {
        micro_batch: m,
        kept,
        layers,
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
#[allow(clippy::too_many_arguments)]
fn backward_slot(
    b: &mut Builder,
    cfg: &StepConfig,
    pos: &Position,
    input: &TickInputs,
    slot: &Recomputed,
    hints: &GradHints,
    schedule: Schedule,
    sends: &Sends,
) -> Result<BackwardDone, StepError> {
    let (par, compute) = (cfg.parallel, cfg.precision.compute());
    b.push_scope("backward_slot");
    let valid = ring::in_range(b, slot.micro_batch, schedule.micro_batches)?;
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
    let dy = b.mul(slot.layers.output, input.gradient_in)?;
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
        _ => sends.backward(b, &pos.place(), dx[0])?,
    };
    let mine = b.mul(w_loss, slot.loss)?;
    let loss = b.all_reduce(mine, BinaryOp::Add, &pos.twins)?;
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
    /// The groups of twins, each rank's place in its stage on every
    /// stage: what a value summed over the stages is all-reduced over.
    twins: Collective,
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
        Ok(Position {
            stage,
            stages,
            last_index,
            first,
            last,
            twins: replica_groups(&par.pp_groups()),
        })
    }

    fn place(&self) -> Place {
        Place {
            stage: self.stage,
            first: self.first,
            last: self.last,
        }
    }
}
