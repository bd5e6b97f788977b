//! Small helpers every layer shares: a fast hash, XLA's string escaping,
//! lists and integers written as XLA writes them.
//! Nothing here knows about HLO.

pub mod decimal;
pub mod escape;
pub mod fx;
pub mod join;
