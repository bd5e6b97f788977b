//! Shapes: tuples, buffers and arrays, with their dims and layouts.

use super::reader::{Expect, Reader};
use super::tree::{ArrayShape, Layout, Shape};

impl<'i> Reader<'i> {
    pub(super) fn shape(&mut self) -> Option<Shape<'i>> {
        self.rule(Some("a shape such as f32[2,3]"), |r| {
            // The first bytes pick the one form that can match: shapes are
            // read for every instruction and operand.
            if r.peek() == Some(b'(') {
                r.tuple_shape()
            } else if r.peek() == Some(b'b') && r.s.get(r.pos + 1) == Some(&b'(') {
                r.buffer_shape()
            } else {
                r.array_shape().map(Shape::Array)
            }
        })
    }

    fn tuple_shape(&mut self) -> Option<Shape<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("(")?;
            let elements = r.list(Self::shape);
            r.then(")")?;
            Some(Shape::Tuple {
                at: r.span(start),
                elements,
            })
        })
    }

    fn buffer_shape(&mut self) -> Option<Shape<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("b(")?;
            let held = r.then_item(Self::shape)?;
            r.then(")")?;
            Some(Shape::Buffer {
                at: r.span(start),
                held: Box::new(held),
            })
        })
    }

    fn array_shape(&mut self) -> Option<ArrayShape<'i>> {
        self.rule(None, |r| {
            let element_type = r.token(Some("an element type"), |r| {
                r.peek_is(|b| b.is_ascii_lowercase()) && {
                    r.eat_while(|b| b.is_ascii_alphanumeric());
                    true
                }
            })?;
            // XLA's lexer takes `s32 [4]` too: spaces between tokens. The
            // `[` is expected right after the type only, so an error after
            // a name and a line break does not list it.
            if r.lit("[").is_none()
                && !(r.peek_is(|b| b.is_ascii_whitespace())
                    && r.scan(|r| {
                        r.skip();
                        r.eat("[")
                    }))
            {
                return None;
            }
            let dims = r.dims()?;
            if !r.eat_byte(b']') {
                r.dims_refused();
                return None;
            }
            // XLA's lexer lets spaces stand before a layout
            // (`f32[3,6] {1,0}`); a computation's `{` after its result
            // shape is no layout, and the attempt fails.
            let layout = match r.peek() {
                Some(b'{') => r.attempt(Self::layout),
                Some(b' ') => r.attempt(|r| {
                    r.eat_while(|b| b == b' ');
                    if r.peek() == Some(b'{') {
                        r.layout()
                    } else {
                        None
                    }
                }),
                _ => None,
            };
            Some(ArrayShape {
                element_type,
                dims,
                layout,
            })
        })
    }

    /// Where the dims of an array shape stop short of their `]`: a bound
    /// on an unbounded dimension (`<=?`) is named as one.
    fn dims_refused(&mut self) {
        let mut at = self.pos;
        if self.s.get(at) == Some(&b',') {
            at += 1;
            while self.s.get(at) == Some(&b' ') {
                at += 1;
            }
        }
        if self.s[at..].starts_with(b"<=?") {
            let pos = std::mem::replace(&mut self.pos, at);
            self.note_expected(Expect::Label(
                "a dimension, a bound such as <=8, or ? for an unbounded dimension (which has no bound)",
            ));
            self.pos = pos;
        } else {
            self.note_expected(Expect::Token(","));
            self.note_expected(Expect::Token("]"));
        }
    }

    /// `int (sep int)*` with `sep` a comma between runs of `space`,
    /// optional as a whole, then `space`: the lists of layouts and
    /// integer values.
    pub(super) fn int_run(&mut self, space: impl Fn(u8) -> bool + Copy) {
        self.eat_while(space);
        if self.int_text() {
            while self.scan(|r| {
                r.eat_while(space);
                r.eat_byte(b',') && {
                    r.eat_while(space);
                    r.int_text()
                }
            }) {}
        }
        self.eat_while(space);
    }

    /// Like `int_run`, where each dimension may be a bound (`<=8`) or
    /// unbounded (`?`).
    fn dims(&mut self) -> Option<super::Span<'i>> {
        self.token(None, |r| {
            r.eat_while(|b| b == b' ');
            if r.dim_text() {
                while r.scan(|r| {
                    r.eat_while(|b| b == b' ');
                    r.eat_byte(b',') && {
                        r.eat_while(|b| b == b' ');
                        r.dim_text()
                    }
                }) {}
            }
            r.eat_while(|b| b == b' ');
            true
        })
    }

    /// A dimension: `8`, a bound `<=8`, or unbounded `?`.
    #[inline(always)]
    fn dim_text(&mut self) -> bool {
        match self.peek() {
            Some(b'<') => self.scan(|r| r.eat("<=") && r.int_text()),
            Some(b'?') => self.eat_byte(b'?'),
            _ => self.int_text(),
        }
    }

    fn layout(&mut self) -> Option<Layout<'i>> {
        let start = self.pos;
        self.atomic(None, |r| {
            if !r.eat_byte(b'{') {
                return None;
            }
            let order = r.pos;
            r.int_run(|b| b == b' ');
            let minor_to_major = r.span(order);
            let tail = r.eat_byte(b':').then(|| {
                let tail = r.pos;
                r.layout_tail();
                r.span(tail)
            });
            r.eat_byte(b'}').then(|| Layout {
                at: r.span(start),
                minor_to_major,
                tail,
            })
        })
    }

    /// Any text with balanced parentheses, up to a `}` outside them.
    fn layout_tail(&mut self) {
        loop {
            match self.peek() {
                Some(b'(') => {
                    if !self.scan(Self::paren_group) {
                        return;
                    }
                }
                Some(b'}' | b')') | None => return,
                Some(_) => self.pos += 1,
            }
        }
    }

    pub(super) fn paren_group(&mut self) -> bool {
        self.eat_byte(b'(') && {
            loop {
                match self.peek() {
                    Some(b'(') => {
                        if !self.scan(Self::paren_group) {
                            break;
                        }
                    }
                    Some(b')') | None => break,
                    Some(_) => self.pos += 1,
                }
            }
            self.eat_byte(b')')
        }
    }
}
