//! Windows and convolution dimension numbers, to and from their protos.

use super::messages::{ConvolutionDimensionNumbers, WindowDimension, WindowProto};
use crate::ir::window::{ConvDims, Window, WindowDim};

/// Always written, empty or not: XLA's proto reader requires a window on
/// every convolution and reduce-window.
pub(super) fn window_to_proto(w: &Window) -> Option<WindowProto> {
    Some(WindowProto {
        dimensions: w
            .dims
            .iter()
            .map(|d| WindowDimension {
                size: d.size,
                stride: d.stride,
                padding_low: d.padding_low,
                padding_high: d.padding_high,
                window_dilation: d.window_dilation,
                base_dilation: d.base_dilation,
                window_reversal: d.window_reversal,
            })
            .collect(),
    })
}

/// An unwritten stride or dilation reads 0 on the wire; XLA means 1.
pub(super) fn window_from_proto(w: &WindowProto) -> Window {
    let at_least_one = |v: i64| if v == 0 { 1 } else { v };
    Window {
        dims: w
            .dimensions
            .iter()
            .map(|d| WindowDim {
                size: d.size,
                stride: at_least_one(d.stride),
                padding_low: d.padding_low,
                padding_high: d.padding_high,
                window_dilation: at_least_one(d.window_dilation),
                base_dilation: at_least_one(d.base_dilation),
                window_reversal: d.window_reversal,
            })
            .collect(),
    }
}

pub(super) fn conv_dims_to_proto(d: &ConvDims) -> ConvolutionDimensionNumbers {
    ConvolutionDimensionNumbers {
        input_batch_dimension: d.input_batch,
        input_feature_dimension: d.input_feature,
        input_spatial_dimensions: d.input_spatial.clone(),
        kernel_input_feature_dimension: d.kernel_input_feature,
        kernel_output_feature_dimension: d.kernel_output_feature,
        kernel_spatial_dimensions: d.kernel_spatial.clone(),
        output_batch_dimension: d.output_batch,
        output_feature_dimension: d.output_feature,
        output_spatial_dimensions: d.output_spatial.clone(),
    }
}

pub(super) fn conv_dims_from_proto(d: &ConvolutionDimensionNumbers) -> ConvDims {
    ConvDims {
        input_batch: d.input_batch_dimension,
        input_feature: d.input_feature_dimension,
        input_spatial: d.input_spatial_dimensions.clone(),
        kernel_input_feature: d.kernel_input_feature_dimension,
        kernel_output_feature: d.kernel_output_feature_dimension,
        kernel_spatial: d.kernel_spatial_dimensions.clone(),
        output_batch: d.output_batch_dimension,
        output_feature: d.output_feature_dimension,
        output_spatial: d.output_spatial_dimensions.clone(),
    }
}
