//! What the verifier finds wrong, before [`super::VerifyError`] says where:
//! one variant per rule of the module as a whole, of a computation, and of
//! the entry's aliasing, with the rules about one instruction's own fields
//! in [`RuleError`].

use super::RuleError;
use crate::analysis::shape_inference::ShapeError;
use crate::ir::device_assignment::DeviceAssignmentError;
use crate::ir::module::EntryLayoutError;
use crate::ir::shape::Shape;
use crate::ir::stack_frames::StackFrameError;

/// A broken rule, with what it was found on.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("module has no entry computation")]
    NoEntry,
    #[error("module name {0:?} is not a valid HLO name")]
    ModuleName(String),
    #[error(transparent)]
    DeviceAssignment(DeviceAssignmentError),
    #[error("stack-frame tables: {0}")]
    StackFrames(StackFrameError),
    #[error("metadata stack_frame_id {id} is not among the module's {frames} stack frames")]
    StackFrameId { id: i32, frames: usize },
    #[error(transparent)]
    EntryLayout(EntryLayoutError),
    #[error("computation name {0:?} is not a valid HLO name")]
    ComputationName(String),
    #[error("two computations are named '{0}'")]
    ComputationTwice(String),
    /// XLA's verifier: "Seen buffers while buffers aren't allowed in this
    /// context" (XLA test 04757).
    #[error("the entry's parameters and result cannot hold a buffer ({0}), as in XLA")]
    BufferAtEntry(Shape),
    #[error("has no ROOT instruction")]
    NoRoot,
    #[error("instructions form a cycle")]
    Cycle,
    #[error("an instruction ({opcode}) has an empty name")]
    EmptyName { opcode: &'static str },
    #[error("instruction name {0:?} is not a valid HLO name")]
    InstructionName(String),
    /// A rule about one instruction's own fields and its operands, or the
    /// module's attributes.
    #[error(transparent)]
    Rule(RuleError),
    #[error("parameter number {number} is also used by '{other}'")]
    ParameterTwice { number: i64, other: String },
    #[error("{opcode}: {source}")]
    Shape {
        opcode: &'static str,
        source: ShapeError,
    },
    #[error("{opcode} produces {inferred} but the instruction declares {declared}")]
    ShapeDiffers {
        opcode: &'static str,
        inferred: Shape,
        declared: Shape,
    },
    #[error("parameter numbers must be 0..{count} without gaps; found {found}")]
    ParameterGap { count: usize, found: i64 },
    /// XLA sets a wrapped computation's `execution_thread` from the async
    /// ops that run it.
    #[error("{opcode} runs on thread '{thread}', but '{callee}' is on thread '{callee_thread}'")]
    AsyncThread {
        opcode: &'static str,
        thread: String,
        callee: String,
        callee_thread: String,
    },
    #[error("name is used twice in this computation")]
    NameTwice,
    #[error("name is also used in computation '{0}'; XLA needs module-wide unique names")]
    NameInOtherComputation(String),
    #[error("calls '{0}', which is recursive or the entry")]
    RecursiveCall(String),
    #[error("input_output_alias: {0}")]
    Alias(AliasProblem),
    #[error("buffer_donor: {0}")]
    Donor(DonorProblem),
}

/// What is wrong with one of the entry's `input_output_alias` pairs.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AliasProblem {
    #[error("entry has no root")]
    NoRoot,
    #[error("output index {index:?} does not exist in {result}")]
    NoOutput { index: Vec<i64>, result: Shape },
    #[error("parameter {0} does not exist")]
    NoParameter(i64),
    #[error("parameter {parameter} has no index {index:?}")]
    NoParameterIndex { parameter: i64, index: Vec<i64> },
    #[error(
        "output {output:?} ({output_shape}) cannot alias parameter {parameter} ({parameter_shape})"
    )]
    Incompatible {
        output: Vec<i64>,
        output_shape: Shape,
        parameter: i64,
        parameter_shape: Shape,
    },
    #[error("output {0:?} is aliased twice")]
    OutputTwice(Vec<i64>),
    #[error("parameter {parameter} {index:?} is aliased by outputs {first:?} and {second:?}")]
    ParameterTwice {
        parameter: i64,
        index: Vec<i64>,
        first: Vec<i64>,
        second: Vec<i64>,
    },
}

/// What is wrong with one of the entry's `buffer_donor` entries.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DonorProblem {
    #[error("parameter {0} does not exist")]
    NoParameter(i64),
    #[error("parameter {parameter} has no index {index:?}")]
    NoParameterIndex { parameter: i64, index: Vec<i64> },
    #[error("parameter {parameter} {index:?} is listed twice")]
    Twice { parameter: i64, index: Vec<i64> },
    #[error("parameter {parameter} {index:?} is both a buffer donor and aliased to an output")]
    AlsoAliased { parameter: i64, index: Vec<i64> },
}
