//! A ring of micro-batch slots carried from tick to tick: what a stage's
//! forward slot keeps for its backward slot, `[depth, ...]` of one value's
//! shape, micro-batch `m` in slot `m mod depth`
//! ([`super::Schedule::stash_depth`] slots: no two micro-batches a stage
//! holds at once share one).

use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection};
use hlatc_compiler::{ElementType, InstrId, Op};

/// `pred[]`: whether micro-batch `m` (`s32[]`) is one of the step's.
pub(super) fn in_range(
    b: &mut Builder,
    m: InstrId,
    micro_batches: i64,
) -> Result<InstrId, BuildError> {
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

/// The start indices of micro-batch `m`'s slot in a ring of `rank + 1`
/// dimensions.
fn slot_start(
    b: &mut Builder,
    m: InstrId,
    depth: i64,
    rank: usize,
) -> Result<Vec<InstrId>, BuildError> {
    let mut start = vec![slot(b, m, depth)?];
    let zero = b.scalar(ElementType::S32, 0.0);
    start.extend(std::iter::repeat_n(zero, rank));
    Ok(start)
}

/// What `ring` (`[depth, dims...]`) keeps for micro-batch `m`, shaped
/// `dims`.
pub(super) fn read(
    b: &mut Builder,
    ring: InstrId,
    m: InstrId,
    depth: i64,
    dims: &[i64],
) -> Result<InstrId, BuildError> {
    let mut operands = vec![ring];
    operands.extend(slot_start(b, m, depth, dims.len())?);
    let mut sizes = vec![1];
    sizes.extend_from_slice(dims);
    let one = b.add(Op::DynamicSlice { sizes }, &operands, None)?;
    b.reshape(one, dims)
}

/// `ring` with `x` kept in micro-batch `m`'s slot when `m` is one of the
/// step's (otherwise the slot keeps what it held: a live micro-batch may
/// share it when the ring is shorter than the pipeline).
pub(super) fn keep(
    b: &mut Builder,
    ring: InstrId,
    x: InstrId,
    m: InstrId,
    depth: i64,
    micro_batches: i64,
) -> Result<InstrId, BuildError> {
    let dims = b.dims(x);
    let held = read(b, ring, m, depth, &dims)?;
    let valid = in_range(b, m, micro_batches)?;
    let valid = b.broadcast(valid, &dims, &[])?;
    let value = b.select(valid, x, held)?;
    let mut one = vec![1];
    one.extend_from_slice(&dims);
    let value = b.reshape(value, &one)?;
    let mut operands = vec![ring, value];
    operands.extend(slot_start(b, m, depth, dims.len())?);
    b.add(Op::DynamicUpdateSlice, &operands, None)
}
