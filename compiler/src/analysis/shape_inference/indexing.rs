//! Ops that read or write parts of an array by position: the slices
//! (`slice`, `dynamic-slice`, `dynamic-update-slice`), and gather and
//! scatter with XLA's dimension-number rules
//! (`ValidateGatherDimensionNumbers`, `ValidateScatterDimensionNumbers`).
//! XLA CPU's emitters assume every one of them; an inconsistent set that
//! slipped through used to abort inside the plugin.

use super::reduction::{check_reducer, FloatTypes};
use super::{
    arr, array, check_dims_in_range, refuse, same_type, AttributeError, CalleeError,
    CalleeSignature, DimensionError, OperandError, OperandRule, ShapeError, ShapesError, TypeError,
};
use crate::ir::op::{GatherDims, Opcode, ScatterDims, SliceDim};
use crate::ir::shape::{ArrayShape, Shape};

/// `dims` is sorted ascending, each in `0..bound` and named once.
const DYNAMIC_UPDATE_SLICE: Opcode = Opcode::new("dynamic-update-slice");
const GATHER: Opcode = Opcode::new("gather");
const SCATTER: Opcode = Opcode::new("scatter");

fn sorted_unique_in_range(
    dims: &[i64],
    bound: usize,
    what: &'static str,
) -> Result<(), ShapeError> {
    check_dims_in_range(dims, bound, what)?;
    if dims.windows(2).any(|w| w[0] > w[1]) {
        return refuse(DimensionError::Unsorted {
            what,
            dims: dims.to_vec(),
        });
    }
    Ok(())
}

/// `lists` names the two lists, for the message.
fn disjoint(a: &[i64], b: &[i64], lists: &'static str) -> Result<(), ShapeError> {
    if let Some(&dimension) = a.iter().find(|d| b.contains(d)) {
        return refuse(DimensionError::InBoth { dimension, lists });
    }
    Ok(())
}

/// The index vector's length and the batch dimensions of the indices.
fn index_vector(idx: &ArrayShape, ivd: i64, opcode: Opcode) -> Result<(i64, Vec<i64>), ShapeError> {
    if ivd < 0 || ivd as usize > idx.rank() {
        return refuse(DimensionError::IndexVector {
            opcode,
            dimension: ivd,
            indices: idx.clone(),
        });
    }
    let ivd = ivd as usize;
    let len = if ivd < idx.rank() { idx.dims[ivd] } else { 1 };
    let batch = (0..idx.rank())
        .filter(|&d| d != ivd)
        .map(|d| idx.dims[d])
        .collect();
    Ok((len, batch))
}

/// The map from index-vector entries to operand dimensions
/// (`start_index_map`, `scatter_dims_to_operand_dims`): one entry per index,
/// each an operand dimension that is named once and is not a batching one.
/// `lists` names the map and the batching dims together, for the message.
fn index_map(
    map: &[i64],
    batching: &[i64],
    rank: usize,
    index_len: i64,
    (name, lists): (&'static str, &'static str),
) -> Result<(), ShapeError> {
    check_dims_in_range(map, rank, name.trim_end_matches("_dims"))?;
    disjoint(map, batching, lists)?;
    if map.len() as i64 != index_len {
        return refuse(AttributeError::IndexMap {
            attribute: name,
            entries: map.len(),
            index_len,
        });
    }
    Ok(())
}

/// Batching dims on the indices side: as many as on the operand side,
/// unique, in range, and never the index vector dimension.
fn indices_batching(
    dims: &[i64],
    operand_side: &[i64],
    idx: &ArrayShape,
    ivd: i64,
    what: &'static str,
) -> Result<(), ShapeError> {
    if dims.len() != operand_side.len() {
        return refuse(AttributeError::BatchingDims {
            what,
            indices: dims.len(),
            operand: operand_side.len(),
        });
    }
    check_dims_in_range(dims, idx.rank(), what)?;
    if dims.contains(&ivd) {
        return refuse(DimensionError::BatchingIndexVector {
            what,
            dimension: ivd,
        });
    }
    Ok(())
}

pub(super) fn gather(
    a: &ArrayShape,
    idx: &ArrayShape,
    dims: &GatherDims,
    slice_sizes: &[i64],
) -> Result<Shape, ShapeError> {
    if !idx.ty.is_integer() {
        return refuse(TypeError::Indices {
            opcode: GATHER,
            ty: idx.ty,
        });
    }
    if slice_sizes.len() != a.rank()
        || slice_sizes
            .iter()
            .zip(&a.dims)
            .any(|(s, d)| *s < 0 || s > d)
    {
        return refuse(AttributeError::SliceSizes {
            attribute: "slice_sizes",
            sizes: slice_sizes.to_vec(),
            operand: a.clone(),
        });
    }
    let (index_len, batch) = index_vector(idx, dims.index_vector_dim, GATHER)?;
    sorted_unique_in_range(&dims.collapsed_slice_dims, a.rank(), "collapsed_slice")?;
    sorted_unique_in_range(&dims.operand_batching_dims, a.rank(), "operand_batching")?;
    disjoint(
        &dims.collapsed_slice_dims,
        &dims.operand_batching_dims,
        "collapsed_slice_dims and operand_batching_dims",
    )?;
    index_map(
        &dims.start_index_map,
        &dims.operand_batching_dims,
        a.rank(),
        index_len,
        (
            "start_index_map",
            "start_index_map and operand_batching_dims",
        ),
    )?;
    indices_batching(
        &dims.start_indices_batching_dims,
        &dims.operand_batching_dims,
        idx,
        dims.index_vector_dim,
        "start_indices_batching",
    )?;
    for &d in dims
        .collapsed_slice_dims
        .iter()
        .chain(&dims.operand_batching_dims)
    {
        if slice_sizes[d as usize] > 1 {
            return refuse(AttributeError::CollapsedSliceSize {
                dimension: d,
                size: slice_sizes[d as usize],
            });
        }
    }
    let skipped: Vec<i64> = dims
        .collapsed_slice_dims
        .iter()
        .chain(&dims.operand_batching_dims)
        .copied()
        .collect();
    let offsets: Vec<i64> = (0..a.rank() as i64)
        .filter(|d| !skipped.contains(d))
        .map(|d| slice_sizes[d as usize])
        .collect();
    if offsets.len() != dims.offset_dims.len() {
        return refuse(AttributeError::OffsetDims {
            offset_dims: dims.offset_dims.len(),
            slice_dims: offsets.len(),
        });
    }
    let rank = batch.len() + offsets.len();
    sorted_unique_in_range(&dims.offset_dims, rank, "offset")?;
    let (mut bi, mut oi) = (batch.into_iter(), offsets.into_iter());
    let out: Vec<i64> = (0..rank as i64)
        .map(|d| {
            if dims.offset_dims.contains(&d) {
                oi.next()
            } else {
                bi.next()
            }
        })
        .collect::<Option<Vec<i64>>>()
        // Each offset dimension is below the rank once (checked above), and
        // there are as many as offsets: the rest of the rank is the batch.
        .expect("offset_dims checked against the offsets and the rank");
    Ok(Shape::Array(ArrayShape::new(a.ty, out)))
}

/// `scatter` of `inputs` (one or more, of one shape) by `idx`, with one
/// update per input: one result, or a tuple of them.
pub(super) fn scatter(
    inputs: &[&ArrayShape],
    idx: &ArrayShape,
    updates: &[&ArrayShape],
    dims: &ScatterDims,
    to_apply: &str,
    callee: &super::CalleeSignature,
) -> Result<Shape, ShapeError> {
    let (a, upd) = (inputs[0], updates[0]);
    if !idx.ty.is_integer() {
        return refuse(TypeError::Indices {
            opcode: SCATTER,
            ty: idx.ty,
        });
    }
    for (x, u) in inputs.iter().zip(updates) {
        super::same_type(x, u, SCATTER)?;
        if x.dims != a.dims || u.dims != upd.dims {
            return refuse(ShapesError::Scatter {
                input: (*x).clone(),
                update: (*u).clone(),
                first_input: a.clone(),
                first_update: upd.clone(),
            });
        }
    }
    let (index_len, scatter_batch) = index_vector(idx, dims.index_vector_dim, SCATTER)?;
    sorted_unique_in_range(&dims.update_window_dims, upd.rank(), "update_window")?;
    sorted_unique_in_range(&dims.inserted_window_dims, a.rank(), "inserted_window")?;
    sorted_unique_in_range(&dims.input_batching_dims, a.rank(), "input_batching")?;
    disjoint(
        &dims.inserted_window_dims,
        &dims.input_batching_dims,
        "inserted_window_dims and input_batching_dims",
    )?;
    let covered = dims.update_window_dims.len()
        + dims.inserted_window_dims.len()
        + dims.input_batching_dims.len();
    if covered != a.rank() {
        return refuse(AttributeError::ScatterCover {
            covered,
            rank: a.rank(),
        });
    }
    index_map(
        &dims.scatter_dims_to_operand_dims,
        &dims.input_batching_dims,
        a.rank(),
        index_len,
        (
            "scatter_dims_to_operand_dims",
            "scatter_dims_to_operand_dims and input_batching_dims",
        ),
    )?;
    indices_batching(
        &dims.scatter_indices_batching_dims,
        &dims.input_batching_dims,
        idx,
        dims.index_vector_dim,
        "scatter_indices_batching",
    )?;
    // The updates are the scatter batch dimensions, in order, with the
    // window dimensions at `update_window_dims`.
    if upd.rank() != scatter_batch.len() + dims.update_window_dims.len() {
        return refuse(ShapesError::UpdatesRank {
            updates: upd.clone(),
            scatter: scatter_batch.len(),
            window: dims.update_window_dims.len(),
        });
    }
    let window_operand_dims = (0..a.rank() as i64).filter(|d| {
        !dims.inserted_window_dims.contains(d) && !dims.input_batching_dims.contains(d)
    });
    for (&u, o) in dims.update_window_dims.iter().zip(window_operand_dims) {
        if upd.dims[u as usize] > a.dims[o as usize] {
            return refuse(ShapesError::UpdateWindow {
                update_dim: u,
                update_size: upd.dims[u as usize],
                operand_dim: o,
                operand_size: a.dims[o as usize],
            });
        }
    }
    let update_scatter_dims = (0..upd.rank() as i64)
        .filter(|d| !dims.update_window_dims.contains(d))
        .map(|d| upd.dims[d as usize]);
    if !update_scatter_dims.eq(scatter_batch.iter().copied()) {
        return refuse(ShapesError::ScatterIndices {
            updates: upd.clone(),
            indices: idx.clone(),
        });
    }
    if check_reducer(to_apply, callee, inputs, FloatTypes::AnyWidth)? && inputs.len() == 1 {
        return refuse(CalleeError::TupledScatterReducer {
            callee: to_apply.to_string(),
        });
    }
    Ok(super::one_or_tuple(
        inputs
            .iter()
            .map(|x| Shape::Array(ArrayShape::new(x.ty, x.dims.clone())))
            .collect(),
    ))
}

pub(super) fn scatter_operands(
    dims: &ScatterDims,
    (to_apply, callee): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    // Variadic: N inputs, the indices, then N updates.
    if operands.len() < 3 || operands.len().is_multiple_of(2) {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::ScatterOperands,
            got: operands.len(),
        });
    }
    let n = operands.len() / 2;
    let arrays = |range: std::ops::Range<usize>| {
        range
            .map(|i| array(operands, i))
            .collect::<Result<Vec<_>, _>>()
    };
    scatter(
        &arrays(0..n)?,
        array(operands, n)?,
        &arrays(n + 1..2 * n + 1)?,
        dims,
        to_apply,
        &callee,
    )
}

pub(super) fn slice(slices: &[SliceDim], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    if slices.len() != a.rank() {
        return refuse(AttributeError::SliceRanges {
            ranges: slices.len(),
            rank: a.rank(),
        });
    }
    let mut dims = Vec::with_capacity(slices.len());
    for (i, s) in slices.iter().enumerate() {
        if s.start < 0 || s.start > s.limit || s.limit > a.dims[i] || s.stride < 1 {
            return refuse(AttributeError::SliceRange {
                start: s.start,
                limit: s.limit,
                stride: s.stride,
                dimension: i,
                size: a.dims[i],
            });
        }
        // start <= limit was checked, so the span is non-negative.
        // XLA rounds up as (span + stride - 1) / stride, which must
        // not overflow either.
        let span = s.limit - s.start;
        if span.checked_add(s.stride - 1).is_none() {
            return refuse(AttributeError::SliceStride {
                stride: s.stride,
                dimension: i,
            });
        }
        dims.push(span / s.stride + i64::from(span % s.stride != 0));
    }
    Ok(arr(a.ty, dims))
}

pub(super) fn dynamic_slice(sizes: &[i64], operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::OnePlusRank,
            got: 0,
        });
    }
    let a = array(operands, 0)?;
    check_start_indices(operands, 1, a.rank())?;
    if sizes.len() != a.rank() || sizes.iter().zip(&a.dims).any(|(s, d)| *s < 0 || s > d) {
        return refuse(AttributeError::SliceSizes {
            attribute: "dynamic_slice_sizes",
            sizes: sizes.to_vec(),
            operand: a.clone(),
        });
    }
    Ok(arr(a.ty, sizes.to_vec()))
}

pub(super) fn dynamic_update_slice(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    if operands.len() < 2 {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::TwoPlusRank,
            got: operands.len(),
        });
    }
    let (a, u) = (array(operands, 0)?, array(operands, 1)?);
    same_type(a, u, DYNAMIC_UPDATE_SLICE)?;
    if u.rank() != a.rank() || u.dims.iter().zip(&a.dims).any(|(x, y)| x > y) {
        return refuse(ShapesError::Update {
            update: u.clone(),
            operand: a.clone(),
        });
    }
    check_start_indices(operands, 2, a.rank())?;
    Ok(arr(a.ty, a.dims.clone()))
}

pub(super) fn check_start_indices(
    operands: &[&Shape],
    from: usize,
    rank: usize,
) -> Result<(), ShapeError> {
    // XLA still reads the first form: all start indices in one vector.
    if operands.len() == from + 1 {
        let v = array(operands, from)?;
        if v.rank() == 1 {
            if !v.ty.is_integer() || v.dims[0] != rank as i64 {
                return refuse(OperandError::StartIndexVector {
                    rank,
                    vector: v.clone(),
                });
            }
            return Ok(());
        }
    }
    if operands.len() != from + rank {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::StartIndices { fixed: from, rank },
            got: operands.len(),
        });
    }
    for i in from..operands.len() {
        let s = array(operands, i)?;
        if s.rank() != 0 || !s.ty.is_integer() {
            return refuse(OperandError::StartIndex {
                index: i - from,
                shape: s.clone(),
            });
        }
        let first = array(operands, from)?;
        if s.ty != first.ty {
            return refuse(TypeError::StartIndices {
                first: first.ty,
                index: i - from,
                ty: s.ty,
            });
        }
    }
    Ok(())
}
