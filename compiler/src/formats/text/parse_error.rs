//! The one error of reading HLO text: where, and what went wrong. Apart
//! from the parser so that the stack-frame tables, read before the
//! grammar runs, report in the same form without importing the parser.

use std::fmt;

/// A parse failure at `line:column` (1-based).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}
