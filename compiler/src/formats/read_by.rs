//! How the readers build an op from its opcode and attributes, stated for
//! every op by an exhaustive match over [`Op`], so an op added to the IR
//! fails to compile here until its reading is chosen, as it does in the
//! printer and the proto writer. Both readers (text and proto) dispatch
//! alike, by opcode, description, family, then by hand; in debug builds
//! each checks what it built against this statement, so an op stated
//! `Hand` without an arm in a reader fails its round-trip fixture there.

use crate::ir::op::Op;

/// Where an op's reading comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadBy {
    /// Its opcode alone (`Op::without_attributes`): the op has no
    /// attributes.
    Opcode,
    /// Its row of the op table (`Op::read_described`).
    Description,
    /// Its family's enum, which spells the opcode (batch norms, transfers,
    /// async steps).
    Family,
    /// Code in the reader written for it.
    Hand,
}

/// How the text parser and the proto reader build `op`. The ones read by
/// hand have arms in `formats/text/parser/ops.rs` (`op_named`; parameters
/// and constants in the instruction reader) and in
/// `formats/proto/instruction.rs` (`read_op_by_opcode`).
pub(crate) fn read_by(op: &Op) -> ReadBy {
    match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert
        | Op::StochasticConvert
        | Op::BitcastConvert
        | Op::Bitcast
        | Op::DynamicUpdateSlice
        | Op::DynamicReshape
        | Op::Tuple
        | Op::OptBarrier
        | Op::CollectiveDone(_)
        | Op::ReplicaId
        | Op::PartitionId
        | Op::CopyDone
        | Op::AfterAll
        | Op::AddDependency => ReadBy::Opcode,
        Op::BatchNorm { .. } | Op::Transfer(_) | Op::Async { .. } => ReadBy::Family,
        Op::Parameter(_)
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Conditional { .. }
        | Op::Domain { .. }
        | Op::Outfeed { .. }
        | Op::CustomCall(_) => ReadBy::Hand,
        crate::ir::op::description::described_ops!() => ReadBy::Description,
    }
}
