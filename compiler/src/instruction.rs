//! One HLO instruction: a named value with a shape, an op and annotations.

use crate::op::Op;
use crate::types::Shape;
use std::collections::BTreeMap;

/// XLA's `OpMetadata`, kept so that imported programs keep their provenance.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Metadata {
    pub op_type: String,
    pub op_name: String,
    pub source_file: String,
    pub source_line: i64,
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
}

impl Instruction {
    pub fn new(name: impl Into<String>, shape: Shape, op: Op) -> Self {
        Instruction {
            name: name.into(),
            shape,
            op,
            metadata: Metadata::default(),
            frontend_attributes: BTreeMap::new(),
        }
    }
}
