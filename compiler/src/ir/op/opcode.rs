//! An opcode as a value other crates can hold: only a spelling the op
//! table has makes one. [`Opcode::new`] is a `const fn` that panics on any
//! other spelling, so a misspelt opcode in a `const` or `static` (a cast
//! policy's rules, a Neuron rule's matcher) is a compile error, and
//! [`Opcode::parse`] checks one a user gives.

use super::{AsyncStep, BatchNormKind, Op, TransferStep, BINARY_NAMES, UNARY_NAMES};
use crate::ir::op::description::TABLE_OPCODES;
use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Opcode(&'static str);

/// Whether two strings are equal, in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The table's spelling of `s`, if it spells one.
const fn spelled(s: &str) -> Option<&'static str> {
    let mut i = 0;
    while i < TABLE_OPCODES.len() {
        if same(TABLE_OPCODES[i], s) {
            return Some(TABLE_OPCODES[i]);
        }
        i += 1;
    }
    let mut i = 0;
    while i < UNARY_NAMES.len() {
        if same(UNARY_NAMES[i].1, s) {
            return Some(UNARY_NAMES[i].1);
        }
        i += 1;
    }
    let mut i = 0;
    while i < BINARY_NAMES.len() {
        if same(BINARY_NAMES[i].1, s) {
            return Some(BINARY_NAMES[i].1);
        }
        i += 1;
    }
    let mut i = 0;
    while i < BatchNormKind::ALL.len() {
        if same(BatchNormKind::ALL[i].opcode(), s) {
            return Some(BatchNormKind::ALL[i].opcode());
        }
        i += 1;
    }
    let mut i = 0;
    while i < TransferStep::ALL.len() {
        if same(TransferStep::ALL[i].opcode(), s) {
            return Some(TransferStep::ALL[i].opcode());
        }
        i += 1;
    }
    let mut i = 0;
    while i < AsyncStep::ALL.len() {
        if same(AsyncStep::ALL[i].opcode(), s) {
            return Some(AsyncStep::ALL[i].opcode());
        }
        i += 1;
    }
    None
}

impl Opcode {
    /// The opcode spelt `s`. Panics unless the op table spells it: in a
    /// constant, that is a compile error naming the constant.
    pub const fn new(s: &'static str) -> Opcode {
        match spelled(s) {
            Some(s) => Opcode(s),
            None => panic!("not an HLO opcode of hlatc's op table"),
        }
    }

    /// The opcode spelt `s`, if the op table spells it (a user's input).
    pub fn parse(s: &str) -> Option<Opcode> {
        spelled(s).map(Opcode)
    }

    /// The opcode of `op`.
    pub fn of(op: &Op) -> Opcode {
        Opcode(op.opcode())
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opcode({})", self.0)
    }
}

impl PartialEq<str> for Opcode {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}
