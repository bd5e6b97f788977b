//! Checks only XLA CPU needs. The verifier accepts any custom-call target
//! (neuronx-cc has its own), but XLA CPU implements a few targets itself and
//! trusts their operands blindly: a wrong operand count or shape there
//! aborts the process instead of returning an error. Those are checked, or
//! refused, here before the module reaches the plugin. So are the ops the
//! fuzzer found XLA CPU aborting on for valid modules of sub-byte integers,
//! and dynamic dimensions at the entry's boundary.
//!
//! A module of several replicas (`replica_count` N above 1, one partition)
//! has its collectives checked against N: every replica group names
//! replicas below N, each once; all-gather, reduce-scatter and all-to-all
//! split by the group size; permutes name replicas below N and carry no
//! channel (which would make them permute partitions, and XLA CPU
//! aborts); and no collective sits in a loop or a conditional, where
//! replicas could reach it a different number of times and XLA CPU exits
//! the process once they have waited on one another past its timeout.
//!
//! A module of N partitions of one replica (the partition form, whose
//! entry is manually sharded) is checked the same way against N, except
//! that every collective must carry a channel: without one it would
//! exchange between replicas, of which there is one.

use super::xla_cpu_flags::Emitters;
use hlatc_compiler::ir::op::AsyncStep;
use hlatc_compiler::ir::shape::minifloat::Format;
use hlatc_compiler::{Computation, ComputationId, ElementType, InstrId, Module, Op, Opcode, Shape};
use std::collections::BTreeSet;

mod custom_calls;
mod unsupported;

use custom_calls::check_target;
pub use custom_calls::CustomCallError;
pub use unsupported::Unsupported;

/// Where a module breaks an XLA CPU contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("computation '{computation}', instruction '{instruction}': {reason}")]
pub struct PreflightError {
    pub computation: String,
    pub instruction: String,
    pub reason: Refusal,
}

/// Which contract an instruction breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// What XLA CPU aborts or hangs on for a valid module, with why.
    /// Boxed, as the custom calls' errors are.
    #[error(transparent)]
    Unsupported(Box<Unsupported>),
    /// A call to a target XLA CPU implements, with operands it would trust
    /// blindly. Boxed: the runtime's errors carry it on every path.
    #[error(transparent)]
    CustomCall(Box<CustomCallError>),
}

/// Checks every custom call in `module` against XLA CPU's own targets,
/// and refuses what XLA CPU would abort or hang on.
///
/// The module runs on `module.devices.replica_count` replicas of one
/// partition (what the runtime compiles); on one, the checks are those of a
/// one-device run. `emitters` are the code generator XLA CPU compiles it
/// with ([`Emitters::of_process`] for the runtime's own compiles).
pub fn check(module: &Module, emitters: Emitters) -> Result<(), PreflightError> {
    let counts = module.devices;
    let partitioned = counts.replica_count == 1 && counts.num_partitions > 1;
    let replicas = counts
        .replica_count
        .saturating_mul(counts.num_partitions.max(1));
    let one_device = replicas == 1;
    static_at_the_boundary(module)?;
    async_start_in_a_loop(module)?;
    let in_control_flow = if one_device {
        Default::default()
    } else {
        under_control_flow(module)
    };
    for (i, c) in module.computations.iter().enumerate() {
        let controlled = in_control_flow.contains(&ComputationId::new(i));
        for id in c.ids() {
            let instr = c.instr(id);
            if let Some(unsupported) = aborts_xla_cpu(&instr.op, &instr.shape, one_device)
                .or_else(|| aborts_legacy_emitters(&instr.op, &instr.shape, emitters))
                .or_else(|| waits_forever(&instr.op))
                .or_else(|| mishandled_contraction_types(c, id))
                .or_else(|| one_device.then(|| leaves_unwritten(c, id)).flatten())
                .or_else(|| {
                    (!one_device)
                        .then(|| misfits_replicas(c, id, replicas, partitioned, controlled))
                        .flatten()
                })
            {
                return Err(PreflightError {
                    computation: c.name.clone(),
                    instruction: instr.name.clone(),
                    reason: Refusal::Unsupported(Box::new(unsupported)),
                });
            }
            let Op::CustomCall(call) = &instr.op else {
                continue;
            };
            let operands: Vec<&Shape> = c
                .operands(id)
                .into_iter()
                .map(|o| &c.instr(o).shape)
                .collect();
            check_target(call, &operands, &instr.shape).map_err(|e| PreflightError {
                computation: c.name.clone(),
                instruction: instr.name.clone(),
                reason: Refusal::CustomCall(Box::new(e)),
            })?;
        }
    }
    Ok(())
}

/// XLA CPU passes a dynamic array with its run-time sizes after the data,
/// so a buffer of the bound's size aborts it ("Size mismatch on param 0");
/// hlatc's runtime passes and reads plain arrays only. Dynamic dimensions
/// inside the module run (XLA pads them to their bounds). Part of
/// [`check`]; the runtime also asks it alone, before it sizes a run.
pub fn static_at_the_boundary(module: &Module) -> Result<(), PreflightError> {
    let e = module.entry();
    let root = e.root().map(|r| (r, "the result"));
    let params = e.parameters().into_iter().map(|p| (p, "a parameter"));
    for (id, what) in params.chain(root) {
        let instr = e.instr(id);
        if !instr.shape.is_static() {
            return Err(PreflightError {
                computation: e.name.clone(),
                instruction: instr.name.clone(),
                reason: Refusal::Unsupported(Box::new(Unsupported::DynamicAtTheBoundary {
                    what,
                    shape: instr.shape.clone(),
                })),
            });
        }
    }
    Ok(())
}

/// An `async-start` in a loop's body or condition, or in anything they
/// call: XLA CPU's loop-invariant code motion hoists one whose operands the
/// loop does not change and aborts ("Check failed: prev->opcode() ==
/// HloOpcode::kAsyncUpdate", XLA's test 00542). XLA CPU compiles no async
/// op anyway; the runtime makes each chain a call first (`async-to-sync`),
/// so what is left here is a start whose bundle something else reads.
fn async_start_in_a_loop(module: &Module) -> Result<(), PreflightError> {
    for id in reached_from(module, |op| matches!(op, Op::While { .. })) {
        let c = module.computation(id);
        for id in c.ids() {
            if let Op::Async {
                step: AsyncStep::Start,
                ..
            } = c.instr(id).op
            {
                return Err(PreflightError {
                    computation: c.name.clone(),
                    instruction: c.instr(id).name.clone(),
                    reason: Refusal::Unsupported(Box::new(Unsupported::AsyncStartInALoop)),
                });
            }
        }
    }
    Ok(())
}

/// A dot or convolution whose written type XLA's verifier takes but XLA CPU
/// mishandles (both found by the fuzzer once dots took any result type):
/// - two 8-bit float formats of the same exponent and mantissa widths
///   among its types (`f8e5m2` and `f8e5m2fnuz`, say): XLA CPU cannot tell
///   which is the more precise and aborts ("Check failed: a == b (19 vs.
///   24)" in primitive_util.h);
/// - complex operands into a real or integer type, which XLA CPU writes
///   as garbage (a `pred` byte of 254); `convert` refuses that narrowing.
fn mishandled_contraction_types(c: &Computation, id: InstrId) -> Option<Unsupported> {
    let instr = c.instr(id);
    if !matches!(instr.op, Op::Dot { .. } | Op::Convolution { .. }) {
        return None;
    }
    let mut types: Vec<ElementType> = c
        .operands(id)
        .into_iter()
        .filter_map(|o| c.instr(o).shape.as_array().map(|a| a.ty))
        .collect();
    let result = instr.shape.as_array().map(|a| a.ty);
    if let Some(r) = result.filter(|r| !r.is_complex()) {
        if let Some(&z) = types.iter().find(|t| t.is_complex()) {
            return Some(Unsupported::ComplexIntoReal {
                opcode: Opcode::of(&instr.op),
                operand: z,
                result: r,
            });
        }
    }
    types.extend(result);
    let widths = |t: ElementType| Format::of(t).map(|f| (f.exponent, f.mantissa));
    for (i, &a) in types.iter().enumerate() {
        for &b in &types[i + 1..] {
            if a != b && widths(a).is_some() && widths(a) == widths(b) {
                return Some(Unsupported::UnorderedFloat8 {
                    opcode: Opcode::of(&instr.op),
                    a,
                    b,
                });
            }
        }
    }
    None
}

/// An all-gather that grows its dimension on a one-device run: XLA CPU
/// gathers the one shard there is and leaves the rest of the result
/// unwritten, whatever memory held (XLA's tests 01605 and 06592 gave other
/// values run to run).
fn leaves_unwritten(c: &Computation, id: InstrId) -> Option<Unsupported> {
    let (Op::AllGather { dimension, .. } | Op::AllGatherStart { dimension, .. }) = &c.instr(id).op
    else {
        return None;
    };
    let gathered = c
        .operands(id)
        .first()
        .map(|&o| &c.instr(o).shape)?
        .as_array()?;
    let result = match &c.instr(id).shape {
        Shape::Tuple(t) => t.last()?.as_array()?,
        s => s.as_array()?,
    };
    let d = usize::try_from(*dimension).ok()?;
    let (from, to) = (*gathered.dims.get(d)?, *result.dims.get(d)?);
    (from != to).then_some(Unsupported::GatherLeavesUnwritten {
        from,
        to,
        dimension: d,
    })
}

/// The computations a `while` or `conditional` runs, and all they call.
fn under_control_flow(module: &Module) -> BTreeSet<ComputationId> {
    reached_from(module, |op| {
        matches!(op, Op::While { .. } | Op::Conditional { .. })
    })
}

/// The computations the ops `starts` picks call, and all those call in
/// turn, in the order of their ids.
fn reached_from(module: &Module, starts: impl Fn(&Op) -> bool) -> BTreeSet<ComputationId> {
    let mut todo: Vec<ComputationId> = module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
        .filter(|op| starts(op))
        .flat_map(Op::called_computations)
        .collect();
    let mut seen = BTreeSet::new();
    while let Some(id) = todo.pop() {
        let Some(c) = module.get_computation(id) else {
            continue;
        };
        if seen.insert(id) {
            todo.extend(c.ids().flat_map(|i| c.instr(i).op.called_computations()));
        }
    }
    seen
}

/// Where a collective of a module of `replicas` (above 1) replicas of one
/// partition names replicas it does not have, splits by other than its
/// group size, permutes partitions, or sits in control flow (`controlled`).
/// XLA's verifier refuses most of these itself, but only after the plugin
/// has printed its stack; a permute with a channel aborts the process.
fn misfits_replicas(
    c: &Computation,
    id: InstrId,
    replicas: i64,
    partitioned: bool,
    controlled: bool,
) -> Option<Unsupported> {
    let op = &c.instr(id).op;
    if !op.is_collective() {
        return None;
    }
    let opcode = Opcode::of(op);
    if controlled {
        return Some(Unsupported::CollectiveInControlFlow { opcode, replicas });
    }
    let channel = match op {
        Op::CollectivePermute { channel_id, .. }
        | Op::CollectivePermuteStart { channel_id, .. } => channel_id.is_some(),
        _ => op.collective().is_some_and(|c| c.channel_id.is_some()),
    };
    if partitioned && !channel {
        return Some(Unsupported::NoChannelAmongPartitions { opcode, replicas });
    }
    if let Op::CollectivePermute { pairs, .. } | Op::CollectivePermuteStart { pairs, .. } = op {
        return misfit_permute(opcode, channel && !partitioned, pairs, replicas);
    }
    let collective = op.collective()?;
    if !partitioned
        && collective.channel_id.is_some()
        && matches!(
            op,
            Op::AllToAll { .. } | Op::RaggedAllToAll { .. } | Op::CollectiveBroadcast { .. }
        )
    {
        return Some(Unsupported::ChannelAmongReplicas { opcode, replicas });
    }
    let groups = collective.replica_groups.expanded();
    let group_size = groups.first().map_or(replicas, |g| g.len() as i64);
    if let Some(misfit) = misfit_groups(groups, replicas) {
        return Some(misfit);
    }
    misfit_group_shapes(c, id, group_size)
}

/// A permute between partitions (a channel), or naming a replica the
/// module does not have.
fn misfit_permute(
    opcode: Opcode,
    has_channel: bool,
    pairs: &[(i64, i64)],
    replicas: i64,
) -> Option<Unsupported> {
    if has_channel {
        return Some(Unsupported::PermutesPartitions { opcode, replicas });
    }
    let beyond = pairs
        .iter()
        .flat_map(|&(s, t)| [s, t])
        .find(|&r| !(0..replicas).contains(&r));
    beyond.map(|replica| Unsupported::PermuteBeyondReplicas { replica, replicas })
}

/// Explicit groups that do not hold each of the module's replicas once
/// (no groups at all is one group of every replica).
fn misfit_groups(groups: Vec<Vec<i64>>, replicas: i64) -> Option<Unsupported> {
    if groups.is_empty() {
        return None;
    }
    let mut ids: Vec<i64> = groups.iter().flatten().copied().collect();
    ids.sort_unstable();
    if ids.iter().copied().eq(0..replicas) {
        return None;
    }
    Some(Unsupported::MisfitGroups {
        beyond: ids.iter().copied().find(|r| !(0..replicas).contains(r)),
        held: ids.len(),
        groups,
        replicas,
    })
}

/// A gather, scatter or all-to-all whose shapes do not change by its
/// group size where they must.
fn misfit_group_shapes(c: &Computation, id: InstrId, group_size: i64) -> Option<Unsupported> {
    let instr = c.instr(id);
    let op = &instr.op;
    let operands: Vec<&Shape> = c
        .operands(id)
        .into_iter()
        .map(|o| &c.instr(o).shape)
        .collect();
    match op {
        Op::AllGather { dimension, .. }
        | Op::AllGatherStart { dimension, .. }
        | Op::ReduceScatter { dimension, .. } => {
            let results = match (op, &instr.shape) {
                (Op::AllGatherStart { .. }, Shape::Tuple(t)) => t.last()?,
                (_, s) => s,
            };
            let results: Vec<&Shape> = match results {
                Shape::Tuple(t) => t.iter().collect(),
                s => vec![s],
            };
            let grow = !matches!(op, Op::ReduceScatter { .. });
            let d = usize::try_from(*dimension).ok()?;
            for (x, r) in operands.iter().zip(results) {
                let (x, r) = (x.as_array()?, r.as_array()?);
                let (from, to) = (*x.dims.get(d)?, *r.dims.get(d)?);
                let (small, big) = if grow { (from, to) } else { (to, from) };
                if small.checked_mul(group_size) != Some(big) {
                    return Some(Unsupported::GroupFactor {
                        opcode: Opcode::of(op),
                        how: if grow { "gathers" } else { "scatters" },
                        operand: x.clone(),
                        result: r.clone(),
                        dimension: d,
                        group_size,
                    });
                }
            }
            None
        }
        Op::AllToAll {
            dimension: Some(d), ..
        } => {
            let x = operands.first()?.as_array()?;
            let size = *x.dims.get(usize::try_from(*d).ok()?)?;
            (size % group_size != 0).then(|| Unsupported::AllToAllSplit {
                dimension: *d,
                operand: x.clone(),
                group_size,
                size,
            })
        }
        Op::AllToAll {
            dimension: None, ..
        } => (operands.len() as i64 != group_size).then_some(Unsupported::AllToAllOperands {
            operands: operands.len(),
            group_size,
        }),
        _ => None,
    }
}

/// What XLA CPU would wait on forever: hlatc's runtime is no host side for
/// `infeed` and `outfeed`, so nothing would ever fill or drain them.
fn waits_forever(op: &Op) -> Option<Unsupported> {
    matches!(op, Op::Infeed { .. } | Op::Outfeed { .. }).then(|| Unsupported::NoHostSide {
        opcode: Opcode::of(op),
    })
}

/// Valid HLO that XLA CPU aborts on (found by `runtime/tests/fuzz_xla`,
/// with the plugin `scripts/fetch-xla-cpu-plugin.sh` installs):
/// - its fast concatenate cannot address 2-bit elements (`ir_array.cc`:
///   "Check failed: bit_offset != nullptr"); 4-bit ones work;
/// - a transpose of 2- or 4-bit elements that a tuple reads throws a C++
///   exception out of the plugin. Read by an elementwise op it works, but
///   which readers are safe is not known, so every such transpose is
///   refused;
/// - so does a scatter into 2- or 4-bit elements that a tuple reads (an
///   `s4[2,4]` scatter returned beside its operand), and a gather of them
///   whose slices land before its batch dimensions (XLA CPU transposes
///   them there); both are refused the same way. A gather whose slices
///   trail, as an embedding lookup's do, runs;
/// - an in-place collective-permute (`slice_sizes`) crashes it with a
///   segfault, even on one device;
/// - a collective-permute in which device 0, the one it runs, receives
///   from another device throws a C++ exception out of the plugin (XLA's
///   test 04808; sending to a missing device gives zeros and runs).
fn aborts_xla_cpu(op: &Op, result: &Shape, one_device: bool) -> Option<Unsupported> {
    if let Op::CollectivePermute {
        slice_sizes, pairs, ..
    }
    | Op::CollectivePermuteStart {
        slice_sizes, pairs, ..
    } = op
    {
        if !slice_sizes.is_empty() {
            return Some(Unsupported::InPlacePermute);
        }
        if let Some(&(sender, _)) = pairs.iter().find(|&&(s, t)| one_device && t == 0 && s != 0) {
            return Some(Unsupported::ReceivesFromMissingDevice { sender });
        }
    }
    let Shape::Array(a) = result else {
        return None;
    };
    let (what, width) = match op {
        Op::Concatenate { .. } if a.ty.bit_width() == 2 => ("concatenating", "2-bit"),
        Op::Transpose { .. } if a.ty.bit_width() < 8 => ("transposing", "sub-byte"),
        Op::Scatter { .. } if a.ty.bit_width() < 8 => ("scattering into", "sub-byte"),
        // Slices gathered to other than the last dimensions are moved
        // there by a transpose inside XLA CPU, which aborts as above.
        Op::Gather { dims, .. }
            if a.ty.bit_width() < 8 && !offsets_trail(&dims.offset_dims, a.rank()) =>
        {
            ("gathering (through a transpose)", "sub-byte")
        }
        _ => return None,
    };
    Some(Unsupported::SubByte {
        what,
        ty: a.ty,
        width,
    })
}

/// Valid HLO that only XLA CPU's legacy emitters abort on (found by
/// `runtime/tests/it/fuzz_xla` run with `--xla_cpu_use_fusion_emitters=false`,
/// 10,000 modules): a pad of 2-bit elements cannot be addressed
/// (`ir_array.cc`: "Check failed: bit_offset != nullptr", from
/// `IrEmitter::HandlePad`). 4-bit pads run, and the fusion emitters
/// compile both.
fn aborts_legacy_emitters(op: &Op, result: &Shape, emitters: Emitters) -> Option<Unsupported> {
    let Shape::Array(a) = result else {
        return None;
    };
    (emitters == Emitters::Legacy && matches!(op, Op::Pad { .. }) && a.ty.bit_width() == 2)
        .then_some(Unsupported::LegacyPad2Bit { ty: a.ty })
}

/// Whether a gather's offset dimensions are the result's last ones, in
/// order.
fn offsets_trail(offset_dims: &[i64], rank: usize) -> bool {
    let first = rank as i64 - offset_dims.len() as i64;
    offset_dims
        .iter()
        .enumerate()
        .all(|(i, &d)| d == first + i as i64)
}
