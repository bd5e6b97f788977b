//! Backward rules of the ops that read or write parts of an array by
//! position: `gather` and `scatter`, each the other's adjoint, and the
//! slices (`slice`, `dynamic-slice`, `dynamic-update-slice`).

use super::{not_differentiable, AutodiffError, Site};
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::*;

pub(super) fn gather(
    b: &mut Builder,
    s: &Site,
    dims: &GatherDims,
) -> Result<Option<InstrId>, AutodiffError> {
    let Site { ops, i, x, g, .. } = *s;
    Ok(match i {
        0 => {
            let to_apply = b.reducer(BinaryOp::Add, b.ty(g));
            let z = b.full_like(x, 0.0)?;
            Some(b.add(
                Op::Scatter {
                    dims: ScatterDims {
                        update_window_dims: dims.offset_dims.clone(),
                        inserted_window_dims: dims.collapsed_slice_dims.clone(),
                        scatter_dims_to_operand_dims: dims.start_index_map.clone(),
                        input_batching_dims: dims.operand_batching_dims.clone(),
                        scatter_indices_batching_dims: dims.start_indices_batching_dims.clone(),
                        index_vector_dim: dims.index_vector_dim,
                    },
                    to_apply,
                    indices_are_sorted: false,
                    unique_indices: false,
                },
                &[z, ops[1], g],
                None,
            )?)
        }
        _ => None,
    })
}

pub(super) fn scatter(
    b: &mut Builder,
    s: &Site,
    dims: &ScatterDims,
    to_apply: ComputationId,
) -> Result<Option<InstrId>, AutodiffError> {
    let Site { n, ops, i, g, .. } = *s;
    if b.reducer_op(to_apply) != Some(BinaryOp::Add) {
        return not_differentiable(b, n, "only scatter-add has a gradient");
    }
    Ok(match i {
        0 => Some(g),
        2 => {
            let operand_rank = b.dims(ops[0]).len() as i64;
            let upd = b.dims(ops[2]);
            let mut window = dims.update_window_dims.iter().map(|&d| upd[d as usize]);
            let slice_sizes: Vec<i64> = (0..operand_rank)
                .map(|d| {
                    if dims.inserted_window_dims.contains(&d)
                        || dims.input_batching_dims.contains(&d)
                    {
                        1
                    } else {
                        window.next().unwrap_or(1)
                    }
                })
                .collect();
            Some(b.add(
                Op::Gather {
                    dims: GatherDims {
                        offset_dims: dims.update_window_dims.clone(),
                        collapsed_slice_dims: dims.inserted_window_dims.clone(),
                        start_index_map: dims.scatter_dims_to_operand_dims.clone(),
                        operand_batching_dims: dims.input_batching_dims.clone(),
                        start_indices_batching_dims: dims.scatter_indices_batching_dims.clone(),
                        index_vector_dim: dims.index_vector_dim,
                    },
                    slice_sizes,
                    indices_are_sorted: false,
                },
                &[g, ops[1]],
                None,
            )?)
        }
        _ => None,
    })
}

pub(super) fn slice_vjp(
    b: &mut Builder,
    g: InstrId,
    x: InstrId,
    slices: &[SliceDim],
) -> Result<InstrId, AutodiffError> {
    let (xd, gd) = (b.dims(x), b.dims(g));
    if gd.contains(&0) {
        return Ok(b.full_like(x, 0.0)?);
    }
    let config: Vec<PadDim> = slices
        .iter()
        .zip(xd.iter().zip(&gd))
        .map(|(s, (&n, &m))| PadDim {
            low: s.start,
            high: n - s.start - (m - 1) * s.stride - 1,
            interior: s.stride - 1,
        })
        .collect();
    let z = b.scalar(b.ty(g), 0.0);
    Ok(b.add(Op::Pad { config }, &[g, z], None)?)
}

pub(super) fn dynamic_slice(b: &mut Builder, s: &Site) -> Result<Option<InstrId>, AutodiffError> {
    let Site { ops, i, x, g, .. } = *s;
    Ok(match i {
        0 => {
            let z = b.full_like(x, 0.0)?;
            let mut args = vec![z, g];
            args.extend_from_slice(&ops[1..]);
            Some(b.add(Op::DynamicUpdateSlice, &args, None)?)
        }
        _ => None,
    })
}

pub(super) fn dynamic_update_slice(
    b: &mut Builder,
    s: &Site,
) -> Result<Option<InstrId>, AutodiffError> {
    let Site { ops, i, x, g, .. } = *s;
    Ok(match i {
        0 => {
            let z = b.full_like(ops[1], 0.0)?;
            let mut args = vec![g, z];
            args.extend_from_slice(&ops[2..]);
            Some(b.add(Op::DynamicUpdateSlice, &args, None)?)
        }
        1 => {
            let mut args = vec![g];
            args.extend_from_slice(&ops[2..]);
            Some(b.add(Op::DynamicSlice { sizes: b.dims(x) }, &args, None)?)
        }
        _ => None,
    })
}
