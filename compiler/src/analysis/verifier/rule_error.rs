//! What the verifier's rules about one instruction or one module's
//! attributes find wrong, before [`super::VerifyError`] says where.

use super::MAX_RANK;
use crate::ir::op::{AsyncStep, TransferStep};
use crate::ir::shape::{ArrayShape, Shape};
use crate::util::join::join;

/// A broken rule, with what it was found on; its message is the one
/// [`super::VerifyError`] carries.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// A `send-done` or `recv-done` takes something other than its start.
    #[error("{} takes '{operand}', a {operand_opcode}, where XLA requires the {} itself", .step.opcode(), .started.opcode())]
    TransferDone {
        step: TransferStep,
        started: TransferStep,
        operand: String,
        operand_opcode: &'static str,
    },
    /// A callee that is no computation of the module (a module built in
    /// code: the readers resolve every name they read).
    #[error("{opcode}: calls unknown computation {}", .callee.describe())]
    UnknownCallee {
        opcode: &'static str,
        callee: crate::ir::computation_id::ComputationId,
    },
    /// The entry is what runs the program; nothing calls it.
    #[error("{opcode}: calls the entry computation '{entry}'")]
    CallsEntry { opcode: &'static str, entry: String },
    /// An `async-update` or `async-done` continues another computation's
    /// async op.
    #[error("{} runs '{calls}', but '{operand}' began '{theirs}'", .step.opcode())]
    AsyncCallee {
        step: AsyncStep,
        calls: String,
        operand: String,
        theirs: String,
    },
    /// An `async-update` or `async-done` takes something other than an
    /// async op.
    #[error("{} takes '{operand}', a {operand_opcode}, where it needs an async-start or async-update", .step.opcode())]
    AsyncOperand {
        step: AsyncStep,
        operand: String,
        operand_opcode: &'static str,
    },
    /// A custom call's operand buffer no output aliases.
    #[error("operand {operand}'s buffer at {{{}}} is not passed on: no output aliases it", join(.index))]
    BufferDropped { operand: usize, index: Vec<i64> },
    /// A custom call's operand buffer several outputs alias.
    #[error("operand {operand}'s buffer at {{{}}} is aliased by {outputs} outputs; a buffer passes to one", join(.index))]
    BufferShared {
        operand: usize,
        index: Vec<i64>,
        outputs: usize,
    },
    /// `result_accuracy` is refused, as its own check words it.
    #[error("{0}")]
    ResultAccuracy(String),
    /// `original_value` is refused, as its own check words it.
    #[error("{0}")]
    OriginalValue(String),
    #[error("statistic name '{0}' cannot be written in HLO text")]
    StatisticName(String),
    #[error("frontend attribute key {0:?} is not a name XLA reads ([A-Za-z_][A-Za-z0-9_.-]*)")]
    AttributeKey(String),
    #[error(
        "a composite call (is_composite=true) needs a non-empty frontend attribute composite.name"
    )]
    CompositeName,
    #[error("a composite call's composite.version must be a non-negative integer, got {0:?}")]
    CompositeVersion(String),
    #[error("layout of {shape} has a tile {tile:?} with no dimensions or one below 1")]
    Tile { shape: ArrayShape, tile: Vec<i64> },
    #[error("layout of {shape} aligns tail padding to {alignment} elements (at least 1)")]
    TailPadding { shape: ArrayShape, alignment: i64 },
    #[error("layout of {0} has a negative element size or memory space")]
    NegativeSize(ArrayShape),
    #[error("layout of {shape} splits dimension {dimension} at {indices:?} (a dimension of the shape, at ascending positive indices)")]
    Split {
        shape: ArrayShape,
        dimension: i64,
        indices: Vec<i64>,
    },
    #[error("rank {0} is above the {MAX_RANK} dimensions hlatc supports")]
    Rank(usize),
    #[error("shape {0} has a negative dimension")]
    NegativeDimension(ArrayShape),
    #[error("shape {0} is too large to address")]
    TooLarge(ArrayShape),
    /// `minor_to_major` does not name each dimension once.
    #[error("layout {minor_to_major:?} of {shape} is not a permutation of its dimensions")]
    MinorToMajor {
        shape: ArrayShape,
        minor_to_major: Vec<i64>,
    },
    /// `parameter_replication` belongs to parameters only.
    #[error("parameter_replication is set on an instruction that is not a parameter")]
    ReplicationOffParameter,
    /// `parameter_replication` needs one entry per leaf buffer.
    #[error("parameter_replication has {entries} entries but {shape} has {leaves} leaf buffers")]
    ReplicationCount {
        entries: usize,
        shape: Shape,
        leaves: usize,
    },
}
