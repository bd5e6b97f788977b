//! The described ops' attributes ([`crate::op_description`]) as XLA's
//! text spells them: one writer for the printer, one reader for the parser.

use std::borrow::Cow;
use std::fmt::Write;

use super::parser::{
    collective, error_at, flag_value, int_value, ints_value, word_value, Attrs, ParseError,
};
use super::printer::{write_aliasing, write_collective};
use super::syntax::Pair;
use crate::op_description::{AttrReader, AttrValue, AttrWriter, Attribute, FieldError, Form};
use crate::types::write_joined;

/// Appends `, key=value` for each attribute the form says is written.
pub(super) struct TextWriter<'a>(pub &'a mut String);

impl AttrWriter for TextWriter<'_> {
    fn write(&mut self, a: &'static Attribute, v: AttrValue<'_>) {
        let out = &mut *self.0;
        let key = a.key;
        match a.form {
            _ if v == AttrValue::Absent => {}
            Form::Flag if !v.flag() => {}
            Form::Flag | Form::FlagDefaultTrue => {
                let _ = write!(out, ", {key}={}", v.flag());
            }
            Form::List | Form::ListOrEmpty | Form::ListIfAny | Form::OneDimension => {
                let ints = v.ints().unwrap_or_default();
                if a.form != Form::ListIfAny || !ints.is_empty() {
                    let _ = write!(out, ", {key}={{");
                    let _ = write_joined(out, &ints);
                    out.push('}');
                }
            }
            Form::Int => {
                if let Some(n) = v.int() {
                    let _ = write!(out, ", {key}={n}");
                }
            }
            Form::Word => {
                if let Some(w) = v.word() {
                    let _ = write!(out, ", {key}={w}");
                }
            }
            Form::Window => {
                if let AttrValue::Window(w) = &v {
                    let _ = write!(out, ", {key}={{{w}}}");
                }
            }
            Form::Aliasing => {
                if let AttrValue::Aliasing(a) = &v {
                    write_aliasing(out, a);
                }
            }
            Form::Collective => {
                if let AttrValue::Collective(c) = &v {
                    write_collective(out, c);
                }
            }
        }
    }
}

/// Reads described attributes out of an instruction's attributes,
/// remembering where the last one was written for its errors.
pub(super) struct TextReader<'a, 'i> {
    pub attrs: &'a mut Attrs<'i>,
    pub opcode: &'a str,
    pub last: Option<Pair<'i>>,
}

impl AttrReader for TextReader<'_, '_> {
    type Error = ParseError;

    fn read(&mut self, a: &'static Attribute) -> Result<AttrValue<'static>, ParseError> {
        // Each has its own default for what is not written.
        match a.form {
            Form::Window => return Ok(AttrValue::Window(Cow::Owned(self.attrs.window()?))),
            Form::Aliasing => {
                return Ok(AttrValue::Aliasing(Cow::Owned(
                    self.attrs.operand_aliasing()?,
                )))
            }
            Form::Collective => {
                return Ok(AttrValue::Collective(Cow::Owned(collective(self.attrs)?)))
            }
            _ => {}
        }
        let Some(written) = self.attrs.take(a.key) else {
            return Ok(match a.form {
                Form::ListOrEmpty | Form::ListIfAny => AttrValue::Ints(Cow::Owned(Vec::new())),
                Form::Flag => AttrValue::Flag(false),
                Form::FlagDefaultTrue => AttrValue::Flag(true),
                _ => AttrValue::Absent,
            });
        };
        self.last = Some(written.1);
        let key = a.key;
        Ok(match a.form {
            Form::Int => AttrValue::Int(int_value(key, written)?),
            Form::List | Form::ListOrEmpty | Form::ListIfAny | Form::OneDimension => {
                AttrValue::Ints(Cow::Owned(ints_value(key, written)?))
            }
            Form::Flag | Form::FlagDefaultTrue => AttrValue::Flag(flag_value(key, written)?),
            Form::Word => AttrValue::Word(Cow::Owned(word_value(key, written)?.0)),
            Form::Window | Form::Aliasing | Form::Collective => AttrValue::Absent,
        })
    }

    fn invalid(&mut self, a: &'static Attribute, e: FieldError) -> ParseError {
        let (opcode, key) = (self.opcode, a.key);
        let at = match (&e, &self.last) {
            (FieldError::Missing, _) | (_, None) => &self.attrs.at,
            (_, Some(p)) => p,
        };
        let message = match e {
            FieldError::Missing => format!("{opcode} needs attribute '{key}'"),
            FieldError::NotOneDimension(v) => {
                format!("{opcode} needs exactly one dimension, got {v:?}")
            }
            FieldError::Unknown { written, choices } => {
                format!("unknown {key} '{written}' (expected one of {choices})")
            }
            FieldError::OutOfRange(n) => format!("{key}={n} is out of range"),
            FieldError::WrongKind(kind) => format!("'{key}' must be {kind}"),
        };
        error_at(at, message)
    }
}
