//! An instruction's rules: its name, shape, body and operands.

use super::reader::{is_name_char, Reader};
use super::tree::{Body, ConstantValue, Instruction, NestedInstruction, Operand};

impl<'i> Reader<'i> {
    pub(super) fn instruction(&mut self) -> Option<Instruction<'i>> {
        let start = self.pos;
        self.rule(Some("an instruction"), |r| {
            let is_root = r.keyword(Some("`ROOT`"), "ROOT");
            if is_root {
                r.skip();
            }
            let name = r.name()?;
            r.then("=")?;
            let shape = r.attempt(|r| r.then_item(Self::shape));
            r.skip();
            let body = r.body()?;
            let mut attributes = Vec::new();
            while let Some(a) = r.attempt(|r| {
                r.then(",")?;
                r.then_item(Self::attribute)
            }) {
                attributes.push(a);
            }
            Some(Instruction {
                at: r.span(start),
                is_root,
                name,
                shape,
                body,
                attributes,
            })
        })
    }

    fn body(&mut self) -> Option<Body<'i>> {
        self.constant_body()
            .or_else(|| self.parameter_body())
            .or_else(|| self.op_body())
    }

    fn constant_body(&mut self) -> Option<Body<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("constant")?;
            r.then("(")?;
            let value = r.then_item(|r| {
                r.elided()
                    .map(ConstantValue::Elided)
                    .or_else(|| r.literal().map(ConstantValue::Literal))
            })?;
            r.then(")")?;
            Some(Body::Constant {
                at: r.span(start),
                value,
            })
        })
    }

    fn elided(&mut self) -> Option<super::Span<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("{")?;
            r.then("...")?;
            r.then("}")?;
            Some(r.span(start))
        })
    }

    fn parameter_body(&mut self) -> Option<Body<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("parameter")?;
            r.then("(")?;
            let number = r.then_item(Self::int)?;
            r.then(")")?;
            Some(Body::Parameter {
                at: r.span(start),
                number,
            })
        })
    }

    fn op_body(&mut self) -> Option<Body<'i>> {
        self.rule(None, |r| {
            let opcode = r.opcode()?;
            r.then("(")?;
            let operands = r.list(Self::operand);
            r.then(")")?;
            Some(Body::Op { opcode, operands })
        })
    }

    /// An operand: a name, or an instruction written in its place, without
    /// a name or attributes (`add(f32[10] parameter(0), multiply(p, q))`),
    /// as XLA's parser reads it. A word followed by `(` is the latter; the
    /// look-ahead keeps the common case, a name, from being read twice.
    fn operand(&mut self) -> Option<Operand<'i>> {
        let start = self.pos;
        self.rule(Some("an operand"), |r| {
            let shape = r.attempt(Self::shape);
            if shape.is_some() {
                r.skip();
            }
            if r.at_call() {
                let body = r.body()?;
                Some(Operand::Nested(Box::new(NestedInstruction {
                    at: r.span(start),
                    shape,
                    body,
                })))
            } else {
                r.name().map(Operand::Named)
            }
        })
    }

    /// Whether a word (name characters) and then `(` come next.
    fn at_call(&self) -> bool {
        let rest = &self.s[self.pos..];
        let word = rest.iter().take_while(|&&b| is_name_char(b)).count();
        word > 0 && rest.get(word) == Some(&b'(')
    }

    fn opcode(&mut self) -> Option<super::Span<'i>> {
        self.token(Some("an opcode"), |r| {
            r.peek_is(|b| b.is_ascii_alphabetic()) && {
                r.eat_while(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                true
            }
        })
    }
}
