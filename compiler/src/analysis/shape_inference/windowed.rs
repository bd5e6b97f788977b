//! Ops that slide a window over their input: `convolution` and
//! `reduce-window`.

use super::contraction::contraction_operands;
use super::{invalid, one_or_tuple, ShapeError};
use crate::ir::op::Precision;
use crate::ir::shape::{ArrayShape, Shape};
use crate::ir::window::{ConvDims, Window};

/// Each dimension number in range and used once, for one operand.
fn check_roles(what: &str, dims: &[i64], a: &ArrayShape) -> Result<(), ShapeError> {
    if dims.len() != a.rank() {
        return invalid(format!(
            "convolution {what} labels name {} dimensions, {a} has {}",
            dims.len(),
            a.rank()
        ));
    }
    match crate::ir::window::misplaced_dimension(dims.iter().copied(), a.rank()) {
        Some(d) => invalid(format!(
            "convolution {what} dimension {d} is out of range or named twice"
        )),
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
    let (lhs, rhs, ty) = contraction_operands("convolution", precision, operands, declared)?;
    let spatial = dims.input_spatial.len();
    if dims.kernel_spatial.len() != spatial || dims.output_spatial.len() != spatial {
        return invalid(format!(
            "convolution dimension numbers give input, kernel and output {spatial}, {} and {} spatial dimensions",
            dims.kernel_spatial.len(),
            dims.output_spatial.len()
        ));
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
        return invalid(format!(
            "convolution window has {} dimensions, the labels {spatial} spatial ones",
            window.dims.len()
        ));
    }
    if feature_groups < 1 || batch_groups < 1 {
        return invalid(format!(
            "feature_group_count {feature_groups} and batch_group_count {batch_groups} must be positive"
        ));
    }
    let at = |a: &ArrayShape, d: i64| a.dims[d as usize];
    let batch = at(lhs, dims.input_batch);
    let in_features = at(lhs, dims.input_feature);
    let kernel_in = at(rhs, dims.kernel_input_feature);
    let kernel_out = at(rhs, dims.kernel_output_feature);
    if in_features % feature_groups != 0 || in_features / feature_groups != kernel_in {
        return invalid(format!(
            "convolution input has {in_features} features in {feature_groups} groups, the kernel takes {kernel_in} per group"
        ));
    }
    if kernel_out % feature_groups != 0 {
        return invalid(format!(
            "kernel's {kernel_out} output features do not split into {feature_groups} feature groups"
        ));
    }
    if batch % batch_groups != 0 || kernel_out % batch_groups != 0 {
        return invalid(format!(
            "batch {batch} and kernel's {kernel_out} output features must both split into {batch_groups} batch groups"
        ));
    }
    let mut spatial_out = Vec::with_capacity(spatial);
    for (i, w) in window.dims.iter().enumerate() {
        let k = at(rhs, dims.kernel_spatial[i]);
        if w.size != k {
            return invalid(format!(
                "convolution window size {} in spatial dimension {i}, the kernel has {k}",
                w.size
            ));
        }
        spatial_out.push(
            w.output_size(at(lhs, dims.input_spatial[i]))
                .or_else(|e| invalid(e.to_string()))?,
        );
    }
    let mut out = vec![0; spatial + 2];
    let output_roles = roles(dims.output_batch, dims.output_feature, &dims.output_spatial);
    let values = [&[batch / batch_groups, kernel_out][..], &spatial_out].concat();
    for (&d, v) in output_roles.iter().zip(values) {
        match usize::try_from(d).ok().and_then(|d| out.get_mut(d)) {
            Some(slot) => *slot = v,
            None => return invalid(format!("convolution output dimension {d} is out of range")),
        }
    }
    let placeholder = ArrayShape::new(ty, out.clone());
    check_roles("output", &output_roles, &placeholder)?;
    Ok(Shape::array(ty, out))
}

pub(super) fn reduce_window(window: &Window, inputs: &[&ArrayShape]) -> Result<Shape, ShapeError> {
    let first = inputs[0];
    if window.dims.len() != first.rank() {
        return invalid(format!(
            "reduce-window window has {} dimensions, its input {first} {}",
            window.dims.len(),
            first.rank()
        ));
    }
    let out = window
        .output_dims(&first.dims)
        .or_else(|e| invalid(e.to_string()))?;
    Ok(one_or_tuple(
        inputs
            .iter()
            .map(|x| Shape::array(x.ty, out.clone()))
            .collect(),
    ))
}
