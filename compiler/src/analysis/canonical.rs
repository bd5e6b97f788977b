//! One spelling per meaning: attributes that restate XLA's defaults are
//! dropped on import, so a module reads back equal whether it came from our
//! printer, XLA's printer or a proto (XLA's proto writer fills defaults in).

use crate::ir::module::Module;
use crate::ir::op::{ComparisonType, Op, Precision};
use crate::ir::shape::ElementType;

/// The comparison type XLA assumes for operands of `ty`.
pub fn default_comparison_type(ty: ElementType) -> ComparisonType {
    if ty.is_float() || ty.is_complex() {
        ComparisonType::Float
    } else if ty.is_signed_int() {
        ComparisonType::Signed
    } else {
        ComparisonType::Unsigned
    }
}

/// Removes default comparison types and all-default operand precisions
/// (and a custom call's convolution attributes left with nothing to say),
/// and an outfeed_shape that is the data's own.
pub fn drop_default_attributes(m: &mut Module) {
    for c in &mut m.computations {
        let ids: Vec<_> = c.ids().collect();
        for id in ids {
            let first = c.operands(id).first().map(|&o| &c.instr(o).shape);
            let operand_ty = first.and_then(|s| s.as_array().map(|a| a.ty));
            let restates_data = matches!(&c.instr(id).op,
                Op::Outfeed { shape: Some(s), .. } if Some(&**s) == first);
            match &mut c.instr_mut(id).op {
                Op::Compare { kind, .. } => {
                    if let (Some(k), Some(ty)) = (*kind, operand_ty) {
                        if k == default_comparison_type(ty) {
                            *kind = None;
                        }
                    }
                }
                // XLA's reader fills in a convolution's two.
                Op::Dot { precision, .. }
                | Op::RaggedDot { precision, .. }
                | Op::Convolution { precision, .. }
                    if precision.iter().all(|&p| p == Precision::Default) =>
                {
                    precision.clear();
                }
                // XLA writes it always, as the data's shape when unset.
                Op::Outfeed { shape, .. } if restates_data => {
                    *shape = None;
                }
                Op::CustomCall(cc) => {
                    if let Some(conv) = &mut cc.convolution {
                        if conv.precision.iter().all(|&p| p == Precision::Default) {
                            conv.precision.clear();
                        }
                        if conv.is_empty() {
                            cc.convolution = None;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}
