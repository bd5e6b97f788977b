//! C-style string escaping as XLA's printer (`CEscape`) writes it.

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(b as char),
            // Non-ASCII bytes and control characters: octal, as CEscape does.
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        for s in [
            "plain",
            "q\"uote",
            "back\\slash",
            "line\nbreak",
            "tab\t",
            "ünï",
            "\u{1}",
        ] {
            assert_eq!(unescape(&escape(s)).as_deref(), Some(s), "{s:?}");
        }
        assert_eq!(unescape("bad\\q"), None);
    }
}
