//! Attributes of the ops that run whole computations: a fusion's kind and
//! the steps of the async ops.

use super::row_traits::Arity;

/// A fusion's kind (`kind=` in text, `fusion_kind` in the proto): how XLA's
/// backend would emit the fused computation. hlatc keeps it as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FusionKind {
    Loop,
    Input,
    Output,
    Custom,
}

impl FusionKind {
    pub const ALL: [FusionKind; 4] = [
        FusionKind::Loop,
        FusionKind::Input,
        FusionKind::Output,
        FusionKind::Custom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FusionKind::Loop => "kLoop",
            FusionKind::Input => "kInput",
            FusionKind::Output => "kOutput",
            FusionKind::Custom => "kCustom",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Which of the three async ops: `async-start` begins running its wrapped
/// computation, `async-update` passes the running bundle on, `async-done`
/// waits for the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncStep {
    Start,
    Update,
    Done,
}

impl AsyncStep {
    pub const ALL: [AsyncStep; 3] = [AsyncStep::Start, AsyncStep::Update, AsyncStep::Done];

    /// A start takes its computation's operands; an update or done the
    /// bundle before it.
    pub fn arity(self) -> Arity {
        match self {
            AsyncStep::Start => Arity::Variadic,
            AsyncStep::Update | AsyncStep::Done => Arity::Exactly(1),
        }
    }

    pub const fn opcode(self) -> &'static str {
        match self {
            AsyncStep::Start => "async-start",
            AsyncStep::Update => "async-update",
            AsyncStep::Done => "async-done",
        }
    }

    /// The suffix of XLA's short form (`call-start`, `negate-done`): the
    /// wrapped op's opcode, then this.
    pub fn suffix(self) -> &'static str {
        match self {
            AsyncStep::Start => "-start",
            AsyncStep::Update => "-update",
            AsyncStep::Done => "-done",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.opcode() == s)
    }
}
