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
    pub fn is_empty(&self) -> bool {
        self == &Metadata::default()
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
        }
    }
}
