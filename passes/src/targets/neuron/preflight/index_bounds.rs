//! Gathers and scatters whose indices provably run past their operand:
//! indices that are an `iota` (seen through ops that move or repeat
//! values but change none) take every value in `[0, n)`, so the largest
//! start is `n - 1`, and neuronx-cc refuses a gather or scatter whose
//! slice from there leaves the operand (`NCC_EVRF056`, `NCC_EVRF031`),
//! where XLA would clamp the gather and drop the scatter's updates. A
//! typical case is a position table (`max_position_embeddings` rows)
//! gathered at `iota(seq_len)` positions.
//!
//! Only a one-component index (one start dimension) is judged; anything
//! else, or indices that are not an iota, gives no finding: the check
//! never refuses what it cannot prove.

use hlatc_compiler::ir::op::{GatherDims, ScatterDims, UnaryOp};
use hlatc_compiler::{Computation, InstrId, Op, Shape};

/// How many values an index array holds when it is an iota seen through
/// value-keeping ops: `n` for values `0..n`; `None` otherwise.
fn iota_extent(c: &Computation, mut id: InstrId) -> Option<i64> {
    loop {
        let instr = c.instr(id);
        match &instr.op {
            Op::Iota { dimension } => {
                let a = instr.shape.as_array()?;
                return a.dims.get(usize::try_from(*dimension).ok()?).copied();
            }
            // Integer to integer conversions keep values below 2^31 (every
            // extent an array can have here); anything else may not.
            Op::Convert
                if instr.shape.as_array().is_some_and(|a| a.ty.is_integer())
                    && c.instr(*c.operand_ids(id).first()?)
                        .shape
                        .as_array()
                        .is_some_and(|a| a.ty.is_integer()) =>
            {
                id = c.operand_ids(id)[0];
            }
            Op::Reshape { .. }
            | Op::Broadcast { .. }
            | Op::Transpose { .. }
            | Op::Unary(UnaryOp::Copy) => {
                id = *c.operand_ids(id).first()?;
            }
            _ => return None,
        }
    }
}

fn dims_of(shape: &Shape) -> Option<&[i64]> {
    shape.as_array().map(|a| a.dims.as_slice())
}

/// A gather whose iota indices start a slice past the operand's end along
/// its one start dimension: what was found, for the finding.
pub(super) fn gather_out_of_bounds(c: &Computation, id: InstrId) -> Option<String> {
    let Op::Gather {
        dims: GatherDims {
            start_index_map, ..
        },
        slice_sizes,
        ..
    } = &c.instr(id).op
    else {
        return None;
    };
    let [d] = start_index_map.as_slice() else {
        return None;
    };
    let d = usize::try_from(*d).ok()?;
    let &[operand, indices] = c.operand_ids(id) else {
        return None;
    };
    let size = *dims_of(&c.instr(operand).shape)?.get(d)?;
    let slice = *slice_sizes.get(d)?;
    beyond(iota_extent(c, indices)?, slice, size, d)
}

/// A scatter whose iota indices place an update window past the operand's
/// end along its one scatter dimension.
pub(super) fn scatter_out_of_bounds(c: &Computation, id: InstrId) -> Option<String> {
    let Op::Scatter {
        dims:
            ScatterDims {
                update_window_dims,
                inserted_window_dims,
                scatter_dims_to_operand_dims,
                input_batching_dims,
                ..
            },
        ..
    } = &c.instr(id).op
    else {
        return None;
    };
    let [d] = scatter_dims_to_operand_dims.as_slice() else {
        return None;
    };
    // scatter(operands..., indices, updates...): k of each around one.
    let operands = c.operand_ids(id);
    let k = operands.len() / 2;
    let (operand, indices, updates) = (operands[0], operands[k], operands[k + 1]);
    let operand_dims = dims_of(&c.instr(operand).shape)?;
    let size = *operand_dims.get(usize::try_from(*d).ok()?)?;
    // The window's extent along `d`: 1 where the dimension is inserted,
    // else the updates' window dimension that stands for it (the operand's
    // dimensions that are neither inserted nor batched, in order).
    let window = if inserted_window_dims.contains(d) {
        1
    } else {
        let p = (0..*d)
            .filter(|i| !inserted_window_dims.contains(i) && !input_batching_dims.contains(i))
            .count();
        let w = usize::try_from(*update_window_dims.get(p)?).ok()?;
        *dims_of(&c.instr(updates).shape)?.get(w)?
    };
    beyond(
        iota_extent(c, indices)?,
        window,
        size,
        usize::try_from(*d).ok()?,
    )
}

/// Starts `0..n` with a slice of `slice` along a dimension of `size`: the
/// finding when the last start's slice passes the end.
fn beyond(n: i64, slice: i64, size: i64, d: usize) -> Option<String> {
    (n > 0 && n - 1 + slice > size).then(|| {
        format!(
            "iota indices in [0, {n}) with a slice of {slice}, along operand dimension {d} of {size}"
        )
    })
}
