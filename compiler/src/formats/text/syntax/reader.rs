//! The machinery under the grammar's rules: a position in the bytes,
//! backtracking, whitespace and comments between items, and, on the
//! second reading of a text that failed, what was expected where.
//!
//! A rule is a method that returns what it read, or `None` with the
//! position where it started: every rule is undone when it fails, so the
//! callers choose between rules without saving anything themselves.

use super::span::Span;

/// What a syntax error says was expected.
pub(super) enum Expect {
    Token(&'static str),
    Label(&'static str),
}

pub(super) struct Reader<'i> {
    /// The input, behind a thin reference each span keeps.
    pub(super) input: &'i &'i str,
    pub(super) s: &'i [u8],
    pub(super) pos: usize,
    /// Whether expectations are recorded (the second reading only).
    track: bool,
    pub(super) furthest: usize,
    pub(super) expected: Vec<Expect>,
}

/// A rule, as the list helpers take one.
pub(super) type Item<'i, T> = fn(&mut Reader<'i>) -> Option<T>;

pub(super) fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

impl<'i> Reader<'i> {
    pub(super) fn new(input: &'i &'i str, track: bool) -> Self {
        Reader {
            input,
            s: input.as_bytes(),
            pos: 0,
            track,
            furthest: 0,
            expected: Vec::new(),
        }
    }

    /// From `start` to here.
    pub(super) fn span(&self, start: usize) -> Span<'i> {
        Span::new(self.input, start, self.pos)
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    pub(super) fn peek_is(&self, f: impl Fn(u8) -> bool) -> bool {
        self.peek().is_some_and(f)
    }

    /// Records `e` as expected here, on the second reading.
    pub(super) fn note_expected(&mut self, e: Expect) {
        if !self.track {
            return;
        }
        if self.pos > self.furthest {
            self.furthest = self.pos;
            self.expected.clear();
        }
        if self.pos == self.furthest {
            self.expected.push(e);
        }
    }

    /// Whitespace and comments, between the items of a rule.
    pub(super) fn skip(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => self.pos += 1,
                Some(b'/') if self.s.get(self.pos + 1) == Some(&b'*') => {
                    match find(&self.s[self.pos + 2..], b"*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        // An unclosed comment is no comment: the `/` is
                        // then what the grammar finds.
                        None => return,
                    }
                }
                Some(b'/') if self.s.get(self.pos + 1) == Some(&b'/') => {
                    self.pos = match self.s[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(i) => self.pos + i,
                        None => self.s.len(),
                    };
                }
                _ => return,
            }
        }
    }

    /// Eats `t` if it comes next, without recording it as expected.
    pub(super) fn eat(&mut self, t: &str) -> bool {
        if self.s[self.pos..].starts_with(t.as_bytes()) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }

    pub(super) fn eat_byte(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// `t`, recorded as expected when it does not come next.
    #[inline(always)]
    pub(super) fn lit(&mut self, t: &'static str) -> Option<()> {
        if self.eat(t) {
            Some(())
        } else {
            self.note_expected(Expect::Token(t));
            None
        }
    }

    /// Whitespace, then `t`.
    #[inline(always)]
    pub(super) fn then(&mut self, t: &'static str) -> Option<()> {
        self.skip();
        self.lit(t)
    }

    /// Whitespace, then `item`.
    #[inline(always)]
    pub(super) fn then_item<T>(&mut self, item: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.skip();
        item(self)
    }

    pub(super) fn eat_while(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.pos;
        while self.peek_is(&f) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `f`, undone when it fails.
    #[inline(always)]
    pub(super) fn attempt<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let pos = self.pos;
        let out = f(self);
        if out.is_none() {
            self.pos = pos;
        }
        out
    }

    /// [`Reader::attempt`] for byte-level reading, which only succeeds or
    /// fails.
    pub(super) fn scan(&mut self, f: impl FnOnce(&mut Self) -> bool) -> bool {
        self.attempt(|r| f(r).then_some(())).is_some()
    }

    /// A rule: `f`, undone when it fails. When it fails without getting
    /// past its start, `label` (if any) stands for whatever `f` tried
    /// there, as what a user would recognize.
    #[inline(always)]
    pub(super) fn rule<T>(
        &mut self,
        label: Option<&'static str>,
        f: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<T> {
        let start = self.pos;
        let before = (self.furthest, self.expected.len());
        let out = f(self);
        if out.is_some() {
            return out;
        }
        self.pos = start;
        if let (true, Some(l)) = (self.track && self.furthest <= start, label) {
            // Expectations at `start` recorded inside give way to the label.
            if before.0 == start {
                self.expected.truncate(before.1);
            } else {
                self.expected.clear();
            }
            self.note_expected(Expect::Label(l));
        }
        None
    }

    /// An atomic rule: `f` reads bytes, and a failure is the rule's, named
    /// by `label` where it has one.
    #[inline(always)]
    pub(super) fn atomic<T>(
        &mut self,
        label: Option<&'static str>,
        f: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<T> {
        let quiet = std::mem::replace(&mut self.track, false);
        let out = self.attempt(f);
        self.track = quiet;
        if out.is_none() {
            if let Some(l) = label {
                self.note_expected(Expect::Label(l));
            }
        }
        out
    }

    /// An atomic rule that reads a token: its span.
    #[inline(always)]
    pub(super) fn token(
        &mut self,
        label: Option<&'static str>,
        f: impl FnOnce(&mut Self) -> bool,
    ) -> Option<Span<'i>> {
        let start = self.pos;
        self.atomic(label, |r| f(r).then(|| r.span(start)))
    }

    /// `(item ("," item)*)?`, then whatever follows is read after
    /// whitespace.
    pub(super) fn list<T>(&mut self, item: Item<'i, T>) -> Vec<T> {
        self.skip();
        let Some(first) = self.attempt(item) else {
            return Vec::new();
        };
        self.rest_of_list(first, item)
    }

    /// `item ("," item)*`.
    pub(super) fn list1<T>(&mut self, item: Item<'i, T>) -> Option<Vec<T>> {
        self.skip();
        let first = item(self)?;
        Some(self.rest_of_list(first, item))
    }

    fn rest_of_list<T>(&mut self, first: T, item: Item<'i, T>) -> Vec<T> {
        let mut items = vec![first];
        while let Some(next) = self.attempt(|r| {
            r.then(",")?;
            r.then_item(item)
        }) {
            items.push(next);
        }
        items
    }

    /// `"{" item ("," item)* "}"`.
    pub(super) fn braced1<T>(&mut self, item: Item<'i, T>) -> Option<Vec<T>> {
        self.lit("{")?;
        let items = self.list1(item)?;
        self.then("}")?;
        Some(items)
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
