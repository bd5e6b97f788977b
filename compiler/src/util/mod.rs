//! Small helpers every layer shares: a fast hash, XLA's string escaping.
//! Nothing here knows about HLO.

pub mod escape;
pub mod fx;
pub mod join;
