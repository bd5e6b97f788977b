//! Which ops have a backward rule and what each rule reads from the
//! forward pass, which give no operand a contribution, and why the rest
//! are refused: one exhaustive table, so a new op cannot be left out, and
//! what the error says, what remat may drop and the docs' op table list
//! come from the same place.

use crate::graph::module_markers::ModuleMarker;
use crate::ir::op::{BinaryOp, Op, UnaryOp};
use std::borrow::Cow;

/// A forward value a backward rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saved {
    Operand(usize),
    /// The op's own result.
    Output,
    /// Operands from this position on (start indices of dynamic slices).
    OperandsFrom(usize),
}

/// What autodiff does with an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gradient {
    /// A rule gives each float operand's adjoint (see [`super::vjp`]),
    /// reading from the forward pass only what `saves` lists; everything
    /// else it needs is static (shapes, attributes) or the incoming adjoint.
    Rule { saves: &'static [Saved] },
    /// No operand gets a contribution: an input, a constant, a comparison
    /// or integer result, a random draw, a device id.
    Zero,
    /// No rule; the reason is what the error says.
    Refused(Cow<'static, str>),
}

fn refused(reason: impl Into<Cow<'static, str>>) -> Gradient {
    Gradient::Refused(reason.into())
}

/// Why nothing complex is differentiated: an op with a complex result
/// here, and any op over complex values in `vjp`.
pub(super) const COMPLEX: &str = "complex values have no gradient rules in hlatc";

const NOTHING: Gradient = Gradient::Rule { saves: &[] };

/// What autodiff does with `op`.
pub fn gradient(op: &Op) -> Gradient {
    use Gradient::*;
    use Saved::*;
    match op {
        // Piecewise constant, integer or boolean results, a complex
        // value's imaginary part of a float: zero almost everywhere.
        Op::Unary(
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::RoundNearestEven
            | UnaryOp::Sign
            | UnaryOp::Not
            | UnaryOp::IsFinite
            | UnaryOp::PopulationCount
            | UnaryOp::Imag,
        ) => Zero,
        Op::Binary(
            BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical
            | BinaryOp::ShiftRightArithmetic,
        ) => Zero,
        // Its result is complex.
        Op::Binary(BinaryOp::Complex) => refused(COMPLEX),
        Op::Unary(
            UnaryOp::Abs
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Erf,
        ) => Rule {
            saves: &[Operand(0)],
        },
        Op::Unary(
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Tanh
            | UnaryOp::Tan
            | UnaryOp::Cbrt
            | UnaryOp::Logistic,
        ) => Rule { saves: &[Output] },
        Op::Unary(UnaryOp::Negate | UnaryOp::Copy | UnaryOp::Real) => NOTHING,
        Op::Binary(BinaryOp::Add | BinaryOp::Subtract) => NOTHING,
        Op::Binary(BinaryOp::Divide) => Rule {
            saves: &[Operand(1), Output],
        },
        Op::Binary(BinaryOp::Power | BinaryOp::Remainder) => Rule {
            saves: &[Operand(0), Operand(1), Output],
        },
        Op::Binary(
            BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Atan2,
        ) => Rule {
            saves: &[Operand(0), Operand(1)],
        },
        Op::Select => Rule {
            saves: &[Operand(0)],
        },
        Op::Clamp => Rule {
            saves: &[Operand(0), Operand(1), Operand(2)],
        },
        Op::Dot { .. } => Rule {
            saves: &[Operand(0), Operand(1)],
        },
        // A max or min reduction's adjoint finds where the maximum was; a
        // sum's is a broadcast and reads nothing (see `saves`).
        Op::Reduce { .. } => Rule {
            saves: &[Operand(0), Output],
        },
        Op::DynamicSlice { .. } => Rule {
            saves: &[OperandsFrom(1)],
        },
        Op::DynamicUpdateSlice => Rule {
            saves: &[OperandsFrom(2)],
        },
        Op::Gather { .. } | Op::Scatter { .. } => Rule {
            saves: &[Operand(1)],
        },
        Op::Convert
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Broadcast { .. }
        | Op::Slice { .. }
        | Op::Concatenate { .. }
        | Op::Pad { .. } => NOTHING,
        Op::Parameter(_)
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Iota { .. }
        | Op::RngBitGenerator { .. } => Zero,
        Op::Compare { .. } | Op::BitcastConvert => Zero,
        Op::Tuple | Op::GetTupleElement { .. } | Op::OptBarrier => {
            refused("tuples are not differentiated")
        }
        Op::Bitcast => refused("bitcast reinterprets bytes by layout"),
        Op::Call { .. } | Op::Fusion { .. } => {
            refused("calls are not differentiated; inline the callee")
        }
        Op::ReplicaId | Op::PartitionId => Zero,
        Op::Rng { .. } | Op::RngGetAndUpdateState { .. } => Zero,
        Op::Sort { .. } | Op::Map { .. } => refused("sort and map have no gradient rule in hlatc"),
        Op::Convolution { .. } | Op::ReduceWindow { .. } | Op::SelectAndScatter { .. } => {
            refused("windowed ops have no gradient rule in hlatc")
        }
        // Transposed into each other (see `collective.rs`); only sums.
        Op::AllReduce { .. } | Op::AllGather { .. } | Op::ReduceScatter { .. } => NOTHING,
        Op::AllToAll { .. }
        | Op::RaggedAllToAll { .. }
        | Op::CollectiveBroadcast { .. }
        | Op::CollectivePermute { .. }
        | Op::AllReduceStart { .. }
        | Op::AllGatherStart { .. }
        | Op::CollectivePermuteStart { .. }
        | Op::CollectiveDone(_) => refused(
            "only all-reduce, all-gather and reduce-scatter (by sum, across replicas) have gradient rules in hlatc",
        ),
        Op::While { .. } | Op::Conditional { .. } => {
            refused("control flow has no gradient rule in hlatc")
        }
        Op::TopK { .. } => refused("topk has no gradient rule in hlatc"),
        Op::BatchNorm { .. } => refused("batch-norm ops have no gradient rule in hlatc"),
        Op::RaggedDot { .. } => refused("ragged-dot has no gradient rule in hlatc"),
        Op::Async { .. } => refused("async ops have no gradient rule in hlatc"),
        Op::TriangularSolve { .. } | Op::Cholesky { .. } | Op::Fft { .. } => {
            refused("linear-algebra ops have no gradient rule in hlatc")
        }
        Op::Domain { .. } => refused("sharding domains have no gradient rule in hlatc"),
        Op::SetDimensionSize { .. } | Op::GetDimensionSize { .. } | Op::DynamicReshape => {
            refused("dynamic dimensions have no gradient rules in hlatc")
        }
        Op::StochasticConvert | Op::ReducePrecision { .. } => refused(
            "rounding ops (stochastic-convert, reduce-precision) have no gradient rule in hlatc",
        ),
        Op::CopyStart { .. } | Op::CopyDone => {
            refused("asynchronous copies have no gradient rule in hlatc")
        }
        Op::AfterAll
        | Op::AddDependency
        | Op::Transfer(_)
        | Op::Infeed { .. }
        | Op::Outfeed { .. } => {
            refused("ops ordered by tokens (transfers, feeds) have no gradient rule in hlatc")
        }
        // A module marker passes its tensor through; its gradient is the
        // incoming one, marked for the backward pass.
        Op::CustomCall(_) if ModuleMarker::of(op).is_some() => Gradient::Rule { saves: &[] },
        Op::CustomCall(cc) => refused(format!("custom call '{}' has no gradient rule", cc.target)),
    }
}

/// What the backward rule of `op` keeps from the forward pass, given the
/// reducer of a reduction (a sum's adjoint reads nothing).
pub fn saves(op: &Op, reducer: Option<BinaryOp>) -> Vec<Saved> {
    match (op, gradient(op)) {
        (Op::Reduce { .. }, _) if reducer == Some(BinaryOp::Add) => vec![],
        (_, Gradient::Rule { saves }) => saves.to_vec(),
        _ => vec![],
    }
}
