//! Ops that slide a window over their input: `convolution` and
//! `reduce-window`.

use super::contraction::contraction_operands;
use super::{
    one_or_tuple, refuse, AttributeError, DimensionError, ShapeError, ShapesError, SplitError,
};
use crate::ir::op::{Opcode, Precision};
use crate::ir::shape::{ArrayShape, Shape};
use crate::ir::window::{ConvDims, Window};

/// Each dimension number in range and used once, for one operand.
fn check_roles(what: &'static str, dims: &[i64], a: &ArrayShape) -> Result<(), ShapeError> {
    if dims.len() != a.rank() {
        return refuse(AttributeError::ConvolutionLabels {
            what,
            labels: dims.len(),
            operand: a.clone(),
        });
    }
    match crate::ir::window::misplaced_dimension(dims.iter().copied(), a.rank()) {
        Some(dimension) => refuse(DimensionError::ConvolutionLabel { what, dimension }),
        None => Ok(()),
    }
}

pub(super) fn convolution(
    window: &Window,
    dims: &ConvDims,
    (feature_groups, batch_groups): (i64, i64),
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (lhs, rhs, ty) = contraction_operands(
        const { Opcode::new("convolution") },
        precision,
        operands,
        declared,
    )?;
    let spatial = dims.input_spatial.len();
    if dims.kernel_spatial.len() != spatial || dims.output_spatial.len() != spatial {
        return refuse(AttributeError::SpatialCounts {
            input: spatial,
            kernel: dims.kernel_spatial.len(),
            output: dims.output_spatial.len(),
        });
    }
    let roles = |a: i64, b: i64, s: &[i64]| [&[a, b][..], s].concat();
    check_roles(
        "input",
        &roles(dims.input_batch, dims.input_feature, &dims.input_spatial),
        lhs,
    )?;
    check_roles(
        "kernel",
        &roles(
            dims.kernel_input_feature,
            dims.kernel_output_feature,
            &dims.kernel_spatial,
        ),
        rhs,
    )?;
    if window.dims.len() != spatial {
        return refuse(AttributeError::ConvolutionWindow {
            window: window.dims.len(),
            spatial,
        });
    }
    if feature_groups < 1 || batch_groups < 1 {
        return refuse(AttributeError::GroupCounts {
            feature_groups,
            batch_groups,
        });
    }
    let at = |a: &ArrayShape, d: i64| a.dims[d as usize];
    let batch = at(lhs, dims.input_batch);
    let in_features = at(lhs, dims.input_feature);
    let kernel_in = at(rhs, dims.kernel_input_feature);
    let kernel_out = at(rhs, dims.kernel_output_feature);
    if in_features % feature_groups != 0 || in_features / feature_groups != kernel_in {
        return refuse(SplitError::InputFeatures {
            features: in_features,
            groups: feature_groups,
            kernel: kernel_in,
        });
    }
    if kernel_out % feature_groups != 0 {
        return refuse(SplitError::KernelFeatures {
            features: kernel_out,
            groups: feature_groups,
        });
    }
    if batch % batch_groups != 0 || kernel_out % batch_groups != 0 {
        return refuse(SplitError::BatchGroups {
            batch,
            features: kernel_out,
            groups: batch_groups,
        });
    }
    let mut spatial_out = Vec::with_capacity(spatial);
    for (i, w) in window.dims.iter().enumerate() {
        let k = at(rhs, dims.kernel_spatial[i]);
        if w.size != k {
            return refuse(ShapesError::ConvolutionWindow {
                size: w.size,
                dimension: i,
                kernel: k,
            });
        }
        spatial_out.push(w.output_size(at(lhs, dims.input_spatial[i]))?);
    }
    let mut out = vec![0; spatial + 2];
    let output_roles = roles(dims.output_batch, dims.output_feature, &dims.output_spatial);
    let values = [&[batch / batch_groups, kernel_out][..], &spatial_out].concat();
    for (&d, v) in output_roles.iter().zip(values) {
        match usize::try_from(d).ok().and_then(|d| out.get_mut(d)) {
            Some(slot) => *slot = v,
            None => return refuse(DimensionError::ConvolutionOutput { dimension: d }),
        }
    }
    let placeholder = ArrayShape::new(ty, out.clone());
    check_roles("output", &output_roles, &placeholder)?;
    Ok(Shape::array(ty, out))
}

pub(super) fn reduce_window(window: &Window, inputs: &[&ArrayShape]) -> Result<Shape, ShapeError> {
    let first = inputs[0];
    if window.dims.len() != first.rank() {
        return refuse(AttributeError::ReduceWindow {
            window: window.dims.len(),
            input: first.clone(),
        });
    }
    let out = window.output_dims(&first.dims)?;
    Ok(one_or_tuple(
        inputs
            .iter()
            .map(|x| Shape::array(x.ty, out.clone()))
            .collect(),
    ))
}
