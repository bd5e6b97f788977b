//! Lists written with commas between their items, as XLA writes dimension
//! lists, replica groups and attribute values.

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
