//! One HLO instruction: a named value with a shape, an op and annotations.

use crate::op::Op;
use crate::types::Shape;
use std::collections::BTreeMap;

/// XLA's `OpMetadata`, kept so that imported programs keep their provenance.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Metadata {
    pub op_type: String,
    pub op_name: String,
    pub source_file: String,
    pub source_line: i64,
    pub source_end_line: i64,
    pub source_column: i64,
    pub source_end_column: i64,
    /// Index into the module's stack-frame tables (1-based; 0: none).
    pub stack_frame_id: i32,
    pub scheduling_name: String,
    pub deduplicated_name: String,
}

impl Metadata {
    /// Field by field, without comparing against a default value: that
    /// compared every string with `memcmp`, which was half of printing a
    /// module on one VM. The destructuring names every field, so a new one
    /// cannot be left out.
    pub fn is_empty(&self) -> bool {
        let Metadata {
            op_type,
            op_name,
            source_file,
            source_line,
            source_end_line,
            source_column,
            source_end_column,
            stack_frame_id,
            scheduling_name,
            deduplicated_name,
        } = self;
        op_type.is_empty()
            && op_name.is_empty()
            && source_file.is_empty()
            && scheduling_name.is_empty()
            && deduplicated_name.is_empty()
            && [
                *source_line,
                *source_end_line,
                *source_column,
                *source_end_column,
            ] == [0; 4]
            && *stack_frame_id == 0
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    pub name: String,
    pub shape: Shape,
    pub op: Op,
    pub metadata: Metadata,
    /// Per-op annotations (`frontend_attributes={...}`), e.g. a rounding mode
    /// or a remat policy. Ordered so emission is deterministic.
    pub frontend_attributes: BTreeMap<String, String>,
    /// How the value is split across devices (`sharding={...}`), as read.
    pub sharding: Option<crate::sharding::Sharding>,
    /// XLA's `backend_config`: opaque to hlatc (a custom call's argument, a
    /// GPU fusion's launch choice, a loop's known trip count), kept as
    /// written; empty when absent.
    pub backend_config: String,
    /// A parameter's `parameter_replication={...}`: per leaf buffer, whether
    /// every replica holds the same value (SPMD may then skip a broadcast).
    pub parameter_replication: Option<Vec<bool>>,
    /// `statistics={...}`: numbers a tool attached, kept as read. This and
    /// the next two are boxed: rare, and every instruction carries the
    /// slots (unboxed, they cost 3% of parsing a JAX dump in moves).
    pub statistics: Option<Box<crate::statistics::Statistics>>,
    /// `result_accuracy={...}`: how exact a transcendental unary op must
    /// be; `None` is XLA's default.
    pub result_accuracy: Option<Box<crate::result_accuracy::ResultAccuracy>>,
    /// `origin={...}`: the value of the program as first written that
    /// this computes.
    pub original_value: Option<Box<crate::original_value::OriginalValue>>,
}

impl Instruction {
    pub fn new(name: impl Into<String>, shape: Shape, op: Op) -> Self {
        Instruction {
            name: name.into(),
            shape,
            op,
            metadata: Metadata::default(),
            frontend_attributes: BTreeMap::new(),
            sharding: None,
            backend_config: String::new(),
            parameter_replication: None,
            statistics: None,
            result_accuracy: None,
            original_value: None,
        }
    }

    /// What tells two instructions with the same op, shape and operands
    /// apart: their annotations. Value numbering and cse merge only equal
    /// ones.
    pub fn annotations(&self) -> Annotations<'_> {
        (
            &self.frontend_attributes,
            &self.sharding,
            &self.backend_config,
            &self.result_accuracy,
            &self.statistics,
            &self.original_value,
        )
    }

    /// Whether the instruction carries no annotation at all.
    pub fn is_unannotated(&self) -> bool {
        self.frontend_attributes.is_empty()
            && self.sharding.is_none()
            && self.backend_config.is_empty()
            && self.result_accuracy.is_none()
            && self.statistics.is_none()
            && self.original_value.is_none()
    }
}

/// See [`Instruction::annotations`].
pub type Annotations<'a> = (
    &'a BTreeMap<String, String>,
    &'a Option<crate::sharding::Sharding>,
    &'a String,
    &'a Option<Box<crate::result_accuracy::ResultAccuracy>>,
    &'a Option<Box<crate::statistics::Statistics>>,
    &'a Option<Box<crate::original_value::OriginalValue>>,
);
