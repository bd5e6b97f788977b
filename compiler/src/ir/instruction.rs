//! One HLO instruction: a named value with a shape, an op and annotations.

use crate::ir::metadata::Metadata;
use crate::ir::op::Op;
use crate::ir::shape::Shape;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The frontend attribute that carries [`Instruction::recomputed`] in HLO
/// text and protos, valued `"true"`. XLA has no field for it, and XLA and
/// neuronx-cc pass frontend attributes through untouched.
pub const RECOMPUTED_ATTRIBUTE: &str = "_hlatc_recomputed";

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
    pub sharding: Option<crate::ir::sharding::Sharding>,
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
    pub statistics: Option<Box<crate::ir::statistics::Statistics>>,
    /// `result_accuracy={...}`: how exact a transcendental unary op must
    /// be; `None` is XLA's default.
    pub result_accuracy: Option<Box<crate::ir::result_accuracy::ResultAccuracy>>,
    /// `origin={...}`: the value of the program as first written that
    /// this computes.
    pub original_value: Option<Box<crate::ir::original_value::OriginalValue>>,
    /// Autodiff's copy of a forward value, recomputed for the backward
    /// pass instead of kept: cse never merges it with the value it copies,
    /// and the `remat` pass holds it behind an opt-barrier, then clears
    /// this. Its name (`recomputed.3`) only shows it to a reader.
    pub recomputed: bool,
}

/// A [`RECOMPUTED_ATTRIBUTE`] valued other than `"true"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("frontend attribute {RECOMPUTED_ATTRIBUTE}=\"{0}\": hlatc writes it only as \"true\", on a value autodiff recomputes")]
pub struct RecomputedValueError(pub String);

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
            recomputed: false,
        }
    }

    /// The frontend attributes as HLO writes them: the instruction's own,
    /// with [`RECOMPUTED_ATTRIBUTE`] where it is recomputed.
    pub fn written_frontend_attributes(&self) -> Cow<'_, BTreeMap<String, String>> {
        if !self.recomputed {
            return Cow::Borrowed(&self.frontend_attributes);
        }
        let mut attrs = self.frontend_attributes.clone();
        attrs.insert(RECOMPUTED_ATTRIBUTE.to_string(), "true".to_string());
        Cow::Owned(attrs)
    }

    /// Sets the frontend attributes read from HLO, taking
    /// [`RECOMPUTED_ATTRIBUTE`] out of them into [`Instruction::recomputed`].
    pub fn set_written_frontend_attributes(
        &mut self,
        mut attrs: BTreeMap<String, String>,
    ) -> Result<(), RecomputedValueError> {
        self.recomputed = match attrs.remove(RECOMPUTED_ATTRIBUTE) {
            None => false,
            Some(v) if v == "true" => true,
            Some(v) => return Err(RecomputedValueError(v)),
        };
        self.frontend_attributes = attrs;
        Ok(())
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
    &'a Option<crate::ir::sharding::Sharding>,
    &'a String,
    &'a Option<Box<crate::ir::result_accuracy::ResultAccuracy>>,
    &'a Option<Box<crate::ir::statistics::Statistics>>,
    &'a Option<Box<crate::ir::original_value::OriginalValue>>,
);
