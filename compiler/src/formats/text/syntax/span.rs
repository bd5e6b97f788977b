//! Where a piece of the syntax tree is written: its text, and its line and
//! column, found only when an error or a note asks for them.

/// A piece of the input. It keeps the whole input, so that its line and
/// column can be counted without the tree.
#[derive(Clone, Copy)]
pub(crate) struct Span<'i> {
    input: &'i &'i str,
    start: usize,
    end: usize,
}

impl<'i> Span<'i> {
    /// Bytes `start..end` of `input`, both on character boundaries.
    pub(super) fn new(input: &'i &'i str, start: usize, end: usize) -> Self {
        Span { input, start, end }
    }

    pub(crate) fn as_str(&self) -> &'i str {
        self.input.get(self.start..self.end).unwrap_or_default()
    }

    /// 1-based line and column (in characters) of where the span starts.
    pub(crate) fn line_col(&self) -> (usize, usize) {
        self.line_col_at(0)
    }

    /// [`Span::line_col`] of the byte `offset` bytes into the span (kept
    /// inside the input).
    pub(crate) fn line_col_at(&self, offset: usize) -> (usize, usize) {
        line_col(self.input, self.start.saturating_add(offset))
    }
}

/// A name as written, `%` sigil and all: an instruction's, a
/// computation's, an operand's, or a bare word as a value.
#[derive(Clone, Copy)]
pub(crate) struct Name<'i>(pub(crate) Span<'i>);

impl<'i> Name<'i> {
    /// The name without its sigil: what names are looked up by.
    pub(crate) fn text(&self) -> &'i str {
        let s = self.0.as_str();
        s.strip_prefix('%').unwrap_or(s)
    }
}

/// An integer as written (`-`? digits), read by the parser, which says
/// when it is out of range.
#[derive(Clone, Copy)]
pub(crate) struct Int<'i>(pub(crate) Span<'i>);

/// 1-based line and column (in characters) of byte `at` of `input` (or
/// of the character it falls in).
pub(crate) fn line_col(input: &str, at: usize) -> (usize, usize) {
    let before = &input[..char_floor(input, at)];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// `at`, moved back to the start of the character it falls in.
pub(crate) fn char_floor(input: &str, at: usize) -> usize {
    let mut at = at.min(input.len());
    while !input.is_char_boundary(at) {
        at -= 1;
    }
    at
}
