//! Ops that slide a window over their input: `convolution`, `reduce-window`
//! and its gradient `select-and-scatter`.

use super::linear_algebra::contraction_operands;
use super::reduction::{check_reducer, inputs_and_inits, reduced, FloatTypes};
use super::{
    array, check_signature, one_or_tuple, refuse, AttributeError, CalleeSignature, DimensionError,
    OperandError, ShapeError, ShapesError, SplitError,
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

/// The shapes a window over `inputs` gives them: one per input, as one
/// array or a tuple.
fn window_shapes(window: &Window, inputs: &[&ArrayShape]) -> Result<Shape, ShapeError> {
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

pub(super) fn reduce_window(
    window: &Window,
    (to_apply, callee): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let inputs = inputs_and_inits(const { Opcode::new("reduce-window") }, operands)?;
    let tupled = check_reducer(to_apply, &callee, &inputs, FloatTypes::Exact)?;
    match window_shapes(window, &inputs)? {
        Shape::Array(a) => Ok(reduced(vec![Shape::Array(a)], tupled)),
        several => Ok(several),
    }
}

/// `select-and-scatter(operand, source, init)`: `source` has the shape a
/// reduce-window of the operand with this window has, `init` is a scalar
/// of the operand's type, `select` compares two of its elements and
/// `scatter` combines two; the result has the operand's shape.
pub(super) fn select_and_scatter(
    window: &Window,
    (select, select_sig): (&str, CalleeSignature),
    (scatter, scatter_sig): (&str, CalleeSignature),
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let (x, source, init) = (
        array(operands, 0)?,
        array(operands, 1)?,
        array(operands, 2)?,
    );
    // XLA's inference allows a rank-0 operand (an empty window), but XLA
    // CPU's select-and-scatter expander aborts on one ("parameter number 1
    // already allocated"), found by the fuzzer.
    if x.rank() == 0 {
        return refuse(ShapesError::Scalar {
            opcode: const { Opcode::new("select-and-scatter") },
            operand: x.clone(),
        });
    }
    let scalar = Shape::scalar(x.ty);
    if init.rank() != 0 || init.ty != x.ty {
        return refuse(OperandError::SelectAndScatterInit {
            expected: scalar,
            init: init.clone(),
        });
    }
    let windows = window_shapes(window, &[x])?;
    let expected = Shape::array(
        x.ty,
        windows
            .as_array()
            .map(|a| a.dims.clone())
            .unwrap_or_default(),
    );
    if !Shape::Array(source.clone()).compatible(&expected) {
        return refuse(ShapesError::SelectAndScatterSource {
            expected,
            source_operand: source.clone(),
        });
    }
    check_signature(
        select,
        &select_sig,
        &[scalar.clone(), scalar.clone()],
        &Shape::scalar(crate::ir::shape::ElementType::Pred),
    )?;
    check_signature(
        scatter,
        &scatter_sig,
        &[scalar.clone(), scalar.clone()],
        &scalar,
    )?;
    Ok(Shape::Array(ArrayShape::new(x.ty, x.dims.clone())))
}
