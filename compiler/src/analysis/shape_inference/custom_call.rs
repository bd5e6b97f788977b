//! `custom-call`, and the check of the operand aliasing a custom call or a
//! fusion declares.

use super::{refuse, AttributeError, CalleeSignature, ShapeError};
use crate::ir::computation_id::ComputationId;
use crate::ir::op::CustomCall;
use crate::ir::shape::Shape;

pub(super) fn custom_call<'c>(
    cc: &CustomCall,
    callee: &dyn Fn(ComputationId) -> Result<(&'c str, CalleeSignature), ShapeError>,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    if let Some(layouts) = &cc.operand_layouts {
        if layouts.len() != operands.len() {
            return refuse(AttributeError::OperandLayouts {
                layouts: layouts.len(),
                operands: operands.len(),
            });
        }
        if let Some((index, (l, o))) = layouts
            .iter()
            .zip(operands)
            .enumerate()
            .find(|(_, (l, o))| !l.compatible(o))
        {
            return refuse(AttributeError::OperandLayout {
                index,
                layout: l.clone(),
                operand: (*o).clone(),
            });
        }
    }
    for &id in &cc.called {
        callee(id)?;
    }
    let result = declared.cloned().ok_or(ShapeError::NeedsResultShape)?;
    if let Some(dims) = cc.convolution.as_ref().and_then(|c| c.dims.as_ref()) {
        // cuDNN's convolutions return (result, scratch): the first array.
        let output = match &result {
            Shape::Tuple(parts) => parts.first(),
            other => Some(other),
        };
        let rank = |s: Option<&Shape>| s.and_then(Shape::as_array).map(|a| a.rank());
        let ranks = [
            rank(operands.first().copied()),
            rank(operands.get(1).copied()),
            rank(output),
        ];
        dims.check_writable(ranks)?;
    }
    check_operand_aliasing(&cc.aliasing, operands, &result)?;
    Ok(result)
}

/// One shape up to layout, or an array and a buffer of it: a custom call
/// pins an array into a buffer, or unpins it, in place (`Pin`, `Unpin`).
fn same_storage(a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Buffer(x), Shape::Array(y)) | (Shape::Array(x), Shape::Buffer(y)) => {
            x.same_dims_and_type(y)
        }
        _ => a.compatible(b),
    }
}

/// Each aliased output and operand part exists, and the two have one shape
/// up to layout (or are an array and a buffer of it).
pub(super) fn check_operand_aliasing(
    aliasing: &[crate::ir::op::OperandAlias],
    operands: &[&Shape],
    result: &Shape,
) -> Result<(), ShapeError> {
    for a in aliasing {
        let operand = usize::try_from(a.operand)
            .ok()
            .and_then(|i| operands.get(i))
            .and_then(|s| s.subshape(&a.operand_index));
        let output = result.subshape(&a.output_index);
        match (output, operand) {
            (Some(o), Some(i)) if same_storage(o, i) => {}
            _ => return refuse(AttributeError::Aliasing(a.clone())),
        }
    }
    Ok(())
}
