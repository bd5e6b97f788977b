//! How a reader builds an op from its opcode and attributes. Each reader
//! (text and proto) states it for every op by an exhaustive match over
//! [`Op`](crate::Op), so an op added to the IR fails to compile in both
//! readers until its reading is chosen, as it does in the printer and the
//! proto writer; in debug builds each reader checks what it built against
//! its own statement.

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
