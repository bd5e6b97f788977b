//! A cursor over an attribute's text, for the values the HLO grammar takes
//! whole (shardings, replica groups): an error names the byte where the
//! value goes wrong.

/// A problem at a byte offset of an attribute's text.
pub(crate) struct AttrSyntaxError {
    pub offset: usize,
    pub message: String,
}

type Result<T> = std::result::Result<T, AttrSyntaxError>;

pub(crate) struct Cursor<'t> {
    pub(crate) text: &'t str,
    pub(crate) pos: usize,
}

impl<'t> Cursor<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Cursor { text, pos: 0 }
    }

    pub(crate) fn fail<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(AttrSyntaxError {
            offset: self.pos,
            message: message.into(),
        })
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    pub(crate) fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    /// Whitespace and `/* */` comments (XLA numbers the elements of long
    /// tuple shardings with `/*index=5*/`).
    pub(crate) fn skip_ws(&mut self) {
        loop {
            while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
                self.pos += 1;
            }
            match self.rest().strip_prefix("/*").and_then(|r| r.find("*/")) {
                Some(end) => self.pos += 2 + end + 2,
                None => return,
            }
        }
    }

    pub(crate) fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// `s`, after whitespace, or an error naming it and what is there.
    pub(crate) fn require(&mut self, s: &str) -> Result<()> {
        if self.eat(s) {
            Ok(())
        } else {
            let found: String = self.rest().chars().take(20).collect();
            self.fail(format!("expected `{s}`, found `{found}`"))
        }
    }

    pub(crate) fn word(&mut self) -> &str {
        self.run(|b| b.is_ascii_alphanumeric() || b == b'_')
    }

    /// After whitespace, the bytes that `f` takes, up to the first it
    /// does not (ASCII: positions stay on character boundaries).
    pub(crate) fn run(&mut self, f: impl Fn(u8) -> bool) -> &'t str {
        self.skip_ws();
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii() && f(b)) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    pub(crate) fn int(&mut self) -> Result<i64> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        match self.text[start..self.pos].parse() {
            Ok(v) => Ok(v),
            Err(_) => {
                self.pos = start;
                self.fail("expected an integer")
            }
        }
    }

    /// A number as XLA's lexer takes one (`0.5`, `-1e-30`, `inf`), read as
    /// an f64.
    pub(crate) fn float(&mut self) -> Result<f64> {
        let text = self.run(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'));
        let start = self.pos - text.len();
        match text.parse() {
            Ok(v) => Ok(v),
            Err(_) => {
                self.pos = start;
                self.fail("expected a number")
            }
        }
    }

    /// A quoted string, its escapes read.
    pub(crate) fn string(&mut self) -> Result<String> {
        self.skip_ws();
        let open = self.pos;
        if self.peek() != Some(b'"') {
            return self.fail("expected a string");
        }
        self.pos += 1;
        while let Some(b) = self.peek() {
            match b {
                b'\\' => self.pos += 2,
                b'"' => break,
                _ => self.pos += 1,
            }
        }
        if self.peek() != Some(b'"') {
            self.pos = open;
            return self.fail("unterminated string");
        }
        let raw = &self.text[open + 1..self.pos];
        self.pos += 1;
        crate::util::escape::unescape(raw).ok_or_else(|| AttrSyntaxError {
            offset: open,
            message: "malformed escape sequence in string".into(),
        })
    }

    /// `a,b,c` (at least one).
    pub(crate) fn ints(&mut self) -> Result<Vec<i64>> {
        let mut v = vec![self.int()?];
        while self.eat(",") {
            v.push(self.int()?);
        }
        Ok(v)
    }

    /// `[a,b,c]`.
    pub(crate) fn bracketed(&mut self, open: &str, close: &str) -> Result<Vec<i64>> {
        self.require(open)?;
        let v = self.ints()?;
        self.require(close)?;
        Ok(v)
    }

    /// After `<=`: `[reshape]`, then `T(transpose)` if written (empty if
    /// not), as in `devices=[2,2]<=[2,2]T(1,0)`.
    pub(crate) fn iota(&mut self) -> Result<(Vec<i64>, Vec<i64>)> {
        let reshape = self.bracketed("[", "]")?;
        let transpose = if self.rest().starts_with('T') {
            self.pos += 1;
            self.bracketed("(", ")")?
        } else {
            Vec::new()
        };
        Ok((reshape, transpose))
    }

    /// Nothing but whitespace is left.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos != self.text.len() {
            return self.fail("unexpected text after the value");
        }
        Ok(())
    }
}
