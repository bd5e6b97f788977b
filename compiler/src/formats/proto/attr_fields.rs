//! The attribute values that the hand-written ops and the described ops
//! ([`super::described`]) both keep in `HloInstructionProto`'s fields,
//! each way: dot dimensions, operand aliasing, operand precision and a
//! feed's configuration. A leaf, so that the writer, the reader and the
//! described ops use it without importing each other.

use super::error::InstructionError;
use super::messages::{DotDimensionNumbers, HloInstructionProto, OutputOperandAliasing};
use crate::ir::op::{DotDims, OperandAlias, Precision};

pub(super) fn dot_dims_to_proto(dims: &DotDims) -> DotDimensionNumbers {
    DotDimensionNumbers {
        lhs_contracting_dimensions: dims.lhs_contracting.clone(),
        rhs_contracting_dimensions: dims.rhs_contracting.clone(),
        lhs_batch_dimensions: dims.lhs_batch.clone(),
        rhs_batch_dimensions: dims.rhs_batch.clone(),
    }
}

pub(super) fn aliasing_to_proto(aliasing: &[OperandAlias]) -> Vec<OutputOperandAliasing> {
    aliasing
        .iter()
        .map(|a| OutputOperandAliasing {
            output_shape_index: a.output_index.clone(),
            operand_index: a.operand,
            operand_shape_index: a.operand_index.clone(),
        })
        .collect()
}

/// A feed's configuration: bytes on the wire, text in hlatc (as in XLA's
/// text, where it is a quoted string).
pub(super) fn utf8_config(bytes: &[u8], field: &'static str) -> Result<String, InstructionError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| InstructionError::NotUtf8(field))
}

pub(super) fn aliasing_from_proto(p: &HloInstructionProto) -> Vec<OperandAlias> {
    p.output_operand_aliasing
        .iter()
        .map(|a| OperandAlias {
            output_index: a.output_shape_index.clone(),
            operand: a.operand_index,
            operand_index: a.operand_shape_index.clone(),
        })
        .collect()
}

pub(super) fn dot_dims_from_proto(d: &DotDimensionNumbers) -> DotDims {
    DotDims {
        lhs_batch: d.lhs_batch_dimensions.clone(),
        lhs_contracting: d.lhs_contracting_dimensions.clone(),
        rhs_batch: d.rhs_batch_dimensions.clone(),
        rhs_contracting: d.rhs_contracting_dimensions.clone(),
    }
}

pub(super) fn precision_from_proto(
    p: &HloInstructionProto,
) -> Result<Vec<Precision>, InstructionError> {
    p.precision_config
        .as_ref()
        .map(|pc| {
            pc.operand_precision
                .iter()
                .map(|&v| Precision::from_proto(v).ok_or(InstructionError::UnknownPrecision(v)))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()
        .map(Option::unwrap_or_default)
}
