//! The tokens every level reads: names, words, integers and numbers.

use super::reader::{is_name_char, Reader};
use super::{Int, Name, Span};

impl<'i> Reader<'i> {
    pub(super) fn name(&mut self) -> Option<Name<'i>> {
        self.token(Some("a name"), Self::name_text).map(Name)
    }

    pub(super) fn word(&mut self) -> Option<Span<'i>> {
        self.token(Some("a word"), Self::name_text)
    }

    pub(super) fn int(&mut self) -> Option<Int<'i>> {
        self.token(Some("an integer"), Self::int_text).map(Int)
    }

    pub(super) fn number(&mut self) -> Option<Span<'i>> {
        self.token(Some("a number"), Self::number_text)
    }

    fn name_text(&mut self) -> bool {
        self.scan(|r| {
            r.eat_byte(b'%');
            r.peek_is(|b| b.is_ascii_alphabetic() || b == b'_') && {
                r.eat_while(is_name_char);
                true
            }
        })
    }

    pub(super) fn int_text(&mut self) -> bool {
        self.scan(|r| {
            r.eat_byte(b'-');
            r.eat_while(|b| b.is_ascii_digit()) > 0
        })
    }

    pub(super) fn number_text(&mut self) -> bool {
        self.scan(|r| {
            r.eat_byte(b'-');
            let digits = r.eat_while(|b| b.is_ascii_digit());
            let mantissa = if digits > 0 {
                if r.eat_byte(b'.') {
                    r.eat_while(|b| b.is_ascii_digit());
                }
                true
            } else {
                r.eat_byte(b'.') && r.eat_while(|b| b.is_ascii_digit()) > 0
            };
            mantissa && {
                r.scan(|r| {
                    (r.eat_byte(b'e') || r.eat_byte(b'E')) && {
                        let _ = r.eat_byte(b'+') || r.eat_byte(b'-');
                        r.eat_while(|b| b.is_ascii_digit()) > 0
                    }
                });
                true
            }
        })
    }
}
