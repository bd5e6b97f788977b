//! Attributes and the forms of their values, told apart by the grammar
//! in the order the attribute rule tries them.

use super::reader::{is_name_char, Reader};
use super::tree::{Attribute, Pad, ShapedValue, Slice, Value, ValueForm};
use super::{Int, Span};

impl<'i> Reader<'i> {
    pub(super) fn attribute(&mut self) -> Option<Attribute<'i>> {
        let start = self.pos;
        self.rule(Some("an attribute (key=value)"), |r| {
            let key = r.attr_name()?;
            r.then("=")?;
            let value = r.then_item(|r| r.rule(Some("an attribute value"), Self::value))?;
            Some(Attribute {
                at: r.span(start),
                key,
                value,
            })
        })
    }

    fn attr_name(&mut self) -> Option<Span<'i>> {
        self.token(Some("an attribute name"), |r| {
            r.peek_is(|b| b.is_ascii_alphabetic() || b == b'_') && {
                r.eat_while(is_name_char);
                true
            }
        })
    }

    /// The first form that reads, as a value.
    fn value(&mut self) -> Option<Value<'i>> {
        let start = self.pos;
        let form = self
            .string()
            .or_else(|| self.raw(Self::arrow_text))
            .or_else(|| self.padding())
            .or_else(|| self.slice_list())
            .or_else(|| self.int_list())
            .or_else(|| self.kv_map())
            .or_else(|| self.word_list())
            .or_else(|| self.shape_list())
            .or_else(|| self.number().map(ValueForm::Number))
            .or_else(|| self.raw_value())
            .or_else(|| self.raw(Self::mesh_groups_text))
            .or_else(|| self.shaped_literal())
            .or_else(|| self.word().map(|w| ValueForm::Word(super::Name(w))))?;
        Some(Value {
            at: self.span(start),
            form,
        })
    }

    fn string(&mut self) -> Option<ValueForm<'i>> {
        self.rule(Some("a quoted string"), |r| {
            r.lit("\"")?;
            let inner = r.token(None, |r| {
                r.string_text();
                true
            })?;
            r.eat_byte(b'"').then_some(ValueForm::String(inner))
        })
    }

    /// The text of a string up to its closing quote, escapes included.
    fn string_text(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b'"' => return,
                b'\\' => {
                    self.pos += 1;
                    self.any_char();
                }
                _ => self.pos += 1,
            }
        }
    }

    /// One character, whole: text positions stay on character boundaries.
    fn any_char(&mut self) {
        let Some(b) = self.peek() else {
            return;
        };
        let width = match b {
            0..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        self.pos = (self.pos + width).min(self.s.len());
    }

    /// An atomic value read whole by `f`, as raw text.
    fn raw(&mut self, f: fn(&mut Self) -> bool) -> Option<ValueForm<'i>> {
        self.token(None, f).map(ValueForm::Raw)
    }

    /// `a->b`: a name (or `?`) run, an arrow, another run.
    fn arrow_text(&mut self) -> bool {
        let part = |b: u8| is_name_char(b) || b == b'?';
        let start = self.pos;
        while self.peek_is(part) && !self.s[self.pos..].starts_with(b"->") {
            self.pos += 1;
        }
        self.pos > start && self.eat("->") && self.eat_while(part) > 0
    }

    fn padding(&mut self) -> Option<ValueForm<'i>> {
        self.atomic(None, |r| {
            let mut dims = vec![r.pad_dim()?];
            while let Some(d) = r.attempt(|r| if r.eat_byte(b'x') { r.pad_dim() } else { None }) {
                dims.push(d);
            }
            (!r.peek_is(is_name_char)).then_some(ValueForm::Padding(dims))
        })
    }

    fn pad_dim(&mut self) -> Option<Pad<'i>> {
        let start = self.pos;
        let low = self.int_token()?;
        if !self.eat_byte(b'_') {
            return None;
        }
        let high = self.int_token()?;
        let interior = self.attempt(|r| {
            if r.eat_byte(b'_') {
                r.int_token()
            } else {
                None
            }
        });
        Some(Pad {
            at: self.span(start),
            low,
            high,
            interior,
        })
    }

    /// An integer inside an atomic rule.
    fn int_token(&mut self) -> Option<Int<'i>> {
        let start = self.pos;
        self.int_text().then(|| Int(self.span(start)))
    }

    fn slice_list(&mut self) -> Option<ValueForm<'i>> {
        self.rule(None, |r| r.braced1(Self::slice).map(ValueForm::Slices))
    }

    fn slice(&mut self) -> Option<Slice<'i>> {
        self.rule(None, |r| {
            r.lit("[")?;
            let start = r.then_item(Self::int)?;
            r.then(":")?;
            let limit = r.then_item(Self::int)?;
            let stride = r.attempt(|r| {
                r.then(":")?;
                r.then_item(Self::int)
            });
            r.then("]")?;
            Some(Slice {
                start,
                limit,
                stride,
            })
        })
    }

    fn int_list(&mut self) -> Option<ValueForm<'i>> {
        self.atomic(None, |r| {
            if !r.eat_byte(b'{') {
                return None;
            }
            let start = r.pos;
            r.int_run(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
            let ints = r.span(start);
            r.eat_byte(b'}').then_some(ValueForm::Ints(ints))
        })
    }

    fn kv_map(&mut self) -> Option<ValueForm<'i>> {
        self.rule(None, |r| {
            r.lit("{")?;
            let mut entries = vec![r.then_item(Self::kv)?];
            while let Some(kv) = r.attempt(|r| {
                r.attempt(|r| r.then(","));
                r.then_item(Self::kv)
            }) {
                entries.push(kv);
            }
            r.then("}")?;
            Some(ValueForm::Map(entries))
        })
    }

    fn kv(&mut self) -> Option<(Span<'i>, Value<'i>)> {
        self.rule(None, |r| {
            let key = r.attr_name()?;
            r.then("=")?;
            r.skip();
            let start = r.pos;
            let form = r
                .string()
                .or_else(|| r.number().map(ValueForm::Number))
                .or_else(|| r.word().map(|w| ValueForm::Word(super::Name(w))))
                .or_else(|| r.raw_value())?;
            let at = r.span(start);
            Some((key, Value { at, form }))
        })
    }

    fn word_list(&mut self) -> Option<ValueForm<'i>> {
        self.rule(None, |r| {
            r.braced1(|r| r.word().map(super::Name))
                .map(ValueForm::Words)
        })
    }

    fn shape_list(&mut self) -> Option<ValueForm<'i>> {
        self.rule(None, |r| r.braced1(Self::shape).map(ValueForm::Shapes))
    }

    /// A shape, and a value of it where one follows on the same line (a
    /// custom call's `literal=s32[2]{0} {1, 2}`): one rule, so a word value
    /// is not read as a shape twice.
    fn shaped_literal(&mut self) -> Option<ValueForm<'i>> {
        self.rule(None, |r| {
            let shape = r.shape()?;
            let literal = r.attempt(|r| {
                r.eat_while(|b| b == b' ');
                r.literal()
            });
            Some(ValueForm::Shape(Box::new(ShapedValue { shape, literal })))
        })
    }

    /// A braced group or an iota list, read whole.
    fn raw_value(&mut self) -> Option<ValueForm<'i>> {
        self.raw(|r| r.scan(Self::raw_group) || r.scan(Self::raw_iota))
    }

    /// Replica groups over a mesh, as XLA writes them in programs it has
    /// partitioned: `mesh['a'=2,'b'=4]`, an optional `, device_ids=(...)`,
    /// then the axes, `{'a','b':(2)2}`. Taken whole, as one value, for
    /// `text::collective` to read.
    fn mesh_groups_text(&mut self) -> bool {
        self.eat("mesh[")
            && {
                self.eat_while(|b| b != b']');
                self.eat_byte(b']')
            }
            && {
                self.scan(|r| {
                    r.eat_byte(b',');
                    r.eat_while(|b| b == b' ');
                    r.eat("device_ids=") && r.paren_group()
                });
                self.eat_while(|b| b == b' ');
                self.raw_group()
            }
    }

    fn raw_group(&mut self) -> bool {
        self.eat_byte(b'{') && {
            loop {
                match self.peek() {
                    Some(b'{') => {
                        if !self.scan(Self::raw_group) {
                            break;
                        }
                    }
                    Some(b'"') => {
                        if !self.scan(|r| {
                            r.pos += 1;
                            r.string_text();
                            r.eat_byte(b'"')
                        }) {
                            break;
                        }
                    }
                    Some(b'}') | None => break,
                    Some(_) => self.pos += 1,
                }
            }
            self.eat_byte(b'}')
        }
    }

    fn raw_iota(&mut self) -> bool {
        let bracketed = |r: &mut Self| {
            r.eat_byte(b'[') && {
                r.eat_while(|b| b != b']');
                r.eat_byte(b']')
            }
        };
        bracketed(self) && self.eat("<=") && bracketed(self) && {
            self.scan(|r| {
                r.eat("T(") && {
                    r.eat_while(|b| b != b')');
                    r.eat_byte(b')')
                }
            });
            true
        }
    }
}
