//! Result shapes of ops from their operands, following XLA's rules.
//!
//! Some ops (parameter, broadcast, reshape, convert, iota, custom-call, ...)
//! take part of their result from the instruction's declared shape; for them
//! the declared shape is required and checked against the operands instead.

mod collective;
mod control_flow;
mod gather_scatter;
mod scalar_callee;
mod token;
mod windowed;

use crate::op::{BinaryOp, ComparisonType, Op, RngAlgorithm, RngDistribution, UnaryOp};
use crate::types::{ArrayShape, ElementType, Shape};

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ShapeError {
    #[error("expects {expected} operand(s), got {got}")]
    OperandCount { expected: String, got: usize },
    #[error("operand {index} must be an array, got {shape}")]
    TupleOperand { index: usize, shape: String },
    #[error("needs an explicit result shape")]
    NeedsResultShape,
    #[error("calls unknown computation '{0}'")]
    UnknownComputation(String),
    #[error("{0}")]
    Invalid(String),
}

/// The signature of a called computation.
#[derive(Clone, Debug, PartialEq)]
pub struct CalleeSignature {
    pub params: Vec<Shape>,
    pub result: Shape,
}

impl CalleeSignature {
    /// `(params) -> result`, for messages.
    pub fn text(&self) -> String {
        let params: Vec<String> = self.params.iter().map(Shape::to_string).collect();
        format!("({}) -> {}", params.join(", "), self.result)
    }
}

fn invalid<T>(msg: impl Into<String>) -> Result<T, ShapeError> {
    Err(ShapeError::Invalid(msg.into()))
}

fn arity(operands: &[&Shape], expected: usize) -> Result<(), ShapeError> {
    if operands.len() != expected {
        return Err(ShapeError::OperandCount {
            expected: expected.to_string(),
            got: operands.len(),
        });
    }
    Ok(())
}

fn array<'a>(operands: &[&'a Shape], index: usize) -> Result<&'a ArrayShape, ShapeError> {
    operands[index]
        .as_array()
        .ok_or_else(|| ShapeError::TupleOperand {
            index,
            shape: operands[index].to_string(),
        })
}

fn declared_array(declared: Option<&Shape>) -> Result<&ArrayShape, ShapeError> {
    match declared {
        Some(Shape::Array(a)) => Ok(a),
        Some(t) => invalid(format!("result must be an array, declared {t}")),
        None => Err(ShapeError::NeedsResultShape),
    }
}

fn check_dims_in_range(dims: &[i64], rank: usize, what: &str) -> Result<(), ShapeError> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d < 0 || d as usize >= rank {
            return invalid(format!("{what} dimension {d} out of range for rank {rank}"));
        }
        if std::mem::replace(&mut seen[d as usize], true) {
            return invalid(format!("{what} dimension {d} repeated"));
        }
    }
    Ok(())
}

fn same_type(a: &ArrayShape, b: &ArrayShape, what: &str) -> Result<(), ShapeError> {
    if a.ty != b.ty {
        return invalid(format!(
            "{what}: element types differ ({} vs {})",
            a.ty, b.ty
        ));
    }
    Ok(())
}

fn arr(ty: ElementType, dims: Vec<i64>) -> Shape {
    Shape::Array(ArrayShape::new(ty, dims))
}

/// Infers the result shape of `op` applied to `operands`. `declared` is the
/// instruction's own shape where it has one; `callee` looks up the signature
/// of a called computation.
pub fn infer_shape(
    op: &Op,
    operands: &[&Shape],
    declared: Option<&Shape>,
    callee: &dyn Fn(&str) -> Option<CalleeSignature>,
) -> Result<Shape, ShapeError> {
    let get_callee =
        |name: &str| callee(name).ok_or_else(|| ShapeError::UnknownComputation(name.to_string()));
    match op {
        Op::Parameter(n) => {
            arity(operands, 0)?;
            if *n < 0 {
                return invalid(format!("parameter number {n} is negative"));
            }
            declared.cloned().ok_or(ShapeError::NeedsResultShape)
        }
        Op::Constant(lit) => {
            arity(operands, 0)?;
            Ok(Shape::Array(lit.shape.clone()))
        }
        Op::Iota { dimension } => {
            arity(operands, 0)?;
            let d = declared_array(declared)?;
            if *dimension < 0 || *dimension as usize >= d.rank() {
                return invalid(format!(
                    "iota_dimension {dimension} out of range for rank {}",
                    d.rank()
                ));
            }
            if d.ty == ElementType::Pred {
                return invalid("iota cannot produce pred");
            }
            Ok(Shape::Array(d.clone()))
        }
        // A copy of any shape is that shape, a tuple's included, as XLA's
        // inference has it (there is no copy opcode in its proto-level ops).
        Op::Unary(UnaryOp::Copy) => {
            arity(operands, 1)?;
            Ok(operands[0].clone())
        }
        Op::Unary(u) => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let ok = match u {
                UnaryOp::Not => a.ty == ElementType::Pred || a.ty.is_integer(),
                UnaryOp::PopulationCount => a.ty.is_integer(),
                // XLA CPU has no abs or sign of an unsigned integer and
                // aborts on one.
                UnaryOp::Abs | UnaryOp::Sign => a.ty.is_float() || a.ty.is_signed_int(),
                UnaryOp::Negate => a.ty != ElementType::Pred,
                _ => a.ty.is_float(),
            };
            if !ok {
                return invalid(format!("{} does not accept {}", u.opcode(), a.ty));
            }
            let ty = if *u == UnaryOp::IsFinite {
                ElementType::Pred
            } else {
                a.ty
            };
            Ok(arr(ty, a.dims.clone()))
        }
        Op::Binary(b) => {
            arity(operands, 2)?;
            let (x, y) = (array(operands, 0)?, array(operands, 1)?);
            if x.dims != y.dims {
                return invalid(format!("operand dimensions differ: {x} vs {y}"));
            }
            same_type(x, y, b.opcode())?;
            let ok = match b {
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                    x.ty == ElementType::Pred || x.ty.is_integer()
                }
                BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic => x.ty.is_integer(),
                BinaryOp::Atan2 => x.ty.is_float(),
                _ => x.ty != ElementType::Pred,
            };
            if !ok {
                return invalid(format!("{} does not accept {}", b.opcode(), x.ty));
            }
            Ok(arr(x.ty, x.dims.clone()))
        }
        Op::Compare { kind, .. } => {
            arity(operands, 2)?;
            let (x, y) = (array(operands, 0)?, array(operands, 1)?);
            if x.dims != y.dims {
                return invalid(format!("operand dimensions differ: {x} vs {y}"));
            }
            same_type(x, y, "compare")?;
            if let Some(k) = kind {
                check_comparison_type(*k, x.ty)?;
            }
            Ok(arr(ElementType::Pred, x.dims.clone()))
        }
        Op::Select => {
            arity(operands, 3)?;
            let (p, t, f) = (
                array(operands, 0)?,
                array(operands, 1)?,
                array(operands, 2)?,
            );
            if p.ty != ElementType::Pred {
                return invalid(format!("select predicate must be pred, got {}", p.ty));
            }
            if !t.same_dims_and_type(f) {
                return invalid(format!("select branches differ: {t} vs {f}"));
            }
            if p.dims != t.dims && !p.dims.is_empty() {
                return invalid(format!("select predicate {p} does not match branches {t}"));
            }
            Ok(Shape::Array(ArrayShape::new(t.ty, t.dims.clone())))
        }
        Op::Clamp => {
            arity(operands, 3)?;
            let (lo, x, hi) = (
                array(operands, 0)?,
                array(operands, 1)?,
                array(operands, 2)?,
            );
            for (b, what) in [(lo, "min"), (hi, "max")] {
                same_type(b, x, "clamp")?;
                if b.dims != x.dims && !b.dims.is_empty() {
                    return invalid(format!("clamp {what} {b} does not match operand {x}"));
                }
            }
            Ok(arr(x.ty, x.dims.clone()))
        }
        Op::Convert => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let d = declared_array(declared)?;
            if a.dims != d.dims {
                return invalid(format!("convert changes dimensions: {a} to {d}"));
            }
            Ok(arr(d.ty, a.dims.clone()))
        }
        Op::Bitcast => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let d = declared_array(declared)?;
            let bytes = |s: &ArrayShape| s.element_count().saturating_mul(s.ty.byte_size() as i64);
            if bytes(a) != bytes(d) {
                return invalid(format!(
                    "bitcast from {a} ({} bytes) to {d} ({} bytes) changes the byte size",
                    bytes(a),
                    bytes(d)
                ));
            }
            if (a.ty == ElementType::Pred) != (d.ty == ElementType::Pred) {
                return invalid("bitcast between pred and another type");
            }
            Ok(Shape::Array(d.clone()))
        }
        Op::BitcastConvert => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let d = declared_array(declared)?;
            let (wi, wo) = (a.ty.bit_width(), d.ty.bit_width());
            let dims = if wi == wo {
                a.dims.clone()
            } else if wi > wo {
                let mut v = a.dims.clone();
                v.push((wi / wo) as i64);
                v
            } else {
                match a.dims.split_last() {
                    Some((&last, rest)) if last as usize == wo / wi => rest.to_vec(),
                    _ => {
                        return invalid(format!(
                            "bitcast-convert from {a} to {} needs a last dimension of {}",
                            d.ty,
                            wo / wi
                        ))
                    }
                }
            };
            if a.ty == ElementType::Pred || d.ty == ElementType::Pred {
                return invalid("bitcast-convert does not accept pred");
            }
            Ok(arr(d.ty, dims))
        }
        Op::Broadcast { dimensions } => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let d = declared_array(declared)?;
            if dimensions.len() != a.rank() {
                return invalid(format!(
                    "broadcast dimensions {dimensions:?} must have one entry per operand dimension ({})",
                    a.rank()
                ));
            }
            check_dims_in_range(dimensions, d.rank(), "broadcast")?;
            for (i, &od) in dimensions.iter().enumerate() {
                if a.dims[i] != d.dims[od as usize] {
                    return invalid(format!(
                        "broadcast operand dimension {i} (size {}) does not match result dimension {od} (size {})",
                        a.dims[i], d.dims[od as usize]
                    ));
                }
            }
            Ok(arr(a.ty, d.dims.clone()))
        }
        Op::Reshape => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            let d = declared_array(declared)?;
            if a.element_count() != d.element_count() {
                return invalid(format!("reshape changes the element count: {a} to {d}"));
            }
            Ok(arr(a.ty, d.dims.clone()))
        }
        Op::Transpose { permutation } => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            if permutation.len() != a.rank() {
                return invalid(format!(
                    "transpose permutation {permutation:?} does not match rank {}",
                    a.rank()
                ));
            }
            check_dims_in_range(permutation, a.rank(), "transpose")?;
            Ok(arr(
                a.ty,
                permutation.iter().map(|&p| a.dims[p as usize]).collect(),
            ))
        }
        Op::Reverse { dimensions } => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            check_dims_in_range(dimensions, a.rank(), "reverse")?;
            Ok(arr(a.ty, a.dims.clone()))
        }
        Op::Slice { slices } => {
            arity(operands, 1)?;
            let a = array(operands, 0)?;
            if slices.len() != a.rank() {
                return invalid(format!(
                    "slice has {} ranges for rank {}",
                    slices.len(),
                    a.rank()
                ));
            }
            let mut dims = Vec::with_capacity(slices.len());
            for (i, s) in slices.iter().enumerate() {
                if s.start < 0 || s.start > s.limit || s.limit > a.dims[i] || s.stride < 1 {
                    return invalid(format!(
                        "slice range [{}:{}:{}] invalid for dimension {i} of size {}",
                        s.start, s.limit, s.stride, a.dims[i]
                    ));
                }
                // start <= limit was checked, so the span is non-negative.
                // XLA rounds up as (span + stride - 1) / stride, which must
                // not overflow either.
                let span = s.limit - s.start;
                if span.checked_add(s.stride - 1).is_none() {
                    return invalid(format!(
                        "slice stride {} of dimension {i} is too large",
                        s.stride
                    ));
                }
                dims.push(span / s.stride + i64::from(span % s.stride != 0));
            }
            Ok(arr(a.ty, dims))
        }
        Op::DynamicSlice { sizes } => {
            if operands.is_empty() {
                return Err(ShapeError::OperandCount {
                    expected: "1 + rank".into(),
                    got: 0,
                });
            }
            let a = array(operands, 0)?;
            check_start_indices(operands, 1, a.rank())?;
            if sizes.len() != a.rank() || sizes.iter().zip(&a.dims).any(|(s, d)| *s < 0 || s > d) {
                return invalid(format!("dynamic_slice_sizes {sizes:?} invalid for {a}"));
            }
            Ok(arr(a.ty, sizes.clone()))
        }
        Op::DynamicUpdateSlice => {
            if operands.len() < 2 {
                return Err(ShapeError::OperandCount {
                    expected: "2 + rank".into(),
                    got: operands.len(),
                });
            }
            let (a, u) = (array(operands, 0)?, array(operands, 1)?);
            same_type(a, u, "dynamic-update-slice")?;
            if u.rank() != a.rank() || u.dims.iter().zip(&a.dims).any(|(x, y)| x > y) {
                return invalid(format!("update {u} does not fit in {a}"));
            }
            check_start_indices(operands, 2, a.rank())?;
            Ok(arr(a.ty, a.dims.clone()))
        }
        Op::Concatenate { dimension } => {
            if operands.is_empty() {
                return Err(ShapeError::OperandCount {
                    expected: "at least 1".into(),
                    got: 0,
                });
            }
            let first = array(operands, 0)?;
            let d = *dimension;
            if d < 0 || d as usize >= first.rank() {
                return invalid(format!(
                    "concatenate dimension {d} out of range for rank {}",
                    first.rank()
                ));
            }
            let mut dims = first.dims.clone();
            dims[d as usize] = 0;
            for i in 0..operands.len() {
                let o = array(operands, i)?;
                same_type(first, o, "concatenate")?;
                if o.rank() != first.rank()
                    || o.dims
                        .iter()
                        .zip(&first.dims)
                        .enumerate()
                        .any(|(k, (x, y))| k != d as usize && x != y)
                {
                    return invalid(format!(
                        "concatenate operand {i} {o} does not match {first}"
                    ));
                }
                dims[d as usize] = dims[d as usize].saturating_add(o.dims[d as usize]);
            }
            Ok(arr(first.ty, dims))
        }
        Op::Pad { config } => {
            arity(operands, 2)?;
            let (a, v) = (array(operands, 0)?, array(operands, 1)?);
            same_type(a, v, "pad")?;
            if v.rank() != 0 {
                return invalid(format!("padding value must be a scalar, got {v}"));
            }
            if config.len() != a.rank() {
                return invalid(format!(
                    "padding has {} dimensions for rank {}",
                    config.len(),
                    a.rank()
                ));
            }
            let mut dims = Vec::with_capacity(a.rank());
            for (n, p) in a.dims.iter().zip(config) {
                if p.interior < 0 {
                    return invalid("interior padding must be non-negative");
                }
                let out = (n - 1)
                    .max(0)
                    .checked_mul(p.interior)
                    .and_then(|x| x.checked_add(*n))
                    .and_then(|x| x.checked_add(p.low))
                    .and_then(|x| x.checked_add(p.high))
                    .unwrap_or(-1);
                if out < 0 {
                    return invalid(format!(
                        "padding {}_{}_{} makes dimension of size {n} negative",
                        p.low, p.high, p.interior
                    ));
                }
                dims.push(out);
            }
            Ok(arr(a.ty, dims))
        }
        Op::Dot {
            dims, precision, ..
        } => {
            arity(operands, 2)?;
            let (l, r) = (array(operands, 0)?, array(operands, 1)?);
            if !precision.is_empty() && precision.len() != 2 {
                return invalid("operand_precision needs one entry per operand");
            }
            let ty = contraction_type("dot", l, r, declared)?;
            if dims.lhs_batch.len() != dims.rhs_batch.len()
                || dims.lhs_contracting.len() != dims.rhs_contracting.len()
            {
                return invalid("dot needs as many lhs as rhs batch and contracting dimensions");
            }
            let lhs_all: Vec<i64> = dims
                .lhs_batch
                .iter()
                .chain(&dims.lhs_contracting)
                .copied()
                .collect();
            let rhs_all: Vec<i64> = dims
                .rhs_batch
                .iter()
                .chain(&dims.rhs_contracting)
                .copied()
                .collect();
            check_dims_in_range(&lhs_all, l.rank(), "lhs")?;
            check_dims_in_range(&rhs_all, r.rank(), "rhs")?;
            for (a, b) in dims
                .lhs_batch
                .iter()
                .zip(&dims.rhs_batch)
                .chain(dims.lhs_contracting.iter().zip(&dims.rhs_contracting))
            {
                if l.dims[*a as usize] != r.dims[*b as usize] {
                    return invalid(format!(
                        "dot dimension sizes differ: lhs dim {a} is {}, rhs dim {b} is {}",
                        l.dims[*a as usize], r.dims[*b as usize]
                    ));
                }
            }
            let mut out: Vec<i64> = dims.lhs_batch.iter().map(|&d| l.dims[d as usize]).collect();
            out.extend(
                (0..l.rank() as i64)
                    .filter(|d| !lhs_all.contains(d))
                    .map(|d| l.dims[d as usize]),
            );
            out.extend(
                (0..r.rank() as i64)
                    .filter(|d| !rhs_all.contains(d))
                    .map(|d| r.dims[d as usize]),
            );
            Ok(arr(ty, out))
        }
        Op::Reduce {
            dimensions,
            to_apply,
        } => {
            let inputs = inputs_and_inits("reduce", operands)?;
            check_dims_in_range(dimensions, inputs[0].rank(), "reduce")?;
            check_reducer(to_apply, &get_callee(to_apply)?, &inputs)?;
            let results = inputs.iter().map(|x| {
                let kept = (0..x.rank() as i64)
                    .filter(|d| !dimensions.contains(d))
                    .map(|d| x.dims[d as usize])
                    .collect();
                arr(x.ty, kept)
            });
            Ok(one_or_tuple(results.collect()))
        }
        Op::Convolution {
            window,
            dims,
            feature_group_count,
            batch_group_count,
            precision,
        } => windowed::convolution(
            window,
            dims,
            (*feature_group_count, *batch_group_count),
            precision,
            operands,
            declared,
        ),
        Op::ReduceWindow { window, to_apply } => {
            let inputs = inputs_and_inits("reduce-window", operands)?;
            check_reducer(to_apply, &get_callee(to_apply)?, &inputs)?;
            windowed::reduce_window(window, &inputs)
        }
        Op::Tuple => Ok(Shape::Tuple(
            operands.iter().map(|s| (*s).clone()).collect(),
        )),
        Op::OptBarrier => {
            arity(operands, 1)?;
            Ok(operands[0].clone())
        }
        Op::GetTupleElement { index } => {
            arity(operands, 1)?;
            match operands[0] {
                Shape::Tuple(elems) => usize::try_from(*index)
                    .ok()
                    .and_then(|i| elems.get(i))
                    .cloned()
                    .ok_or_else(|| {
                        ShapeError::Invalid(format!(
                            "tuple index {index} out of range for {}",
                            operands[0]
                        ))
                    }),
                s => invalid(format!("get-tuple-element needs a tuple operand, got {s}")),
            }
        }
        Op::Call { to_apply, .. } => {
            control_flow::call("call", to_apply, get_callee(to_apply)?, operands)
        }
        Op::Fusion {
            calls, aliasing, ..
        } => {
            let result = control_flow::call("fusion", calls, get_callee(calls)?, operands)?;
            check_operand_aliasing(aliasing, operands, &result)?;
            Ok(result)
        }
        Op::While { condition, body } => control_flow::while_loop(
            (condition, get_callee(condition)?),
            (body, get_callee(body)?),
            operands,
        ),
        Op::Sort {
            dimension,
            comparator,
            ..
        } => scalar_callee::sort(*dimension, (comparator, get_callee(comparator)?), operands),
        Op::Map {
            dimensions,
            to_apply,
        } => scalar_callee::map(dimensions, (to_apply, get_callee(to_apply)?), operands),
        Op::Rng { distribution } => {
            arity(operands, 2)?;
            let (a, b) = (array(operands, 0)?, array(operands, 1)?);
            let d = declared_array(declared)?;
            if a.rank() != 0 || b.rank() != 0 || a.ty != d.ty || b.ty != d.ty {
                return invalid(format!(
                    "rng parameters must be two {} scalars, got {a} and {b}",
                    d.ty
                ));
            }
            let ok = match distribution {
                RngDistribution::Uniform => d.ty.is_float() || d.ty.is_integer(),
                RngDistribution::Normal => d.ty.is_float(),
            };
            if !ok {
                return invalid(format!("{} cannot produce {}", distribution.name(), d.ty));
            }
            Ok(Shape::Array(d.clone()))
        }
        Op::AllReduce {
            collective,
            to_apply,
        } => collective::all_reduce(collective, (to_apply, get_callee(to_apply)?), operands),
        Op::AllGather {
            collective,
            dimension,
        } => collective::resized(
            "all-gather",
            collective,
            *dimension,
            true,
            operands,
            declared,
        ),
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => collective::reduce_scatter(
            collective,
            *dimension,
            (to_apply, get_callee(to_apply)?),
            operands,
            declared,
        ),
        Op::AllToAll {
            collective,
            dimension,
        } => collective::all_to_all(collective, *dimension, operands),
        Op::CollectivePermute { pairs, .. } => collective::collective_permute(pairs, operands),
        Op::ReplicaId | Op::PartitionId => collective::device_id(operands),
        Op::AllReduceStart {
            collective,
            to_apply,
        } => collective::all_reduce(collective, (to_apply, get_callee(to_apply)?), operands),
        Op::AllGatherStart {
            collective,
            dimension,
        } => collective::started(operands, declared, |results| {
            collective::resized(
                "all-gather",
                collective,
                *dimension,
                true,
                operands,
                results,
            )
        }),
        Op::CollectivePermuteStart { pairs, .. } => collective::started(operands, declared, |_| {
            collective::collective_permute(pairs, operands)
        }),
        Op::CollectiveDone(kind) => collective::done(*kind, operands),
        Op::Conditional { branches } => {
            let sigs = branches
                .iter()
                .map(|b| Ok((b.as_str(), get_callee(b)?)))
                .collect::<Result<Vec<_>, ShapeError>>()?;
            control_flow::conditional(&sigs, operands)
        }
        Op::Gather {
            dims, slice_sizes, ..
        } => {
            arity(operands, 2)?;
            gather_scatter::gather(array(operands, 0)?, array(operands, 1)?, dims, slice_sizes)
        }
        Op::Scatter { dims, to_apply, .. } => {
            // Variadic: N inputs, the indices, then N updates.
            if operands.len() < 3 || operands.len().is_multiple_of(2) {
                return Err(ShapeError::OperandCount {
                    expected: "an odd number, at least 3 (inputs, indices, updates)".into(),
                    got: operands.len(),
                });
            }
            let n = operands.len() / 2;
            let arrays = |range: std::ops::Range<usize>| {
                range
                    .map(|i| array(operands, i))
                    .collect::<Result<Vec<_>, _>>()
            };
            gather_scatter::scatter(
                &arrays(0..n)?,
                array(operands, n)?,
                &arrays(n + 1..2 * n + 1)?,
                dims,
                to_apply,
                &get_callee(to_apply)?,
            )
        }
        Op::RngBitGenerator { algorithm } => {
            arity(operands, 1)?;
            let state = array(operands, 0)?;
            // The state is a u64 key and counter: two words, or three for
            // Philox. XLA CPU aborts on any other state, and refuses a third
            // word for ThreeFry and the default algorithm (ThreeFry there).
            let ok = state.ty == ElementType::U64
                && match algorithm {
                    RngAlgorithm::Philox => matches!(state.dims.as_slice(), [2] | [3]),
                    _ => state.dims == [2],
                };
            if !ok {
                return invalid(format!(
                    "rng-bit-generator state for {} must be u64[2]{}, got {state}",
                    algorithm.name(),
                    if *algorithm == RngAlgorithm::Philox {
                        " or u64[3]"
                    } else {
                        ""
                    }
                ));
            }
            match declared {
                Some(Shape::Tuple(elems)) if elems.len() == 2 => {
                    if !elems[0].compatible(operands[0]) {
                        return invalid(format!(
                            "rng-bit-generator state result {} must match {state}",
                            elems[0]
                        ));
                    }
                    match &elems[1] {
                        Shape::Array(o) if matches!(o.ty, ElementType::U32 | ElementType::U64) => {
                            Ok(Shape::Tuple(elems.clone()))
                        }
                        o => invalid(format!(
                            "rng-bit-generator output must be a u32 or u64 array, got {o}"
                        )),
                    }
                }
                Some(s) => invalid(format!(
                    "rng-bit-generator result must be (state, bits), got {s}"
                )),
                None => Err(ShapeError::NeedsResultShape),
            }
        }
        Op::CustomCall(cc) => {
            if let Some(layouts) = &cc.operand_layouts {
                if layouts.len() != operands.len() {
                    return invalid(format!(
                        "operand_layout_constraints lists {} shapes for {} operands",
                        layouts.len(),
                        operands.len()
                    ));
                }
                if let Some((i, (l, o))) = layouts
                    .iter()
                    .zip(operands)
                    .enumerate()
                    .find(|(_, (l, o))| !l.compatible(o))
                {
                    return invalid(format!(
                        "operand_layout_constraints gives operand {i} as {l}, but it is {o}"
                    ));
                }
            }
            for name in &cc.called {
                get_callee(name)?;
            }
            if let Some(dims) = cc.convolution.as_ref().and_then(|c| c.dims.as_ref()) {
                dims.check_writable()
                    .map_err(|m| ShapeError::Invalid(format!("dim_labels: {m}")))?;
            }
            let result = declared.cloned().ok_or(ShapeError::NeedsResultShape)?;
            check_operand_aliasing(&cc.aliasing, operands, &result)?;
            Ok(result)
        }
        Op::CopyStart { .. } => copy_start(operands, declared),
        Op::CopyDone => copy_done(operands),
        Op::AfterAll => token::after_all(operands),
        Op::AddDependency => token::add_dependency(operands),
        Op::Transfer(t) => token::transfer(t, operands, declared),
        Op::Infeed { .. } => token::infeed(operands, declared),
        Op::Outfeed { shape, .. } => token::outfeed(operands, shape.as_deref()),
    }
}

/// `(destination, source, u32[])`: both the operand's shape up to layout,
/// as XLA's verifier compares them (the destination's memory space is its
/// own).
fn copy_start(operands: &[&Shape], declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    arity(operands, 1)?;
    let x = operands[0];
    match declared {
        Some(Shape::Tuple(e))
            if e.len() == 3
                && e[0].compatible(x)
                && e[1].compatible(x)
                && e[2].is_scalar_of(ElementType::U32) =>
        {
            Ok(Shape::Tuple(e.clone()))
        }
        Some(s) => invalid(format!(
            "copy-start of {x} gives (destination, source, u32[]), both {x} up to layout; declared {s}"
        )),
        None => Err(ShapeError::NeedsResultShape),
    }
}

/// The destination of the copy a `copy-start` began.
fn copy_done(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    arity(operands, 1)?;
    match operands[0] {
        Shape::Tuple(e) if e.len() == 3 && e[2].is_scalar_of(ElementType::U32) => Ok(e[0].clone()),
        s => invalid(format!(
            "copy-done takes a copy-start's (destination, source, u32[]), got {s}"
        )),
    }
}

fn check_start_indices(operands: &[&Shape], from: usize, rank: usize) -> Result<(), ShapeError> {
    if operands.len() != from + rank {
        return Err(ShapeError::OperandCount {
            expected: format!("{} ({} + one start index per dimension)", from + rank, from),
            got: operands.len(),
        });
    }
    for i in from..operands.len() {
        let s = array(operands, i)?;
        if s.rank() != 0 || !s.ty.is_integer() {
            return invalid(format!(
                "start index {} must be an integer scalar, got {s}",
                i - from
            ));
        }
        let first = array(operands, from)?;
        if s.ty != first.ty {
            return invalid(format!(
                "start indices must all have one type: index 0 is {}, index {} is {}",
                first.ty,
                i - from,
                s.ty
            ));
        }
    }
    Ok(())
}

/// The comparison types XLA accepts for an element type: FLOAT or
/// TOTALORDER for floats, SIGNED for signed integers, UNSIGNED for unsigned
/// integers and pred. Any other pairing aborts XLA's compiler.
fn check_comparison_type(kind: ComparisonType, ty: ElementType) -> Result<(), ShapeError> {
    let ok = match kind {
        ComparisonType::Float | ComparisonType::TotalOrder => ty.is_float(),
        ComparisonType::Signed => ty.is_signed_int(),
        ComparisonType::Unsigned => ty == ElementType::Pred || ty.is_unsigned_int(),
    };
    if !ok {
        return invalid(format!(
            "comparison type {} does not apply to {ty}",
            kind.name()
        ));
    }
    Ok(())
}

/// Each aliased output and operand part exists, and the two have one shape
/// up to layout.
fn check_operand_aliasing(
    aliasing: &[crate::op::OperandAlias],
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
            (Some(o), Some(i)) if o.compatible(i) => {}
            _ => {
                return invalid(format!(
                    "output_to_operand_aliasing {a} does not name an output and an operand part of one shape"
                ))
            }
        }
    }
    Ok(())
}

/// The element type of a dot or convolution of `l` and `r`: the written
/// one (an accumulation type), else the operands'. Integer weights may meet
/// float activations (`s4` x `bf16`), as XLA allows; the result is then a
/// float type, written.
fn contraction_type(
    opcode: &str,
    l: &ArrayShape,
    r: &ArrayShape,
    declared: Option<&Shape>,
) -> Result<ElementType, ShapeError> {
    let mixed = l.ty.is_float() != r.ty.is_float();
    if l.ty == ElementType::Pred || r.ty == ElementType::Pred {
        return invalid(format!(
            "{opcode} operand types {} and {} are incompatible",
            l.ty, r.ty
        ));
    }
    Ok(match declared {
        Some(Shape::Array(d))
            if (d.ty.is_float() == l.ty.is_float() || mixed && d.ty.is_float())
                && d.ty != ElementType::Pred =>
        {
            d.ty
        }
        _ if mixed => {
            return invalid(format!(
                "a {opcode} of {} and {} gives a float type, written as its result",
                l.ty, r.ty
            ))
        }
        _ => l.ty,
    })
}

/// A reduction's operands: inputs of one shape, then a scalar init of each
/// input's type. Returns the inputs.
fn inputs_and_inits<'a>(
    opcode: &str,
    operands: &[&'a Shape],
) -> Result<Vec<&'a ArrayShape>, ShapeError> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return Err(ShapeError::OperandCount {
            expected: "an even number (inputs, then inits)".into(),
            got: operands.len(),
        });
    }
    let n = operands.len() / 2;
    let first = array(operands, 0)?;
    let mut inputs = Vec::with_capacity(n);
    for i in 0..n {
        let (x, init) = (array(operands, i)?, array(operands, n + i)?);
        if x.dims != first.dims {
            return invalid(format!(
                "{opcode} inputs differ in dimensions: {x} vs {first}"
            ));
        }
        if init.rank() != 0 || init.ty != x.ty {
            return invalid(format!("{opcode} init {init} must be a {} scalar", x.ty));
        }
        inputs.push(x);
    }
    Ok(inputs)
}

/// A reducer over `inputs`: (T1.., T1..) -> T1, or a tuple for several.
fn check_reducer(
    name: &str,
    sig: &CalleeSignature,
    inputs: &[&ArrayShape],
) -> Result<(), ShapeError> {
    let scalars: Vec<Shape> = inputs.iter().map(|x| Shape::scalar(x.ty)).collect();
    let params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
    check_signature(name, sig, &params, &one_or_tuple(scalars))
}

/// One result as itself, several as a tuple (variadic reductions).
fn one_or_tuple(mut results: Vec<Shape>) -> Shape {
    if results.len() == 1 {
        results.pop().expect("one result")
    } else {
        Shape::Tuple(results)
    }
}

fn check_signature(
    name: &str,
    sig: &CalleeSignature,
    params: &[Shape],
    result: &Shape,
) -> Result<(), ShapeError> {
    let ok = sig.params.len() == params.len()
        && sig.params.iter().zip(params).all(|(a, b)| a.compatible(b))
        && sig.result.compatible(result);
    if !ok {
        let required = CalleeSignature {
            params: params.to_vec(),
            result: result.clone(),
        };
        return invalid(format!(
            "'{name}' has signature {} but {} is required",
            sig.text(),
            required.text()
        ));
    }
    Ok(())
}
