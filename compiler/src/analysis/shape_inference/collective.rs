//! Collectives: the result is the operand's shape, or (for all-gather and
//! reduce-scatter) the operand's with one dimension scaled by the group
//! size, which the written result shape gives when the groups do not.

use super::reduction::check_reducer_signature;
use super::{
    array, refuse, AttributeError, CalleeSignature, DeclaredError, DimensionError, OperandError,
    OperandRule, ShapeError, ShapesError, SplitError, TypeError,
};
use crate::ir::collective::Collective;
use crate::ir::op::{AsyncCollective, Opcode};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// The operands' shapes, as one value: the array itself for one operand, a
/// tuple for several.
fn same_as_operands(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    for i in 0..operands.len() {
        array(operands, i)?;
    }
    Ok(match operands {
        [one] => (*one).clone(),
        _ => Shape::Tuple(operands.iter().map(|s| (*s).clone()).collect()),
    })
}

fn at_least_one(operands: &[&Shape]) -> Result<(), ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::AtLeastOne,
            got: 0,
        });
    }
    Ok(())
}

fn check_groups(c: &Collective, same_size: bool) -> Result<(), ShapeError> {
    c.replica_groups
        .check(same_size)
        .map_err(|e| ShapeError::ReplicaGroups(Box::new(e)))?;
    if c.use_global_device_ids && c.channel_id.is_none() {
        return refuse(AttributeError::GlobalDeviceIds);
    }
    Ok(())
}

/// A channel without global device ids groups replicas across every
/// partition (or, in XLA's cross-partition mode, partitions): the
/// participants are then a group times a count only the device assignment
/// knows, so the group size only bounds them.
fn spans_partitions(c: &Collective) -> bool {
    c.channel_id.is_some() && !c.use_global_device_ids
}

/// The operands share one element type, and the reducer combines two
/// scalars into one of their type. XLA's verifier does not hold the
/// reducer's type to the operands' (its tests reduce s32 values with an f32
/// adder), so neither does hlatc: the reducer's first parameter says which.
fn check_reducer(
    opcode: Opcode,
    name: &str,
    sig: &CalleeSignature,
    operands: &[&Shape],
) -> Result<(), ShapeError> {
    let ty = array(operands, 0)?.ty;
    for i in 1..operands.len() {
        let other = array(operands, i)?.ty;
        if other != ty {
            return refuse(TypeError::CollectiveOperands { opcode, ty, other });
        }
    }
    let ty = match sig.params.first() {
        Some(Shape::Array(p)) if p.rank() == 0 => p.ty,
        _ => ty,
    };
    let s = Shape::scalar(ty);
    check_reducer_signature(name, sig, &[s.clone(), s.clone()], &s)
}

pub(super) fn all_reduce(
    c: &Collective,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    at_least_one(operands)?;
    check_groups(c, false)?;
    check_reducer(const { Opcode::new("all-reduce") }, name, &sig, operands)?;
    same_as_operands(operands)
}

/// The declared result leaves, one per operand.
fn declared_leaves(
    opcode: Opcode,
    declared: Option<&Shape>,
    count: usize,
) -> Result<Vec<&ArrayShape>, ShapeError> {
    let leaves: Vec<&Shape> = match declared {
        None => return Err(ShapeError::NeedsResultShape),
        Some(Shape::Tuple(t)) if count > 1 => t.iter().collect(),
        Some(s) => vec![s],
    };
    if leaves.len() != count {
        return refuse(DeclaredError::ResultCount {
            opcode,
            count,
            declared: leaves.len(),
        });
    }
    leaves
        .into_iter()
        .map(|s| match s {
            Shape::Array(a) => Ok(a),
            t => refuse(DeclaredError::NotArrays {
                opcode,
                declared: t.clone(),
            }),
        })
        .collect()
}

/// All-gather (`grow`) or reduce-scatter (`!grow`): along `dimension`, the
/// result is the operand times (or divided by) the group size; the other
/// dimensions and the element type stay.
pub(super) fn resized(
    opcode: Opcode,
    c: &Collective,
    dimension: i64,
    grow: bool,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    at_least_one(operands)?;
    check_groups(c, true)?;
    let leaves = declared_leaves(opcode, declared, operands.len())?;
    let mut results = Vec::with_capacity(leaves.len());
    for (i, result) in leaves.into_iter().enumerate() {
        let x = array(operands, i)?;
        let d = usize::try_from(dimension)
            .ok()
            .filter(|&d| d < x.rank())
            .map_or_else(
                || {
                    refuse(DimensionError::OutOfRangeOf {
                        opcode,
                        dimension,
                        operand: x.clone(),
                    })
                },
                Ok,
            )?;
        let (small, big) = if grow { (x, result) } else { (result, x) };
        let same_elsewhere = result.ty == x.ty
            && result.rank() == x.rank()
            && (0..x.rank()).all(|k| k == d || result.dims[k] == x.dims[k]);
        let factor = match (small.dims[d], big.dims[d]) {
            (0, 0) => c.replica_groups.group_size(),
            (s, b) if s > 0 && b % s == 0 => Some(b / s),
            _ => None,
        };
        let fits = match (factor, c.replica_groups.group_size()) {
            (Some(f), Some(g)) if spans_partitions(c) => f >= g && f % g == 0,
            (Some(f), Some(g)) => f == g,
            (Some(f), None) => f >= 1,
            (None, _) => false,
        };
        if !same_elsewhere || !fits {
            return refuse(SplitError::Resized {
                opcode,
                operand: x.clone(),
                dimension: d,
                result: result.clone(),
                grow,
                group_size: c.replica_groups.group_size(),
                spans_partitions: spans_partitions(c),
            });
        }
        results.push(Shape::Array(result.clone()));
    }
    Ok(match results.len() {
        1 => results.pop().expect("one result"),
        _ => Shape::Tuple(results),
    })
}

pub(super) fn reduce_scatter(
    c: &Collective,
    dimension: i64,
    (name, sig): (&str, CalleeSignature),
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    const REDUCE_SCATTER: Opcode = Opcode::new("reduce-scatter");
    at_least_one(operands)?;
    check_reducer(REDUCE_SCATTER, name, &sig, operands)?;
    resized(REDUCE_SCATTER, c, dimension, false, operands, declared)
}

/// `ragged-all-to-all(input, output, input_offsets, send_sizes,
/// output_offsets, recv_sizes)` writes runs of input rows into `output`,
/// whose shape it has: input and output hold rows of one shape and type,
/// and the four index operands are s32 or s64 arrays of one type, of rank
/// 1 or 2 (XLA's tests give offsets a second dimension where one peer
/// takes several runs).
pub(super) fn ragged_all_to_all(c: &Collective, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    check_groups(c, false)?;
    let (input, output) = (array(operands, 0)?, array(operands, 1)?);
    if input.ty != output.ty
        || input.rank() == 0
        || input.dims[1..] != output.dims[1.min(output.rank())..]
    {
        return refuse(ShapesError::RaggedRows {
            input: input.clone(),
            output: output.clone(),
        });
    }
    let offsets = array(operands, 2)?;
    for i in 2..6 {
        let index = array(operands, i)?;
        if !matches!(index.ty, ElementType::S32 | ElementType::S64)
            || !(1..=2).contains(&index.rank())
            || index.ty != offsets.ty
        {
            return refuse(OperandError::RaggedOffsets {
                offsets: offsets.clone(),
                index: i,
                operand: index.clone(),
            });
        }
    }
    Ok(Shape::Array(output.clone()))
}

pub(super) fn all_to_all(
    c: &Collective,
    dimension: Option<i64>,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    at_least_one(operands)?;
    check_groups(c, true)?;
    if let Some(d) = dimension {
        if operands.len() != 1 {
            return refuse(OperandError::SplitAllToAll(operands.len()));
        }
        let x = array(operands, 0)?;
        let size = usize::try_from(d)
            .ok()
            .and_then(|d| x.dims.get(d))
            .copied()
            .map_or_else(
                || {
                    refuse(DimensionError::OutOfRangeOf {
                        opcode: const { Opcode::new("all-to-all") },
                        dimension: d,
                        operand: x.clone(),
                    })
                },
                Ok,
            )?;
        if let Some(g) = c.replica_groups.group_size() {
            if size % g != 0 {
                return refuse(SplitError::AllToAll {
                    dimension: d,
                    operand: x.clone(),
                    pieces: g,
                });
            }
        }
        return same_as_operands(operands);
    }
    // The tuple form: operand i goes to participant i, and the result is a
    // tuple even of one.
    for i in 0..operands.len() {
        array(operands, i)?;
    }
    Ok(Shape::Tuple(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}

/// A collective-permute sends one or more operands whole (XLA combines
/// permutes that way), or, in place, slices of `input` into `output`.
pub(super) fn collective_permute(
    pairs: &[(i64, i64)],
    slice_sizes: &[Vec<i64>],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    // A device sends and receives once, or, in place, once per transfer.
    let allowed = if slice_sizes.is_empty() {
        at_least_one(operands)?;
        1
    } else {
        check_in_place(operands)?;
        transfers_per_pair(operands)
    };
    let mut sources: Vec<i64> = pairs.iter().map(|p| p.0).collect();
    let mut targets: Vec<i64> = pairs.iter().map(|p| p.1).collect();
    for (ids, what) in [(&mut sources, "source"), (&mut targets, "target")] {
        ids.sort_unstable();
        if let Some(&id) = ids.iter().find(|&&id| id < 0) {
            return refuse(AttributeError::NegativeDevice { what, id });
        }
        if let Some(w) = ids.windows(allowed + 1).find(|w| w[0] == w[allowed]) {
            return refuse(AttributeError::RepeatedDevice {
                what,
                id: w[0],
                allowed,
            });
        }
    }
    if slice_sizes.is_empty() {
        same_as_operands(operands)
    } else {
        Ok(operands[1].clone())
    }
}

/// `(input, output, input_offsets, output_offsets)`: two arrays, or two
/// tuples of as many arrays, and an offset for each, as XLA's verifier
/// checks them.
fn check_in_place(operands: &[&Shape]) -> Result<(), ShapeError> {
    if operands.len() != 4 {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::RaggedAllToAll,
            got: operands.len(),
        });
    }
    let (input, output) = (operands[0], operands[1]);
    let buffers_and_offsets = [
        (input, operands[2], "input"),
        (output, operands[3], "output"),
    ];
    match (input, output) {
        (Shape::Array(_), Shape::Array(_)) => {
            for (buffer, offset, what) in buffers_and_offsets {
                check_buffer_offset(buffer, offset, what)?;
            }
            Ok(())
        }
        (Shape::Tuple(i), Shape::Tuple(o)) if i.len() == o.len() => {
            for (buffer, offset, what) in buffers_and_offsets {
                let offsets_per_buffer = || {
                    refuse(OperandError::InPlaceOffsets {
                        what,
                        offset: offset.clone(),
                    })
                };
                let (Shape::Tuple(buffers), Shape::Tuple(offsets)) = (buffer, offset) else {
                    return offsets_per_buffer();
                };
                if buffers.len() != offsets.len() {
                    return offsets_per_buffer();
                }
                for (b, off) in buffers.iter().zip(offsets) {
                    check_buffer_offset(b, off, what)?;
                }
            }
            Ok(())
        }
        _ => refuse(OperandError::InPlaceBuffers {
            input: input.clone(),
            output: output.clone(),
        }),
    }
}

/// How many transfers an in-place permute makes per source-target pair: as
/// many as the (first) input offset lists, one when it is a single index.
fn transfers_per_pair(operands: &[&Shape]) -> usize {
    let offset = match (operands[0], operands[2]) {
        (Shape::Tuple(_), Shape::Tuple(per_buffer)) => per_buffer.first(),
        (_, offset) => Some(offset),
    };
    match offset {
        Some(Shape::Tuple(parts))
            if parts.first().is_some_and(|p| matches!(p, Shape::Tuple(_))) =>
        {
            parts.len()
        }
        _ => 1,
    }
}

/// An offset into `buffer`: a tuple of one index per dimension, or a tuple
/// of such tuples (one per transfer).
fn check_buffer_offset(
    buffer: &Shape,
    offset: &Shape,
    what: &'static str,
) -> Result<(), ShapeError> {
    let rank = buffer.as_array().map_or(0, ArrayShape::rank);
    let fits = match offset {
        Shape::Tuple(parts) if parts.iter().all(|p| p.as_array().is_some()) => parts.len() == rank,
        Shape::Tuple(parts) => parts
            .iter()
            .all(|p| matches!(p, Shape::Tuple(idx) if idx.len() == rank)),
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        refuse(OperandError::InPlaceOffset {
            what,
            offset: offset.clone(),
            rank,
            buffer: buffer.clone(),
        })
    }
}

/// Each participant's value is the group's first participant's operand:
/// the operand's shape.
pub(super) fn collective_broadcast(
    c: &Collective,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    check_groups(c, false)?;
    Ok(operands[0].clone())
}

/// `replica-id` and `partition-id`: a `u32[]`.
pub(super) fn device_id() -> Result<Shape, ShapeError> {
    Ok(Shape::scalar(ElementType::U32))
}

/// An async start's value: the tuple (operands, results, and any context
/// the backend keeps), its results as `result` finds them given their
/// declared shape.
pub(super) fn started(
    operands: &[&Shape],
    declared: Option<&Shape>,
    result: impl FnOnce(Option<&Shape>) -> Result<Shape, ShapeError>,
) -> Result<Shape, ShapeError> {
    let Some(Shape::Tuple(parts)) = declared else {
        return refuse(DeclaredError::CollectiveStart(declared.cloned()));
    };
    let context_ok = parts.len() == 2
        || parts[2..].iter().all(|p| {
            p.is_scalar_of(ElementType::U32)
                || p.as_array().is_some_and(|a| a.ty == ElementType::U32)
        });
    if parts.len() < 2 || !context_ok {
        return refuse(DeclaredError::CollectiveStartParts(parts.len()));
    }
    let inputs = match operands {
        [one] => (*one).clone(),
        _ => Shape::Tuple(operands.iter().map(|s| (*s).clone()).collect()),
    };
    if !parts[0].compatible(&inputs) {
        return refuse(DeclaredError::CollectiveStartOperands {
            operands: inputs,
            declared: parts[0].clone(),
        });
    }
    let results = result(Some(&parts[1]))?;
    if !results.compatible(&parts[1]) {
        return refuse(DeclaredError::CollectiveStartResults {
            results,
            declared: parts[1].clone(),
        });
    }
    Ok(Shape::Tuple(parts.clone()))
}

/// A `-done`: an all-reduce's value as started, or the results held in
/// the start's tuple.
pub(super) fn done(kind: AsyncCollective, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    match (kind, operands[0]) {
        (AsyncCollective::AllReduce, s) => Ok(s.clone()),
        (_, Shape::Tuple(parts)) if parts.len() >= 2 => Ok(parts[1].clone()),
        (_, s) => refuse(OperandError::CollectiveDone(s.clone())),
    }
}
