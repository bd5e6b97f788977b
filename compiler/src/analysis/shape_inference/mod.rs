//! Result shapes of ops from their operands, following XLA's rules.
//!
//! Some ops (parameter, broadcast, reshape, convert, iota, custom-call, ...)
//! take part of their result from the instruction's declared shape; for them
//! the declared shape is required and checked against the operands instead.
//!
//! [`infer_shape`] checks a fixed operand count (the op table's arity)
//! and dispatches: each op family's rules live in the module its
//! [`OpFamily`](crate::ir::op::OpFamily) names (`values`, `elementwise`,
//! `data_movement`, `dynamic_dims`, `indexing`, `linear_algebra`,
//! `reduction`, `windowed`, `fft`, `collective`, `control_flow`,
//! `custom_call`, `random`, `token`), beside the helpers they share here.
//! What a rule refuses is a typed [`ShapeError`] (`error`, the one module
//! that is not a family): which kind of contract broke, and the data it
//! was checked on.

mod collective;
mod control_flow;
mod custom_call;
mod data_movement;
mod dynamic_dims;
mod elementwise;
mod error;
mod fft;
mod indexing;
mod linear_algebra;
mod random;
mod reduction;
mod token;
mod values;
mod windowed;

use crate::ir::computation_id::ComputationId;
use crate::ir::op::description::Arity;
use crate::ir::op::{Op, Opcode};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

pub use error::{
    AttributeError, CalleeError, DeclaredError, DimensionError, OperandError, OperandRule,
    ShapeError, ShapesError, SplitError, TypeError,
};

pub use crate::ir::computation::CalleeSignature;

const CALL: Opcode = Opcode::new("call");
const ALL_GATHER: Opcode = Opcode::new("all-gather");

/// Refuses with `e`, whichever kind of [`ShapeError`] it is.
fn refuse<T>(e: impl Into<ShapeError>) -> Result<T, ShapeError> {
    Err(e.into())
}

/// An unbounded dimension (`f32[?]`, what StableHLO's `tensor<?xf32>`
/// becomes) has no size to compute with, so hlatc has no shape rule over
/// one: it passes through parameters, custom calls (whose targets define
/// their results) and tuples, and is refused on every other op.
fn passes_unbounded_through(
    op: &Op,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<(), ShapeError> {
    if matches!(
        op,
        Op::Parameter(_) | Op::CustomCall(_) | Op::Tuple | Op::GetTupleElement { .. }
    ) {
        return Ok(());
    }
    match operands
        .iter()
        .copied()
        .chain(declared)
        .find(|s| s.has_unbounded())
    {
        None => Ok(()),
        Some(s) => Err(ShapeError::Unbounded(Box::new(s.clone()))),
    }
}

fn arity(operands: &[&Shape], expected: usize) -> Result<(), ShapeError> {
    if operands.len() != expected {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::Exactly(expected),
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
            shape: Box::new(operands[index].clone()),
        })
}

fn declared_array(declared: Option<&Shape>) -> Result<&ArrayShape, ShapeError> {
    match declared {
        Some(Shape::Array(a)) => Ok(a),
        Some(t) => refuse(DeclaredError::NotArray(t.clone())),
        None => Err(ShapeError::NeedsResultShape),
    }
}

/// The one operand of an op that takes part of its result from the
/// declared shape (convert, broadcast, reshape, ...), and that shape.
fn operand_and_declared<'a>(
    operands: &[&'a Shape],
    declared: Option<&'a Shape>,
) -> Result<(&'a ArrayShape, &'a ArrayShape), ShapeError> {
    Ok((array(operands, 0)?, declared_array(declared)?))
}

/// `what` names the list of dimensions (`broadcast`, `lhs`, ...).
fn check_dims_in_range(dims: &[i64], rank: usize, what: &'static str) -> Result<(), ShapeError> {
    let mut seen = vec![false; rank];
    for &dimension in dims {
        if dimension < 0 || dimension as usize >= rank {
            return refuse(DimensionError::OutOfRange {
                what,
                dimension,
                rank,
            });
        }
        if std::mem::replace(&mut seen[dimension as usize], true) {
            return refuse(DimensionError::Repeated { what, dimension });
        }
    }
    Ok(())
}

fn same_type(a: &ArrayShape, b: &ArrayShape, opcode: Opcode) -> Result<(), ShapeError> {
    if a.ty != b.ty {
        return refuse(TypeError::Differ {
            opcode,
            lhs: a.ty,
            rhs: b.ty,
        });
    }
    Ok(())
}

/// The operands as arrays of one shape.
fn arrays_of_same_dims<'a>(
    opcode: Opcode,
    operands: &[&'a Shape],
) -> Result<Vec<&'a ArrayShape>, ShapeError> {
    if operands.is_empty() {
        return Err(ShapeError::OperandCount {
            expected: OperandRule::AtLeastOne,
            got: 0,
        });
    }
    let arrays = (0..operands.len())
        .map(|i| array(operands, i))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(other) = arrays.iter().find(|a| a.dims != arrays[0].dims) {
        return refuse(ShapesError::Differ {
            opcode,
            what: "operands",
            lhs: arrays[0].clone(),
            rhs: (*other).clone(),
        });
    }
    Ok(arrays)
}

fn arr(ty: ElementType, dims: Vec<i64>) -> Shape {
    Shape::Array(ArrayShape::new(ty, dims))
}

/// Infers the result shape of `op` applied to `operands`. `declared` is the
/// instruction's own shape where it has one; `callee` looks up the signature
/// of a called computation.
pub fn infer_shape<'c>(
    op: &Op,
    operands: &[&Shape],
    declared: Option<&Shape>,
    callee: &dyn Fn(ComputationId) -> Option<(&'c str, CalleeSignature)>,
) -> Result<Shape, ShapeError> {
    let get_callee = |id: ComputationId| callee(id).ok_or(ShapeError::UnknownComputation(id));
    if let Arity::Exactly(n) = op.arity() {
        arity(operands, n)?;
    }
    passes_unbounded_through(op, operands, declared)?;
    // Grouped by the ops' families, each calling into its family's module.
    match op {
        Op::Parameter(n) => values::parameter(*n, declared),
        Op::Constant(lit) => values::constant(lit),
        Op::TupleConstant(elems) => values::tuple_constant(elems),
        Op::Iota { dimension } => values::iota(*dimension, declared),
        Op::Tuple => values::tuple(operands),
        Op::OptBarrier | Op::Domain { .. } => values::opt_barrier(operands),
        Op::GetTupleElement { index } => values::get_tuple_element(*index, operands),

        Op::Unary(u) => elementwise::unary(*u, operands),
        Op::Binary(b) => elementwise::binary(*b, operands),
        Op::Compare { direction, kind } => elementwise::compare(*direction, *kind, operands),
        Op::Select => elementwise::select(operands),
        Op::Clamp => elementwise::clamp(operands),
        Op::Convert => elementwise::convert(operands, declared),
        Op::StochasticConvert => elementwise::stochastic_convert(operands, declared),
        Op::ReducePrecision {
            exponent_bits,
            mantissa_bits,
        } => elementwise::reduce_precision((*exponent_bits, *mantissa_bits), operands),
        Op::BitcastConvert => elementwise::bitcast_convert(operands, declared),
        Op::Map {
            dimensions,
            to_apply,
        } => elementwise::map(dimensions, get_callee(*to_apply)?, operands),

        Op::Bitcast => data_movement::bitcast(operands, declared),
        Op::Broadcast { dimensions } => data_movement::broadcast(dimensions, operands, declared),
        Op::Reshape { inferred_dimension } => {
            data_movement::reshape(*inferred_dimension, operands, declared)
        }
        Op::Transpose { permutation } => data_movement::transpose(permutation, operands),
        Op::Reverse { dimensions } => data_movement::reverse(dimensions, operands),
        Op::Concatenate { dimension } => data_movement::concatenate(*dimension, operands),
        Op::Pad { config } => data_movement::pad(config, operands),
        Op::Sort {
            dimension,
            comparator,
            ..
        } => data_movement::sort(*dimension, get_callee(*comparator)?, operands),
        Op::TopK { k, .. } => data_movement::top_k(*k, operands),
        Op::CopyStart { .. } => data_movement::copy_start(operands, declared),
        Op::CopyDone => data_movement::copy_done(operands),

        Op::SetDimensionSize { dimension } => {
            dynamic_dims::set_dimension_size(*dimension, operands)
        }
        Op::GetDimensionSize { dimension } => {
            dynamic_dims::get_dimension_size(*dimension, operands)
        }
        Op::DynamicReshape => dynamic_dims::dynamic_reshape(operands, declared),

        Op::Slice { slices } => indexing::slice(slices, operands),
        Op::DynamicSlice { sizes } => indexing::dynamic_slice(sizes, operands),
        Op::DynamicUpdateSlice => indexing::dynamic_update_slice(operands),
        Op::Gather {
            dims, slice_sizes, ..
        } => indexing::gather(array(operands, 0)?, array(operands, 1)?, dims, slice_sizes),
        Op::Scatter { dims, to_apply, .. } => {
            indexing::scatter_operands(dims, get_callee(*to_apply)?, operands)
        }

        Op::Dot {
            dims, precision, ..
        } => linear_algebra::dot(dims, precision, operands, declared),
        Op::RaggedDot {
            dims,
            ragged,
            precision,
            ..
        } => linear_algebra::ragged_dot(dims, ragged, precision, operands, declared),
        Op::TriangularSolve { left_side, .. } => {
            linear_algebra::triangular_solve(*left_side, operands)
        }
        Op::Cholesky { .. } => linear_algebra::cholesky(operands),

        Op::Reduce {
            dimensions,
            to_apply,
        } => reduction::reduce(dimensions, get_callee(*to_apply)?, operands),
        Op::BatchNorm {
            kind,
            feature_index,
            ..
        } => reduction::batch_norm(*kind, *feature_index, operands),

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
            windowed::reduce_window(window, get_callee(*to_apply)?, operands)
        }
        Op::SelectAndScatter {
            window,
            select,
            scatter,
        } => windowed::select_and_scatter(
            window,
            get_callee(*select)?,
            get_callee(*scatter)?,
            operands,
        ),

        Op::Fft {
            fft_type,
            fft_length,
        } => fft::fft(*fft_type, fft_length, operands),

        Op::AllReduce {
            collective,
            to_apply,
        } => collective::all_reduce(collective, get_callee(*to_apply)?, operands),
        Op::AllGather {
            collective,
            dimension,
        } => collective::resized(ALL_GATHER, collective, *dimension, true, operands, declared),
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => collective::reduce_scatter(
            collective,
            *dimension,
            get_callee(*to_apply)?,
            operands,
            declared,
        ),
        Op::AllToAll {
            collective,
            dimension,
        } => collective::all_to_all(collective, *dimension, operands),
        Op::RaggedAllToAll { collective } => collective::ragged_all_to_all(collective, operands),
        Op::CollectivePermute {
            pairs, slice_sizes, ..
        } => collective::collective_permute(pairs, slice_sizes, operands),
        Op::ReplicaId | Op::PartitionId => collective::device_id(),
        Op::CollectiveBroadcast { collective } => {
            collective::collective_broadcast(collective, operands)
        }
        Op::AllReduceStart {
            collective,
            to_apply,
        } => collective::all_reduce(collective, get_callee(*to_apply)?, operands),
        Op::AllGatherStart {
            collective,
            dimension,
        } => collective::started(operands, declared, |results| {
            collective::resized(ALL_GATHER, collective, *dimension, true, operands, results)
        }),
        Op::CollectivePermuteStart {
            pairs, slice_sizes, ..
        } => {
            // In place, the start holds the input buffer, not the offsets.
            let held = if slice_sizes.is_empty() {
                operands
            } else {
                &operands[..operands.len().min(1)]
            };
            collective::started(held, declared, |_| {
                collective::collective_permute(pairs, slice_sizes, operands)
            })
        }
        Op::CollectiveDone(kind) => collective::done(*kind, operands),

        Op::Call { to_apply, .. } => control_flow::call(CALL, get_callee(*to_apply)?, operands),
        Op::While { condition, body } => {
            control_flow::while_loop(get_callee(*condition)?, get_callee(*body)?, operands)
        }
        Op::Conditional { branches } => {
            let sigs = branches
                .iter()
                .map(|&b| get_callee(b))
                .collect::<Result<Vec<_>, ShapeError>>()?;
            control_flow::conditional(&sigs, operands)
        }
        Op::Fusion {
            calls, aliasing, ..
        } => control_flow::fusion(get_callee(*calls)?, aliasing, operands),
        Op::Async { step, calls, .. } => {
            control_flow::async_op(*step, get_callee(*calls)?, operands, declared)
        }

        Op::CustomCall(cc) => custom_call::custom_call(cc, &get_callee, operands, declared),

        Op::Rng { distribution } => random::rng(*distribution, operands, declared),
        Op::RngGetAndUpdateState { .. } => random::rng_state(),
        Op::RngBitGenerator { algorithm } => {
            random::rng_bit_generator(*algorithm, operands, declared)
        }

        Op::AfterAll => token::after_all(operands),
        Op::AddDependency => token::add_dependency(operands),
        Op::Transfer(t) => token::transfer(t, operands, declared),
        Op::Infeed { .. } => token::infeed(operands, declared),
        Op::Outfeed { shape, .. } => token::outfeed(operands, shape.as_deref()),
    }
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
    check_signature_as(name, sig, params, result, Shape::compatible)
}

/// A callee's signature against the one an op needs, shape by shape as
/// `same` compares them.
fn check_signature_as(
    name: &str,
    sig: &CalleeSignature,
    params: &[Shape],
    result: &Shape,
    same: fn(&Shape, &Shape) -> bool,
) -> Result<(), ShapeError> {
    let ok = sig.params.len() == params.len()
        && sig.params.iter().zip(params).all(|(a, b)| same(a, b))
        && same(&sig.result, result);
    if !ok {
        return refuse(CalleeError::Signature {
            callee: name.to_string(),
            found: sig.clone(),
            required: CalleeSignature {
                params: params.to_vec(),
                result: result.clone(),
            },
        });
    }
    Ok(())
}
