//! Literals: nested lists, scalars, pairs and tuples.

use super::reader::Reader;
use super::tree::{Literal, LiteralItems, ScalarPair};
use super::Span;

impl<'i> Reader<'i> {
    pub(super) fn literal(&mut self) -> Option<Literal<'i>> {
        self.rule(Some("a literal value"), |r| {
            // Large constants have millions of elements: the first byte
            // picks the one form that can match, instead of trying each.
            if r.peek_is(|b| b == b'(') {
                r.scalar_pair().or_else(|| r.tuple_literal())
            } else {
                r.literal_list().or_else(|| r.scalar().map(Literal::Scalar))
            }
        })
    }

    fn scalar_pair(&mut self) -> Option<Literal<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("(")?;
            let first = r.then_item(Self::scalar_literal)?;
            r.then(",")?;
            let second = r.then_item(Self::scalar_literal)?;
            r.then(")")?;
            Some(Literal::Pair(Box::new(ScalarPair {
                at: r.span(start),
                first,
                second,
            })))
        })
    }

    /// A scalar, named as a literal value where it is missing: a pair of
    /// them reads either as a complex value's parts or as a tuple
    /// constant's elements.
    fn scalar_literal(&mut self) -> Option<Span<'i>> {
        self.rule(Some("a literal value"), Self::scalar)
    }

    fn tuple_literal(&mut self) -> Option<Literal<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("(")?;
            let items = r.list(Self::literal);
            r.then(")")?;
            Some(Literal::Tuple(Box::new(LiteralItems {
                at: r.span(start),
                items,
            })))
        })
    }

    /// `{a, b, ...}`. XLA's reader also takes nested lists one after
    /// another without a comma (`{ {1} {2} }`), as some of its tests write
    /// them.
    fn literal_list(&mut self) -> Option<Literal<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("{")?;
            r.skip();
            let mut items = Vec::new();
            if let Some(first) = r.attempt(Self::literal) {
                items.push(first);
                while let Some(next) = r.attempt(|r| {
                    if r.then(",").is_none() {
                        r.skip();
                        if r.peek() != Some(b'{') {
                            return None;
                        }
                    }
                    r.then_item(Self::literal)
                }) {
                    items.push(next);
                }
            }
            r.attempt(|r| r.then(","));
            r.then("}")?;
            Some(Literal::List(Box::new(LiteralItems {
                at: r.span(start),
                items,
            })))
        })
    }

    fn scalar(&mut self) -> Option<Span<'i>> {
        self.token(None, |r| {
            r.eat("true")
                || r.eat("false")
                || r.scan(|r| {
                    r.eat_byte(b'-');
                    r.eat("inf")
                        || r.eat("nan") && {
                            r.scan(|r| {
                                r.eat("(0x")
                                    && r.eat_while(|b| b.is_ascii_hexdigit()) > 0
                                    && r.eat_byte(b')')
                            });
                            true
                        }
                })
                || r.number_text()
        })
    }
}
