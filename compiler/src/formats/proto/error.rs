//! Why a proto is refused: [`ProtoError`], and under it what is wrong
//! with a module's structure ([`ImportError`]) or with one instruction's
//! fields ([`InstructionError`]). Each module of the reader has its own
//! error for what it reads (shapes, literals, shardings, collectives,
//! annotations, the wire walk), wrapped here with its message unchanged.

use super::annotations::AnnotationError;
use super::collective::CollectiveProtoError;
use super::literal::LiteralProtoError;
use super::shape::ShapeProtoError;
use super::sharding::ShardingProtoError;
use super::wire::WireError;
use crate::ir::async_ops::AsyncCalleeError;
use crate::ir::module::BoundaryMismatch;

#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("not a valid HloModuleProto: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A field XLA writes that hlatc does not model, by its path.
    #[error(transparent)]
    Unmodeled(#[from] WireError),
    #[error("computation '{computation}'{}: {error}", instruction.as_ref().map(|i| format!(", instruction '{i}'")).unwrap_or_default())]
    Invalid {
        computation: String,
        instruction: Option<String>,
        /// Boxed: a module's result should not be the size of its
        /// largest error.
        #[source]
        error: Box<ImportError>,
    },
}

/// What is wrong with a module, a computation or how an instruction sits
/// in it; [`ProtoError::Invalid`] says where.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("computation id {0} is used twice")]
    ComputationIdTwice(i64),
    #[error("entry computation id {0} not found")]
    NoEntry(i64),
    /// Read, but not a layout of the entry ([`crate::ir::module::EntryLayout`]).
    #[error("host_program_shape {0}")]
    HostProgramShape(#[source] BoundaryMismatch),
    #[error("computation '{0}' is marked is_fusion_computation but no fusion calls it")]
    StrayFusionFlag(String),
    #[error("the schedule lists instruction id {0}, which the computation does not hold once")]
    ScheduleId(i64),
    #[error("the schedule orders {ordered} of its {held} instructions")]
    ScheduleCount { ordered: usize, held: usize },
    #[error("root id {0} not found")]
    NoRoot(i64),
    /// An async op's computation, which its start names
    /// ([`crate::ir::async_ops`]).
    #[error(transparent)]
    AsyncCallee(AsyncCalleeError),
    #[error("has no shape")]
    NoShape,
    #[error("calls unknown computation id {0}")]
    UnknownCallee(i64),
    #[error("instruction id {0} is used twice")]
    InstructionIdTwice(i64),
    #[error("operand id {0} is not in this computation")]
    UnknownOperand(i64),
    #[error("control predecessor id {0} is not in this computation")]
    UnknownPredecessor(i64),
    #[error("sharding: {0}")]
    Sharding(#[source] ShardingProtoError),
    #[error("original_value: {0}")]
    OriginalValue(#[source] AnnotationError),
    #[error(transparent)]
    Shape(#[from] ShapeProtoError),
    #[error(transparent)]
    Instruction(#[from] InstructionError),
}

/// What is wrong with an instruction's op and the fields that carry it.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum InstructionError {
    #[error("unsupported opcode '{0}'")]
    UnsupportedOpcode(String),
    /// A field written on an op that does not carry it, where it would be
    /// lost.
    #[error(
        "{opcode} has field {field}, which hlatc reads only on {carriers}; here it would be lost"
    )]
    StrayField {
        opcode: String,
        field: &'static str,
        carriers: String,
    },
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error("needs exactly one called computation, has {0}")]
    OneCallee(usize),
    #[error("{opcode} needs {} ({}), has {has}", callee_count(keys.len()), keys.join(", "))]
    Callees {
        opcode: &'static str,
        keys: Vec<&'static str>,
        has: usize,
    },
    #[error("{opcode} needs {field}")]
    MissingField { opcode: String, field: &'static str },
    #[error("{opcode} needs exactly one dimension, has {dims:?}")]
    NotOneDimension { opcode: String, dims: Vec<i64> },
    #[error("has unknown {field} {written} (expected one of {choices})")]
    UnknownValue {
        field: &'static str,
        written: String,
        choices: String,
    },
    #[error("{field} {value} is out of range")]
    OutOfRange { field: &'static str, value: i64 },
    #[error("{field} must be {kind}")]
    WrongKind {
        field: &'static str,
        kind: &'static str,
    },
    #[error("unknown precision {0}")]
    UnknownPrecision(i32),
    #[error("unknown precision_config.algorithm {0}")]
    UnknownAlgorithm(i32),
    #[error(
        "custom-call has precision_config.algorithm, which hlatc reads only on dot and ragged-dot"
    )]
    AlgorithmOnCustomCall,
    #[error("unknown custom-call api version {0}")]
    UnknownApiVersion(i32),
    #[error("unknown custom_call_schedule {0}")]
    UnknownSchedule(i32),
    #[error("unknown padding_type {0}")]
    UnknownPaddingType(i32),
    #[error("custom-call's literal has no shape")]
    CallLiteralWithoutShape,
    #[error("custom-call has operand_shapes_with_layout without constrain_layout")]
    LayoutsWithoutConstraint,
    #[error("constant has no literal")]
    NoLiteral,
    #[error("domain has no {0}")]
    DomainWithout(&'static str),
    #[error(transparent)]
    Shape(#[from] ShapeProtoError),
    #[error(transparent)]
    Literal(#[from] LiteralProtoError),
    #[error(transparent)]
    Sharding(#[from] ShardingProtoError),
    #[error(transparent)]
    Collective(#[from] CollectiveProtoError),
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
    #[error(transparent)]
    Recomputed(#[from] crate::ir::instruction::RecomputedValueError),
}

fn callee_count(n: usize) -> String {
    match n {
        1 => "one called computation".to_string(),
        2 => "two called computations".to_string(),
        n => format!("{n} called computations"),
    }
}
