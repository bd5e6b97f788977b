//! The operations of the IR and their attributes.
//!
//! Each variant carries exactly the attributes XLA gives that opcode, so the
//! text printer, the parser and proto emission agree by construction.

use crate::ir::collective::Collective;
use crate::ir::computation_id::ComputationId;
use crate::ir::literal::{Literal, LiteralTree};
use crate::ir::op::description::OpTraits;
use crate::ir::shape::Shape;
use crate::ir::window::{ConvDims, Window};

/// An attribute enum as text spells it and the proto numbers it: one row
/// per variant gives both, and the lookups both ways come from the rows.
macro_rules! spelled_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = ($text:literal, $number:literal)),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// XLA's text spelling.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }

            pub fn from_name(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == s)
            }

            /// XLA's proto enum number.
            pub fn proto(self) -> i32 {
                match self {
                    $($name::$variant => $number),*
                }
            }

            pub fn from_proto(v: i32) -> Option<Self> {
                Self::ALL.iter().copied().find(|x| x.proto() == v)
            }
        }
    };
}

// The families' attribute types, one file per family that has any (see
// `OpFamily`); `bits` (floats kept by their bits), `description` (the op
// table) and `opcode` are the helpers they share.
mod bits;
mod collective;
mod control_flow;
mod custom_call;
mod data_movement;
pub mod description;
mod elementwise;
mod fft;
mod indexing;
mod linear_algebra;
mod opcode;
mod random;
mod reduction;
mod row_traits;
mod token;

pub use bits::*;
pub use collective::*;
pub use control_flow::*;
pub use custom_call::*;
pub use data_movement::*;
pub use description::OpFamily;
pub use elementwise::*;
pub use fft::*;
pub use indexing::*;
pub use linear_algebra::*;
pub use opcode::Opcode;
pub use random::*;
pub use reduction::*;
pub use token::*;

use elementwise::{BINARY_NAMES, UNARY_NAMES};

/// An operation with its attributes. Called computations are referenced by
/// name; the module resolves them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Parameter(i64),
    Constant(Literal),
    /// A constant of tuple shape, its elements' values (as XLA's
    /// `constant((a, b))`); printed and carried in the proto's
    /// `tuple_literals`.
    TupleConstant(Vec<LiteralTree>),
    Iota {
        dimension: i64,
    },
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare {
        direction: ComparisonDirection,
        kind: Option<ComparisonType>,
    },
    Select,
    Clamp,
    Convert,
    /// `stochastic-convert`: a float operand converted to the declared type,
    /// rounding up or down by its second operand's random bits (unsigned,
    /// as wide as the operand's type) instead of to nearest.
    StochasticConvert,
    /// `reduce-precision`: each float rounded to the nearest value with
    /// `exponent_bits` and `mantissa_bits`, kept in its own type.
    ReducePrecision {
        exponent_bits: i32,
        mantissa_bits: i32,
    },
    BitcastConvert,
    /// `bitcast`: the operand's bytes read as the declared shape (which may
    /// differ in dimensions, layout or element type, not in byte size).
    Bitcast,
    Broadcast {
        dimensions: Vec<i64>,
    },
    /// `reshape`: the operand's elements in the declared shape.
    /// `inferred_dimension` names the result dimension a frontend left to
    /// be inferred (a dynamic one); XLA keeps it in the proto's
    /// `dimensions`.
    Reshape {
        inferred_dimension: Option<i64>,
    },
    Transpose {
        permutation: Vec<i64>,
    },
    Reverse {
        dimensions: Vec<i64>,
    },
    Slice {
        slices: Vec<SliceDim>,
    },
    DynamicSlice {
        sizes: Vec<i64>,
    },
    DynamicUpdateSlice,
    /// `set-dimension-size(operand, size)`: the operand, its dimension
    /// `dimension` made dynamic, holding `size` (an s32 scalar) elements at
    /// run time, at most the dimension's bound.
    SetDimensionSize {
        dimension: i64,
    },
    /// `get-dimension-size(operand)`: how many elements dimension
    /// `dimension` holds at run time, as `s32[]`.
    GetDimensionSize {
        dimension: i64,
    },
    /// `dynamic-reshape(operand, sizes...)`: a reshape to the declared
    /// shape, whose dimensions hold the s32 scalars `sizes` at run time.
    DynamicReshape,
    Concatenate {
        dimension: i64,
    },
    Pad {
        config: Vec<PadDim>,
    },
    Dot {
        dims: DotDims,
        precision: Vec<Precision>,
        algorithm: DotAlgorithm,
    },
    /// `ragged-dot(lhs, rhs, group_sizes)`: a dot whose lhs dimension
    /// `ragged.lhs_ragged` is cut into consecutive groups of the sizes the
    /// third operand gives (a mixture of experts' tokens per expert). Not
    /// contracted, each group meets its own rhs matrix (`rhs_group`);
    /// contracted, each group's partial product is its own result row.
    RaggedDot {
        dims: DotDims,
        /// Boxed: every op is as large as the largest, and ragged dots
        /// are rare.
        ragged: Box<RaggedDims>,
        precision: Vec<Precision>,
        algorithm: DotAlgorithm,
    },
    Reduce {
        dimensions: Vec<i64>,
        to_apply: ComputationId,
    },
    /// A window slid over the input (`lhs`), each position contracted with
    /// the kernel (`rhs`); features split into groups by the two counts.
    Convolution {
        window: Window,
        /// Boxed: inline, it would make every `Op` larger.
        dims: Box<ConvDims>,
        feature_group_count: i64,
        batch_group_count: i64,
        precision: Vec<Precision>,
    },
    /// `to_apply` folded over each position of a window (inputs, then one
    /// init per input, as `reduce`).
    ReduceWindow {
        window: Window,
        to_apply: ComputationId,
    },
    /// `select-and-scatter(operand, source, init)`: in each window of the
    /// operand, `select` picks one element (a max pool's argmax, say), and
    /// the source value of that window is combined by `scatter` into that
    /// position of a result that starts as `init` everywhere: the gradient
    /// of a max pool.
    SelectAndScatter {
        window: Window,
        select: ComputationId,
        scatter: ComputationId,
    },
    Tuple,
    /// `opt-barrier`: its result is its (tuple) operand, but no optimization
    /// moves work across it or merges values through it. Remat routes a
    /// recomputation's inputs through one so XLA's CSE cannot fold the
    /// recomputed values back into the saved ones.
    OptBarrier,
    GetTupleElement {
        index: i64,
    },
    /// `call`: `to_apply` on the operands. A composite call
    /// (`is_composite=true`) stands for the op its frontend attributes
    /// name (`composite.name`), `to_apply` being its decomposition.
    Call {
        to_apply: ComputationId,
        is_composite: bool,
    },
    /// `while`: runs `body` on its (one) operand while `condition` of it is
    /// true; the result is the last value.
    While {
        condition: ComputationId,
        body: ComputationId,
    },
    /// `conditional`: runs one branch on its operand. A pred selector
    /// picks the first branch (`true_computation`) when true; an s32 index
    /// picks that branch, or the last when out of range.
    Conditional {
        branches: Vec<ComputationId>,
    },
    /// `fusion`: a call whose callee XLA's backend emits as one kernel.
    Fusion {
        kind: FusionKind,
        calls: ComputationId,
        aliasing: Vec<OperandAlias>,
    },
    /// `sort`: sorts its operands together along `dimension`, ordered by
    /// `comparator` over the elements of every operand.
    Sort {
        dimension: i64,
        is_stable: bool,
        comparator: ComputationId,
    },
    /// `map`: applies the scalar computation `to_apply` to each element of
    /// its operands (`dimensions` lists every dimension, in order, or none).
    Map {
        dimensions: Vec<i64>,
        to_apply: ComputationId,
    },
    /// `rng`: random values of the declared shape, between (uniform) or
    /// around (normal) its two scalar operands.
    Rng {
        distribution: RngDistribution,
    },
    /// `rng-get-and-update-state`: the device's RNG state as `u64[2]`,
    /// then advanced by `delta` (XLA's lowering of `rng` writes it).
    RngGetAndUpdateState {
        delta: i64,
    },
    /// `all-reduce`: every participant gets the reduction (by `to_apply`)
    /// of all participants' operands.
    AllReduce {
        collective: Collective,
        to_apply: ComputationId,
    },
    /// `all-gather`: the participants' operands concatenated along
    /// `dimension`.
    AllGather {
        collective: Collective,
        dimension: i64,
    },
    /// `reduce-scatter`: reduced as by all-reduce, then split along
    /// `dimension`, one piece per participant.
    ReduceScatter {
        collective: Collective,
        dimension: i64,
        to_apply: ComputationId,
    },
    /// `all-to-all`: with a `dimension`, the operand is split along it and
    /// piece i goes to participant i; without, operand i does.
    AllToAll {
        collective: Collective,
        dimension: Option<i64>,
    },
    /// The batch normalizations (see [`BatchNormKind`]): `epsilon` is
    /// added to the variance, `feature_index` is the dimension whose
    /// entries keep their own statistics.
    BatchNorm {
        kind: BatchNormKind,
        epsilon: F32Bits,
        feature_index: i64,
    },
    /// `ragged-all-to-all(input, output, input_offsets, send_sizes,
    /// output_offsets, recv_sizes)`: each participant sends a run of its
    /// input's rows to every other, of sizes and at offsets the four index
    /// operands give; its value is `output` with the received runs written
    /// in.
    RaggedAllToAll {
        collective: Collective,
    },
    /// `domain`: its operand, marking where one sharding domain ends and
    /// another begins (`domain={kind="sharding", entry=..., exit=...}`).
    /// XLA keeps `exit` on the operand's side (proto field 54,
    /// `domain_entry_sharding`) and `entry` on the users' (55).
    Domain {
        entry: Box<crate::ir::sharding::Sharding>,
        exit: Box<crate::ir::sharding::Sharding>,
    },
    /// `triangular-solve`: solves `a x = b` (or `x a = b` unless
    /// `left_side`) for a triangular `a`, over leading batch dimensions.
    /// `transpose_a` is `None` where it is not written (XLA's
    /// `TRANSPOSE_INVALID`, which it prints as nothing).
    TriangularSolve {
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose_a: Option<TransposeA>,
    },
    /// `cholesky`: the lower (or upper) triangular factor of a symmetric
    /// positive definite matrix; the other triangle is unspecified.
    Cholesky {
        lower: bool,
    },
    /// `fft`: a discrete Fourier transform over the last
    /// `fft_length.len()` (1 to 3) dimensions.
    Fft {
        fft_type: FftType,
        fft_length: Vec<i64>,
    },
    /// `collective-broadcast`: every participant of a group gets the
    /// operand of the group's first participant.
    CollectiveBroadcast {
        collective: Collective,
    },
    /// `topk`: the `k` largest (or, with `largest` false, smallest) values
    /// along the last dimension, and their indices as s32.
    TopK {
        k: i64,
        largest: bool,
    },
    /// `collective-permute`: each source sends its operands to its target;
    /// a participant nobody sends to gets zeros.
    CollectivePermute {
        channel_id: Option<i64>,
        pairs: Vec<(i64, i64)>,
        /// Empty unless in place: then the operands are `(input, output,
        /// input_offsets, output_offsets)`, each transfer writes a slice of
        /// these sizes into `output` (XLA's `slice_sizes`, flattened into
        /// `dynamic_slice_sizes` in the proto), and the result is `output`.
        slice_sizes: Vec<Vec<i64>>,
    },
    /// `all-reduce-start`: an all-reduce begun; its value (the same as the
    /// all-reduce's) is read through `all-reduce-done`.
    AllReduceStart {
        collective: Collective,
        to_apply: ComputationId,
    },
    /// `all-gather-start`: an all-gather begun; its value is the tuple
    /// (operands, results), and `all-gather-done` gives the results.
    AllGatherStart {
        collective: Collective,
        dimension: i64,
    },
    /// `collective-permute-start`: the tuple (operand, result) or (operand,
    /// result, u32[], u32[]) with the transfer's context;
    /// `collective-permute-done` gives the result.
    CollectivePermuteStart {
        channel_id: Option<i64>,
        pairs: Vec<(i64, i64)>,
        /// As `CollectivePermute`'s; in place, the start holds `(input,
        /// output, u32[], u32[])`.
        slice_sizes: Vec<Vec<i64>>,
    },
    /// `all-reduce-done`, `all-gather-done`, `collective-permute-done`.
    CollectiveDone(AsyncCollective),
    /// `replica-id`: this device's replica number, `u32[]`.
    ReplicaId,
    /// `partition-id`: this device's partition number, `u32[]`.
    PartitionId,
    Gather {
        dims: GatherDims,
        slice_sizes: Vec<i64>,
        indices_are_sorted: bool,
    },
    Scatter {
        dims: ScatterDims,
        to_apply: ComputationId,
        indices_are_sorted: bool,
        unique_indices: bool,
    },
    RngBitGenerator {
        algorithm: RngAlgorithm,
    },
    CustomCall(CustomCall),
    /// `after-all`: a token ordered after every operand token (none: a
    /// fresh token).
    AfterAll,
    /// `add-dependency`: its first operand's value, ordered after the token
    /// that is its second.
    AddDependency,
    /// `send`, `send-done`, `recv`, `recv-done`.
    Transfer(Transfer),
    /// `async-start`, `async-update`, `async-done`: `calls` (a computation
    /// whose root is the one instruction run asynchronously) on `thread`
    /// (`async_execution_thread`; `None` is the main thread). An
    /// async-start's value is ((operands), result, context...), which the
    /// update passes on and from which the done takes the result.
    Async {
        step: AsyncStep,
        calls: ComputationId,
        thread: Option<String>,
    },
    /// `copy-start`: a copy begun, usually between memory spaces; its value
    /// is (destination, source, u32[] context), the destination's layout
    /// its own. `cross_program_prefetch_index` marks XLA's prefetch of a
    /// parameter across program runs.
    CopyStart {
        cross_program_prefetch_index: Option<i32>,
    },
    /// `copy-done`: the destination of the copy its operand began.
    CopyDone,
    /// `infeed`: reads the declared data from the host, after the token;
    /// its value is (data, token). `config` is for the host side, as written.
    Infeed {
        config: String,
    },
    /// `outfeed`: writes its operand to the host, after the token; its
    /// value is a token. `shape` is what the host is told to expect
    /// (`outfeed_shape`), `None` meaning the operand's own shape.
    Outfeed {
        config: String,
        shape: Option<Box<Shape>>,
    },
}

/// The ops with no attribute besides the elementwise ones: their opcode is
/// all there is to read or write of them. The text parser and the proto
/// reader both build them from here, and spell them through [`Op::opcode`].
const WITHOUT_ATTRIBUTES: [Op; 18] = [
    Op::Select,
    Op::Clamp,
    Op::Convert,
    Op::StochasticConvert,
    Op::BitcastConvert,
    Op::Bitcast,
    Op::DynamicUpdateSlice,
    Op::DynamicReshape,
    Op::Tuple,
    Op::OptBarrier,
    Op::CollectiveDone(AsyncCollective::AllReduce),
    Op::CollectiveDone(AsyncCollective::AllGather),
    Op::CollectiveDone(AsyncCollective::CollectivePermute),
    Op::ReplicaId,
    Op::PartitionId,
    Op::CopyDone,
    Op::AfterAll,
    Op::AddDependency,
];

/// Every opcode spelling the IR accepts, for `--help` and error messages.
pub fn all_opcodes() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNARY_NAMES.iter().map(|(_, n)| *n).collect();
    v.extend(BINARY_NAMES.iter().map(|(_, n)| *n));
    v.extend(crate::ir::op::description::TABLE_OPCODES);
    v.extend(BatchNormKind::ALL.iter().map(|k| k.opcode()));
    v.extend(TransferStep::ALL.iter().map(|t| t.opcode()));
    v.extend(AsyncStep::ALL.iter().map(|a| a.opcode()));
    v.sort_unstable();
    v.dedup();
    v
}

/// Every op that neither calls a computation nor is a replica-grouped
/// collective, as a pattern: the callee slots and `collective()` both end
/// with it, so a new op is listed once and must be placed by hand.
macro_rules! plain_ops {
    () => {
        Op::Parameter(_)
            | Op::Constant(_)
            | Op::TupleConstant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare { .. }
            | Op::Select
            | Op::Clamp
            | Op::Convert
            | Op::StochasticConvert
            | Op::ReducePrecision { .. }
            | Op::BitcastConvert
            | Op::Bitcast
            | Op::Broadcast { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Reverse { .. }
            | Op::Slice { .. }
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::SetDimensionSize { .. }
            | Op::GetDimensionSize { .. }
            | Op::DynamicReshape
            | Op::Concatenate { .. }
            | Op::Pad { .. }
            | Op::Dot { .. }
            | Op::RaggedDot { .. }
            | Op::Convolution { .. }
            | Op::Tuple
            | Op::OptBarrier
            | Op::GetTupleElement { .. }
            | Op::Rng { .. }
            | Op::RngGetAndUpdateState { .. }
            | Op::BatchNorm { .. }
            | Op::Domain { .. }
            | Op::TriangularSolve { .. }
            | Op::Cholesky { .. }
            | Op::Fft { .. }
            | Op::TopK { .. }
            | Op::CollectivePermute { .. }
            | Op::CollectivePermuteStart { .. }
            | Op::CollectiveDone(_)
            | Op::ReplicaId
            | Op::PartitionId
            | Op::Gather { .. }
            | Op::RngBitGenerator { .. }
            | Op::AfterAll
            | Op::AddDependency
            | Op::Transfer(_)
            | Op::CopyStart { .. }
            | Op::CopyDone
            | Op::Infeed { .. }
            | Op::Outfeed { .. }
    };
}

/// The computations an op calls as (first, second, the rest), in XLA's
/// order; one match for shared and mutable access alike (match ergonomics
/// give `&` or `&mut` bindings), so the two cannot drift apart.
/// The [`Collective`] of a replica-grouped collective, borrowed as `$op`
/// is (shared or mutable), for [`Op::collective`] and
/// [`Op::collective_mut`].
macro_rules! collective_slot {
    ($op:expr) => {
        match $op {
            Op::AllReduce { collective, .. }
            | Op::AllGather { collective, .. }
            | Op::ReduceScatter { collective, .. }
            | Op::AllToAll { collective, .. }
            | Op::RaggedAllToAll { collective }
            | Op::CollectiveBroadcast { collective }
            | Op::AllReduceStart { collective, .. }
            | Op::AllGatherStart { collective, .. } => Some(collective),
            // Listed rather than `_`, so a new op must say whether it is one.
            plain_ops!()
            | Op::Reduce { .. }
            | Op::ReduceWindow { .. }
            | Op::SelectAndScatter { .. }
            | Op::Call { .. }
            | Op::While { .. }
            | Op::Conditional { .. }
            | Op::Fusion { .. }
            | Op::Sort { .. }
            | Op::Map { .. }
            | Op::Scatter { .. }
            | Op::CustomCall(_)
            | Op::Async { .. } => None,
        }
    };
}

macro_rules! callee_slots {
    ($op:expr) => {
        match $op {
            Op::Reduce { to_apply, .. }
            | Op::ReduceWindow { to_apply, .. }
            | Op::Call { to_apply, .. }
            | Op::Scatter { to_apply, .. }
            | Op::AllReduce { to_apply, .. }
            | Op::AllReduceStart { to_apply, .. }
            | Op::ReduceScatter { to_apply, .. }
            | Op::Map { to_apply, .. }
            | Op::Sort {
                comparator: to_apply,
                ..
            }
            | Op::Fusion {
                calls: to_apply, ..
            }
            | Op::Async {
                calls: to_apply, ..
            } => (Some(to_apply), None, None),
            Op::While { condition, body } => (Some(body), Some(condition), None),
            Op::SelectAndScatter {
                select, scatter, ..
            } => (Some(select), Some(scatter), None),
            Op::Conditional { branches } => (None, None, Some(branches)),
            Op::CustomCall(CustomCall { called, .. }) => (None, None, Some(called)),
            // Listed rather than `_`, so a new op must say whether it calls.
            plain_ops!()
            | Op::AllGather { .. }
            | Op::AllToAll { .. }
            | Op::RaggedAllToAll { .. }
            | Op::CollectiveBroadcast { .. }
            | Op::AllGatherStart { .. } => (None, None, None),
        }
    };
}

impl Op {
    /// A reshape with no dimension left to infer.
    pub const RESHAPE: Op = Op::Reshape {
        inferred_dimension: None,
    };

    /// The op `opcode` names when it has no attributes to read: an
    /// elementwise unary or binary op, or one of `WITHOUT_ATTRIBUTES`.
    pub fn without_attributes(opcode: &str) -> Option<Op> {
        if let Some(u) = UnaryOp::from_opcode(opcode) {
            return Some(Op::Unary(u));
        }
        if let Some(b) = BinaryOp::from_opcode(opcode) {
            return Some(Op::Binary(b));
        }
        WITHOUT_ATTRIBUTES
            .iter()
            .find(|op| op.opcode() == opcode)
            .cloned()
    }

    /// Whether the op carries its float operands' element type through to
    /// its result unchanged, whatever float type that is (elementwise
    /// arithmetic and data movement): over operands of the same dims whose
    /// float type moves from one float type to another, a valid instruction
    /// stays valid with its result's float type moved the same way.
    /// Comparisons and `is-finite` give pred either way. Not `convert`,
    /// dots, reductions or anything with a called computation.
    pub fn carries_float_type(&self) -> bool {
        self.traits().has(OpTraits::CARRIES_FLOAT_TYPE)
    }

    /// Whether the op's result type is its own (a dot's accumulation type,
    /// a convert's target) while its dims come from its operands' dims:
    /// over operands of the same dims whose float types move between float
    /// types, a valid instruction stays valid with the same result shape.
    pub fn result_ignores_float_operand_types(&self) -> bool {
        matches!(self, Op::Dot { .. } | Op::Convert)
    }

    /// Whether the op's effect is more than its value (a custom call marked
    /// `custom_call_has_side_effect`, a transfer, infeed or outfeed): such
    /// instructions are never removed or merged.
    pub fn has_side_effect(&self) -> bool {
        match self {
            Op::CustomCall(cc) => cc.has_side_effect,
            _ => self.traits().has(OpTraits::SIDE_EFFECT),
        }
    }

    /// Whether two instructions with this op and the same operands are the
    /// same value, so one can stand for both (value numbering, cse).
    /// Parameters are distinct inputs; each RNG draw is its own.
    /// Ops that run other computations as a whole (loops, branches,
    /// fusions, async ops) are never merged: hlatc does not look into
    /// their callees for draws or side effects, and a merged async-start
    /// would have two dones. Nor are collectives: each is a separate
    /// exchange between devices.
    pub fn is_pure(&self) -> bool {
        !self.traits().has(OpTraits::IMPURE) && !self.is_collective() && !self.has_side_effect()
    }

    /// Whether the op exchanges data between devices.
    pub fn is_collective(&self) -> bool {
        self.traits().has(OpTraits::COLLECTIVE)
    }

    /// The replica groups and channel of a replica-grouped collective.
    pub fn collective(&self) -> Option<&Collective> {
        collective_slot!(self)
    }

    /// [`Op::collective`], to change (a channel, the group mode).
    pub fn collective_mut(&mut self) -> Option<&mut Collective> {
        collective_slot!(self)
    }

    /// The computations this op calls, in XLA's order of
    /// `called_computation_ids` (a while's body before its condition),
    /// without allocating: every pass over a module asks this of every
    /// instruction.
    pub fn called_computations(&self) -> impl Iterator<Item = ComputationId> + '_ {
        let (first, second, rest) = callee_slots!(self);
        first
            .into_iter()
            .chain(second)
            .chain(rest.into_iter().flatten())
            .copied()
    }

    pub fn called_computations_mut(&mut self) -> Vec<&mut ComputationId> {
        let (first, second, rest) = callee_slots!(self);
        first
            .into_iter()
            .chain(second)
            .chain(rest.into_iter().flat_map(|v| v.iter_mut()))
            .collect()
    }
}
