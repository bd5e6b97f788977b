//! A bound on bracket nesting, checked before the grammar runs. The grammar's
//! reader and the shape and literal readers recurse once per level, so a
//! tuple shape nested thousands deep would overflow the stack; no real
//! module comes near the limit (a rank-64 constant inside a computation
//! needs 66 levels).

use super::ParseError;

/// Deepest `(`, `{` and `[` nesting accepted in HLO text.
pub const MAX_NESTING: usize = 256;

/// Fails at the first bracket that opens level `MAX_NESTING + 1`. Brackets
/// inside strings and comments do not count.
pub fn check_nesting(text: &str) -> Result<(), ParseError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        // Most bytes are none of the ones that matter here.
        if !MATTERS[usize::from(bytes[i])] {
            i += 1;
            continue;
        }
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 1;
            }
            b'(' | b'{' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let (line, column) = super::syntax::line_col(text, i);
                    return Err(ParseError {
                        line,
                        column,
                        message: format!(
                            "brackets nest more than {MAX_NESTING} deep here; hlatc refuses such input \
                             rather than risk running out of stack"
                        ),
                    });
                }
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The bytes [`check_nesting`] looks at: brackets, quotes and what may
/// open a comment.
static MATTERS: [bool; 256] = {
    let mut t = [false; 256];
    let mut k = 0;
    let special = b"\"/(){}[]";
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};
