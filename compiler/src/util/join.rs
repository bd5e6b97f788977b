//! Lists written with commas between their items, as XLA writes dimension
//! lists, replica groups and attribute values.

use crate::util::decimal::push_digits;
use std::fmt;

/// `1,2,3`.
pub fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Writes `items` with a comma between each.
pub fn write_joined<T: fmt::Display>(f: &mut impl fmt::Write, items: &[T]) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_char(',')?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

/// Appends `v` to `out` with a comma between each, as [`join`] writes them:
/// the replica groups of a collective over thousands of ranks are the
/// bulk of a sharded step's text, so the digits are written as bytes and
/// handed over once.
pub fn push_joined(out: &mut String, v: &[i64]) {
    let mut bytes: Vec<u8> = Vec::with_capacity(v.len() * 6);
    for (i, &x) in v.iter().enumerate() {
        if i > 0 {
            bytes.push(b',');
        }
        push_int(&mut bytes, x);
    }
    // Digits, signs and commas are ASCII, so always UTF-8.
    out.push_str(std::str::from_utf8(&bytes).unwrap_or_default());
}

fn push_int(out: &mut Vec<u8>, x: i64) {
    if x < 0 {
        out.push(b'-');
    }
    push_digits(out, x.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_lists_read_as_joined_ones() {
        for v in [vec![], vec![0], vec![7, -3, 10, 2047, i64::MIN, i64::MAX]] {
            let mut out = String::from("x");
            push_joined(&mut out, &v);
            assert_eq!(out, format!("x{}", join(&v)));
        }
    }
}
