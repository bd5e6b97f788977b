//! The batch normalizations: statistics per entry of the feature
//! dimension, over every other dimension.

use super::{array, refuse, DimensionError, ShapeError, ShapesError, TypeError};
use crate::ir::op::{BatchNormKind, Opcode};
use crate::ir::shape::{ArrayShape, Shape};

/// A float operand with a `feature_index` dimension; every per-feature
/// operand a vector of that dimension's size and the operand's type. The
/// training op gives (normalized, mean, variance), the grad op (d operand,
/// d scale, d offset), the inference op the normalized operand.
pub(super) fn batch_norm(
    kind: BatchNormKind,
    feature_index: i64,
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    // The opcode only for an error: `Opcode::new` searches the op table.
    let opcode = || Opcode::new(kind.opcode());
    // Which operands besides the operand are per feature (the count is
    // the kind's arity, checked before).
    let vectors: &[usize] = match kind {
        BatchNormKind::Training => &[1, 2],
        BatchNormKind::Inference => &[1, 2, 3, 4],
        BatchNormKind::Grad => &[1, 2, 3],
    };
    let x = array(operands, 0)?;
    if !x.ty.is_float() {
        return refuse(TypeError::BatchNorm {
            opcode: opcode(),
            operand: Box::new(x.clone()),
        });
    }
    let Some(&features) = usize::try_from(feature_index)
        .ok()
        .and_then(|i| x.dims.get(i))
    else {
        return refuse(DimensionError::NotADimension {
            opcode: opcode(),
            attribute: "feature_index",
            dimension: feature_index,
            shape: x.clone(),
        });
    };
    for &index in vectors {
        let v = array(operands, index)?;
        if v.ty != x.ty || v.dims != [features] {
            return refuse(ShapesError::PerFeature {
                opcode: opcode(),
                index,
                ty: x.ty,
                features,
                operand: v.clone(),
            });
        }
    }
    if kind == BatchNormKind::Grad {
        let grad = array(operands, 4)?;
        if !grad.same_dims_and_type(x) {
            return refuse(ShapesError::OutputGradient {
                opcode: opcode(),
                operand: x.clone(),
                gradient: grad.clone(),
            });
        }
    }
    let same = Shape::Array(ArrayShape::new(x.ty, x.dims.clone()));
    let vector = Shape::array(x.ty, vec![features]);
    Ok(match kind {
        BatchNormKind::Inference => same,
        BatchNormKind::Training | BatchNormKind::Grad => {
            Shape::Tuple(vec![same, vector.clone(), vector])
        }
    })
}
