//! The custom-call targets XLA CPU implements itself and trusts blindly:
//! their operands and result are checked here, since a mismatch aborts the
//! process instead of returning an error.

use hlatc_compiler::ir::op::CustomCall;
use hlatc_compiler::{ArrayShape, ElementType, Shape};

/// A custom call XLA CPU would abort on or cannot run. Shapes are boxed to
/// keep the error, returned on every path, small.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CustomCallError {
    /// A sharding marker without exactly one operand.
    #[error("custom call '{target}' takes exactly one operand, got {count}")]
    OperandCount { target: String, count: usize },
    /// A sharding marker whose result is not its operand's (`Sharding`
    /// keeps the shape; the SPMD conversions, only the element type).
    #[error(
        "custom call '{target}' must return its operand's {} ({operand}), not {result}",
        kept_by(.target)
    )]
    ResultMismatch {
        target: String,
        operand: Box<Shape>,
        result: Box<Shape>,
    },
    /// A target for dynamic shapes, which hlatc's runtime never passes.
    #[error("custom call '{target}' works on dynamic shapes, which hlatc does not support")]
    Dynamic { target: String },
    /// A target XLA CPU's own rewrites create, whose backend config it
    /// trusts unchecked.
    #[error(
        "custom call '{target}' is internal to XLA CPU (its own rewrites create it with a \
         backend config it trusts); it cannot be run from a module"
    )]
    Internal { target: String },
    /// `TopK` with other than one array operand.
    #[error("custom call 'TopK' takes exactly one array operand")]
    TopKOperand,
    /// `TopK` of other than an f32 vector or batch of vectors.
    #[error("custom call 'TopK' needs an f32 operand of rank 1 or 2, got {operand}")]
    TopKOperandType { operand: Box<ArrayShape> },
    /// `TopK` whose result is not a pair of arrays.
    #[error("custom call 'TopK' returns (values, indices), not {result}")]
    TopKResult { result: Box<Shape> },
    /// `TopK` whose values and indices do not match its operand: the same
    /// batch, at most `max_k` of each, f32 values and s32 indices.
    #[error(
        "custom call 'TopK' on {operand} must return (f32[..,k], s32[..,k]) with k <= {max_k}, not {result}"
    )]
    TopKShapes {
        operand: Box<ArrayShape>,
        max_k: i64,
        result: Box<Shape>,
    },
}

/// What a sharding marker keeps of its operand.
fn kept_by(target: &str) -> &'static str {
    if target == "Sharding" {
        "shape"
    } else {
        "element type"
    }
}

/// Checks a call to one of XLA CPU's own targets; any other target passes.
pub(super) fn check_target(
    call: &CustomCall,
    operands: &[&Shape],
    result: &Shape,
) -> Result<(), CustomCallError> {
    let target = call.target.as_str();
    match target {
        "Sharding" | "SPMDFullToShardShape" | "SPMDShardToFullShape" => {
            let [x] = operands else {
                return Err(CustomCallError::OperandCount {
                    target: target.to_string(),
                    count: operands.len(),
                });
            };
            let same = match (x, result) {
                (Shape::Array(a), Shape::Array(r)) => {
                    a.ty == r.ty && (target != "Sharding" || a.dims == r.dims)
                }
                _ => false,
            };
            if !same {
                return Err(CustomCallError::ResultMismatch {
                    target: target.to_string(),
                    operand: Box::new((*x).clone()),
                    result: Box::new(result.clone()),
                });
            }
            Ok(())
        }
        "TopK" => check_top_k(operands, result),
        "SliceToDynamic" | "PadToStatic" => Err(CustomCallError::Dynamic {
            target: target.to_string(),
        }),
        t if t.starts_with("__onednn$") || t.starts_with("__cpu$") || t.starts_with("__xnn") => {
            Err(CustomCallError::Internal {
                target: target.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// `TopK(x)`: `x` is `f32[n]` or `f32[b, n]`; the result is
/// `(f32[.., k], s32[.., k])` with `k <= n`.
fn check_top_k(operands: &[&Shape], result: &Shape) -> Result<(), CustomCallError> {
    let [Shape::Array(x)] = operands else {
        return Err(CustomCallError::TopKOperand);
    };
    if x.ty != ElementType::F32 || !(1..=2).contains(&x.rank()) {
        return Err(CustomCallError::TopKOperandType {
            operand: Box::new(x.clone()),
        });
    }
    let not_a_pair = || CustomCallError::TopKResult {
        result: Box::new(result.clone()),
    };
    let Shape::Tuple(elems) = result else {
        return Err(not_a_pair());
    };
    let (Some(Shape::Array(v)), Some(Shape::Array(i)), 2) =
        (elems.first(), elems.get(1), elems.len())
    else {
        return Err(not_a_pair());
    };
    let batch = &x.dims[..x.rank() - 1];
    let n = x.dims[x.rank() - 1];
    let ok = |s: &ArrayShape, ty| {
        s.ty == ty
            && s.rank() == x.rank()
            && &s.dims[..s.rank() - 1] == batch
            && s.dims[s.rank() - 1] <= n
    };
    if !ok(v, ElementType::F32) || !ok(i, ElementType::S32) || v.dims != i.dims {
        return Err(CustomCallError::TopKShapes {
            operand: Box::new(x.clone()),
            max_k: n,
            result: Box::new(result.clone()),
        });
    }
    Ok(())
}
