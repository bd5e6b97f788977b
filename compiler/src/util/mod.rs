//! Small helpers every layer shares: a fast hash, XLA's string escaping,
//! lists and integers written as XLA writes them, a pseudo-random stream,
//! the host memory a run may take, the files a user names (only regular
//! ones are read).
//! Nothing here knows about HLO beyond a module's size.

pub mod decimal;
pub mod escape;
pub mod fx;
pub mod host_memory;
pub mod input_file;
pub mod join;
pub mod split_mix;
