//! C-style string escaping as XLA's printer (`CEscape`) writes it.

use std::fmt::Write;

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    escape_into(&mut out, s);
    out
}

/// [`escape`], appended to `out`. Names and scopes rarely hold a byte that
/// needs escaping, so each run of printable ASCII is copied whole: the
/// printer escapes every instruction's metadata, and byte by byte that was
/// a tenth of printing a training step.
pub fn escape_into(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\t' => "\\t",
            b'\r' => "\\r",
            0x20..=0x7e => continue,
            _ => "",
        };
        // `start..i` is printable ASCII (or empty), so both ends are
        // character boundaries and `get` always finds it.
        out.push_str(s.get(start..i).unwrap_or_default());
        if escaped.is_empty() {
            // Non-ASCII bytes and control characters: octal, as CEscape does.
            let _ = write!(out, "\\{b:03o}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(s.get(start..).unwrap_or_default());
}

/// Inverse of [`escape`]; `None` for a malformed escape or invalid UTF-8.
pub fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = *bytes.get(i + 1)?;
        i += 2;
        match c {
            b'"' | b'\\' | b'\'' => out.push(c),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'0'..=b'7' => {
                let mut v: u32 = (c - b'0') as u32;
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(u8::try_from(v).ok()?);
            }
            b'x' => {
                let hex = s.get(i..i + 2)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}
