//! One program run over every rank's state: what the trainer and the
//! pipeline's ticks both step with.

use crate::device_state::{self, Slot};
use crate::run_error::RunError;
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_runtime::{Arg, DeviceBuffer, ExecuteError, Program};
use hlatc_step::batch_check::check_batch_input;
use hlatc_step::data::Batch;
use hlatc_step::expert_tokens::ExpertTokens;
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::{output_with_role, Role, TensorSpec};

/// A program and its signature, as the runner reads them.
pub(crate) struct Stage<'a> {
    pub(crate) program: &'a Program,
    pub(crate) inputs: &'a [TensorSpec],
    pub(crate) outputs: &'a [TensorSpec],
    pub(crate) ranks: &'a RankInputs,
}

/// Runs `stage` on every rank: its batch inputs from `batch` (each rank its
/// rows), `token_count` where it takes one, its state inputs from `state`
/// by name (each rank's in the order of `held`), which its state outputs
/// update. A state input the output updating it aliases is donated, and
/// that output's buffer takes its slot; the others are lent. Returns rank
/// 0's other outputs on the host (every rank computes the same
/// statistics), `None` for the state's. Token ids must lie in the
/// vocabulary, targets too unless they are the ignore index, and segment
/// ids must be a packing; the first that is not is named (XLA would take
/// it silently), see [`hlatc_step::batch_check`]. A step refused before it ran
/// leaves the state as it was; one that failed on the devices says how
/// much of it went with it.
pub(crate) fn run_stage(
    stage: &Stage,
    state: &mut [Vec<Slot>],
    held: &[(&str, Role)],
    vocab_size: i64,
    batch: Option<&Batch>,
    given: &[(Role, &Literal)],
) -> Result<Vec<Option<Literal>>, Error> {
    let wants = |role: Role| stage.inputs.iter().any(|s| s.role == role);
    if let Some(b) = batch {
        if b.segment_ids.is_some() != wants(Role::SegmentIds) {
            return Err(RunError::PackedMismatch {
                compiled_packed: wants(Role::SegmentIds),
            }
            .into());
        }
        for spec in stage.inputs {
            if let Some(value) = b.for_role(spec.role) {
                check_batch_input(spec, value, vocab_size)?;
            }
        }
    }
    // Where each state input and output of the stage is in the state: by
    // name, so a micro step that reads the parameters and updates only the
    // accumulators finds both.
    let slot = |spec: &TensorSpec| state_slot(held, spec);
    // Where each input comes from, found once for every rank.
    let given_for = |role: Role| given.iter().find(|(r, _)| *r == role).map(|&(_, l)| l);
    let sources = stage
        .inputs
        .iter()
        .map(|s| match (s.role, batch.and_then(|b| b.for_role(s.role))) {
            (_, Some(l)) => Ok(Source::Batch(l)),
            (Role::Rank, _) => Ok(Source::Rank),
            (Role::TokenCount | Role::Tick | Role::BackwardTokens, _) => {
                given_for(s.role).map(Source::Batch).ok_or_else(|| {
                    RunError::MissingInput {
                        role: s.role,
                        input: s.name.clone(),
                    }
                    .into()
                })
            }
            _ => slot(s).map(Source::State).ok_or_else(|| {
                RunError::NoStateFor {
                    input: s.name.clone(),
                }
                .into()
            }),
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let updates: Vec<(usize, usize)> = stage
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.role.is_state())
        .map(|(o, spec)| {
            slot(spec)
                .map(|k| (o, k))
                .ok_or_else(|| RunError::UnknownOutput {
                    output: spec.name.clone(),
                })
        })
        .collect::<Result<_, _>>()?;
    // A state input is donated when the output aliasing it updates its
    // own slot: the step then writes the new value over the old in place.
    // Any other is lent, and an output aliasing it gets a buffer of its
    // own (what every slot would need, were the step to write one slot
    // over another's input).
    let donated: Vec<Option<usize>> = sources
        .iter()
        .enumerate()
        .map(|(i, source)| match source {
            Source::State(k) => stage
                .program
                .aliases()
                .iter()
                .any(|&(p, o)| p == i && updates.contains(&(o, *k)))
                .then_some(*k),
            _ => None,
        })
        .collect();
    // Every slot read must be there before any is taken.
    for rank in state.iter() {
        for (spec, source) in stage.inputs.iter().zip(&sources) {
            if let Source::State(k) = source {
                device_state::buffer(&rank[*k], &spec.name)?;
            }
        }
    }
    // What the step is given besides the state, on each rank's device:
    // made for this run alone, so the run may have them.
    let mut fresh = (0..state.len())
        .map(|rank| {
            stage
                .inputs
                .iter()
                .zip(&sources)
                .map(|(s, source)| {
                    let value = match source {
                        Source::Batch(l) => stage.ranks.take(s, l, rank as i64),
                        Source::Rank => RankInputs::rank_value(rank as i64),
                        Source::State(_) => return Ok(None),
                    };
                    Ok(Some(stage.program.to_device(&value, rank)?))
                })
                .collect::<Result<Vec<_>, Error>>()
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let mut taken: Vec<Vec<Slot>> = state
        .iter_mut()
        .map(|rank| {
            donated
                .iter()
                .map(|k| k.and_then(|k| rank[k].take()))
                .collect()
        })
        .collect();
    let run = {
        let args: Vec<Vec<Arg<'_>>> = state
            .iter()
            .zip(&mut fresh)
            .zip(&mut taken)
            .map(|((rank, fresh), taken)| {
                sources
                    .iter()
                    .enumerate()
                    .map(
                        |(i, source)| match (fresh[i].take(), taken[i].take(), source) {
                            (Some(b), _, _) | (None, Some(b), _) => Arg::Donated(b),
                            (None, None, Source::State(k)) => {
                                Arg::Lent(rank[*k].as_ref().expect("checked above"))
                            }
                            (None, None, _) => unreachable!("every other input was made above"),
                        },
                    )
                    .collect()
            })
            .collect();
        match stage.program.execute(args) {
            Ok(outputs) => Ok(outputs),
            Err(ExecuteError::Refused { error, args }) => {
                // Nothing ran: the donated slots go back where they were.
                let back: Vec<Vec<Slot>> = args
                    .into_iter()
                    .map(|list| {
                        list.into_iter()
                            .map(|a| match a {
                                Arg::Donated(b) => Some(b),
                                Arg::Lent(_) => None,
                            })
                            .collect()
                    })
                    .collect();
                Err((error, Some(back)))
            }
            Err(ExecuteError::Failed(error)) => Err((error, None)),
        }
    };
    let outputs = match run {
        Ok(outputs) => outputs,
        Err((error, Some(back))) => {
            for (rank, list) in state.iter_mut().zip(back) {
                for (b, k) in list.into_iter().zip(&donated) {
                    if let (Some(b), Some(k)) = (b, k) {
                        rank[*k] = Some(b);
                    }
                }
            }
            return Err(error.into());
        }
        Err((source, None)) => {
            let lost = donated.iter().flatten().count() * state.len();
            return Err(RunError::StepFailed { lost, source }.into());
        }
    };
    let mut first = None;
    for (rank, out) in outputs.into_iter().enumerate() {
        if out.len() != stage.outputs.len() {
            return Err(RunError::FewerOutputs.into());
        }
        let mut out: Vec<Slot> = out.into_iter().map(Some).collect();
        for &(o, k) in &updates {
            state[rank][k] = out[o].take();
        }
        if first.is_none() {
            first = Some(
                out.iter()
                    .map(|b| b.as_ref().map(DeviceBuffer::to_literal).transpose())
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
    }
    first.ok_or_else(|| RunError::NoRanks.into())
}

/// Where a stage's input comes from: the batch or a value given for the
/// step (each rank its part), or the state (its index).
enum Source<'a> {
    Batch(&'a Literal),
    /// The rank's own number.
    Rank,
    State(usize),
}

/// Index of the state input named and roled as `spec` among `held`.
fn state_slot(held: &[(&str, Role)], spec: &TensorSpec) -> Option<usize> {
    held.iter()
        .position(|&(name, role)| name == spec.name && role == spec.role)
}

/// The statistic with `role` among a stage's outputs.
pub(crate) fn scalar(
    outputs: &[TensorSpec],
    values: &[Option<Literal>],
    role: Role,
) -> Result<f64, Error> {
    output_with_role(outputs, role)
        .and_then(|i| values.get(i)?.as_ref())
        .map(|l| l.to_f64_vec()[0])
        .ok_or_else(|| RunError::NoOutput { role }.into())
}

/// A mixture of experts' routing over a step, from its outputs (`None`
/// for a dense model's step).
pub(crate) fn expert_tokens(
    outputs: &[TensorSpec],
    values: &[Option<Literal>],
) -> Option<ExpertTokens> {
    let value = |role| output_with_role(outputs, role).and_then(|i| values.get(i)?.as_ref());
    Some(ExpertTokens {
        routed: value(Role::ExpertTokens)?.to_f64_vec(),
        dropped: value(Role::DroppedTokens)?.to_f64_vec()[0],
    })
}

/// Micro-batch `j` of `k` of `batch`, as a global batch: each of the `dp`
/// replicas' runs of rows contributes its `j`-th `k`-th, so the micro
/// step's ranks take, of it, their replica's rows of micro-batch `j`.
pub(crate) fn micro_batch(batch: &Batch, j: i64, k: i64, dp: i64) -> Batch {
    let part = |l: &Literal| micro_rows(l, Some(j), k, dp);
    Batch {
        tokens: part(&batch.tokens),
        targets: part(&batch.targets),
        segment_ids: batch.segment_ids.as_ref().map(part),
    }
}

/// [`micro_batch`]'s rows of one tensor `l`; for `None`, zeros of their
/// shape, what a pipeline's tick without a micro-batch takes.
pub(crate) fn micro_rows(l: &Literal, j: Option<i64>, k: i64, dp: i64) -> Literal {
    let rows = l.dims()[0];
    let per_replica = rows / dp;
    let micro = per_replica / k;
    let mut dims = l.dims().to_vec();
    dims[0] = dp * micro;
    let Some(j) = j else {
        return Literal::zeros(l.ty(), dims);
    };
    let row_bytes = l.bytes().len() / rows.max(1) as usize;
    let mut bytes = Vec::with_capacity((dp * micro) as usize * row_bytes);
    for d in 0..dp {
        let a = (d * per_replica + j * micro) as usize * row_bytes;
        bytes.extend_from_slice(&l.bytes()[a..a + micro as usize * row_bytes]);
    }
    Literal::from_bytes(l.ty(), dims, bytes).expect("whole rows")
}
