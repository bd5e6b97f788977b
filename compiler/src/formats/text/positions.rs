//! Where each instruction of a module's text is written. The IR keeps no
//! source positions (a module read from a proto or built in memory has
//! none to keep, and every instruction would pay for the slot), so a tool
//! that points into the text (a check's findings) reads the text's syntax
//! tree once more, only when it has something to point at.

use super::parser::{syntax_error, ParseError};
use super::syntax;
use crate::util::fx::FxHashMap;

/// A 1-based line and column (in characters), as the parser's errors give
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextPosition {
    pub line: usize,
    pub column: usize,
}

/// Each computation's and each named instruction's position in a module's
/// text, by name as written. An instruction is found where its name is
/// written (after `ROOT`), a computation where its header starts.
#[derive(Debug, Default)]
pub struct TextPositions {
    instructions: FxHashMap<(String, String), TextPosition>,
    computations: FxHashMap<String, TextPosition>,
}

impl TextPositions {
    /// Where instruction `name` of computation `computation` is written. A
    /// name the reader changed (one repeated across computations, renamed
    /// `name.N` as XLA renames it) is not found under its new name.
    pub fn instruction(&self, computation: &str, name: &str) -> Option<TextPosition> {
        self.instructions
            .get(&(computation.to_string(), name.to_string()))
            .copied()
    }

    /// Where computation `name` starts.
    pub fn computation(&self, name: &str) -> Option<TextPosition> {
        self.computations.get(name).copied()
    }
}

/// Reads `text` as [`super::parse_module`] reads it (a byte-order mark is
/// not counted, stack-frame tables are skipped with their lines kept) and
/// says where each computation and instruction is written.
pub fn instruction_positions(text: &str) -> Result<TextPositions, ParseError> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let (text, _) = super::stack_frame_tables::take_tables(text)?;
    let text: &str = &text;
    super::nesting::check_nesting(text)?;
    let tree = syntax::parse(&text).map_err(|e| syntax_error(e, text))?;
    let at = |(line, column): (usize, usize)| TextPosition { line, column };
    let mut out = TextPositions::default();
    for c in &tree.computations {
        let computation = c.name.text().to_string();
        out.computations
            .insert(computation.clone(), at(c.at.line_col()));
        for i in &c.instructions {
            out.instructions.insert(
                (computation.clone(), i.name.text().to_string()),
                at(i.name.0.line_col()),
            );
        }
    }
    Ok(out)
}
