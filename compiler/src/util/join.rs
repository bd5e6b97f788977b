//! Lists written with commas between their items, as XLA writes dimension
//! lists, replica groups and attribute values.

use crate::util::decimal::push_digits_str;
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
/// bulk of a sharded step's text, and every instruction's shape has two
/// such lists, so the digits are written without `write!`.
pub fn push_joined(out: &mut String, v: &[i64]) {
    out.reserve(v.len() * 6);
    for (i, &x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if x < 0 {
            out.push('-');
        }
        push_digits_str(out, x.unsigned_abs());
    }
}
