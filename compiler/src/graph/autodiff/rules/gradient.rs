//! Which ops have a backward rule, what each rule reads from the forward
//! pass and the rule itself, which give no operand a contribution, and why
//! the rest are refused: one exhaustive table, so a new op cannot be left
//! out, an op declared differentiable cannot lack its rule (each arm that
//! declares one hands it over), and what the error says, what remat may
//! drop and the docs' op table list come from the same place.

use super::{
    collective, data_movement, elementwise, indexing, linear_algebra, reduction, AutodiffError,
    Site,
};
use crate::graph::builder::Builder;
use crate::graph::module_markers::ModuleMarker;
use crate::ir::computation::InstrId;
use crate::ir::op::{BinaryOp, Op, UnaryOp};
use std::borrow::Cow;
use std::fmt;

/// A forward value a backward rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saved {
    Operand(usize),
    /// The op's own result.
    Output,
    /// Operands from this position on (start indices of dynamic slices).
    OperandsFrom(usize),
}

/// How a rule computes operand `site.i`'s adjoint: `None` when that
/// operand gets no contribution (an integer operand, a predicate).
type Apply = Box<dyn Fn(&mut Builder, &Site<'_>) -> Result<Option<InstrId>, AutodiffError>>;

/// An op's backward rule (see [`super::vjp`]): it reads from the forward
/// pass only what `saves` lists; everything else it needs is static
/// (shapes, attributes, captured from the op when the table made it) or
/// the incoming adjoint.
pub struct Rule {
    pub saves: &'static [Saved],
    apply: Apply,
}

impl Rule {
    /// Operand `site.i`'s adjoint, in whatever type the rule computes it.
    pub(super) fn apply(
        &self,
        b: &mut Builder,
        site: &Site<'_>,
    ) -> Result<Option<InstrId>, AutodiffError> {
        (self.apply)(b, site)
    }

    /// What this rule of `op` reads, given the reducer of a reduction.
    pub(super) fn reads(&self, op: &Op, reducer: Option<BinaryOp>) -> &'static [Saved] {
        match op {
            Op::Reduce { .. } if reducer == Some(BinaryOp::Add) => &[],
            _ => self.saves,
        }
    }
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("saves", &self.saves)
            .finish_non_exhaustive()
    }
}

/// What autodiff does with an op.
#[derive(Debug)]
pub enum Gradient {
    /// A rule gives each float operand's adjoint.
    Rule(Rule),
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

/// A rule that reads `saves` from the forward pass.
fn rule(
    saves: &'static [Saved],
    apply: impl Fn(&mut Builder, &Site<'_>) -> Result<Option<InstrId>, AutodiffError> + 'static,
) -> Gradient {
    Gradient::Rule(Rule {
        saves,
        apply: Box::new(apply),
    })
}

/// A rule that always contributes to its operand.
fn always(
    saves: &'static [Saved],
    apply: impl Fn(&mut Builder, &Site<'_>) -> Result<InstrId, AutodiffError> + 'static,
) -> Gradient {
    rule(saves, move |b, s| apply(b, s).map(Some))
}

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
            u @ (UnaryOp::Abs
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Erf),
        ) => unary(*u, &[Operand(0)]),
        Op::Unary(
            u @ (UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Tanh
            | UnaryOp::Tan
            | UnaryOp::Cbrt
            | UnaryOp::Logistic),
        ) => unary(*u, &[Output]),
        Op::Unary(u @ (UnaryOp::Negate | UnaryOp::Copy | UnaryOp::Real)) => unary(*u, &[]),
        Op::Binary(op @ (BinaryOp::Add | BinaryOp::Subtract)) => binary(*op, &[]),
        Op::Binary(op @ BinaryOp::Divide) => binary(*op, &[Operand(1), Output]),
        Op::Binary(op @ (BinaryOp::Power | BinaryOp::Remainder)) => {
            binary(*op, &[Operand(0), Operand(1), Output])
        }
        Op::Binary(
            op @ (BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Atan2),
        ) => binary(*op, &[Operand(0), Operand(1)]),
        Op::Select => rule(&[Operand(0)], elementwise::select),
        Op::Clamp => always(&[Operand(0), Operand(1), Operand(2)], elementwise::clamp),
        Op::Dot { dims, .. } => {
            let dims = dims.clone();
            always(&[Operand(0), Operand(1)], move |b, s| {
                linear_algebra::dot_vjp(b, &dims, s.ops[0], s.ops[1], s.i, s.g)
            })
        }
        // A max or min reduction's adjoint finds where the maximum was; a
        // sum's is a broadcast and reads nothing (see `saves`).
        Op::Reduce {
            dimensions,
            to_apply,
        } => {
            let (dimensions, to_apply) = (dimensions.clone(), *to_apply);
            always(&[Operand(0), Output], move |b, s| {
                reduction::reduce(b, s, &dimensions, to_apply)
            })
        }
        Op::DynamicSlice { .. } => rule(&[OperandsFrom(1)], indexing::dynamic_slice),
        Op::DynamicUpdateSlice => rule(&[OperandsFrom(2)], indexing::dynamic_update_slice),
        Op::Gather { dims, .. } => {
            let dims = dims.clone();
            rule(&[Operand(1)], move |b, s| indexing::gather(b, s, &dims))
        }
        Op::Scatter { dims, to_apply, .. } => {
            let (dims, to_apply) = (dims.clone(), *to_apply);
            rule(&[Operand(1)], move |b, s| {
                indexing::scatter(b, s, &dims, to_apply)
            })
        }
        Op::Convert => always(&[], |b, s| Ok(b.convert(s.g, b.ty(s.x))?)),
        Op::Reshape { .. } => always(&[], |b, s| Ok(b.reshape(s.g, &b.dims(s.x))?)),
        Op::Transpose { permutation } => {
            let permutation = permutation.clone();
            always(&[], move |b, s| {
                data_movement::transpose(b, s.g, &permutation)
            })
        }
        Op::Reverse { dimensions } => {
            let dimensions = dimensions.clone();
            always(&[], move |b, s| data_movement::reverse(b, s.g, &dimensions))
        }
        Op::Broadcast { dimensions } => {
            let dimensions = dimensions.clone();
            always(&[], move |b, s| {
                data_movement::unbroadcast(b, s.g, s.x, &dimensions)
            })
        }
        Op::Slice { slices } => {
            let slices = slices.clone();
            always(&[], move |b, s| indexing::slice_vjp(b, s.g, s.x, &slices))
        }
        Op::Concatenate { dimension } => {
            let dimension = *dimension;
            always(&[], move |b, s| {
                data_movement::concatenate(b, s, dimension)
            })
        }
        Op::Pad { config } => {
            let config = config.clone();
            rule(&[], move |b, s| data_movement::pad(b, s, &config))
        }
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
        Op::AllReduce {
            collective,
            to_apply,
        } => {
            let (c, to_apply) = (collective.clone(), *to_apply);
            always(&[], move |b, s| collective::all_reduce(b, s, &c, to_apply))
        }
        Op::AllGather {
            collective,
            dimension,
        } => {
            let (c, dimension) = (collective.clone(), *dimension);
            always(&[], move |b, s| collective::all_gather(b, s, &c, dimension))
        }
        Op::ReduceScatter {
            collective,
            dimension,
            to_apply,
        } => {
            let (c, dimension, to_apply) = (collective.clone(), *dimension, *to_apply);
            always(&[], move |b, s| {
                collective::reduce_scatter(b, s, &c, dimension, to_apply)
            })
        }
        Op::AllToAll {
            collective,
            dimension,
        } => {
            let (c, dimension) = (collective.clone(), *dimension);
            always(&[], move |b, s| collective::all_to_all(b, s, &c, dimension))
        }
        Op::RaggedAllToAll { .. }
        | Op::CollectiveBroadcast { .. }
        | Op::CollectivePermute { .. }
        | Op::AllReduceStart { .. }
        | Op::AllGatherStart { .. }
        | Op::CollectivePermuteStart { .. }
        | Op::CollectiveDone(_) => refused(
            "only all-reduce, all-gather, reduce-scatter (by sum) and all-to-all, across replicas, have gradient rules in hlatc",
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
        Op::CustomCall(cc) => match ModuleMarker::of(op) {
            Some(marker) => always(&[], move |b, s| Ok(b.module_marker(marker.adjoint(), s.g)?)),
            None => refused(format!("custom call '{}' has no gradient rule", cc.target)),
        },
    }
}

fn unary(u: UnaryOp, saves: &'static [Saved]) -> Gradient {
    rule(saves, move |b, s| {
        elementwise::unary(b, u, s.ops[0], s.out, s.g)
    })
}

fn binary(op: BinaryOp, saves: &'static [Saved]) -> Gradient {
    rule(saves, move |b, s| {
        elementwise::binary(b, op, s.ops, s.out, s.i, s.g)
    })
}

/// What the backward rule of `op` keeps from the forward pass, given the
/// reducer of a reduction (a sum's adjoint reads nothing).
pub fn saves(op: &Op, reducer: Option<BinaryOp>) -> Vec<Saved> {
    match gradient(op) {
        Gradient::Rule(rule) => rule.reads(op, reducer).to_vec(),
        _ => vec![],
    }
}
