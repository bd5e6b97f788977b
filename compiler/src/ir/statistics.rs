//! `statistics={visualizing_index=1,stat-0=55.5}`: numbers a profiler or
//! numerics tool attached to an instruction, and which of them a viewer
//! shows (XLA's `StatisticsViz`). hlatc keeps them; nothing reads them.

use crate::ir::op::F64Bits;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Statistics {
    /// Which statistic a viewer colours the instruction by.
    pub visualizing_index: i64,
    /// Name and value, in the order written.
    pub values: Vec<(String, F64Bits)>,
}

impl std::fmt::Display for Statistics {
    /// As XLA prints it, the index first. XLA prints nothing when there
    /// is no statistic, which loses the index; hlatc prints it alone,
    /// which XLA reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{visualizing_index={}", self.visualizing_index)?;
        for (name, v) in &self.values {
            write!(f, ",{name}={v}")?;
        }
        f.write_str("}")
    }
}

/// Whether `b` may appear in a statistic's name.
pub fn is_stat_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Whether `name` can be written as a statistic's name.
pub fn is_stat_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(is_stat_name_byte)
}
