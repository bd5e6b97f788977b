//! Which ops have a backward rule, which give no operand a contribution,
//! and why the rest are refused: one exhaustive table, so a new op cannot
//! be left out, and what the error says and the docs' op table list come
//! from the same place.

use crate::ir::op::{BinaryOp, Op, UnaryOp};
use std::borrow::Cow;

/// What autodiff does with an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gradient {
    /// A rule gives each float operand's adjoint (see [`super::vjp`]).
    Rule,
    /// No operand gets a contribution: an input, a constant, a comparison
    /// or integer result, a random draw, a device id.
    Zero,
    /// No rule; the reason is what the error says.
    Refused(Cow<'static, str>),
}

fn refused(reason: impl Into<Cow<'static, str>>) -> Gradient {
    Gradient::Refused(reason.into())
}

/// What autodiff does with `op`.
pub fn gradient(op: &Op) -> Gradient {
    use Gradient::*;
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
        Op::Binary(BinaryOp::Complex) => refused("complex values have no gradient rules in hlatc"),
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Broadcast { .. }
        | Op::Slice { .. }
        | Op::Concatenate { .. }
        | Op::Pad { .. }
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::Dot { .. }
        | Op::Reduce { .. }
        | Op::Gather { .. }
        | Op::Scatter { .. } => Rule,
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
        Op::AllReduce { .. }
        | Op::AllGather { .. }
        | Op::ReduceScatter { .. }
        | Op::AllToAll { .. }
        | Op::RaggedAllToAll { .. }
        | Op::CollectiveBroadcast { .. }
        | Op::CollectivePermute { .. }
        | Op::AllReduceStart { .. }
        | Op::AllGatherStart { .. }
        | Op::CollectivePermuteStart { .. }
        | Op::CollectiveDone(_) => refused("collectives have no gradient rule in hlatc"),
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
        Op::CustomCall(cc) => refused(format!("custom call '{}' has no gradient rule", cc.target)),
    }
}
